package fma

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestF32 holds F32 to a·b+c computed exactly (math/big) and rounded once
// to float32, on random operands and on ones built to sit on a rounding
// midpoint, where rounding twice to nearest goes wrong.
func TestF32(t *testing.T) {
	exact := func(a, b, c float32) float32 {
		if r := float64(a)*float64(b) + float64(c); math.IsInf(r, 0) || r != r {
			return float32(r) // non-finite operands or product: IEEE's rules
		}
		p := new(big.Float).SetPrec(200).Mul(big.NewFloat(float64(a)).SetPrec(200), big.NewFloat(float64(b)))
		p.Add(p, big.NewFloat(float64(c)))
		f, _ := p.Float32()
		return f
	}
	check := func(a, b, c float32) {
		t.Helper()
		if got, want := F32(a, b, c), exact(a, b, c); !sameFloat(got, want) {
			t.Fatalf("F32(%g, %g, %g) = %g (%#x), want %g (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	// 1+2^-24 is the midpoint between 1 and its float32 successor: a tiny
	// c decides the rounding, which float64 alone would lose.
	one := float32(1 + 0x1p-12)
	check(one, one, -0x1p-24+0x1p-60)          // (1+2^-12)² = 1+2^-11+2^-24
	check(one, one, -0x1p-11)                  // exactly 1+2^-24: ties to even
	check(one, one, -0x1p-11+0x1p-70)          // just above the tie
	check(one, one, -0x1p-11-0x1p-70)          // just below
	check(-one, one, 0x1p-11+0x1p-70)          // negative
	check(3, 5, float32(math.Inf(1)))          // infinity
	check(0x1p100, 0x1p100, 1)                 // overflow
	check(0x1p-80, 0x1p-80, 0x1p-149)          // subnormal result
	check(0, 5, float32(math.Copysign(0, -1))) // signed zero
	// The float64 sum of a·b and c lands on the float32 midpoint
	// 1+2^-23+2^-24; the exact value is below it.
	check(float32(math.Ldexp(1+1.0/(1<<15), -24)), float32(1-1.0/(1<<15)), float32(1+1.0/(1<<23)))
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 200000 {
		// Operands as the kernels see them: a scale, an integer lane sum,
		// and an accumulator of similar or far smaller magnitude.
		a := float32(math.Ldexp(rng.Float64()+0.5, rng.IntN(60)-40))
		b := float32(rng.IntN(1<<16) - 1<<15)
		c := float32(math.Ldexp(rng.NormFloat64(), rng.IntN(100)-60))
		check(a, b, c)
		check(math.Float32frombits(rng.Uint32()), math.Float32frombits(rng.Uint32()), math.Float32frombits(rng.Uint32()))
		// Normal operands of a float dot product, and products around
		// half an ulp of the accumulator.
		a, c = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		b = float32(math.Ldexp(rng.NormFloat64(), rng.IntN(60)-30))
		if i%2 == 0 {
			b = float32(math.Ldexp(float64(b), -24-rng.IntN(40)))
		}
		check(a, b, c)
	}
}
