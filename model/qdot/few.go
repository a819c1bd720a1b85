package qdot

import (
	"fmt"
	"math"
	"unsafe"

	"ringlm/gguf"
)

// Products of quantized rows with a few inputs (a decode step of one to
// eight sequences), on a CPU with AVX-512 VNNI: each result is Dot's, bit
// for bit. For Q8_0 rows a kernel computes 16 rows at once, the vector
// lanes being the rows. The kernel of MulBatch makes its lanes the inputs, which leaves
// most of them idle below 16 inputs; here each block of the 16 rows is
// transposed in registers (row r in lane r, one register per 4-byte group
// of the block) and each input's 4-byte group is broadcast against it,
// so a lane sums one (row, input) pair's block without a horizontal
// reduction, and the transposition is shared by every input. VPDPBUSD
// takes unsigned bytes on the register side: the weights are flipped to
// their value + 128 as they are loaded, and each input's block sum is
// corrected by -128·Σq, which Set computes once per input and block. The
// weights are read in place from the mapped file.
//
// Q5_0 rows (most matrices of a Q4_K_M model whose width is not a
// multiple of 256) have kernels of their own (few_q5_amd64.s), which
// keep Dot's eight float lanes per row: its block is decoded into the
// eight dword lanes of a 256-bit vector (no transposition), the q5
// unsigned against the input's signed quants, and the eight lane sums
// are converted and fused-multiply-added as Dot does them. One input
// takes four rows a tile, a row to a vector; two and four inputs two
// rows to a 512-bit vector, the decoding shared by the inputs. Q4_K and
// Q6_K rows (a Q4_K_M model's ffn_down) have kernels against Q8_K inputs
// (few_k.go), a row at a time, its super-block decoded once for every
// input.

// FewInputs is the most inputs a Few holds.
const FewInputs = 8

// fewRows is the rows of a tile of the Q8_0 row-lane kernels.
const fewRows = 16

// fewKernel is a Q8_0 row-lane kernel (few_amd64.s): fewRows rows at w,
// ldw bytes apart, of nb blocks against the inputs of a Few (its q, d and
// c), row r's result for input t to out + t·ldo + r·rs (bytes) for t < n.
type fewKernel func(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr, n int)

// Few is 1 to FewInputs inputs quantized to Q8_0 or Q8_K, laid out for
// MulFew. The kernels take 1, 2, 4 or 8 inputs; a Few of another count is
// padded with inputs of zeros, whose results are not stored.
type Few struct {
	n, np, nb int
	act       gguf.Type // the inputs' type
	// Q8_0: for block b and input t of np: q[(b·np+t)·32 + i] is quant
	// i of the input's block, d[b·np+t] its scale, c[b·np+t] = -128·Σ
	// quants, and c5[(b·np+t)·8 + l] = -16·Σ of quants 4l..4l+3 (the Q5_0
	// kernels' corrections for the offset of 16 of Q5_0's q5).
	q  []int8
	d  []float32
	c  []int32
	c5 []int32
	k  fewK // Q8_K (few_k.go); d holds the super-blocks' scales
}

// Len is the inputs in f.
func (f *Few) Len() int { return f.n }

// Set lays out acts, 1 to FewInputs inputs quantized to Q8_0 or Q8_K,
// all of one type and length. Anything else is a bug of the caller: it
// panics.
func (f *Few) Set(acts []Acts) {
	if len(acts) >= 1 && len(acts) <= FewInputs && acts[0].typ == gguf.TypeQ8_K {
		f.setK(acts)
		return
	}
	n := q8Inputs(acts, FewInputs, "few")
	np := fewPadded(len(acts))
	f.n, f.np, f.nb, f.act = len(acts), np, n/32, gguf.TypeQ8_0
	f.q = grow(f.q, f.nb*np*32)
	f.d = grow(f.d, f.nb*np)
	f.c = grow(f.c, f.nb*np)
	f.c5 = grow(f.c5, f.nb*np*8)
	for b := range f.nb {
		for t := range np {
			i := b*np + t
			q, c5 := f.q[32*i:32*i+32], f.c5[8*i:8*i+8]
			if t >= len(acts) {
				clear(q)
				clear(c5)
				f.d[i], f.c[i] = 0, 0
				continue
			}
			a := &acts[t]
			copy(q, a.q[32*b:32*b+32])
			f.d[i], f.c[i] = a.d[b], -128*int32(a.sums[b])
			for l := range c5 {
				c5[l] = -16 * (int32(q[4*l]) + int32(q[4*l+1]) + int32(q[4*l+2]) + int32(q[4*l+3]))
			}
		}
	}
}

