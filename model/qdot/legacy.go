package qdot

import (
	"math"

	"ringlm/gguf"
)

// The 32-element block types against Q8_0 (Q8_1 for the ones with a min).
// Each kernel but Q5_0's sums its blocks' contributions in order into one
// float32, each contribution formed as in ggml's generic kernel for the
// type; Q5_0's sums in float lanes (lanes.go).

func init() {
	register(gguf.TypeQ4_0, gguf.TypeQ8_0, dotQ4_0)
	register(gguf.TypeQ4_1, gguf.TypeQ8_1, dotQ4_1)
	register(gguf.TypeQ5_0, gguf.TypeQ8_0, dotQ5_0)
	register(gguf.TypeQ5_1, gguf.TypeQ8_1, dotQ5_1)
	register(gguf.TypeQ8_0, gguf.TypeQ8_0, dotQ8_0)
	register(gguf.TypeIQ4_NL, gguf.TypeQ8_0, dotIQ4_NL)
	register(gguf.TypeMXFP4, gguf.TypeQ8_0, dotMXFP4)
}

// f16 reads a little-endian F16 value.
func f16(b []byte) float32 { return gguf.F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }

// kvaluesIQ4NL are the 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// kvaluesMXFP4 are the FP4 (E2M1) values doubled, so they are integers;
// e8m0Half halves the block scale to match (ggml's kvalues_mxfp4 and
// GGML_E8M0_TO_FP32_HALF).
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is 2^(e-128), the shared E8M0 scale 2^(e-127) halved; e = 0
// and 1 give the subnormals 2^-128 and 2^-127, and 255 (NaN in the OCP
// spec) gives 2^127, as ggml decodes it.
func e8m0Half(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// nibbles4 returns Σ lo·q[j] and Σ hi·q[j+16] over a 32-block's 16 bytes
// of nibbles, each nibble mapped through lut.
func nibbles4(qs []byte, q []int8, lut *[16]int32) (lo, hi int32) {
	qs, q = qs[:16], q[:32]
	for j, b := range qs {
		lo += lut[b&0xF] * int32(q[j])
		hi += lut[b>>4] * int32(q[j+16])
	}
	return lo, hi
}

var (
	lutQ4_0, lutQ4_1, lutIQ4NL, lutMXFP4 [16]int32
)

func init() {
	for i := range 16 {
		lutQ4_0[i] = int32(i) - 8
		lutQ4_1[i] = int32(i)
		lutIQ4NL[i] = int32(kvaluesIQ4NL[i])
		lutMXFP4[i] = int32(kvaluesMXFP4[i])
	}
}

// Q4_0: d (F16), 16 bytes of nibbles: element j is the low nibble of byte
// j, element j+16 its high nibble; value d·(nibble-8).
func dotQ4_0(w []byte, a *Acts) float32 {
	var sumf float32
	for b := range a.n / 32 {
		blk := w[18*b : 18*b+18]
		lo, hi := nibbles4(blk[2:], a.q[32*b:], &lutQ4_0)
		sumf += float32(float32(float32(lo+hi)*f16(blk)) * a.d[b])
	}
	return sumf
}

// Q4_1: d, m (F16), nibbles as Q4_0; value d·nibble + m.
func dotQ4_1(w []byte, a *Acts) float32 {
	var sumf float32
	for b := range a.n / 32 {
		blk := w[20*b : 20*b+20]
		lo, hi := nibbles4(blk[4:], a.q[32*b:], &lutQ4_1)
		t := float32(float32(f16(blk)*a.d[b]) * float32(lo+hi))
		sumf += float32(t + float32(f16(blk[2:])*a.s[b]))
	}
	return sumf
}

// u32 reads a little-endian uint32.
func u32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// fifth returns elements j and j+16 of a Q5 block: the nibbles of qs[j]
// with bits j and j+16 of qh as their fifth bits.
func fifth(qh uint32, qs []byte, j int) (lo, hi int32) {
	lo = int32(qs[j]&0xF) | int32(qh>>j&1)<<4
	hi = int32(qs[j]>>4) | int32(qh>>(j+16)&1)<<4
	return lo, hi
}

// sum5 is Σ (q5-offset)·q over a Q5 block's qh (4 bytes) and qs (16).
func sum5(qhb, qs []byte, q []int8, offset int32) int32 {
	qh := u32(qhb)
	q = q[:32]
	var sumi int32
	for j := range 16 {
		lo, hi := fifth(qh, qs, j)
		sumi += (lo-offset)*int32(q[j]) + (hi-offset)*int32(q[j+16])
	}
	return sumi
}

// Q5_0: d (F16), qh (4 bytes: bit j is element j's fifth bit), nibbles as
// Q4_0; value d·(q-16). Summed in the order of ggml's AVX2 kernel
// (ggml_vec_dot_q5_0_q8_0, arch/x86), not its generic one: lanes8x4.
func dotQ5_0(w []byte, a *Acts) float32 {
	var acc [4][8]float32
	for b := range a.n / 32 {
		blk := w[22*b : 22*b+22]
		qh, qs, q := u32(blk[2:6]), blk[6:22], a.q[32*b:32*b+32]
		var lanes [8]int32
		for j := range 16 {
			lo, hi := fifth(qh, qs, j)
			lanes[j/4] += (lo - 16) * int32(q[j])
			lanes[4+j/4] += (hi - 16) * int32(q[j+16])
		}
		fmaLanes(&acc[b%4], f16(blk)*a.d[b], &lanes)
	}
	return foldLanes(&acc)
}

// Q5_1: d, m (F16), qh, nibbles; value d·q + m.
func dotQ5_1(w []byte, a *Acts) float32 {
	var sumf float32
	for b := range a.n / 32 {
		blk := w[24*b : 24*b+24]
		sumi := sum5(blk[4:8], blk[8:24], a.q[32*b:], 0)
		t := float32(float32(f16(blk)*a.d[b]) * float32(sumi))
		sumf += float32(t + float32(f16(blk[2:])*a.s[b]))
	}
	return sumf
}

// Q8_0: d (F16), 32 int8; value d·q.
func dotQ8_0(w []byte, a *Acts) float32 {
	var sumf float32
	for b := range a.n / 32 {
		blk := w[34*b : 34*b+34]
		q := a.q[32*b : 32*b+32]
		var sumi int32
		for j, v := range blk[2:34] {
			sumi += int32(int8(v)) * int32(q[j])
		}
		sumf += float32(float32(sumi) * float32(f16(blk)*a.d[b]))
	}
	return sumf
}

// dotScaledLUT is the kernel of IQ4_NL and MXFP4 (bb-byte blocks, the
// nibbles at off, mapped through lut): sumf += (dy·scale(blk))·float(sumi).
func dotScaledLUT(w []byte, a *Acts, bb, off int, lut *[16]int32, scale func(blk []byte) float32) float32 {
	var sumf float32
	for b := range a.n / 32 {
		blk := w[bb*b : bb*b+bb]
		lo, hi := nibbles4(blk[off:], a.q[32*b:], lut)
		sumf += float32(float32(a.d[b]*scale(blk)) * float32(lo+hi))
	}
	return sumf
}

// IQ4_NL: d (F16), nibbles as Q4_0 indexing kvaluesIQ4NL; value d·kvalue.
func dotIQ4_NL(w []byte, a *Acts) float32 {
	return dotScaledLUT(w, a, 18, 2, &lutIQ4NL, f16)
}

// MXFP4: e (E8M0), nibbles as Q4_0 holding E2M1 codes; value
// 2^(e-127)·fp4, computed as e8m0Half(e)·kvaluesMXFP4.
func dotMXFP4(w []byte, a *Acts) float32 {
	return dotScaledLUT(w, a, 17, 1, &lutMXFP4, func(blk []byte) float32 { return e8m0Half(blk[0]) })
}
