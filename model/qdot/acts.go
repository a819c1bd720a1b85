package qdot

import (
	"fmt"
	"math"

	"ringlm/gguf"
)

// Acts is an input vector quantized to 8 bits per block, in the
// arithmetic of ggml's reference quantizers (quantize_row_q8_0_ref,
// quantize_row_q8_1_ref, quantize_row_q8_K_ref). The buffers are reused
// from one Quantize to the next.
//
// On a CPU with AVX-512, Q8_0 is quantized by assembly (quant_amd64.s)
// that gives quantize32's bits, six times faster: a decode step of many
// sequences quantizes some 2M activations.
//
// A block holding a NaN or an infinity gets a NaN scale (ggml's quantizers
// would skip or mangle such values), so a non-finite activation still
// makes the products it enters NaN, as in the float path.
type Acts struct {
	typ gguf.Type
	n   int
	q   []int8    // n quants in element order
	d   []float32 // per block: Q8_0/Q8_1 the scale rounded to F16 as ggml stores it; Q8_K the float32 scale
	s   []float32 // Q8_1: d·Σq per block, rounded to F16
	// sums holds Σq per 32-block (Q8_0) or per 16 (Q8_K, ggml's bsums).
	sums []int16
	// For the assembly kernels: Q8_K's qp is q with each 16 reordered as
	// 0,8,1,9,…,7,15, and pair[i] = 32·(qp[2i]+qp[2i+1]); Q8_0's pair[i]
	// = 16·(q[2i]+q[2i+1]), the offset of Q5_0's quants (q5-16) against
	// each pair of activations, so that the kernel multiplies unsigned q5.
	qp   []int8
	pair []int16
	v    view
}

// view is what the assembly kernels read of an Acts, at fixed offsets.
type view struct {
	q    *int8    // 0: q, or qp for Q8_K
	d    *float32 // 8
	s    *float32 // 16
	sums *int16   // 24
	pair *int16   // 32
}

// Type is the block format of the last Quantize.
func (a *Acts) Type() gguf.Type { return a.typ }

// Len is the number of elements of the last Quantize.
func (a *Acts) Len() int { return a.n }

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// Quantize quantizes x to t (Q8_0, Q8_1 or Q8_K); len(x) must be a
// multiple of t's block (32, or 256 for Q8_K). Anything else is a bug of
// the caller: it panics.
func (a *Acts) Quantize(t gguf.Type, x []float32) {
	bs := 32
	if t == gguf.TypeQ8_K {
		bs = 256
	}
	if (t != gguf.TypeQ8_0 && t != gguf.TypeQ8_1 && t != gguf.TypeQ8_K) || len(x)%bs != 0 {
		panic(fmt.Sprintf("qdot: cannot quantize %d activations to %s", len(x), t))
	}
	n, nb := len(x), len(x)/bs
	a.typ, a.n = t, n
	a.q = grow(a.q, n)
	a.d = grow(a.d, nb)
	switch t {
	case gguf.TypeQ8_0:
		a.sums = grow(a.sums, nb)
		if useQuantAVX512 {
			a.pair = grow(a.pair, n/2)
			for b := 0; b < nb; b++ {
				// The assembly to the first block with an infinity or a
				// NaN, which quantize32 takes.
				if b += quantQ8_0AVX512(&x[32*b], &a.q[32*b], &a.d[b], &a.sums[b], &a.pair[16*b], nb-b); b == nb {
					break
				}
				a.d[b], a.sums[b], _ = quantize32(a.q[32*b:32*b+32], x[32*b:32*b+32])
				a.setPairs(16*b, 16*b+16)
			}
			break
		}
		for b := range nb {
			a.d[b], a.sums[b], _ = quantize32(a.q[32*b:32*b+32], x[32*b:32*b+32])
		}
		if useAVX2 {
			a.pair = grow(a.pair, n/2)
			a.setPairs(0, n/2)
		}
	case gguf.TypeQ8_1:
		a.s = grow(a.s, nb)
		for b := range nb {
			var sum int16
			var d float32
			a.d[b], sum, d = quantize32(a.q[32*b:32*b+32], x[32*b:32*b+32])
			// ggml rounds d·Σq with d before its rounding to F16.
			a.s[b] = f16Round(float32(sum) * d)
		}
	case gguf.TypeQ8_K:
		a.sums = grow(a.sums, n/16)
		for b := range nb {
			a.d[b] = quantize256(a.q[256*b:256*b+256], a.sums[16*b:16*b+16], x[256*b:256*b+256])
		}
		if useAVX2 {
			a.reorder()
		}
	}
	a.v = view{q: &a.q[0], d: &a.d[0]}
	if len(a.s) > 0 {
		a.v.s = &a.s[0]
	}
	if len(a.sums) > 0 {
		a.v.sums = &a.sums[0]
	}
	if t == gguf.TypeQ8_K && useAVX2 {
		a.v.q, a.v.pair = &a.qp[0], &a.pair[0]
	}
	if t == gguf.TypeQ8_0 && useAVX2 {
		a.v.pair = &a.pair[0]
	}
}

