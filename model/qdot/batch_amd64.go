//go:build amd64 && !purego

package qdot

import "ringlm/internal/cpufeat"

// useVNNI says whether the batch kernels (batch_amd64.s) run.
var useVNNI = cpufeat.VNNI

//go:noescape
func q8PrepVNNI(w *byte, ldw uintptr, rows int, nb int, corr *int32, dw *float32)

//go:noescape
func q8BatchVNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, corr *int32, dw *float32, out *float32, ldo uintptr, mask uint16)

//go:noescape
func q8Batch1VNNI(w *byte, nb int, xq *byte, xd *float32, corr *int32, dw *float32, out *float32, ldo uintptr, mask uint16)

//go:noescape
func q8LaneVNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, out *float32, ldo uintptr, rs uintptr, mask uint16)

//go:noescape
func q8Lane1VNNI(w *byte, nb int, xq *byte, xd *float32, out *float32, ldo uintptr, mask uint16)
