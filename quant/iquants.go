package quant

import (
	"encoding/binary"

	"ringlm/gguf"
)

// The 4-bit non-linear formats. Each element is a 4-bit index into
// IQ4NLValues, a grid denser near zero than at its ends, scaled per block of
// 32: x = d·IQ4NLValues[q]. The indices are packed as in the legacy
// formats: byte j of a block of 32 holds element j (low nibble) and j+16
// (high nibble).
//
//	IQ4_NL  d (f16), qs[16]                                   18 bytes / 32
//	IQ4_XS  d (f16), scales_h (u16), scales_l[4], qs[128]    136 bytes / 256
//
// IQ4_XS gives each of its 8 blocks of 32 a 6-bit scale ls (bias 32), its
// low 4 bits in scales_l (block i: byte i/2, low nibble for even i) and its
// high 2 bits in scales_h (bits 2i, 2i+1); block i's scale is d·(ls-32).
//
// Quantize follows ggml's quantize_iq4_nl / quantize_iq4_xs without an
// importance matrix, which is what llama-quantize writes for these types:
// per block of 32, the 15 scales that put the largest element on -127±7
// (and a first guess) are tried, and the one of least Σ x²·(x - d·q)² is
// kept. (ggml's quantize_row_iq4_nl_ref skips that search; llama-quantize
// goes through quantize_iq4_nl, which does it.)

// IQ4NLValues is ggml's kvalues_iq4nl, the grid of IQ4_NL and IQ4_XS. The
// integer dot products and device tables decode with it. Read-only.
var IQ4NLValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// iq4Mid2[j] is IQ4NLValues[j-1]+IQ4NLValues[j]: twice the midpoint below
// level j, exact in float32.
var iq4Mid2 = func() (m [16]float32) {
	for j := 1; j < 16; j++ {
		m[j] = float32(int(IQ4NLValues[j-1]) + int(IQ4NLValues[j]))
	}
	return
}()

const (
	iq4Tries     = 7     // ggml's ntry: the largest element tried at -127±7
	groupMaxEps  = 1e-15 // ggml's GROUP_MAX_EPS: blocks below it are zero
	iq4xsBlocks  = 8     // blocks of 32 per IQ4_XS super-block
	iq4xsBytes   = 136
	iq4nlBytes   = 18
	iq4xsQsStart = 8
)

func init() {
	register(&Format{Type: gguf.TypeIQ4_NL, Dequantize: dequantizeIQ4_NL, Quantize: quantizeIQ4_NL})
	register(&Format{Type: gguf.TypeIQ4_XS, Dequantize: dequantizeIQ4_XS, Quantize: quantizeIQ4_XS})
}

// iq4Index is the grid index nearest to x, as ggml's best_index_int8: a
// binary search over the midpoints, doubled so that the comparison is
// exact; a tie goes to the upper level, and NaN to index 0.
func iq4Index(x float32) uint8 {
	x2 := x + x
	i := 0
	for step := 8; step > 0; step >>= 1 {
		if x2 >= iq4Mid2[i+step] {
			i += step
		}
	}
	return uint8(i)
}

// iq4Scale finds the scale of one block of 32: ggml's per-block search in
// quantize_row_iq4_nl_impl, with the weights x² it uses without an
// importance matrix. A block smaller than groupMaxEps gets scale 0. The
// indices found on the way are not kept: both types choose them again.
func iq4Scale(x []float32) float32 {
	var amax, vmax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		return 0
	}
	// ggml's first guess puts the largest element at +127, past the grid's
	// short end (113); the search then tries it on the long end, -127±7,
	// with d of the opposite sign.
	d := -vmax / float32(IQ4NLValues[0])
	sumqx, sumq2 := iq4Fit(x, 1/d)
	d = 0
	if sumq2 > 0 {
		d = sumqx / sumq2
	}
	best := float32(d * sumqx)
	for try := -iq4Tries; try <= iq4Tries; try++ {
		sumqx, sumq2 := iq4Fit(x, float32(try+int(IQ4NLValues[0]))/vmax)
		// Weighted least squares: for fixed indices the best scale is
		// Σwqx/Σwq², and the error falls as (Σwqx)²/Σwq² grows.
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			d = sumqx / sumq2
			best = float32(d * sumqx)
		}
	}
	return d
}