// fewPadded is the inputs the kernels take for n: 1, 2, 4 or 8.
func fewPadded(n int) int {
	np := 1
	for np < n {
		np *= 2
	}
	return np
}

// fewType is the few-input kernels of one weight type: tiles of rows
// (tile), or runs of adjacent rows that the kernel walks itself (span).
type fewType struct {
	// rows is the rows of a tile for a Few of np inputs, by fewIndex[np].
	rows [4]int
	// tile runs the kernel for f on the rows of a tile at w, ldw bytes
	// apart: Dot(row r, input t) to out[t·ldo] + r·rs bytes.
	tile func(f *Few, w *byte, ldw uintptr, out []float32, ldo int, rs uintptr)
	// span runs the kernel for f on rows adjacent rows at w, rb bytes
	// each: Dot(row r, input t) to out[t·ldo + r].
	span func(f *Few, w *byte, rb uintptr, rows int, out []float32, ldo int)
}

// HasFew reports whether MulFew runs a kernel of its own for k in this
// process: Q8_0, Q5_0, Q4_K or Q6_K weights on a CPU with AVX-512 VNNI
// (fewTypes); otherwise it loops over Dot.
func (k *Kernel) HasFew() bool { return useVNNI && fewTypes[k.Weight] != nil }

// MulFew sets out[t*ldo + r] to Dot(row r of w, acts[t]) for the rows of
// w (whole rows of the inputs' length) and the inputs acts, which f holds
// (Set with acts, quantized to k.Act): Dot's bits.
func (k *Kernel) MulFew(out []float32, ldo int, w []byte, acts []Acts, f *Few) {
	rb := f.nb * k.bytes
	if k.Act != f.act || f.n != len(acts) || rb == 0 || len(w)%rb != 0 {
		panic(fmt.Sprintf("qdot: %s rows of %d bytes against %d inputs in a few of %d × %d %s blocks", k.Weight, len(w), len(acts), f.n, f.nb, f.act))
	}
	rows := len(w) / rb
	if len(out) < (f.n-1)*ldo+rows {
		panic(fmt.Sprintf("qdot: output of %d for %d rows × %d inputs at stride %d", len(out), rows, f.n, ldo))
	}
	ft := fewTypes[k.Weight]
	if !useVNNI || ft == nil {
		for t := range acts {
			k.DotRows(out[t*ldo:t*ldo+rows], w, &acts[t])
		}
		return
	}
	if ft.span != nil {
		ft.span(f, &w[0], uintptr(rb), rows, out, ldo)
		return
	}
	tr := ft.rows[fewIndex[f.np]]
	tiles := rows / tr
	// Tile i takes rows i, i+step, i+2·step, …: tr long streams for the
	// prefetcher, not tr short ones (adjacent rows ran Q8_0's 16 at a
	// quarter of the speed), while the lanes' output offsets fit the
	// scatter's int32 indices.
	step := tiles
	if fewAdjacent || (tr-1)*4*tiles > math.MaxInt32 {
		step = 1
	}
	for i := range tiles {
		r := i
		if step == 1 {
			r = i * tr
		}
		ft.tile(f, &w[r*rb], uintptr(step*rb), out[r:], ldo, uintptr(4*step))
	}
	for t := range acts {
		k.DotRows(out[t*ldo+tiles*tr:t*ldo+rows], w[tiles*tr*rb:], &acts[t])
	}
}

// fewAdjacent makes a tile's rows adjacent (the benchmarks compare).
var fewAdjacent = false

// fewIndex maps a Few's padded inputs to its kernel in fewKernels and
// its row count in fewType.rows.
var fewIndex = [FewInputs + 1]int{1: 0, 2: 1, 4: 2, 8: 3}

// q8FewTile is fewType.tile of Q8_0.
func q8FewTile(f *Few, w *byte, ldw uintptr, out []float32, ldo int, rs uintptr) {
	fewKernels[fewIndex[f.np]](w, ldw, f.nb, (*byte)(unsafe.Pointer(&f.q[0])), &f.d[0], &f.c[0], &out[0], uintptr(4*ldo), rs, f.n)
}
