//go:build !amd64 || purego

package qdot

import "ringlm/gguf"

// useAVX2 is false: no assembly on this architecture (or built with
// purego); every kernel runs in Go.
const useAVX2 = false

type asmKernel func(w *byte, v *view, nb int) float32

var asmKernels map[gguf.Type]asmKernel

// useVNNI is false: Batched products loop over Dot.
const useVNNI = false

func q8PrepVNNI(*byte, uintptr, int, int, *int32, *float32) { panic("qdot: no batch kernel") }
func q8BatchVNNI(*byte, uintptr, int, *byte, *float32, *int32, *float32, *float32, uintptr, uint16) {
	panic("qdot: no batch kernel")
}
func q8Batch1VNNI(*byte, int, *byte, *float32, *int32, *float32, *float32, uintptr, uint16) {
	panic("qdot: no batch kernel")
}
func q8LaneVNNI(*byte, uintptr, int, *byte, *float32, *float32, uintptr, uintptr, uint16) {
	panic("qdot: no batch kernel")
}
func q8Lane1VNNI(*byte, int, *byte, *float32, *float32, uintptr, uint16) {
	panic("qdot: no batch kernel")
}
