//go:build !amd64 || purego

package qdot

// useAVX512 is false: Quantize runs in Go.
const useAVX512 = false

func quantQ8_0AVX512(*float32, *int8, *float32, *int16, *int16, int) {
	panic("qdot: no AVX-512 quantizer")
}

func quantQ8_KAVX512(*float32, *int8, *float32, *int16, *int8, *int16, int) {
	panic("qdot: no AVX-512 quantizer")
}
