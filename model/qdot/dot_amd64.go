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
	gguf.TypeQ8_0:   dotQ8_0AVX2,
	gguf.TypeQ4_0:   dotQ4_0AVX2,
	gguf.TypeQ4_1:   dotQ4_1AVX2,
	gguf.TypeQ5_0:   dotQ5_0AVX2,
	gguf.TypeQ5_1:   dotQ5_1AVX2,
	gguf.TypeIQ4_NL: dotIQ4_NLAVX2,
	gguf.TypeMXFP4:  dotMXFP4AVX2,
	gguf.TypeQ2_K:   dotQ2_KAVX2,
	gguf.TypeQ3_K:   dotQ3_KAVX2,
	gguf.TypeIQ4_XS: dotIQ4_XSAVX2,
	gguf.TypeQ4_K:   dotQ4_KAVX2,
	gguf.TypeQ5_K:   dotQ5_KAVX2,
	gguf.TypeQ6_K:   dotQ6_KAVX2,
}

// e8m0Table is e8m0Half for every exponent byte, for the MXFP4 kernel.
var e8m0Table = func() (t [256]float32) {
	for e := range t {
		t[e] = e8m0Half(byte(e))
	}
	return t
}()

//go:noescape
func dotQ8_0AVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ4_0AVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ4_KAVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ6_KAVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ5_KAVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ4_1AVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ5_0AVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ5_1AVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotIQ4_NLAVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotMXFP4AVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ2_KAVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotQ3_KAVX2(w *byte, v *view, nb int) float32

//go:noescape
func dotIQ4_XSAVX2(w *byte, v *view, nb int) float32
