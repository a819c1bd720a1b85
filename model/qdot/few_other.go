//go:build !amd64 || purego

package qdot

// No row-lane kernels here: useVNNI is false, and MulFew loops over Dot.
var fewKernels [4]fewKernel
