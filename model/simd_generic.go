package model

import (
	"encoding/binary"
	"math"

	"ringlm/gguf"
)

// Portable row conversions of the CPU forward: the reference semantics,
// whose bits the assembly conversions give (simd_amd64.go).

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
