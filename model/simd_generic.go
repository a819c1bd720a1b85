package model

import (
	"encoding/binary"
	"math"

	"ringlm/gguf"
)

// Portable kernels of the CPU forward. They are the reference semantics:
// the row conversions of the assembly path must give the same bits, and
// dotGo is the dot product wherever the assembly path is not used (see
// simd_amd64.go for the dispatch).

// dotGo is the dot product of the portable path. Its summation order is
// fixed (eight interleaved partial sums, combined pairwise), so a result
// never depends on how many other rows or sequences share the step.
func dotGo(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
		s4 += a[i+4] * b[i+4]
		s5 += a[i+5] * b[i+5]
		s6 += a[i+6] * b[i+6]
		s7 += a[i+7] * b[i+7]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// rowF32Go decodes len(dst) little-endian float32 values from src.
func rowF32Go(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// rowF16Go decodes len(dst) IEEE half values from src.
func rowF16Go(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = gguf.F16ToF32(uint16(src[2*i]) | uint16(src[2*i+1])<<8)
	}
}

// rowBF16Go decodes len(dst) bfloat16 values from src.
func rowBF16Go(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(src[2*i])<<16 | uint32(src[2*i+1])<<24)
	}
}

// rowQ8_0Go dequantizes len(dst)/32 Q8_0 blocks (34 bytes: an F16 scale d,
// then 32 int8 q; value d*q rounded to float32) from src.
func rowQ8_0Go(dst []float32, src []byte) {
	gguf.DequantizeQ8_0(dst, src)
}
