package quant

// The k-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (weights) and Q8_K (the
// activations ggml multiplies them with). Each packs a super-block of 256
// elements: one or two f16 super-block scales (f32 for Q8_K), per
// sub-block scales quantized against them, and the quants.
//
// Dequantize is ggml's dequantize_row_q*_K. Quantize is ggml's
// quantize_row_q*_K_ref, the reference quantizer llama-quantize uses when
// it has no importance matrix, operation for operation: the same searches,
// the same float32 evaluation order, nearest_int's ties-to-even, and the
// requantization against the f16-rounded scales. Every product that feeds a
// sum, even through a variable or an inlined call, is converted to float32
// explicitly, which is what stops Go fusing the two into an FMA (it does on
// arm64, and on amd64 with GOAMD64=v3): ggml's quantizers live in ggml-base, which x86-64 builds compile
// without FMA, so unfused is what llama.cpp computes there, and our bytes
// are the same on every architecture.
//
// The element order inside a super-block is the subtle part. For quants
// packed several to a byte, consecutive elements do not share a byte: a
// byte holds elements 32 apart (the 2-bit types: the four bit pairs of
// qs[32h+l] are elements 128h+l, +32, +64, +96; the 4-bit types: the two
// nibbles of qs[32c+l] are elements 64c+l and 64c+32+l), and the extra high
// bits of Q3_K and Q5_K are hmask/qh[e%32] bit e/32. Each dequantizer below
// states its layout; kquants_test.go pins them with hand-built blocks.

import (
	"encoding/binary"
	"math"

	"ringlm/gguf"
)

// Bytes per super-block, as gguf.TypeInfo has them.
const (
	q2KBytes = 84
	q3KBytes = 110
	q4KBytes = 144
	q5KBytes = 176
	q6KBytes = 210
	q8KBytes = 292
)

func init() {
	kquant := func(t gguf.Type, size int, dq, q func(*[qkK]float32, []byte)) {
		register(&Format{Type: t,
			Dequantize: func(dst []float32, src []byte) { superBlocks(dst, src, size, dq) },
			Quantize:   func(dst []byte, src []float32) { superBlocks(src, dst, size, q) },
		})
	}
	kquant(gguf.TypeQ2_K, q2KBytes, dequantQ2K, quantQ2K)
	kquant(gguf.TypeQ3_K, q3KBytes, dequantQ3K, quantQ3K)
	kquant(gguf.TypeQ4_K, q4KBytes, dequantQ4K, quantQ4K)
	kquant(gguf.TypeQ5_K, q5KBytes, dequantQ5K, quantQ5K)
	kquant(gguf.TypeQ6_K, q6KBytes, dequantQ6K, quantQ6K)
	kquant(gguf.TypeQ8_K, q8KBytes, dequantQ8K, quantQ8K)
}

// superBlocks calls f on each super-block: 256 elements of xs and the size
// bytes that hold them. It stops at the shorter side rather than panic when
// a Format is called directly with lengths that do not match.
func superBlocks(xs []float32, bs []byte, size int, f func(*[qkK]float32, []byte)) {
	for len(xs) >= qkK && len(bs) >= size {
		f((*[qkK]float32)(xs), bs[:size:size])
		xs, bs = xs[qkK:], bs[size:]
	}
}

// ---- Q2_K: scales[16] qs[64] d dmin (84 bytes) ----
//
// Sixteen groups of 16 elements; group g has scale d·(scales[g]&15) and min
// dmin·(scales[g]>>4); element e = 128h + 32k + l (h < 2, k < 4, l < 32) is
// bit pair k of qs[32h+l], so x = scale·q − min.

func dequantQ2K(x *[qkK]float32, b []byte) {
	scales, qs := b[0:16], b[16:80]
	d, dmin := f16At(b[80:]), f16At(b[82:])
	for g := range 16 {
		sc := scales[g]
		dl, ml := d*float32(sc&0xF), float32(dmin*float32(sc>>4))
		q := qs[32*(g/8)+16*(g%2):][:16]
		shift := 2 * (g % 8 / 2)
		y := x[16*g:][:16]
		for l := range y {
			y[l] = float32(dl*float32(q[l]>>shift&3)) - ml
		}
	}
}

