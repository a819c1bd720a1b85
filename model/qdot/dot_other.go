//go:build !amd64 || purego

package qdot

import "ringlm/gguf"

// useAVX2 is false: no assembly on this architecture (or built with
// purego); every kernel runs in Go.
const useAVX2 = false

type asmKernel func(w *byte, v *view, nb int) float32

var asmKernels map[gguf.Type]asmKernel