// setPairs sets pair[i] = 16·(q[2i]+q[2i+1]) for i in [lo, hi) (Q8_0, for
// the Q5_0 assembly).
func (a *Acts) setPairs(lo, hi int) {
	for i := lo; i < hi; i++ {
		a.pair[i] = 16 * (int16(a.q[2*i]) + int16(a.q[2*i+1]))
	}
}

// reorder fills qp and pair from q (Q8_K, for the assembly kernels).
func (a *Acts) reorder() {
	a.qp = grow(a.qp, a.n)
	a.pair = grow(a.pair, a.n/2)
	for c := 0; c < a.n; c += 16 {
		for k := range 8 {
			lo, hi := a.q[c+k], a.q[c+k+8]
			a.qp[c+2*k], a.qp[c+2*k+1] = lo, hi
			a.pair[c/2+k] = 32 * (int16(lo) + int16(hi))
		}
	}
}

// f16Round is v rounded to the nearest F16 value, as a float32.
func f16Round(v float32) float32 { return gguf.F16ToF32(gguf.F32ToF16(v)) }

// quantize32 is one block of quantize_row_q8_0_ref (and q8_1's): d =
// max|x|/127, q = round(x/d) with halves away from zero, x/d computed as
// x·(1/d). It returns the scale as stored (rounded to F16), Σq, and the
// unrounded scale.
func quantize32(q []int8, x []float32) (stored float32, sum int16, d float32) {
	q, x = q[:32], x[:32]
	var amax, z float32
	for _, v := range x {
		z += v * 0 // NaN once an element is infinite or NaN
		if a := abs32(v); a > amax {
			amax = a
		}
	}
	if z != 0 {
		clear(q)
		nan := float32(math.NaN())
		return nan, 0, nan
	}
	d = amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for j, v := range x {
		q[j] = roundAway(v * id)
		sum += int16(q[j])
	}
	return f16Round(d), sum, d
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// roundAway is C's roundf for |v| ≤ 127.5 (what the quantizers pass it):
// in float64, v ± 0.5 is exact and truncation finishes the rounding.
func roundAway(v float32) int8 {
	return int8(int32(float64(v) + math.Copysign(0.5, float64(v))))
}

// nearestInt is ggml's nearest_int: adding 1.5·2^23 leaves v rounded to
// the nearest integer, halves to even, in the low mantissa bits (|v| ≤
// 2^22).
func nearestInt(v float32) int32 {
	return int32(math.Float32bits(v+12582912)&0x007fffff) - 0x00400000
}

// quantize256 is one block of quantize_row_q8_K_ref: the scale comes from
// the element of largest magnitude (the first such), iscale = -127/max, q =
// min(127, nearestInt(iscale·x)), d = 1/iscale; bsums are the sums of each
// 16 quants.
func quantize256(q []int8, bsums []int16, x []float32) float32 {
	q, bsums, x = q[:256], bsums[:16], x[:256]
	var amax, mx, z float32
	for _, v := range x {
		z += v * 0 // NaN once an element is infinite or NaN
		if ax := abs32(v); ax > amax {
			amax, mx = ax, v
		}
	}
	bad := z != 0
	if bad || amax == 0 {
		clear(q)
		clear(bsums)
		if bad {
			return float32(math.NaN())
		}
		return 0
	}
	iscale := -127 / mx
	for j, v := range x {
		q[j] = int8(min(127, nearestInt(iscale*v)))
	}
	for j := range bsums {
		var s int16
		for _, v := range q[16*j : 16*j+16] {
			s += int16(v)
		}
		bsums[j] = s
	}
	return 1 / iscale
}
