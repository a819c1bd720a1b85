package qdot

import "ringlm/gguf"

// The 256-element super-block types against Q8_K. Q3_K to Q6_K sum in
// eight float lanes as ggml's generic kernels do (lane l takes the
// elements e ≡ l mod 8, each super-block adding d·lane to it), then fold
// the lanes in order; Q2_K and IQ4_XS sum into one float in order.

func init() {
	register(gguf.TypeQ2_K, gguf.TypeQ8_K, dotQ2_K)
	register(gguf.TypeQ3_K, gguf.TypeQ8_K, dotQ3_K)
	register(gguf.TypeQ4_K, gguf.TypeQ8_K, dotQ4_K)
	register(gguf.TypeQ5_K, gguf.TypeQ8_K, dotQ5_K)
	register(gguf.TypeQ6_K, gguf.TypeQ8_K, dotQ6_K)
	register(gguf.TypeIQ4_XS, gguf.TypeQ8_K, dotIQ4_XS)
}

// lanes8 is the integer part of the eight-lane kernels: lane l sums
// sc[e/16]·a[e]·q[e] over the elements e ≡ l (mod 8) of a super-block.
func lanes8(a *[256]int8, q []int8, sc *[16]int32) (lanes [8]int32) {
	q = q[:256]
	for e := 0; e < 256; e += 8 {
		s := sc[e/16]
		for l := range 8 {
			lanes[l] += s * (int32(a[e+l]) * int32(q[e+l]))
		}
	}
	return lanes
}

// superBlock is one super-block decoded for lanes8: its quants (offsets
// applied), the scale of each 16 elements, and its F16 d; for the types
// with mins (Q4_K, Q5_K) also the F16 dmin and the min of each 32.
type superBlock struct {
	aux     [256]int8
	sc      [16]int32
	d, dmin float32
	mins    [8]int32
	hasMins bool
}

// dotLanes is the eight-lane kernel over super-blocks of bb bytes that
// decode reads: per super-block, sums[l] += (d·dy)·float(lane l) and, with
// mins, sumf -= (dmin·dy)·float(Σ bsums[j]·min[j/2]); then the lanes are
// added to sumf in order.
func dotLanes(w []byte, a *Acts, bb int, decode func(blk []byte, sb *superBlock)) float32 {
	var sumf float32
	var sums [8]float32
	var sb superBlock
	for i := range a.n / 256 {
		decode(w[bb*i:bb*i+bb], &sb)
		lanes := lanes8(&sb.aux, a.q[256*i:], &sb.sc)
		d := float32(sb.d * a.d[i])
		for l := range 8 {
			sums[l] += float32(d * float32(lanes[l]))
		}
		if sb.hasMins {
			bs := a.sums[16*i : 16*i+16]
			var summ int32
			for j := range 16 {
				summ += int32(bs[j]) * sb.mins[j/2]
			}
			sumf -= float32(float32(sb.dmin*a.d[i]) * float32(summ))
		}
	}
	for _, v := range sums {
		sumf += v
	}
	return sumf
}

// scaleMinK4 unpacks Q4_K/Q5_K's 12 bytes of 6-bit scales and mins: bytes
// 0-3 hold scales 0-3 and bytes 4-7 mins 0-3 in their low six bits; bytes
// 8-11 hold the low four bits of scales 4-7 (low nibble) and mins 4-7
// (high nibble), whose top two bits are the top bits of bytes 0-3 (scales)
// and 4-7 (mins).
func scaleMinK4(b []byte, sb *superBlock) {
	b = b[:12]
	for j := range 4 {
		s0, s1 := int32(b[j]&63), int32(b[j+8]&0xF)|int32(b[j]>>6)<<4
		sb.sc[2*j], sb.sc[2*j+1] = s0, s0
		sb.sc[2*j+8], sb.sc[2*j+9] = s1, s1
		sb.mins[j] = int32(b[j+4] & 63)
		sb.mins[j+4] = int32(b[j+8]>>4) | int32(b[j+4]>>6)<<4
	}
	sb.hasMins = true
}

// Q2_K (84 bytes): scales[16] (low nibble the scale, high nibble the min
// of each 16), qs[64] (2 bits each), d, dmin (F16). Element 128c+32j+l
// (c < 2, j < 4, l < 32) is bits 2j..2j+1 of qs[32c+l]; value
// d·scale·q - dmin·min.
func dotQ2_K(w []byte, a *Acts) float32 {
	var sumf float32
	for i := range a.n / 256 {
		blk := w[84*i : 84*i+84]
		sc, qs := blk[:16], blk[16:80]
		q := a.q[256*i : 256*i+256]
		bs := a.sums[16*i : 16*i+16]
		var summs int32
		for j := range 16 {
			summs += int32(bs[j]) * int32(sc[j]>>4)
		}
		var isum int32
		for e := 0; e < 256; e += 16 {
			c, j, l0 := e/128, e%128/32, e%32
			var s int32
			for l := l0; l < l0+16; l++ {
				s += int32(q[e+l-l0]) * int32(qs[32*c+l]>>(2*j)&3)
			}
			isum += int32(sc[e/16]&0xF) * s
		}
		dall := a.d[i] * f16(blk[80:])
		dmin := a.d[i] * f16(blk[82:])
		sumf += float32(float32(dall*float32(isum)) - float32(dmin*float32(summs)))
	}
	return sumf
}

