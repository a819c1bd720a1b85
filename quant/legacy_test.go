package quant

import (
	"bytes"
	"testing"

	"ringlm/gguf"
)

// Hand-built blocks, decoded by the format description: f16 d (0x3800 is
// 0.5, 0x3C00 is 1, 0x3400 is 0.25, 0xC000 is -2, 0xBC00 is -1, 0x4000 is
// 2), element j in the low nibble of byte j and j+16 in its high nibble,
// fifth bits in a little-endian uint32 (bit j for element j).

func TestQ4_0Layout(t *testing.T) {
	a := blockOf(uint16(0x3800), byte(0x9F), byte(0x08), repeat(0x88, 14))
	b := blockOf(uint16(0xC000), repeat(0x70, 16))
	checkDecode(t, gguf.TypeQ4_0, append(a, b...), func(i int) float32 {
		switch {
		case i == 0:
			return (15 - 8) * 0.5 // low nibble of 0x9F
		case i == 16:
			return (9 - 8) * 0.5 // its high nibble
		case i == 17:
			return (0 - 8) * 0.5
		case i >= 32 && i < 48:
			return (0 - 8) * -2 // a negative scale flips the grid
		case i >= 48:
			return (7 - 8) * -2
		}
		return 0
	})
}

func TestQ4_1Layout(t *testing.T) {
	qs := make([]byte, 16)
	for j := range qs {
		qs[j] = byte(j) | byte(15-j)<<4
	}
	checkDecode(t, gguf.TypeQ4_1, blockOf(uint16(0x3400), uint16(0xBC00), qs), func(i int) float32 {
		if i < 16 {
			return float32(i)*0.25 - 1
		}
		return float32(15-(i-16))*0.25 - 1
	})
}

func TestQ5_0Layout(t *testing.T) {
	// qh bit 0 → element 0, bit 16 → element 16, bit 31 → element 31.
	blk := blockOf(uint16(0x3C00), uint32(0x80010001), byte(0x21), repeat(0, 15))
	checkDecode(t, gguf.TypeQ5_0, blk, func(i int) float32 {
		switch i {
		case 0:
			return (1 | 16) - 16
		case 16:
			return (2 | 16) - 16
		case 31:
			return (0 | 16) - 16
		}
		return -16
	})
}

func TestQ5_1Layout(t *testing.T) {
	qs := make([]byte, 16)
	for j := range qs {
		qs[j] = byte(j) | 0xF0
	}
	blk := blockOf(uint16(0x3800), uint16(0x4000), uint32(0xFFFF0000), qs)
	checkDecode(t, gguf.TypeQ5_1, blk, func(i int) float32 {
		if i < 16 {
			return float32(i)*0.5 + 2
		}
		return 31*0.5 + 2
	})
}

func TestQ8_0Layout(t *testing.T) {
	qs := make([]byte, 32)
	for i := range qs {
		qs[i] = byte(int8(i*8 - 128)) // -128 too, which ggml decodes but never writes
	}
	checkDecode(t, gguf.TypeQ8_0, blockOf(uint16(0x3800), qs), func(i int) float32 {
		return float32(i*8-128) * 0.5
	})
}

// TestLegacyQuantizeRules pins ggml's rounding rules on blocks worked by
// hand.
func TestLegacyQuantizeRules(t *testing.T) {
	pad := func(x ...float32) []float32 { return append(x, make([]float32, 32-len(x))...) }
	for _, c := range []struct {
		name string
		typ  gguf.Type
		x    []float32
		want []byte
	}{{
		// d = 127/127 = 1; roundf takes halves away from zero.
		"Q8_0 halves away from zero", gguf.TypeQ8_0,
		pad(127, 2.5, -2.5, 0.5, -0.5, 1.5, -1.5),
		blockOf(uint16(0x3C00), []byte{127, 3, 0xFD, 1, 0xFF, 2, 0xFE}, repeat(0, 25)),
	}, {
		// The largest element is +1, so d = 1/-8 = -0.125 (0xB000): +1 is
		// level 0, -1 would be level 16 and clips to 15 (decoding -0.875),
		// and x/d + 8.5 truncated rounds halves up (1/16 is level 8).
		"Q4_0 signed scale, clip and half up", gguf.TypeQ4_0,
		pad(1, -0.5, 0, -1, 0.0625),
		blockOf(uint16(0xB000), []byte{0x80, 0x8C, 0x88, 0x8F, 0x88}, repeat(0x88, 11)),
	}, {
		// A constant block: d = 0, m = f16(0.3) = 0x34CD, every level 0.
		"Q4_1 constant", gguf.TypeQ4_1,
		constant(0.3, 32),
		blockOf(uint16(0), uint16(0x34CD), repeat(0, 16)),
	}} {
		got := make([]byte, len(c.want))
		if err := Quantize(c.typ, got, c.x); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s:\n got %x\nwant %x", c.name, got, c.want)
		}
	}
}

func constant(v float32, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = v
	}
	return x
}
