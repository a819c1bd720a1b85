package qdot

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
	"ringlm/quant"
)

// The tests' own reading of ggml's block layouts (ggml-common.h and
// dequantize_row_* in ggml-quants.c), written apart from the kernels: each
// element's exact value in float64 and the magnitude of the terms it is
// made of (|d·scale·q| + |dmin·min|), which bounds the kernels' float
// error.

func h16(b []byte) float64 { return float64(gguf.F16ToF32(binary.LittleEndian.Uint16(b))) }

// refBlock decodes one block of t into val and mag (len = block size).
func refBlock(t gguf.Type, blk []byte, val, mag []float64) {
	set := func(i int, scale, q, off float64) {
		val[i] = scale*q - off
		mag[i] = math.Abs(scale*q) + math.Abs(off)
	}
	iq4 := [16]float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	fp4 := [16]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6}
	switch t {
	case gguf.TypeQ4_0, gguf.TypeIQ4_NL:
		d := h16(blk)
		for j := range 16 {
			lo, hi := float64(blk[2+j]&0xF), float64(blk[2+j]>>4)
			if t == gguf.TypeQ4_0 {
				set(j, d, lo-8, 0)
				set(j+16, d, hi-8, 0)
			} else {
				set(j, d, iq4[int(lo)], 0)
				set(j+16, d, iq4[int(hi)], 0)
			}
		}
	case gguf.TypeQ4_1:
		d, m := h16(blk), h16(blk[2:])
		for j := range 16 {
			set(j, d, float64(blk[4+j]&0xF), -m)
			set(j+16, d, float64(blk[4+j]>>4), -m)
		}
	case gguf.TypeQ5_0, gguf.TypeQ5_1:
		d, m, o := h16(blk), 0.0, 2
		if t == gguf.TypeQ5_1 {
			m, o = h16(blk[2:]), 4
		}
		qh := binary.LittleEndian.Uint32(blk[o:])
		for j := range 16 {
			lo := float64(uint32(blk[o+4+j]&0xF) | (qh>>j&1)<<4)
			hi := float64(uint32(blk[o+4+j]>>4) | (qh>>(j+16)&1)<<4)
			if t == gguf.TypeQ5_0 {
				lo, hi = lo-16, hi-16
			}
			set(j, d, lo, -m)
			set(j+16, d, hi, -m)
		}
	case gguf.TypeQ8_0:
		d := h16(blk)
		for j := range 32 {
			set(j, d, float64(int8(blk[2+j])), 0)
		}
	case gguf.TypeMXFP4:
		e := math.Ldexp(1, int(blk[0])-127)
		for j := range 16 {
			set(j, e, fp4[blk[1+j]&0xF], 0)
			set(j+16, e, fp4[blk[1+j]>>4], 0)
		}
	case gguf.TypeQ2_K:
		d, dmin := h16(blk[80:]), h16(blk[82:])
		for i := range 256 {
			c, j, l := i/128, i%128/32, i%32
			sc := blk[i/16]
			q := float64(blk[16+32*c+l] >> (2 * j) & 3)
			set(i, d*float64(sc&0xF), q, dmin*float64(sc>>4))
		}
	case gguf.TypeQ3_K:
		d := h16(blk[108:])
		sb := blk[96:108]
		for i := range 256 {
			c, j, l, s := i/128, i%128/32, i%32, i/16
			// 6-bit scale s: low nibble in byte s%8 (high nibble for s ≥ 8),
			// top two bits in byte 8+s%4 at bit 2·(s/4).
			low := sb[s%8] & 0xF
			if s >= 8 {
				low = sb[s%8] >> 4
			}
			sc := float64(int(low|(sb[8+s%4]>>(2*(s/4))&3)<<4) - 32)
			q := float64(blk[32+32*c+l] >> (2 * j) & 3)
			if blk[l]>>(4*c+j)&1 == 0 {
				q -= 4
			}
			set(i, d*sc, q, 0)
		}
	case gguf.TypeQ4_K, gguf.TypeQ5_K:
		d, dmin := h16(blk), h16(blk[2:])
		sb := blk[4:16]
		for i := range 256 {
			j, l, sub := i/64, i%32, i/32
			var sc, mn byte
			if sub < 4 {
				sc, mn = sb[sub]&63, sb[sub+4]&63
			} else {
				sc = sb[sub+4]&0xF | sb[sub-4]>>6<<4
				mn = sb[sub+4]>>4 | sb[sub]>>6<<4
			}
			var q byte
			if t == gguf.TypeQ4_K {
				q = blk[16+32*j+l]
			} else {
				q = blk[48+32*j+l]
			}
			if sub%2 == 1 {
				q >>= 4
			}
			q &= 0xF
			if t == gguf.TypeQ5_K && blk[16+l]>>sub&1 == 1 {
				q += 16
			}
			set(i, d*float64(sc), float64(q), dmin*float64(mn))
		}
	case gguf.TypeQ6_K:
		d := h16(blk[208:])
		for i := range 256 {
			c, k, l := i/128, i%128/32, i%32
			lb := blk[64*c+32*(k%2)+l]
			if k >= 2 {
				lb >>= 4
			}
			q := int(lb&0xF) | int(blk[128+32*c+l]>>(2*k)&3)<<4
			set(i, d*float64(int8(blk[192+i/16])), float64(q-32), 0)
		}
	case gguf.TypeIQ4_XS:
		d := h16(blk)
		sh := binary.LittleEndian.Uint16(blk[2:])
		for i := range 256 {
			b, j := i/32, i%32
			ls := int(blk[4+b/2]>>(4*(b%2))&0xF) | int(sh>>(2*b)&3)<<4
			q := blk[8+16*b+j%16]
			if j >= 16 {
				q >>= 4
			}
			set(i, d*float64(ls-32), iq4[q&0xF], 0)
		}
	default:
		panic("no reference for " + t.String())
	}
}