func quantQ2K(x *[qkK]float32, b []byte) {
	var (
		L            [qkK]uint8
		scales, mins [16]float32
	)
	absWeights := func(xs, w []float32) {
		for l, v := range xs {
			w[l] = absf(v)
		}
	}
	maxScale, maxMin := fitScaleMin(x, &L, scales[:], mins[:], absWeights, 3, -0.5, 0.1, 15, true)

	sc := b[0:16]
	var d, dmin float32
	if maxScale > 0 {
		iscale := 15 / maxScale
		for j := range sc {
			sc[j] = uint8(nearestIntK(iscale * scales[j]))
		}
		d = putF16(b[80:], maxScale/15)
	} else {
		clear(sc)
		d = putF16(b[80:], 0)
	}
	if maxMin > 0 {
		iscale := 15 / maxMin
		for j := range sc {
			sc[j] |= uint8(nearestIntK(iscale*mins[j]) << 4)
		}
		dmin = putF16(b[82:], maxMin/15)
	} else {
		dmin = putF16(b[82:], 0)
	}

	for j := range 16 {
		dl := d * float32(sc[j]&0xF)
		if dl == 0 {
			continue // the group keeps the levels of its own fit
		}
		ml := float32(dmin * float32(sc[j]>>4))
		for i, v := range x[16*j : 16*j+16] {
			L[16*j+i] = uint8(clampInt(nearestIntK((v+ml)/dl), 0, 3))
		}
	}
	pack2Bit(b[16:80], &L)
}

// pack2Bit stores the low two bits of each level the Q2_K/Q3_K way: bit
// pair k of qs[32h+l] is element 128h+32k+l.
func pack2Bit(qs []byte, L *[qkK]uint8) {
	for h := range 2 {
		for l := range 32 {
			e := 128*h + l
			qs[32*h+l] = L[e]&3 | (L[e+32]&3)<<2 | (L[e+64]&3)<<4 | (L[e+96]&3)<<6
		}
	}
}

// ---- Q3_K: hmask[32] qs[64] scales[12] d (110 bytes) ----
//
// Sixteen groups of 16 with signed 6-bit scales (q3KScales), each times d.
// Element e takes its low two bits as Q2_K does and its third bit from
// hmask[e%32] bit e/32. The quant is the low bits minus 4 when that bit is
// clear, so levels run from −4 to 3 and a set bit means "no offset".

func dequantQ3K(x *[qkK]float32, b []byte) {
	hmask, qs := b[0:32], b[32:96]
	sc := q3KScales(b[96:108])
	d := f16At(b[108:])
	for g := range 16 {
		dl := d * float32(sc[g])
		q := qs[32*(g/8)+16*(g%2):][:16]
		hm := hmask[16*(g%2):][:16]
		shift, hbit := 2*(g%8/2), g/2
		y := x[16*g:][:16]
		for l := range y {
			v := int32(q[l] >> shift & 3)
			if hm[l]>>hbit&1 == 0 {
				v -= 4
			}
			y[l] = dl * float32(v)
		}
	}
}

// q3KScales unpacks Q3_K's sixteen 6-bit scales, stored with a bias of 32:
// the low nibble of scale j is nibble j/8 of s[j%8], its top two bits are
// bits 2(j/4), 2(j/4)+1 of s[8+j%4].
func q3KScales(s []byte) (sc [16]int32) {
	for j := range sc {
		lo := s[j%8] >> (4 * (j / 8)) & 0xF
		hi := s[8+j%4] >> (2 * (j / 4)) & 3
		sc[j] = int32(lo|hi<<4) - 32
	}
	return sc
}

