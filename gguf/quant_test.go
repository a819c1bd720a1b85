package gguf

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestF16RoundTripAllHalves(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := F16ToF32(h)
		if f != f { // NaN stays NaN
			if g := F16ToF32(F32ToF16(f)); g == g {
				t.Fatalf("%#04x: NaN lost", h)
			}
			continue
		}
		if got := F32ToF16(f); got != h {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, got)
		}
	}
}

func TestF16Rounding(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65520, 0x7c00}, {1e-8, 0}, {5.960464477539063e-08, 0x0001},
		{1 + 1.0/2048, 0x3c00}, // tie to even (down)
		{1 + 3.0/2048, 0x3c02}, // tie to even (up)
		{float32(math.Inf(-1)), 0xfc00}, {6.103515625e-05, 0x0400},
	}
	for _, c := range cases {
		if got := F32ToF16(c.in); got != c.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func TestBF16(t *testing.T) {
	if got := F32ToBF16(1); got != 0x3f80 {
		t.Fatalf("bf16(1) = %#x", got)
	}
	if got := F32ToBF16(math.Float32frombits(0x3f808000)); got != 0x3f80 { // tie, even stays
		t.Fatalf("tie: %#x", got)
	}
	if got := F32ToBF16(math.Float32frombits(0x3f818000)); got != 0x3f82 { // tie, odd rounds up
		t.Fatalf("tie up: %#x", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		x := float32(r.NormFloat64())
		y := BF16ToF32(F32ToBF16(x))
		if math.Abs(float64(x-y)) > math.Abs(float64(x))/256 {
			t.Fatalf("bf16 error too large: %v -> %v", x, y)
		}
	}
}

func TestQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]float32, 256)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	src[5] = 0
	q := make([]byte, 256/32*34)
	QuantizeQ8_0(q, src)
	back := make([]float32, 256)
	DequantizeQ8_0(back, q)
	for b := 0; b < 8; b++ {
		amax := 0.0
		for _, v := range src[b*32 : b*32+32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		for i := b * 32; i < b*32+32; i++ {
			if math.Abs(float64(src[i]-back[i])) > amax/127*0.5001+amax*1e-3 {
				t.Fatalf("element %d: %v -> %v", i, src[i], back[i])
			}
		}
	}
	zero := make([]float32, 32)
	QuantizeQ8_0(q, zero)
	DequantizeQ8_0(back[:32], q)
	for _, v := range back[:32] {
		if v != 0 {
			t.Fatal("all-zero block must stay zero")
		}
	}
}

// TestQ8_0RoundsHalfAway: ggml's roundf takes halves away from zero, so
// with d = 1 the element 2.5 is 3 and -2.5 is -3 (round-to-even gives 2).
func TestQ8_0RoundsHalfAway(t *testing.T) {
	src := make([]float32, 32)
	copy(src, []float32{127, 2.5, -2.5, 0.5, -0.5})
	q := make([]byte, 34)
	QuantizeQ8_0(q, src)
	for i, want := range []int8{127, 3, -3, 1, -1} {
		if got := int8(q[2+i]); got != want {
			t.Errorf("element %d (%v): got %d, want %d", i, src[i], got, want)
		}
	}
}
