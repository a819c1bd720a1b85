package quant

import (
	"encoding/binary"
	"math"

	"ringlm/gguf"
)

// The legacy formats: blocks of 32 elements with one f16 scale d (and, for
// the _1 types, an f16 offset m). A block's quants are packed in two halves:
// byte j holds element j in its low nibble and element j+16 in its high
// nibble. The 5-bit types keep each element's fifth bit in a little-endian
// uint32 qh, bit j for element j.
//
//	Q4_0  d, qs[16]         x = (q-8)·d      18 bytes
//	Q4_1  d, m, qs[16]      x = q·d + m      20 bytes
//	Q5_0  d, qh[4], qs[16]  x = (q-16)·d     22 bytes
//	Q5_1  d, m, qh[4], qs   x = q·d + m      24 bytes
//	Q8_0  d, qs[32] int8    x = q·d          34 bytes
//
// Quantize is ggml's quantize_row_*_ref, which llama.cpp's quantizer also
// uses for these types when it has no importance matrix.

const qk = 32 // elements per legacy block

func init() {
	register(&Format{Type: gguf.TypeQ4_0, Dequantize: dequantizeQ4_0, Quantize: quantizeQ4_0})
	register(&Format{Type: gguf.TypeQ4_1, Dequantize: dequantizeQ4_1, Quantize: quantizeQ4_1})
	register(&Format{Type: gguf.TypeQ5_0, Dequantize: dequantizeQ5_0, Quantize: quantizeQ5_0})
	register(&Format{Type: gguf.TypeQ5_1, Dequantize: dequantizeQ5_1, Quantize: quantizeQ5_1})
	// One Q8_0 codec for the whole program: gguf's, which synth and the
	// model loader already use.
	register(&Format{Type: gguf.TypeQ8_0, Dequantize: gguf.DequantizeQ8_0, Quantize: gguf.QuantizeQ8_0})
}

// signedMax returns the element of largest magnitude with its sign (the
// first one on ties). The symmetric types scale by it so that it lands
// exactly on the grid's longer side (-8 of -8..7), losing no range.
func signedMax(x []float32) float32 {
	var amax, m float32
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, m = a, v
		}
	}
	return m
}

// minMax returns the smallest and largest element, as ggml's scan from
// ±FLT_MAX does.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func inverse(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// The levels of a block of 32 travel as [32]uint8 between the arithmetic
// and the packing, which every 4- and 5-bit type shares.

// packNibbles stores 32 levels' low 4 bits: byte j = L[j] | L[j+16]<<4.
func packNibbles(qs []byte, L *[qk]uint8) {
	for j := range 16 {
		qs[j] = L[j]&15 | L[j+16]<<4
	}
}

// fifthBits gathers the levels' bit 4: bit j of the result for element j.
func fifthBits(L *[qk]uint8) uint32 {
	var qh uint32
	for j, l := range L {
		qh |= uint32(l>>4&1) << j
	}
	return qh
}

// unpackNibbles is packNibbles' inverse, with the fifth bits of qh added
// (qh = 0 for the 4-bit types).
func unpackNibbles(L *[qk]uint8, qs []byte, qh uint32) {
	for j, q := range qs[:16] {
		L[j] = q&15 | uint8(qh>>j&1)<<4
		L[j+16] = q>>4 | uint8(qh>>(j+16)&1)<<4
	}
}

// symmetricLevels computes the levels of Q4_0 (half = 8) and Q5_0 (16):
// d = max/-half, level = x/d + half rounded half up (C's +half+0.5 then
// truncation), clamped to 0..2·half-1, where the opposite extreme, 2·half,
// clips.
func symmetricLevels(L *[qk]uint8, x []float32, half int) (d float32) {
	d = signedMax(x) / float32(-half)
	id := inverse(d)
	offset := float32(half) + 0.5 // one addition, as ggml's x0 + 8.5f
	for j, v := range x {
		L[j] = uint8(truncClamp(float32(v*id)+offset, 0, 2*half-1))
	}
	return d
}

// affineLevels computes the levels of Q4_1 (top = 15) and Q5_1 (31):
// d = (max-min)/top, m = min, level = (x-m)/d rounded half up.
func affineLevels(L *[qk]uint8, x []float32, top int) (d, m float32) {
	m, hi := minMax(x)
	d = (hi - m) / float32(top)
	id := inverse(d)
	for j, v := range x {
		L[j] = uint8(truncClamp(float32((v-m)*id)+0.5, 0, top))
	}
	return d, m
}

func symmetricValues(y []float32, L *[qk]uint8, d float32, half int) {
	for j, l := range L {
		y[j] = float32(int(l)-half) * d
	}
}

func affineValues(y []float32, L *[qk]uint8, d, m float32) {
	for j, l := range L {
		y[j] = float32(float32(l)*d) + m
	}
}

func quantizeQ4_0(dst []byte, src []float32) {
	var L [qk]uint8
	for b := range len(src) / qk {
		out := dst[b*18:][:18]
		storeF16(out, symmetricLevels(&L, src[b*qk:][:qk], 8))
		packNibbles(out[2:], &L)
	}
}

func dequantizeQ4_0(dst []float32, src []byte) {
	var L [qk]uint8
	for b := range len(dst) / qk {
		blk := src[b*18:][:18]
		unpackNibbles(&L, blk[2:], 0)
		symmetricValues(dst[b*qk:][:qk], &L, loadF16(blk), 8)
	}
}

func quantizeQ4_1(dst []byte, src []float32) {
	var L [qk]uint8
	for b := range len(src) / qk {
		out := dst[b*20:][:20]
		d, m := affineLevels(&L, src[b*qk:][:qk], 15)
		storeF16(out, d)
		storeF16(out[2:], m)
		packNibbles(out[4:], &L)
	}
}

func dequantizeQ4_1(dst []float32, src []byte) {
	var L [qk]uint8
	for b := range len(dst) / qk {
		blk := src[b*20:][:20]
		unpackNibbles(&L, blk[4:], 0)
		affineValues(dst[b*qk:][:qk], &L, loadF16(blk), loadF16(blk[2:]))
	}
}

func quantizeQ5_0(dst []byte, src []float32) {
	var L [qk]uint8
	for b := range len(src) / qk {
		out := dst[b*22:][:22]
		storeF16(out, symmetricLevels(&L, src[b*qk:][:qk], 16))
		binary.LittleEndian.PutUint32(out[2:], fifthBits(&L))
		packNibbles(out[6:], &L)
	}
}

func dequantizeQ5_0(dst []float32, src []byte) {
	var L [qk]uint8
	for b := range len(dst) / qk {
		blk := src[b*22:][:22]
		unpackNibbles(&L, blk[6:], binary.LittleEndian.Uint32(blk[2:]))
		symmetricValues(dst[b*qk:][:qk], &L, loadF16(blk), 16)
	}
}

func quantizeQ5_1(dst []byte, src []float32) {
	var L [qk]uint8
	for b := range len(src) / qk {
		out := dst[b*24:][:24]
		d, m := affineLevels(&L, src[b*qk:][:qk], 31)
		storeF16(out, d)
		storeF16(out[2:], m)
		binary.LittleEndian.PutUint32(out[4:], fifthBits(&L))
		packNibbles(out[8:], &L)
	}
}

func dequantizeQ5_1(dst []float32, src []byte) {
	var L [qk]uint8
	for b := range len(dst) / qk {
		blk := src[b*24:][:24]
		unpackNibbles(&L, blk[8:], binary.LittleEndian.Uint32(blk[4:]))
		affineValues(dst[b*qk:][:qk], &L, loadF16(blk), loadF16(blk[2:]))
	}
}
