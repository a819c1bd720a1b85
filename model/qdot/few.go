package qdot

import (
	"fmt"
	"math"
	"unsafe"

	"ringlm/gguf"
)

// Products of Q8_0 rows with a few inputs (a decode step of one to eight
// sequences), on a CPU with AVX-512 VNNI: each result is Dot's, bit for
// bit, but a kernel computes 16 rows at once, the vector lanes being the
// rows. The kernel of MulBatch makes its lanes the inputs, which leaves
// most of them idle below 16 inputs; here each block of the 16 rows is
// transposed in registers (row r in lane r, one register per 4-byte group
// of the block) and each input's 4-byte group is broadcast against it,
// so a lane sums one (row, input) pair's block without a horizontal
// reduction, and the transposition is shared by every input. VPDPBUSD
// takes unsigned bytes on the register side: the weights are flipped to
// their value + 128 as they are loaded, and each input's block sum is
// corrected by -128·Σq, which Set computes once per input and block. The
// weights are read in place from the mapped file.

// FewInputs is the most inputs a Few holds.
const FewInputs = 8

// fewRows is the rows of a tile of the row-lane kernels.
const fewRows = 16

// fewKernel is a row-lane kernel (few_amd64.s): fewRows rows at w, ldw
// bytes apart, of nb blocks against the inputs of a Few (its q, d and c),
// row r's result for input t to out + t·ldo + r·rs (bytes) for t < n.
type fewKernel func(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr, n int)

// Few is 1 to FewInputs inputs quantized to Q8_0, laid out for MulFew.
// The kernels take 1, 2, 4 or 8 inputs; a Few of another count is padded
// with inputs of zeros, whose results are not stored.
type Few struct {
	n, np, nb int
	// For block b and input t of np: q[(b·np+t)·32 + i] is quant i of
	// the input's block, d[b·np+t] its scale, c[b·np+t] = -128·Σ quants.
	q []int8
	d []float32
	c []int32
}

// Len is the inputs in f.
func (f *Few) Len() int { return f.n }

// Set lays out acts, 1 to FewInputs inputs quantized to Q8_0, all of one
// length. Anything else is a bug of the caller: it panics.
func (f *Few) Set(acts []Acts) {
	n := q8Inputs(acts, FewInputs, "few")
	np := 1
	for np < len(acts) {
		np *= 2
	}
	f.n, f.np, f.nb = len(acts), np, n/32
	f.q = grow(f.q, f.nb*np*32)
	f.d = grow(f.d, f.nb*np)
	f.c = grow(f.c, f.nb*np)
	for b := range f.nb {
		for t := range np {
			i := b*np + t
			q := f.q[32*i : 32*i+32]
			if t >= len(acts) {
				clear(q)
				f.d[i], f.c[i] = 0, 0
				continue
			}
			a := &acts[t]
			copy(q, a.q[32*b:32*b+32])
			f.d[i], f.c[i] = a.d[b], -128*int32(a.sums[b])
		}
	}
}

// HasFew reports whether MulFew runs a kernel of its own for k in this
// process (Q8_0 weights on a CPU with AVX-512 VNNI); MulFew takes Q8_0
// weights only.
func (k *Kernel) HasFew() bool { return k.Weight == gguf.TypeQ8_0 && useVNNI }

// MulFew sets out[t*ldo + r] to Dot(row r of w, acts[t]) for the rows of
// w (whole rows of the inputs' length) and the inputs acts, which f holds
// (Set with acts): Dot's bits.
func (k *Kernel) MulFew(out []float32, ldo int, w []byte, acts []Acts, f *Few) {
	rb := f.nb * k.bytes
	if k.Weight != gguf.TypeQ8_0 || f.n != len(acts) || rb == 0 || len(w)%rb != 0 {
		panic(fmt.Sprintf("qdot: %s rows of %d bytes against %d inputs in a few of %d × %d blocks", k.Weight, len(w), len(acts), f.n, f.nb))
	}
	rows := len(w) / rb
	if len(out) < (f.n-1)*ldo+rows {
		panic(fmt.Sprintf("qdot: output of %d for %d rows × %d inputs at stride %d", len(out), rows, f.n, ldo))
	}
	tiles := 0
	if useVNNI {
		tiles = rows / fewRows
	}
	if tiles > 0 {
		kern := fewKernels[fewIndex[f.np]]
		// Tile i takes rows i, i+step, i+2·step, …: sixteen long streams
		// for the prefetcher, not sixteen short ones (adjacent rows ran
		// at a quarter of the speed), while the lanes' output offsets fit
		// the scatter's int32 indices.
		step := tiles
		if fewAdjacent || (fewRows-1)*4*tiles > math.MaxInt32 {
			step = 1
		}
		for i := range tiles {
			r := i
			if step == 1 {
				r = i * fewRows
			}
			kern(&w[r*rb], uintptr(step*rb), f.nb, (*byte)(unsafe.Pointer(&f.q[0])), &f.d[0], &f.c[0],
				&out[r], uintptr(4*ldo), uintptr(4*step), f.n)
		}
	}
	for t := range acts {
		k.DotRows(out[t*ldo+tiles*fewRows:t*ldo+rows], w[tiles*fewRows*rb:], &acts[t])
	}
}

// fewAdjacent makes a tile's rows adjacent (the benchmarks compare).
var fewAdjacent = false

// fewIndex maps a Few's padded inputs to its kernel in fewKernels.
var fewIndex = [FewInputs + 1]int{1: 0, 2: 1, 4: 2, 8: 3}
