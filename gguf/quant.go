package gguf

import (
	"encoding/binary"
	"math"
)

// F32ToF16 converts to IEEE half precision, rounding to nearest even,
// with overflow to infinity and gradual underflow, as ggml does.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN: keep it quiet
		return sign | 0x7e00
	case exp >= 0x1f: // overflow or infinity
		return sign | 0x7c00
	case exp <= 0: // subnormal or zero
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, correctly reaching infinity
	}
	return sign | uint16(r)
}

// F16ToF32 converts from IEEE half precision.
func F16ToF32(h uint16) float32 {
	return f16Table[h]
}

var f16Table = func() (t [1 << 16]float32) {
	for i := range t {
		t[i] = f16ToF32Slow(uint16(i))
	}
	return
}()

func f16ToF32Slow(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		v := float32(mant) / 1024 / 16384 // 2^-14 * mant/1024
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToBF16 converts to bfloat16, rounding to nearest even.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16ToF32 converts from bfloat16.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// QuantizeQ8_0 packs src (a multiple of 32 values) into Q8_0 blocks: an
// f16 scale d = max|x|/127 followed by 32 signed bytes round(x/d), ggml's
// quantize_row_q8_0_ref. Its roundf rounds halves away from zero (not to
// even), and its float-to-int8 store is undefined for NaN, which becomes 0
// here.
func QuantizeQ8_0(dst []byte, src []float32) {
	for b := 0; b < len(src)/32; b++ {
		x := src[b*32 : b*32+32]
		out := dst[b*34 : b*34+34]
		amax := float32(0)
		for _, v := range x {
			// ggml's MAX(a, b) is a > b ? a : b: a NaN is kept only
			// until the next element, not propagated as Go's max does.
			if a := float32(math.Abs(float64(v))); !(amax > a) {
				amax = a
			}
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(out, F32ToF16(d))
		for i, v := range x {
			q := math.Round(float64(v * id))
			if q != q {
				q = 0
			}
			out[2+i] = byte(int8(max(-127, min(127, q))))
		}
	}
}

// DequantizeQ8_0 unpacks Q8_0 blocks into dst (len(dst) = blocks*32).
func DequantizeQ8_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*34 : b*34+34]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for i := 0; i < 32; i++ {
			dst[b*32+i] = d * float32(int8(blk[2+i]))
		}
	}
}

// EncodeF32 converts float32 values to the byte encoding of typ, which
// must be F32, F16, BF16 or Q8_0. dst must be sized for len(src) values.
func EncodeF32(typ Type, dst []byte, src []float32) bool {
	le := binary.LittleEndian
	switch typ {
	case TypeF32:
		for i, v := range src {
			le.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case TypeF16:
		for i, v := range src {
			le.PutUint16(dst[2*i:], F32ToF16(v))
		}
	case TypeBF16:
		for i, v := range src {
			le.PutUint16(dst[2*i:], F32ToBF16(v))
		}
	case TypeQ8_0:
		QuantizeQ8_0(dst, src)
	default:
		return false
	}
	return true
}

// DecodeF32 converts n values of typ (F32, F16, BF16 or Q8_0) to float32.
func DecodeF32(typ Type, dst []float32, src []byte) bool {
	le := binary.LittleEndian
	switch typ {
	case TypeF32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
	case TypeF16:
		for i := range dst {
			dst[i] = F16ToF32(le.Uint16(src[2*i:]))
		}
	case TypeBF16:
		for i := range dst {
			dst[i] = BF16ToF32(le.Uint16(src[2*i:]))
		}
	case TypeQ8_0:
		DequantizeQ8_0(dst, src)
	default:
		return false
	}
	return true
}