// Q3_K (110 bytes): hmask[32], qs[64] (2 bits each, as Q2_K), scales[12]
// (sixteen 6-bit scales: the low nibbles in bytes 0-7, the top two bits
// in bytes 8-11), d (F16). Element 128c+32j+l has hmask[l]'s bit 4c+j as
// its third bit; value d·(scale-32)·(q-4 if that bit is clear, else q).
func dotQ3_K(w []byte, a *Acts) float32 {
	return dotLanes(w, a, 110, func(blk []byte, sb *superBlock) {
		hm, qs, scb := blk[:32], blk[32:96], blk[96:108]
		for c := range 2 {
			for j := range 4 {
				for l := range 32 {
					// q - 4 where the high bit is clear, without a branch
					high := int8(hm[l] >> (4*c + j) & 1)
					sb.aux[128*c+32*j+l] = int8(qs[32*c+l]>>(2*j)&3) - 4 + 4*high
				}
			}
		}
		for j := range 4 {
			hi := scb[8+j]
			sb.sc[j] = int32(scb[j]&0xF|(hi&3)<<4) - 32
			sb.sc[j+4] = int32(scb[j+4]&0xF|(hi>>2&3)<<4) - 32
			sb.sc[j+8] = int32(scb[j]>>4|(hi>>4&3)<<4) - 32
			sb.sc[j+12] = int32(scb[j+4]>>4|(hi>>6)<<4) - 32
		}
		sb.d = f16(blk[108:])
	})
}

// Q4_K (144 bytes): d, dmin (F16), scales[12] (scaleMinK4), qs[128].
// Element 64j+l (l < 32) is the low nibble of qs[32j+l], element 64j+32+l
// its high nibble; sub-block b (32 elements) has value
// d·scale[b]·q - dmin·min[b].
func dotQ4_K(w []byte, a *Acts) float32 { return dotLanes(w, a, 144, decodeQ4_K) }

// decodeQ4_K decodes one Q4_K super-block for lanes8 (and the batch
// kernels' preparation, batch_k.go).
func decodeQ4_K(blk []byte, sb *superBlock) {
	qs := blk[16:144]
	for j := range 4 {
		for l := range 32 {
			sb.aux[64*j+l] = int8(qs[32*j+l] & 0xF)
			sb.aux[64*j+32+l] = int8(qs[32*j+l] >> 4)
		}
	}
	scaleMinK4(blk[4:16], sb)
	sb.d, sb.dmin = f16(blk), f16(blk[2:])
}

// Q5_K (176 bytes): d, dmin, scales[12] as Q4_K, qh[32], qs[128] as Q4_K;
// element 64j+l takes bit 2j of qh[l] as its fifth bit, element 64j+32+l
// bit 2j+1.
func dotQ5_K(w []byte, a *Acts) float32 { return dotLanes(w, a, 176, decodeQ5_K) }

// decodeQ5_K decodes one Q5_K super-block for lanes8 (and the batch
// kernels' preparation, batch_k.go).
func decodeQ5_K(blk []byte, sb *superBlock) {
	qh, qs := blk[16:48], blk[48:176]
	for j := range 4 {
		for l := range 32 {
			sb.aux[64*j+l] = int8(qs[32*j+l]&0xF | (qh[l]>>(2*j)&1)<<4)
			sb.aux[64*j+32+l] = int8(qs[32*j+l]>>4 | (qh[l]>>(2*j+1)&1)<<4)
		}
	}
	scaleMinK4(blk[4:16], sb)
	sb.d, sb.dmin = f16(blk), f16(blk[2:])
}

// Q6_K (210 bytes): ql[128] (low four bits), qh[64] (high two bits),
// scales[16] (int8, one per 16 elements), d (F16). In each half c of the
// super-block, element 128c+32k+l (k < 4, l < 32) has as low bits the low
// (k < 2) or high nibble of ql[64c+32(k%2)+l], and as high bits bits
// 2k..2k+1 of qh[32c+l]; value d·scale·(q-32).
func dotQ6_K(w []byte, a *Acts) float32 { return dotLanes(w, a, 210, decodeQ6_K) }

// decodeQ6_K decodes one Q6_K super-block for lanes8 (and the batch
// kernels' preparation, batch_k.go).
func decodeQ6_K(blk []byte, sb *superBlock) {
	for c := range 2 {
		ql, qh := blk[64*c:64*c+64], blk[128+32*c:128+32*c+32]
		for l := range 32 {
			h := qh[l]
			sb.aux[128*c+l] = int8(ql[l]&0xF|(h&3)<<4) - 32
			sb.aux[128*c+32+l] = int8(ql[l+32]&0xF|(h>>2&3)<<4) - 32
			sb.aux[128*c+64+l] = int8(ql[l]>>4|(h>>4&3)<<4) - 32
			sb.aux[128*c+96+l] = int8(ql[l+32]>>4|(h>>6)<<4) - 32
		}
	}
	for j := range 16 {
		sb.sc[j] = int32(int8(blk[192+j]))
	}
	sb.d = f16(blk[208:])
}

// IQ4_XS (136 bytes): d (F16), scales_h (uint16: two high bits per
// 32-block), scales_l[4] (a nibble per 32-block), qs[128] (nibbles as
// IQ4_NL, 16 bytes per 32-block); 32-block b has value
// d·(scale-32)·kvalue.
func dotIQ4_XS(w []byte, a *Acts) float32 {
	var sumf float32
	for i := range a.n / 256 {
		blk := w[136*i : 136*i+136]
		d4d8 := f16(blk) * a.d[i]
		h := uint32(blk[2]) | uint32(blk[3])<<8
		for b := range 8 {
			ls := int32(blk[4+b/2]>>(4*(b%2))&0xF) | int32(h>>(2*b)&3)<<4
			lo, hi := nibbles4(blk[8+16*b:], a.q[256*i+32*b:], &lutIQ4NL)
			sumf += float32(float32(d4d8*float32(ls-32)) * float32(lo+hi))
		}
	}
	return sumf
}
