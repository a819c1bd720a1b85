package quant

import (
	"math"

	"ringlm/gguf"
)

// MXFP4, the OCP Microscaling format with FP4 elements: a block of 32 holds
// one E8M0 shared scale e (a bare exponent, 2^(e-127)) and 32 E2M1 values
// (sign, 2 exponent bits, 1 mantissa bit: ±0, 0.5, 1, 1.5, 2, 3, 4, 6),
// packed as ggml does: byte j holds element j in its low nibble and j+16 in
// its high nibble.
//
//	MXFP4  e, qs[16]   x = E2M1(q)·2^(e-127)   17 bytes / 32
//
// ggml decodes with MXFP4Values, the E2M1 values doubled so they are
// integers, and E8M0Half(e) = 2^(e-128), which gives the same products
// exactly. Like ggml, e = 255 decodes as 2^127 rather than the spec's NaN.

// MXFP4Values is ggml's kvalues_mxfp4: twice the E2M1 value of each nibble.
// Read-only.
var MXFP4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

const mxfp4Bytes = 17

func init() {
	register(&Format{Type: gguf.TypeMXFP4, Dequantize: dequantizeMXFP4, Quantize: quantizeMXFP4})
}

// E8M0Half is ggml's ggml_e8m0_to_fp32_half: 2^(e-128), the block scale
// that goes with MXFP4Values. e = 0 and 1 give the subnormals 2^-128 and
// 2^-127.
func E8M0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func dequantizeMXFP4(dst []float32, src []byte) {
	var L [qk]uint8
	for b := range len(dst) / qk {
		blk, y := src[b*mxfp4Bytes:][:mxfp4Bytes], dst[b*qk:][:qk]
		d := E8M0Half(blk[0])
		unpackNibbles(&L, blk[1:], 0)
		for j, l := range L {
			y[j] = float32(MXFP4Values[l]) * d
		}
	}
}

// mxfp4Exponent is ggml's shared exponent floor(log2f(amax)) - 2 + 127: the
// largest element's binade starts at 4·2^(e-127), E2M1's 4, so elements up
// to 6·2^(e-127) are represented and larger ones (up to 8·) clip to 6, the
// OCP spec's suggested conversion. log2f is rounded to float32 before the
// floor, as in ggml: just below a power of two it can round up to it.
// Below 2^-125 the result would be negative (undefined in ggml's uint8
// cast) and is 0 here; infinity gives 254.
func mxfp4Exponent(amax float32) uint8 {
	if !(amax > 0) {
		return 0
	}
	l := math.Floor(float64(float32(math.Log2(float64(amax)))))
	return uint8(min(254, max(0, l-2+127)))
}

// mxfp4Index is the nibble whose value is nearest to x at scale d (ggml's
// best_index_mxfp4): the first of equals wins, so 0 is +0 and a tie goes to
// the smaller magnitude.
func mxfp4Index(x, d float32) uint8 {
	best := uint8(0)
	bestErr := abs32(float32(float32(MXFP4Values[0])*d) - x)
	for i := uint8(1); i < 16; i++ {
		if err := abs32(float32(float32(MXFP4Values[i])*d) - x); err < bestErr {
			best, bestErr = i, err
		}
	}
	return best
}

func quantizeMXFP4(dst []byte, src []float32) {
	var L [qk]uint8
	for b := range len(src) / qk {
		x, out := src[b*qk:][:qk], dst[b*mxfp4Bytes:][:mxfp4Bytes]
		var amax float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax = a
			}
		}
		e := mxfp4Exponent(amax)
		out[0] = e
		d := E8M0Half(e)
		for j, v := range x {
			L[j] = mxfp4Index(v, d)
		}
		packNibbles(out[1:], &L)
	}
}
