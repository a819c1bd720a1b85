package quant

import (
	"encoding/binary"
	"math"

	"ringlm/gguf"
)

// qkK is the k-quants' super-block: 256 elements.
const qkK = 256

// nearestIntK rounds to the nearest integer, ties to even, the way ggml's
// (the k-quants' own, unlike nearestInt in common.go: bit for bit ggml's
// out of range too, which the k-quant goldens pin).
// nearest_int does: adding 1.5·2^23 leaves the rounded value in the low
// mantissa bits. Outside ±2^22 (and for NaN or ±Inf) the result is
// meaningless but the same as ggml's, so a malformed row quantizes to the
// same bytes here as there; callers clamp it before use.
func nearestIntK(f float32) int32 {
	// The conversion rounds a caller's product, say nearestIntK(a*b), before
	// the sum; without it the inlined call may become one FMA.
	v := float32(f) + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// clampInt limits l to [lo, hi].
func clampInt(l, lo, hi int32) int32 {
	return max(lo, min(hi, l))
}

func absf(f float32) float32 {
	return math.Float32frombits(math.Float32bits(f) &^ (1 << 31))
}

// sqrtf is C's sqrtf: the float64 root is exact enough that rounding it to
// float32 gives the correctly rounded float32 root.
func sqrtf(f float32) float32 {
	return float32(math.Sqrt(float64(f)))
}

// f16At reads a little-endian f16 field as float32.
func f16At(b []byte) float32 {
	return gguf.F16ToF32(binary.LittleEndian.Uint16(b))
}

// putF16 stores v as an f16 field and returns the value a reader gets back,
// which is what ggml requantizes against.
func putF16(b []byte, v float32) float32 {
	h := gguf.F32ToF16(v)
	binary.LittleEndian.PutUint16(b, h)
	return gguf.F16ToF32(h)
}