// iq4Fit indexes x at inverse scale id and returns Σw·q·x and Σw·q², w = x²,
// accumulated in order in float32 as ggml does.
func iq4Fit(x []float32, id float32) (sumqx, sumq2 float32) {
	for _, v := range x {
		q := float32(IQ4NLValues[iq4Index(float32(id*v))])
		w := float32(v * v)
		sumqx += float32(w * q * v)
		sumq2 += float32(w * q * q)
	}
	return sumqx, sumq2
}

func quantizeIQ4_NL(dst []byte, src []float32) {
	var L [qk]uint8
	for b := range len(src) / qk {
		x, out := src[b*qk:][:qk], dst[b*iq4nlBytes:][:iq4nlBytes]
		d := iq4Scale(x)
		storeF16(out, d)
		// The indices are chosen again for the scale that was kept (in
		// float32, before its f16 rounding).
		id := inverse(d)
		for j, v := range x {
			L[j] = iq4Index(float32(id * v))
		}
		packNibbles(out[2:], &L)
	}
}

func dequantizeIQ4_NL(dst []float32, src []byte) {
	var L [qk]uint8
	for b := range len(dst) / qk {
		blk, y := src[b*iq4nlBytes:][:iq4nlBytes], dst[b*qk:][:qk]
		d := loadF16(blk)
		unpackNibbles(&L, blk[2:], 0)
		for j, l := range L {
			y[j] = d * float32(IQ4NLValues[l])
		}
	}
}

func quantizeIQ4_XS(dst []byte, src []float32) {
	const n = qk * iq4xsBlocks
	var (
		L      [qk]uint8
		scales [iq4xsBlocks]float32
	)
	for b := range len(src) / n {
		x, out := src[b*n:][:n], dst[b*iq4xsBytes:][:iq4xsBytes]
		var maxScale, amaxScale float32
		for ib := range iq4xsBlocks {
			scales[ib] = iq4Scale(x[ib*qk:][:qk])
			if a := abs32(scales[ib]); a > amaxScale {
				amaxScale, maxScale = a, scales[ib]
			}
		}
		// The block scales become 6-bit multiples of d, the largest one
		// -32·d (the long side of -32..31). An all-zero super-block gets
		// d = -0, as ggml writes it.
		d := -maxScale / 32
		storeF16(out, d)
		id := inverse(d)
		var scalesH uint16
		scalesL := out[4:8]
		clear(scalesL)
		for ib := range iq4xsBlocks {
			l := min(31, max(-32, nearestInt(float32(id*scales[ib]))))
			idl := inverse(d * float32(l))
			xb := x[ib*qk:][:qk]
			for j, v := range xb {
				L[j] = iq4Index(float32(idl * v))
			}
			packNibbles(out[iq4xsQsStart+16*ib:], &L)
			ls := l + 32
			scalesL[ib/2] |= byte(ls&15) << (4 * (ib % 2))
			scalesH |= uint16(ls>>4) << (2 * ib)
		}
		binary.LittleEndian.PutUint16(out[2:], scalesH)
	}
}

func dequantizeIQ4_XS(dst []float32, src []byte) {
	const n = qk * iq4xsBlocks
	var L [qk]uint8
	for b := range len(dst) / n {
		blk := src[b*iq4xsBytes:][:iq4xsBytes]
		d := loadF16(blk)
		scalesH := binary.LittleEndian.Uint16(blk[2:])
		for ib := range iq4xsBlocks {
			ls := int(blk[4+ib/2]>>(4*(ib%2))&15) | int(scalesH>>(2*ib)&3)<<4
			dl := d * float32(ls-32)
			unpackNibbles(&L, blk[iq4xsQsStart+16*ib:], 0)
			y := dst[b*n+ib*qk:][:qk]
			for j, l := range L {
				y[j] = dl * float32(IQ4NLValues[l])
			}
		}
	}
}
