package qdot

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
)

// checkQuantQ8_0 holds Quantize (the AVX-512 quantizer where this process
// runs it) to quantize32 and setPairs, the Go reference, on x: the same
// quants, scales (bits; NaN as NaN), sums and pair sums.
func checkQuantQ8_0(t *testing.T, what string, x []float32) {
	t.Helper()
	var a Acts
	a.Quantize(gguf.TypeQ8_0, x)
	want := Acts{q: make([]int8, len(x)), pair: make([]int16, len(x)/2)}
	for b := range len(x) / 32 {
		d, sum, _ := quantize32(want.q[32*b:32*b+32], x[32*b:32*b+32])
		if !sameFloat(a.d[b], d) || a.sums[b] != sum {
			t.Fatalf("%s: block %d: d %g (%#x) sum %d, want %g (%#x) %d", what, b, a.d[b], math.Float32bits(a.d[b]), a.sums[b], d, math.Float32bits(d), sum)
		}
	}
	want.setPairs(0, len(x)/2)
	for i := range x {
		if a.q[i] != want.q[i] {
			t.Fatalf("%s: quant %d (%g) = %d, want %d", what, i, x[i], a.q[i], want.q[i])
		}
	}
	if useAVX2 {
		for i := range want.pair {
			if a.pair[i] != want.pair[i] {
				t.Fatalf("%s: pair %d = %d, want %d", what, i, a.pair[i], want.pair[i])
			}
		}
	}
}

// TestQuantizeQ8_0Impl: the quantizer this process runs (impl logged) on
// random activations, on blocks with an infinity or a NaN among finite
// ones (the assembly hands them to Go and resumes after them), and on
// values at every rounding edge: halves, their neighbours, and scales
// near the bottom of float32 (d subnormal, 1/d infinite).
func TestQuantizeQ8_0Impl(t *testing.T) {
	t.Logf("AVX-512 quantizer: %v", useQuantAVX512)
	rng := rand.New(rand.NewPCG(71, 72))
	for _, cols := range []int{32, 64, 96, 896, 4864} {
		for round := range 20 {
			x := randActs(rng, cols)
			switch round % 5 {
			case 1:
				x[rng.IntN(cols)] = float32(math.Inf(1 - 2*rng.IntN(2)))
			case 2:
				x[rng.IntN(cols)] = float32(math.NaN())
				x[rng.IntN(cols)] = float32(math.NaN())
			}
			checkQuantQ8_0(t, "random", x)
		}
	}
	x := make([]float32, 32*1024)
	for b := range 1024 {
		blk := x[32*b : 32*b+32]
		blk[0] = 127 // d = 1: every value is its own x·id
		for j := 1; j < 32; j++ {
			v := float32(b%256-128) + float32(j-16)/32 + 0.5
			switch j % 3 {
			case 1:
				v = math.Nextafter32(v, 200)
			case 2:
				v = math.Nextafter32(v, -200)
			}
			blk[j] = max(-127, min(127, v))
		}
	}
	checkQuantQ8_0(t, "halves", x)
	for b := range 1024 {
		blk := x[32*b : 32*b+32]
		e := -150 + b%40 // amax from below the smallest subnormal up
		for j := range blk {
			blk[j] = float32(math.Ldexp(rng.Float64()*2-1, e))
		}
		if b%7 == 0 {
			clear(blk)
		}
	}
	checkQuantQ8_0(t, "tiny", x)
}

// FuzzQuantizeQ8_0: arbitrary float32 bits through the quantizer this
// process runs, against the Go reference.
func FuzzQuantizeQ8_0(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0x00, 0x00, 0x80, 0x7f, 0x01, 0x00, 0x00, 0x00})
	f.Add([]byte{0x00, 0x00, 0xc0, 0x7f, 0x00, 0x00, 0x00, 0x3f})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		x := make([]float32, 32*(1+len(data)/128))
		for i := range x {
			var b [4]byte
			for j := range b {
				b[j] = data[(4*i+j)%len(data)]
			}
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[:]) ^ uint32(i/len(data)))
		}
		checkQuantQ8_0(t, "fuzz", x)
	})
}

// BenchmarkQuantizeQ8_0 times one 4864-element input (Qwen2.5-0.5B's FFN
// width), in the quantizer this process runs and in Go.
func BenchmarkQuantizeQ8_0(b *testing.B) {
	x := randActs(rand.New(rand.NewPCG(1, 1)), 4864)
	var a Acts
	run := func(b *testing.B) {
		for b.Loop() {
			a.Quantize(gguf.TypeQ8_0, x)
		}
		b.SetBytes(int64(4 * len(x)))
	}
	b.Run("impl", run)
	if useQuantAVX512 {
		b.Run("go", func(b *testing.B) {
			useQuantAVX512 = false
			defer func() { useQuantAVX512 = true }()
			run(b)
		})
	}
}
