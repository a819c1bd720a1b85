package quant

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
)

// The IQ4 grid as the format description gives it (ggml-common.h's
// kvalues_iq4nl), written out independently of IQ4NLValues.
var iq4Grid = []float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func TestIQ4_NLLayout(t *testing.T) {
	qs := make([]byte, 16)
	for j := range qs {
		qs[j] = byte(j) | byte(15-j)<<4
	}
	// d = 1, then d = -2 (0xC000) with every index 15.
	blk := blockOf(uint16(0x3C00), qs, uint16(0xC000), repeat(0xFF, 16))
	checkDecode(t, gguf.TypeIQ4_NL, blk, func(i int) float32 {
		switch {
		case i < 16:
			return iq4Grid[i]
		case i < 32:
			return iq4Grid[15-(i-16)]
		}
		return -2 * 113
	})
}

func TestIQ4_XSLayout(t *testing.T) {
	// d = 0.5. Block scales ls (6 bits, bias 32): block 0 → 33, block 1 → 0,
	// block 7 → 63, the others 32 (scale 0). Low nibbles in scales_l (even
	// block low, odd block high), high 2 bits in scales_h (bits 2i, 2i+1):
	// scales_h = 2<<0 | 0<<2 | 2<<4 | 2<<6 | 2<<8 | 2<<10 | 2<<12 | 3<<14.
	scalesH := uint16(2 | 2<<4 | 2<<6 | 2<<8 | 2<<10 | 2<<12 | 3<<14)
	scalesL := []byte{33&15 | (0&15)<<4, 0, 0, 0 | (63&15)<<4}
	qs := repeat(0x88, 128)
	qs[0] = 0xF0      // block 0: element 0 index 0, element 16 index 15
	qs[16] = 0x08     // block 1: element 32 index 8, element 48 index 0
	qs[7*16+3] = 0x1E // block 7: element 227 index 14, element 243 index 1
	blk := blockOf(uint16(0x3800), scalesH, scalesL, qs)
	checkDecode(t, gguf.TypeIQ4_XS, blk, func(i int) float32 {
		var dl float32
		switch i / 32 {
		case 0:
			dl = 0.5 * (33 - 32)
		case 1:
			dl = 0.5 * (0 - 32)
		case 7:
			dl = 0.5 * (63 - 32)
		}
		switch i {
		case 0, 48:
			return dl * -127
		case 16:
			return dl * 113
		case 227:
			return dl * 89
		case 243:
			return dl * -104
		}
		return dl * 1 // index 8
	})
}

func TestIQ4Index(t *testing.T) {
	for _, c := range []struct {
		x    float32
		want uint8
	}{
		{-1000, 0}, {-127, 0}, {-115.5, 1}, {-115.50001, 0}, // a tie goes up
		{-4.5, 8}, {-4.6, 7}, {0, 8}, {112, 15}, {1e30, 15},
		{float32(math.NaN()), 0},
	} {
		if got := iq4Index(c.x); got != c.want {
			t.Errorf("iq4Index(%v) = %d, want %d", c.x, got, c.want)
		}
	}
	// Every level maps to itself.
	for i, v := range iq4Grid {
		if got := iq4Index(v); int(got) != i {
			t.Errorf("iq4Index(%v) = %d, want %d", v, got, i)
		}
	}
}

// randomF16 is a random f16 scale of magnitude in [2^-10, 2^-2), either
// sign.
func randomF16(r *rand.Rand) uint16 {
	h := gguf.F32ToF16(float32(math.Ldexp(1+r.Float64(), -10+r.IntN(8))))
	if r.IntN(2) == 0 {
		h |= 0x8000
	}
	return h
}

// randomIQ4Block packs 32 random indices, index 0 (-127, the largest
// magnitude) at one random place, so that the block's extreme sits on the
// grid's long end as the quantizer puts it.
func randomIQ4Block(r *rand.Rand) []byte {
	var L [32]uint8
	for j := range L {
		L[j] = uint8(r.IntN(16))
	}
	L[r.IntN(32)] = 0
	qs := make([]byte, 16)
	packNibbles(qs, &L)
	return qs
}

// TestIQ4RequantizeGrid: a block already on the grid, its largest element
// on the long end, re-quantizes to the same bytes: the search tries the
// scale 1/d exactly, which fits with no error.
func TestIQ4RequantizeGrid(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 200 {
		nl := blockOf(randomF16(r), randomIQ4Block(r))
		// IQ4_XS: block scales in 0..63 but not 32 (a zero block loses its
		// indices), one of them 0 so that it is the largest and d returns.
		var scalesH uint16
		scalesL := make([]byte, 4)
		zero := r.IntN(8)
		var qs []byte
		for ib := range 8 {
			ls := 0
			if ib != zero {
				ls = 1 + r.IntN(62)
				if ls >= 32 {
					ls++
				}
			}
			scalesL[ib/2] |= byte(ls&15) << (4 * (ib % 2))
			scalesH |= uint16(ls>>4) << (2 * ib)
			qs = append(qs, randomIQ4Block(r)...)
		}
		xs := blockOf(randomF16(r), scalesH, scalesL, qs)
		for _, c := range []struct {
			typ gguf.Type
			blk []byte
		}{{gguf.TypeIQ4_NL, nl}, {gguf.TypeIQ4_XS, xs}} {
			info, _ := c.typ.Info()
			y := make([]float32, info.BlockSize)
			if err := Dequantize(c.typ, y, c.blk); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(c.blk))
			if err := Quantize(c.typ, got, y); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.blk) {
				t.Fatalf("%s: grid block re-quantized differently:\n got %x\nwant %x", c.typ, got, c.blk)
			}
		}
	}
}

// TestIQ4_XSZero: an all-zero super-block is written as ggml writes it:
// d = -0 (the negated largest block scale), every block scale 32 (zero)
// and every index 8 (the level nearest 0).
func TestIQ4_XSZero(t *testing.T) {
	got := make([]byte, 136)
	if err := Quantize(gguf.TypeIQ4_XS, got, make([]float32, 256)); err != nil {
		t.Fatal(err)
	}
	want := blockOf(uint16(0x8000), uint16(0xAAAA), repeat(0, 4), repeat(0x88, 128))
	if !bytes.Equal(got, want) {
		t.Errorf("zeros:\n got %x\nwant %x", got, want)
	}
}
