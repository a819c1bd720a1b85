//go:build !amd64 || purego

package qdot

// No AVX-512 kernels here: useVNNI is false, so MulFew loops over Dot.
var fewKernels [4]fewKernel
