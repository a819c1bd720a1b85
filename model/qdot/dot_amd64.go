//go:build amd64 && !purego

package qdot

import (
	"ringlm/gguf"
	"ringlm/internal/cpufeat"
)

// useAVX2 says whether this process runs the assembly kernels
// (dot_amd64.s), decided once for every package (cpufeat).
var useAVX2 = cpufeat.AVX2

// asmKernel is an assembly kernel: nb blocks of the row at w (32-element
// blocks, or 256-element super-blocks for the Q8_K types) against the
// activations v. The wrapper made by register checks the lengths first.
type asmKernel func(w *byte, v *view, nb int) float32

var asmKernels = map[gguf.Type]asmKernel{
	gguf.TypeQ8_0: dotQ8_0AVX2,
	gguf.TypeQ4_0: dotQ4_0AVX2,
	gguf.TypeQ4_K: dotQ4_KAVX2,
	gguf.TypeQ6_K: dotQ6_KAVX2,
}

//go:noescape
func dotQ8_0AVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ4_0AVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ4_KAVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ6_KAVX2(w *byte, v *view, nb int) float32
