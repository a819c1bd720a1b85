//go:build !amd64 || purego

package qdot

import "ringlm/gguf"

// No AVX-512 kernels here: useVNNI is false, so MulFew loops over Dot.
var (
	fewKernels [4]fewKernel
	fewTypes   map[gguf.Type]*fewType
)
