package quant

import (
	"encoding/binary"
	"math"

	"ringlm/gguf"
)

// Helpers shared by the quantizers. ggml's reference quantizers are plain
// C float arithmetic, each operation rounded to float32 (ggml-base is built
// without -march flags, so nothing is contracted into an FMA). Go may fuse
// x*y+z on some targets unless a product is converted explicitly, so the
// quantizers write float32(x*y) wherever ggml's result depends on the
// product being rounded first.

// loadF16 reads the little-endian IEEE half at b[0:2].
func loadF16(b []byte) float32 { return gguf.F16ToF32(binary.LittleEndian.Uint16(b)) }

// storeF16 writes f as a little-endian IEEE half, rounded to nearest even
// as GGML_FP32_TO_FP16.
func storeF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, gguf.F32ToF16(f)) }

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// nearestInt rounds half to even, as ggml's nearest_int (which adds 1.5·2^23
// and reads the mantissa). ggml asserts |f| ≤ 4194303; here larger values
// saturate and NaN gives 0, so that no input can panic or depend on the
// platform's float-to-int conversion.
func nearestInt(f float32) int {
	const lim = 4194303
	switch {
	case f != f:
		return 0
	case f > lim:
		return lim
	case f < -lim:
		return -lim
	}
	return int(math.RoundToEven(float64(f)))
}

// truncClamp is C's float-to-integer cast (truncation toward zero) followed
// by a clamp to [lo, hi]. Where the cast is defined in ggml (a finite value
// in range) the result is ggml's; NaN and values out of range, undefined
// behaviour in C, saturate (NaN as 0) instead.
func truncClamp(f float32, lo, hi int) int {
	switch {
	case f != f:
		return min(max(0, lo), hi)
	case f <= float32(lo):
		return lo
	case f >= float32(hi):
		return hi
	}
	return int(f)
}
