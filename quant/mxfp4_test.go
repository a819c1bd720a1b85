package quant

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
)

// e2m1 decodes a 4-bit E2M1 value from its bits as the OCP MX spec defines
// it (sign, 2 exponent bits with bias 1, 1 mantissa bit; exponent 0 is
// subnormal), independently of ggml's doubled table.
func e2m1(n byte) float64 {
	exp, man := int(n>>1&3), float64(n&1)
	v := man * 0.5
	if exp > 0 {
		v = (1 + man/2) * math.Exp2(float64(exp-1))
	}
	if n&8 != 0 {
		v = -v
	}
	return v
}

func TestMXFP4Layout(t *testing.T) {
	qs := make([]byte, 16)
	for j := range qs {
		qs[j] = byte(j) | byte(15-j)<<4
	}
	// Shared exponents 127 (scale 1), 130 (8), 0 (2^-127, every product a
	// float32 subnormal or zero) and 200 (2^73).
	exps := []byte{127, 130, 0, 200}
	var blk []byte
	for _, e := range exps {
		blk = append(blk, blockOf(e, qs)...)
	}
	checkDecode(t, gguf.TypeMXFP4, blk, func(i int) float32 {
		e, j := exps[i/32], i%32
		n := byte(j)
		if j >= 16 {
			n = byte(15 - (j - 16))
		}
		return float32(e2m1(n) * math.Exp2(float64(e)-127))
	})
}

// TestE8M0Half pins ggml's scale: 2^(e-128), subnormal for e = 0 and 1,
// and e = 255 as 2^127 where the OCP spec has NaN.
func TestE8M0Half(t *testing.T) {
	for _, e := range []int{0, 1, 2, 100, 127, 128, 254, 255} {
		if got, want := E8M0Half(uint8(e)), float32(math.Exp2(float64(e-128))); got != want {
			t.Errorf("E8M0Half(%d) = %v, want %v", e, got, want)
		}
	}
	// ggml decodes e = 255 with E2M1 0.5 as 2^127, not NaN.
	y := make([]float32, 32)
	if err := Dequantize(gguf.TypeMXFP4, y, blockOf(byte(255), byte(1), repeat(0, 15))); err != nil {
		t.Fatal(err)
	}
	if y[0] != float32(math.Exp2(127)) {
		t.Errorf("e=255: %v", y[0])
	}
}

func TestMXFP4Exponent(t *testing.T) {
	below := func(x float32) float32 { return math.Nextafter32(x, 0) }
	for _, c := range []struct {
		amax float32
		want uint8
	}{
		{6, 127}, {1, 125}, {0.75, 124}, {0, 0},
		// log2f(just under 4) = 1.99999988 in float32: floor 1.
		{below(4), 126},
		// log2f(just under 2^20) rounds to 20.0 in float32 (its ulp there
		// is 2^-19), so ggml takes the next binade: 145, not 144.
		{below(1 << 20), 145},
		{1e-40, 0}, {float32(math.Inf(1)), 254}, {float32(math.NaN()), 0},
	} {
		if got := mxfp4Exponent(c.amax); got != c.want {
			t.Errorf("mxfp4Exponent(%v) = %d, want %d", c.amax, got, c.want)
		}
	}
}

func TestMXFP4QuantizeRules(t *testing.T) {
	// amax 7: e = floor(log2 7) - 2 + 127 = 127, scale 1, grid ±0, 0.5, 1,
	// 1.5, 2, 3, 4, 6. 7 clips to 6; 5 ties between 4 and 6 and 0.25
	// between 0 and ±0.5: the first in table order (smaller magnitude, +0)
	// wins; -0 is +0.
	x := make([]float32, 32)
	copy(x, []float32{6, 7, 5, -5, 0.25, -0.25, float32(math.Copysign(0, -1)), 3, -1.5})
	x[16] = -6
	got := make([]byte, 17)
	if err := Quantize(gguf.TypeMXFP4, got, x); err != nil {
		t.Fatal(err)
	}
	want := blockOf(byte(127), []byte{7 | 15<<4, 7, 6, 14, 0, 0, 0, 5, 11}, repeat(0, 7))
	if !bytes.Equal(got, want) {
		t.Errorf("\n got %x\nwant %x", got, want)
	}
}

// TestMXFP4RequantizeGrid: a block on the grid whose largest element is ±8
// or ±12 (in the doubled table's units, so that its binade gives back the
// same exponent) and without -0 (which re-quantizes as +0) comes back
// byte for byte.
func TestMXFP4RequantizeGrid(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for range 500 {
		var L [32]uint8
		for j := range L {
			if L[j] = uint8(r.IntN(15)); L[j] >= 8 {
				L[j]++
			}
		}
		L[r.IntN(32)] = []uint8{6, 7, 14, 15}[r.IntN(4)]
		blk := make([]byte, 17)
		blk[0] = byte(100 + r.IntN(60))
		packNibbles(blk[1:], &L)
		y := make([]float32, 32)
		if err := Dequantize(gguf.TypeMXFP4, y, blk); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 17)
		if err := Quantize(gguf.TypeMXFP4, got, y); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, blk) {
			t.Fatalf("grid block re-quantized differently:\n got %x\nwant %x", got, blk)
		}
	}
}