func quantQ3K(x *[qkK]float32, b []byte) {
	var (
		L      [qkK]uint8
		scales [16]float32
	)
	for j := range 16 {
		scales[j] = makeQ3(x[16*j:][:16], L[16*j:][:16], 4)
	}
	maxScale, _ := absMax(scales[:]) // the scale of largest magnitude, with its sign

	s := b[96:108]
	clear(s)
	var d float32
	if maxScale != 0 {
		iscale := -32 / maxScale
		for j := range 16 {
			// ggml narrows to int8 before clamping.
			l := uint8(clampInt(int32(int8(nearestIntK(iscale*scales[j]))), -32, 31) + 32)
			s[j%8] |= (l & 0xF) << (4 * (j / 8))
			s[8+j%4] |= (l >> 4) << (2 * (j / 4))
		}
		d = putF16(b[108:], 1/iscale)
	} else {
		d = putF16(b[108:], 0)
	}

	sc := q3KScales(s)
	for j := range 16 {
		dl := d * float32(sc[j])
		if dl == 0 {
			continue
		}
		for i, v := range x[16*j : 16*j+16] {
			L[16*j+i] = uint8(clampInt(nearestIntK(v/dl), -4, 3) + 4)
		}
	}

	hmask := b[0:32]
	clear(hmask)
	for e := range L {
		if L[e] > 3 {
			hmask[e%32] |= 1 << (e / 32)
			L[e] -= 4
		}
	}
	pack2Bit(b[32:96], &L)
}

// ---- Q4_K: d dmin scales[12] qs[128] (144 bytes) ----
//
// Eight sub-blocks of 32 with 6-bit scales and mins (scaleMinK4);
// sub-block s is the low (s even) or high (s odd) nibbles of
// qs[32(s/2):][:32], and x = d·sc·q − dmin·m.

