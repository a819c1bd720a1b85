//go:build amd64 && !purego

package qdot

import (
	"unsafe"

	"ringlm/gguf"
)

//go:noescape
func q8Few1VNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr, n int)

//go:noescape
func q8Few2VNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr, n int)

//go:noescape
func q8Few4VNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr, n int)

//go:noescape
func q8Few8VNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr, n int)

// fewKernels are the row-lane kernels by their inputs: 1, 2, 4, 8.
var fewKernels = [...]fewKernel{q8Few1VNNI, q8Few2VNNI, q8Few4VNNI, q8Few8VNNI}

//go:noescape
func q50Few1VNNI(w *byte, ldw uintptr, nb int, xq *byte, xc *int32, xd *float32, np int, out *float32, ldo uintptr, rs uintptr, n int)

//go:noescape
func q50Few2VNNI(w *byte, ldw uintptr, nb int, xq *byte, xc *int32, xd *float32, np int, out *float32, ldo uintptr, rs uintptr, n int)

//go:noescape
func q50Few4VNNI(w *byte, ldw uintptr, nb int, xq *byte, xc *int32, xd *float32, np int, out *float32, ldo uintptr, rs uintptr, n int)

// fewTypes are the weight types with few-input kernels (few.go).
var fewTypes = map[gguf.Type]*fewType{
	gguf.TypeQ8_0: {rows: [4]int{fewRows, fewRows, fewRows, fewRows}, tile: q8FewTile},
	// Q5_0 (few_q5_amd64.s): 1 input four rows a tile, a row to a 256-bit
	// vector; 2 and 4 inputs four and two rows, two to a 512-bit vector
	// (what the registers hold); 8 inputs as twice 4.
	gguf.TypeQ5_0: {rows: [4]int{4, 4, 2, 2}, tile: q50FewTile},
	// Q4_K, Q6_K (few_k_amd64.s): a row at a time.
	gguf.TypeQ4_K: {span: kFewSpan([3]kFewKernel{q4kFew1VNNI, q4kFew2VNNI, q4kFew4VNNI}, false)},
	gguf.TypeQ6_K: {span: kFewSpan([3]kFewKernel{q6kFew1VNNI, q6kFew2VNNI, q6kFew4VNNI}, true)},
}

// q50FewTile is fewType.tile of Q5_0.
func q50FewTile(f *Few, w *byte, ldw uintptr, out []float32, ldo int, rs uintptr) {
	q := (*byte)(unsafe.Pointer(&f.q[0]))
	switch f.np {
	case 1:
		q50Few1VNNI(w, ldw, f.nb, q, &f.c5[0], &f.d[0], 1, &out[0], uintptr(4*ldo), rs, 1)
	case 2:
		q50Few2VNNI(w, ldw, f.nb, q, &f.c5[0], &f.d[0], 2, &out[0], uintptr(4*ldo), rs, 2)
	default:
		for t := 0; t < f.n; t += 4 {
			q50Few4VNNI(w, ldw, f.nb, (*byte)(unsafe.Pointer(&f.q[32*t])), &f.c5[8*t], &f.d[t], f.np, &out[t*ldo], uintptr(4*ldo), rs, min(4, f.n-t))
		}
	}
}

// The K-quant kernels (few_k_amd64.s): rows adjacent rows at w, ldw bytes
// apart, of nb super-blocks against 1, 2 or 4 inputs of a Few.

//go:noescape
func q4kFew1VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)

//go:noescape
func q4kFew2VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)

//go:noescape
func q4kFew4VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)

//go:noescape
func q6kFew1VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)

//go:noescape
func q6kFew2VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)

//go:noescape
func q6kFew4VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)

// kFewKernel is a K-quant kernel.
type kFewKernel func(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)

// kFewChunk is the rows a K-quant kernel takes at a time when a Few holds
// more than four inputs, so that the rows are still in cache for the
// second four.
const kFewChunk = 16

// kFewSpan is fewType.span of a K-quant type with the kernels kerns (1,
// 2 and 4 inputs); q6 says that they take the Q6_K corrections as xc,
// else the Q4_K sub-block sums.
func kFewSpan(kerns [3]kFewKernel, q6 bool) func(f *Few, w *byte, rb uintptr, rows int, out []float32, ldo int) {
	return func(f *Few, w *byte, rb uintptr, rows int, out []float32, ldo int) {
		xc := func(t int) *byte { return (*byte)(unsafe.Pointer(&f.k.m[8*t])) }
		if q6 {
			xc = func(t int) *byte { return (*byte)(unsafe.Pointer(&f.k.c[128*t])) }
		}
		xq := func(t int) *byte { return (*byte)(unsafe.Pointer(&f.k.q[256*t])) }
		if f.np <= 4 {
			kerns[fewIndex[f.np]](w, rb, rows, f.nb, xq(0), xc(0), &f.d[0], f.np, &out[0], uintptr(4*ldo), f.n)
			return
		}
		for r := 0; r < rows; r += kFewChunk {
			nr := min(kFewChunk, rows-r)
			wr := (*byte)(unsafe.Add(unsafe.Pointer(w), uintptr(r)*rb))
			kerns[2](wr, rb, nr, f.nb, xq(0), xc(0), &f.d[0], f.np, &out[r], uintptr(4*ldo), 4)
			kerns[2](wr, rb, nr, f.nb, xq(4), xc(4), &f.d[4], f.np, &out[4*ldo+r], uintptr(4*ldo), f.n-4)
		}
	}
}
