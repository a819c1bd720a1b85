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
	// Q5_0 (few_q5_amd64.s): two rows to a vector, 8, 4 and 2 rows for
	// 1, 2 and 4 inputs (what the registers hold), 8 inputs as twice 4.
	gguf.TypeQ5_0: {rows: [4]int{4, 4, 2, 2}, tile: q50FewTile},
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