func dequantQ4K(x *[qkK]float32, b []byte) {
	d, dmin := f16At(b[0:]), f16At(b[2:])
	scales, qs := b[4:16], b[16:144]
	for s := range 8 {
		sc, m := scaleMinK4(s, scales)
		d1, m1 := d*float32(sc), float32(dmin*float32(m))
		q := qs[32*(s/2):][:32]
		shift := 4 * (s % 2)
		y := x[32*s:][:32]
		for l := range y {
			y[l] = float32(d1*float32(q[l]>>shift&0xF)) - m1
		}
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of
// sub-block j. Sub-blocks 0–3 keep them whole in the low six bits of q[j]
// and q[j+4]; sub-blocks 4–7 keep their low nibbles in q[j+4] (scale low,
// min high) and their top two bits in the top bits of q[j-4] and q[j].
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// putScaleMinK4 is scaleMinK4's inverse for 6-bit ls, lm; the 12 bytes
// start cleared.
func putScaleMinK4(j int, q []byte, ls, lm uint8) {
	if j < 4 {
		q[j] |= ls
		q[j+4] |= lm
		return
	}
	q[j+4] = ls&0xF | (lm&0xF)<<4
	q[j-4] |= (ls >> 4) << 6
	q[j] |= (lm >> 4) << 6
}

func quantQ4K(x *[qkK]float32, b []byte) {
	var L [qkK]uint8
	quantScaleMinK(x, b[0:16], &L, 15, -1, 0.1, 20)
	qs := b[16:144]
	for c := range 4 {
		for l := range 32 {
			qs[32*c+l] = L[64*c+l] | L[64*c+32+l]<<4
		}
	}
}

// quantScaleMinK is what Q4_K and Q5_K share: fit each sub-block of 32 as
// scale·L − min with make_qkx2_quants over levels 0..nmax, quantize the
// scales and mins to 6 bits against d and dmin (written to hdr, the first
// 16 bytes: d, dmin, scales), and requantize L against the f16 results.
func quantScaleMinK(x *[qkK]float32, hdr []byte, L *[qkK]uint8, nmax int32, rmin, rdelta float32, nstep int) {
	var scales, mins [8]float32
	// Weights |x| plus the sub-block's RMS: large elements count more,
	// small ones not for nothing.
	rmsWeights := func(xs, w []float32) {
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrtf(sumX2 / float32(len(xs)))
		for l, v := range xs {
			w[l] = avX + absf(v)
		}
	}
	maxScale, maxMin := fitScaleMin(x, L, scales[:], mins[:], rmsWeights, nmax, rmin, rdelta, nstep, false)

	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	q := hdr[4:16]
	clear(q)
	for j := range 8 {
		ls := min(63, uint8(nearestIntK(invScale*scales[j])))
		lm := min(63, uint8(nearestIntK(invMin*mins[j])))
		putScaleMinK4(j, q, ls, lm)
	}
	d := putF16(hdr[0:], maxScale/63)
	dmin := putF16(hdr[2:], maxMin/63)

	for j := range 8 {
		sc, m := scaleMinK4(j, q)
		dl := d * float32(sc)
		if dl == 0 {
			continue
		}
		ml := float32(dmin * float32(m))
		for i, v := range x[32*j : 32*j+32] {
			L[32*j+i] = uint8(clampInt(nearestIntK((v+ml)/dl), 0, nmax))
		}
	}
}

// fitScaleMin fits each of the len(scales) sub-blocks of x as scale·L − min
// with make_qkx2_quants (weights from weigh) and returns the largest scale
// and min, against which they are then quantized.
func fitScaleMin(x *[qkK]float32, L *[qkK]uint8, scales, mins []float32, weigh func(xs, w []float32),
	nmax int32, rmin, rdelta float32, nstep int, useMAD bool) (maxScale, maxMin float32) {
	var (
		laux    [32]uint8
		weights [32]float32
	)
	n := qkK / len(scales)
	for j := range scales {
		xs := x[n*j:][:n]
		weigh(xs, weights[:n])
		scales[j], mins[j] = makeQKX2(xs, weights[:n], L[n*j:][:n], laux[:n], nmax, rmin, rdelta, nstep, useMAD)
		maxScale, maxMin = maxf(maxScale, scales[j]), maxf(maxMin, mins[j])
	}
	return maxScale, maxMin
}

// ---- Q5_K: d dmin scales[12] qh[32] qs[128] (176 bytes) ----
//
// Q4_K with a fifth bit: element e adds 16 when qh[e%32] bit e/32 is set.

func dequantQ5K(x *[qkK]float32, b []byte) {
	d, dmin := f16At(b[0:]), f16At(b[2:])
	scales, qh, qs := b[4:16], b[16:48], b[48:176]
	for s := range 8 {
		sc, m := scaleMinK4(s, scales)
		d1, m1 := d*float32(sc), float32(dmin*float32(m))
		q := qs[32*(s/2):][:32]
		shift := 4 * (s % 2)
		y := x[32*s:][:32]
		for l := range y {
			v := q[l] >> shift & 0xF
			v |= (qh[l] >> s & 1) << 4
			y[l] = float32(d1*float32(v)) - m1
		}
	}
}

func quantQ5K(x *[qkK]float32, b []byte) {
	var L [qkK]uint8
	quantScaleMinK(x, b[0:16], &L, 31, -0.5, 0.1, 15)
	qh, qs := b[16:48], b[48:176]
	clear(qh)
	for c := range 4 {
		for l := range 32 {
			lo, hi := L[64*c+l], L[64*c+32+l]
			qs[32*c+l] = lo&0xF | (hi&0xF)<<4
			qh[l] |= (lo>>4)<<(2*c) | (hi>>4)<<(2*c+1)
		}
	}
}

// ---- Q6_K: ql[128] qh[64] scales[16] (int8) d (210 bytes) ----
//
// Sixteen groups of 16 with signed 8-bit scales times d; quants are 6-bit
// with a bias of 32. Element e = 128h + 32k + l (h < 2, k < 4, l < 32)
// takes its low nibble from ql[64h + 32(k%2) + l] (low nibble for k < 2,
// high for k ≥ 2) and its top two bits from bits 2k, 2k+1 of qh[32h+l].

func dequantQ6K(x *[qkK]float32, b []byte) {
	ql, qh, scales := b[0:128], b[128:192], b[192:208]
	d := f16At(b[208:])
	for r := range 8 { // runs of 32 that share their byte positions
		h, k := r/4, r%4
		lo := ql[64*h+32*(k%2):][:32]
		hi := qh[32*h:][:32]
		nib := 4 * (k / 2)
		y := x[32*r:][:32]
		for l := range y {
			q := int32(lo[l]>>nib&0xF|(hi[l]>>(2*k)&3)<<4) - 32
			y[l] = d * float32(int8(scales[2*r+l/16])) * float32(q)
		}
	}
}

func quantQ6K(x *[qkK]float32, b []byte) {
	var (
		L      [qkK]uint8
		scales [16]float32
	)
	for j := range 16 {
		scales[j] = makeQX(x[16*j:][:16], L[16*j:][:16], 32)
	}
	maxScale, maxAbsSc := absMax(scales[:])
	if maxAbsSc < groupMaxEps {
		clear(b)
		return
	}

	iscale := -128 / maxScale
	d := putF16(b[208:], 1/iscale)
	sc := b[192:208]
	for j := range sc {
		sc[j] = uint8(int8(min(127, nearestIntK(iscale*scales[j]))))
	}
	for j := range 16 {
		dl := d * float32(int8(sc[j]))
		if dl == 0 {
			continue
		}
		for i, v := range x[16*j : 16*j+16] {
			L[16*j+i] = uint8(clampInt(nearestIntK(v/dl), -32, 31) + 32)
		}
	}

	ql, qh := b[0:128], b[128:192]
	for h := range 2 {
		for l := range 32 {
			e := 128*h + l
			ql[64*h+l] = L[e]&0xF | (L[e+64]&0xF)<<4
			ql[64*h+32+l] = L[e+32]&0xF | (L[e+96]&0xF)<<4
			qh[32*h+l] = L[e]>>4 | (L[e+32]>>4)<<2 | (L[e+64]>>4)<<4 | (L[e+96]>>4)<<6
		}
	}
}

// ---- Q8_K: d (f32) qs[256] (int8) bsums[16] (int16) (292 bytes) ----
//
// x = d·qs[e] in element order; bsums[g] is the sum of qs[16g:16g+16],
// which the k-quant dot products use to apply the mins.

func dequantQ8K(x *[qkK]float32, b []byte) {
	d := math.Float32frombits(binary.LittleEndian.Uint32(b))
	for e, q := range b[4 : 4+qkK] {
		x[e] = d * float32(int8(q))
	}
}

func quantQ8K(x *[qkK]float32, b []byte) {
	hi, amax := absMax(x[:])
	if amax == 0 {
		clear(b) // ggml leaves bsums unwritten here; they are zero
		return
	}
	iscale := -127 / hi
	qs := b[4 : 4+qkK]
	for e, v := range x {
		qs[e] = uint8(int8(min(127, nearestIntK(iscale*v))))
	}
	for g := range 16 {
		var sum int32
		for _, q := range qs[16*g : 16*g+16] {
			sum += int32(int8(q))
		}
		binary.LittleEndian.PutUint16(b[4+qkK+2*g:], uint16(int16(sum)))
	}
	binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
}

// ---- the searches ----

// makeQKX2 is ggml's make_qkx2_quants: it fits x ≈ scale·L − theMin with
// L in 0..nmax and theMin ≥ 0, minimising the weighted squared (or, with
// useMAD, absolute) error over nstep+1 trial scales around nmax/(max−min).
// laux is scratch of len(x).
func makeQKX2(x, weights []float32, L, laux []uint8, nmax int32, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < len(x); i++ {
		lo, hi = minf(lo, x[i]), maxf(hi, x[i])
		sumW += weights[i]
		sumX += float32(weights[i] * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L[:len(x)])
		return 0, -lo
	}
	fmax := float32(nmax)
	errOf := func(scale, min float32, L []uint8) (e float32) {
		for i, v := range x {
			diff := float32(scale*float32(L[i])) + min - v
			if useMAD {
				diff = absf(diff)
			} else {
				diff = diff * diff
			}
			e += float32(weights[i] * diff)
		}
		return e
	}

	iscale := fmax / (hi - lo)
	scale = 1 / iscale
	for i, v := range x {
		L[i] = uint8(clampInt(nearestIntK(iscale*(v-lo)), 0, nmax))
	}
	best := errOf(scale, lo, L)
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + fmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := clampInt(nearestIntK(iscale*(v-lo)), 0, nmax)
			laux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			if e := errOf(thisScale, thisMin, laux); e < best {
				copy(L, laux[:len(x)])
				best, scale, lo = e, thisScale, thisMin
			}
		}
	}
	return scale, -lo
}

