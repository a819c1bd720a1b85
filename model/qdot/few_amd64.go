//go:build amd64 && !purego

package qdot

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
