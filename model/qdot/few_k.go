package qdot

import "ringlm/gguf"

// Products of Q4_K and Q6_K rows with a few Q8_K inputs (few_k_amd64.s):
// Dot's eight-lane order (kquants.go), a row at a time in a 256-bit
// vector, its super-block decoded once for every input. Each 32-element
// sub-block's bytes are reordered so that dword l holds the four elements
// of lane l (l, l+8, l+16, l+24), and the inputs are laid out the same
// way, so VPMADDUBSW gives per lane two words, the pairs (l, l+8) and
// (l+16, l+24), and VPDPWSSD multiplies them by their scales into lane
// l's sum: sub-block j's scale twice for Q4_K, the scales of its two
// halves for Q6_K. Q6_K's quants stay unsigned (0-63); each input pair's
// 32·Σ, the correction for the offset of 32, is subtracted from its word.
// The lanes' float steps and Q4_K's mins are Dot's.

// fewK is inputs quantized to Q8_K, laid out for the K-quant kernels:
// for super-block s and input t of np (i = s·np + t):
type fewK struct {
	// q[256i + 32j + 4l + k] = quant 32j + l + 8k of the super-block
	// (sub-block j, lane l, k < 4).
	q []int8
	// c[128i + 16j + 2l + h] = 32·(q[32j+l+16h] + q[32j+l+16h+8]), the
	// Q6_K kernel's correction of the pair in word 2l+h of sub-block j.
	c []int16
	// m[8i + j] = the sum of sub-block j's quants, against Q4_K's mins.
	m []int16
}

// setK is Set for Q8_K inputs.
func (f *Few) setK(acts []Acts) {
	n := sameInputs(acts, gguf.TypeQ8_K, "few")
	np := fewPadded(len(acts))
	f.n, f.np, f.nb, f.act = len(acts), np, n/256, gguf.TypeQ8_K
	k := &f.k
	k.q = grow(k.q, f.nb*np*256)
	k.c = grow(k.c, f.nb*np*128)
	k.m = grow(k.m, f.nb*np*8)
	f.d = grow(f.d, f.nb*np)
	for s := range f.nb {
		for t := range np {
			i := s*np + t
			q, c, m := k.q[256*i:256*i+256], k.c[128*i:128*i+128], k.m[8*i:8*i+8]
			if t >= len(acts) {
				clear(q)
				clear(c)
				clear(m)
				f.d[i] = 0
				continue
			}
			a := &acts[t]
			x := a.q[256*s : 256*s+256]
			for j := range 8 {
				for l := range 8 {
					for h := range 2 {
						e0, e1 := 32*j+l+16*h, 32*j+l+16*h+8
						q[32*j+4*l+2*h], q[32*j+4*l+2*h+1] = x[e0], x[e1]
						c[16*j+2*l+h] = 32 * (int16(x[e0]) + int16(x[e1]))
					}
				}
				m[j] = a.sums[16*s+2*j] + a.sums[16*s+2*j+1]
			}
			f.d[i] = a.d[s]
		}
	}
}
