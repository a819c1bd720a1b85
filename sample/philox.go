package sample

import "math/bits"

// Philox4x32 constants (Salmon et al. 2011, table 2): the round multipliers
// and the Weyl-sequence key increments (golden ratio and sqrt(3)-1).
const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9
	philoxW1 = 0xBB67AE85
)

// Philox4x32 is Philox4x32-10: a bijection of the 128-bit counter under the
// 64-bit key. Equal inputs give equal outputs on every machine, which is
// what lets any device draw the same number for a (seed, position) without
// sharing state.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	return philoxRounds(ctr, key, 10)
}

// philoxRounds exists so the tests can also check the published 7-round
// vectors, which pin down the round function independently of the count.
func philoxRounds(ctr [4]uint32, key [2]uint32, rounds int) [4]uint32 {
	for r := 0; r < rounds; r++ {
		if r > 0 {
			key[0] += philoxW0
			key[1] += philoxW1
		}
		hi0, lo0 := bits.Mul32(philoxM0, ctr[0])
		hi1, lo1 := bits.Mul32(philoxM1, ctr[2])
		ctr = [4]uint32{hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0}
	}
	return ctr
}

// Uniform returns the variate in [0, 1) for (seed, pos, stream), following
// the recipe in the package documentation. The top 24 bits of the first
// output word make a float32 exactly (no rounding, so never 1.0).
func Uniform(seed, pos uint64, stream uint32) float32 {
	x := Philox4x32(
		[4]uint32{uint32(pos), uint32(pos >> 32), stream, 0},
		[2]uint32{uint32(seed), uint32(seed >> 32)},
	)
	return float32(x[0]>>8) * (1.0 / (1 << 24))
}