// makeQX is ggml's make_qx_quants in the form the Q6_K reference uses
// (rmse_type 1, weights x²): symmetric levels −nmax..nmax−1 stored as
// L+nmax, the scale chosen by weighted least squares over 19 trial scales
// around −nmax/max, where max is the element of largest magnitude.
func makeQX(x []float32, L []uint8, nmax int32) float32 {
	hi, amax := absMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	fmax := float32(nmax)
	levels := func(iscale float32) {
		for i, v := range x {
			L[i] = uint8(clampInt(nearestIntK(iscale*v), -nmax, nmax-1) + nmax)
		}
	}

	iscale := -fmax / hi
	levels(iscale)
	sumlx, suml2 := x2Sums(x, iscale, nmax, nil)
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fmax + float32(0.1*float32(is))) / hi
		sumlx, suml2 = x2Sums(x, iscale, nmax, nil)
		if suml2 > 0 && sumlx*sumlx > best*suml2 {
			levels(iscale)
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// makeQ3 is ggml's make_q3_quants with do_rmse, as the Q3_K reference uses
// it: symmetric levels −nmax..nmax−1 (stored as L+nmax) from −nmax/max,
// then up to five passes that move single elements to the level that most
// improves the x²-weighted least-squares fit. It returns the fitted scale.
func makeQ3(x []float32, L []uint8, nmax int32) float32 {
	hi, amax := absMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	var ls [16]int32 // the Q3_K groups are 16 long
	sumlx, suml2 := x2Sums(x, -float32(nmax)/hi, nmax, ls[:])
	for range 5 {
		changed := false
		for i, v := range x {
			w, fl := v*v, float32(ls[i])
			slx := sumlx - float32(float32(w*v)*fl)
			if slx <= 0 {
				continue
			}
			sl2 := suml2 - float32(float32(w*fl)*fl)
			nl := clampInt(nearestIntK(v*sl2/slx), -nmax, nmax-1)
			if nl == ls[i] {
				continue
			}
			fn := float32(nl)
			slx += float32(float32(w*v) * fn)
			sl2 += float32(float32(w*fn) * fn)
			if sl2 > 0 && slx*slx*suml2 > sumlx*sumlx*sl2 {
				ls[i], sumlx, suml2 = nl, slx, sl2
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	for i := range x {
		L[i] = uint8(ls[i] + nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// x2Sums puts x on the symmetric levels −nmax..nmax−1 at iscale (into ls,
// when given) and returns the sums Σw·x·l and Σw·l² with weights w = x²,
// whose ratio is the least-squares scale for those levels.
func x2Sums(x []float32, iscale float32, nmax int32, ls []int32) (sumlx, suml2 float32) {
	for i, v := range x {
		l := clampInt(nearestIntK(iscale*v), -nmax, nmax-1)
		if ls != nil {
			ls[i] = l
		}
		w, fl := v*v, float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	return sumlx, suml2
}

// absMax returns the element of largest magnitude, the first on ties, and
// that magnitude, as ggml's `if (ax > amax)` loops find them: NaNs never
// win, and a row of zeros gives 0, 0.
func absMax(x []float32) (v, amax float32) {
	for _, e := range x {
		if a := absf(e); a > amax {
			amax, v = a, e
		}
	}
	return v, amax
}

// minf and maxf are C's `if (v < m) m = v` updates, which keep m when v is
// NaN (Go's min and max would return the NaN).
func minf(m, v float32) float32 {
	if v < m {
		return v
	}
	return m
}

func maxf(m, v float32) float32 {
	if v > m {
		return v
	}
	return m
}
