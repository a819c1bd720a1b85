//go:build !amd64 || purego

package qdot

// No AVX-512 kernels here: useVNNI is false, so MulFew loops over Dot,
// and useQuantAVX512 false (a variable, as on amd64, for the tests), so
// Quantize runs in Go.
var fewKernels [4]fewKernel

var useQuantAVX512 = false

func quantQ8_0AVX512(*float32, *int8, *float32, *int16, *int16, int) int {
	panic("qdot: no AVX-512 quantizer")
}