// refDot is row w dotted with the dequantized activations in float64, and
// the sum of the magnitudes of its terms.
func refDot(t gguf.Type, w []byte, a *Acts) (dot, mag float64) {
	info, _ := t.Info()
	bs, bb := int(info.BlockSize), int(info.BlockBytes)
	val, m := make([]float64, bs), make([]float64, bs)
	ab := 32
	if a.typ == gguf.TypeQ8_K {
		ab = 256
	}
	for b := 0; b < a.n/bs; b++ {
		refBlock(t, w[bb*b:], val, m)
		for j := range bs {
			e := b*bs + j
			x := float64(a.d[e/ab]) * float64(a.q[e])
			dot += val[j] * x
			mag += m[j] * math.Abs(x)
		}
	}
	if a.typ == gguf.TypeQ8_1 {
		// ggml takes the min's term as m·s, s = d·Σq rounded to F16, not
		// Σ m·d·q: put that difference in.
		o := 2
		for b := 0; b < a.n/32; b++ {
			blk := w[bb*b:]
			mm := h16(blk[o:])
			var sum float64
			for j := range 32 {
				sum += float64(a.q[32*b+j])
			}
			dot += mm * (float64(a.s[b]) - float64(a.d[b])*sum)
			mag += math.Abs(mm * float64(a.s[b]))
		}
	}
	return dot, mag
}

// randBlocks returns nb random blocks of t: random bytes, with the F16
// scales (and MXFP4's exponent) set to sane values so that the products
// stay finite.
func randBlocks(rng *rand.Rand, t gguf.Type, nb int) []byte {
	info, _ := t.Info()
	bb := int(info.BlockBytes)
	w := make([]byte, nb*bb)
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	scales := map[gguf.Type][]int{
		gguf.TypeQ4_0: {0}, gguf.TypeQ4_1: {0, 2}, gguf.TypeQ5_0: {0}, gguf.TypeQ5_1: {0, 2},
		gguf.TypeQ8_0: {0}, gguf.TypeIQ4_NL: {0}, gguf.TypeQ2_K: {80, 82}, gguf.TypeQ3_K: {108},
		gguf.TypeQ4_K: {0, 2}, gguf.TypeQ5_K: {0, 2}, gguf.TypeQ6_K: {208}, gguf.TypeIQ4_XS: {0},
	}
	for b := range nb {
		blk := w[b*bb:]
		for _, o := range scales[t] {
			binary.LittleEndian.PutUint16(blk[o:], gguf.F32ToF16(float32(rng.NormFloat64()*0.01)))
		}
		if t == gguf.TypeMXFP4 {
			blk[0] = byte(110 + rng.IntN(30))
		}
	}
	return w
}

// randActs returns n activations: normal values at a few scales, with an
// all-zero block now and then and an exact zero here and there.
func randActs(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for b := 0; b < n; b += 32 {
		if rng.IntN(17) == 0 {
			continue
		}
		s := math.Ldexp(1, rng.IntN(12)-6)
		for j := b; j < b+32; j++ {
			if rng.IntN(10) > 0 {
				x[j] = float32(rng.NormFloat64() * s)
			}
		}
	}
	return x
}

// TestReferenceMatchesQuant holds the tests' reading of the block layouts
// (refBlock, which TestKernelsMatchReference holds the kernels to) to
// package quant's Dequantize, for every kernel type quant reads: within
// the float32 rounding of ggml's dequantization.
func TestReferenceMatchesQuant(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	checked := 0
	for _, typ := range Types() {
		if _, ok := quant.Lookup(typ); !ok {
			t.Logf("%s: quant does not read it", typ)
			continue
		}
		checked++
		info, _ := typ.Info()
		bs, bb := int(info.BlockSize), int(info.BlockBytes)
		const nb = 64
		w := randBlocks(rng, typ, nb)
		got := make([]float32, nb*bs)
		if err := quant.Dequantize(typ, got, w); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		val, mag := make([]float64, bs), make([]float64, bs)
		for b := range nb {
			refBlock(typ, w[b*bb:], val, mag)
			for j := range bs {
				if d := math.Abs(float64(got[b*bs+j]) - val[j]); d > 0x1p-21*mag[j] {
					t.Fatalf("%s block %d element %d: quant %g, reference %g", typ, b, j, got[b*bs+j], val[j])
				}
			}
		}
	}
	if checked == 0 {
		t.Skip("quant reads none of the kernel types yet")
	}
}
