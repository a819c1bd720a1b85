package sample

import (
	"math"
	"testing"
)

// Known answers from the kat_vectors file of the Random123 distribution, as
// cut and pasted into DEShawResearch/Random123-Boost
// libs/random/test/test_philox.cpp (commit 916db91ae4c6): counter (4
// words), key (2 words), expected output (4 words). The 7-round vectors pin
// down the round function apart from the round count.
var philoxKAT = []struct {
	rounds int
	ctr    [4]uint32
	key    [2]uint32
	want   [4]uint32
}{
	{7, [4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
	{7, [4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
	{7, [4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
	{10, [4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
	{10, [4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
	{10, [4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
}

func TestPhiloxKnownAnswers(t *testing.T) {
	for _, c := range philoxKAT {
		if got := philoxRounds(c.ctr, c.key, c.rounds); got != c.want {
			t.Errorf("philox4x32-%d(%08x, %08x) = %08x, want %08x", c.rounds, c.ctr, c.key, got, c.want)
		}
		if c.rounds == 10 {
			if got := Philox4x32(c.ctr, c.key); got != c.want {
				t.Errorf("Philox4x32(%08x, %08x) = %08x, want %08x", c.ctr, c.key, got, c.want)
			}
		}
	}
}

// The layout of Uniform is part of the cross-device contract.
func TestUniformRecipe(t *testing.T) {
	for _, c := range []struct {
		seed, pos uint64
		stream    uint32
	}{
		{0, 0, 0},
		{0x0123456789abcdef, 0xfedcba9876543210, 7},
		{math.MaxUint64, math.MaxUint64, math.MaxUint32},
		{42, 1000, 1},
	} {
		x := Philox4x32(
			[4]uint32{uint32(c.pos), uint32(c.pos >> 32), c.stream, 0},
			[2]uint32{uint32(c.seed), uint32(c.seed >> 32)})
		want := float32(float64(x[0]>>8) / (1 << 24))
		if got := Uniform(c.seed, c.pos, c.stream); got != want {
			t.Errorf("Uniform(%#x, %#x, %d) = %v, want %v", c.seed, c.pos, c.stream, got, want)
		}
	}
	// ctr = key = 0: first word 0x6627e8d5.
	if got, want := Uniform(0, 0, 0), float32(0x6627e8)/(1<<24); got != want {
		t.Errorf("Uniform(0, 0, 0) = %v, want %v", got, want)
	}
}

func TestUniformIsUniform(t *testing.T) {
	const n, bins = 200000, 100
	counts := make([]int, bins)
	var sum float64
	for pos := range uint64(n) {
		u := Uniform(0x5eed, pos, 0)
		if !(u >= 0 && u < 1) {
			t.Fatalf("Uniform(pos %d) = %v, outside [0, 1)", pos, u)
		}
		sum += float64(u)
		counts[int(u*bins)]++
	}
	probs := make([]float64, bins)
	for i := range probs {
		probs[i] = 1.0 / bins
	}
	x2, crit := chiSquare(counts, probs), chiSquareCritical(bins-1, 0.001)
	if x2 > crit {
		t.Errorf("chi-square over %d bins = %.1f > %.1f (p < 0.001)", bins, x2, crit)
	}
	mean := sum / n
	// The mean of n uniforms has standard deviation sqrt(1/(12n)) = 0.00065.
	if math.Abs(mean-0.5) > 5*math.Sqrt(1.0/12/n) {
		t.Errorf("mean = %.5f, want 0.5 ± %.5f", mean, 5*math.Sqrt(1.0/12/n))
	}
	t.Logf("chi-square %.1f (critical %.1f), mean %.5f", x2, crit, mean)
}

func TestUniformStreamsDiffer(t *testing.T) {
	same := 0
	for pos := range uint64(1000) {
		a := Uniform(1, pos, 0)
		if a == Uniform(1, pos, 1) || a == Uniform(2, pos, 0) || a == Uniform(1<<32|1, pos, 0) || a == Uniform(1, pos+1<<32, 0) {
			same++
		}
	}
	// Equal 24-bit values happen by chance with probability about 4·2^-24.
	if same > 1 {
		t.Errorf("%d of 1000 positions gave equal numbers for different seeds, streams or positions", same)
	}
}
