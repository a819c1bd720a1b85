package sample

import "math"

// exp for the softmax. math.Exp costs about 7 ns, and the sampler needs one
// exp per vocabulary entry, so this is the classic table method instead:
// x = (128m + j)·ln2/128 + r with |r| <= ln2/256, e^x = 2^m · 2^(j/128) ·
// e^r, e^r by its Taylor polynomial to degree 4 (remainder < 2e-15). The
// relative error is below 2e-15 (checked against math.Exp by the tests).
// Multiply-adds are explicit math.FMA and other products are rounded by
// explicit conversions, so no compiler fuses them differently on another
// architecture: the weights, and so the tokens, are the same everywhere.

// exp2Tab[j] is 2^(j/128) rounded to nearest, as float64 bits (computed to
// 60 digits with Python's decimal module).
var exp2Tab = [128]uint64{
	0x3ff0000000000000, 0x3ff0163da9fb3335, 0x3ff02c9a3e778061, 0x3ff04315e86e7f85,
	0x3ff059b0d3158574, 0x3ff0706b29ddf6de, 0x3ff0874518759bc8, 0x3ff09e3ecac6f383,
	0x3ff0b5586cf9890f, 0x3ff0cc922b7247f7, 0x3ff0e3ec32d3d1a2, 0x3ff0fb66affed31b,
	0x3ff11301d0125b51, 0x3ff12abdc06c31cc, 0x3ff1429aaea92de0, 0x3ff15a98c8a58e51,
	0x3ff172b83c7d517b, 0x3ff18af9388c8dea, 0x3ff1a35beb6fcb75, 0x3ff1bbe084045cd4,
	0x3ff1d4873168b9aa, 0x3ff1ed5022fcd91d, 0x3ff2063b88628cd6, 0x3ff21f49917ddc96,
	0x3ff2387a6e756238, 0x3ff251ce4fb2a63f, 0x3ff26b4565e27cdd, 0x3ff284dfe1f56381,
	0x3ff29e9df51fdee1, 0x3ff2b87fd0dad990, 0x3ff2d285a6e4030b, 0x3ff2ecafa93e2f56,
	0x3ff306fe0a31b715, 0x3ff32170fc4cd831, 0x3ff33c08b26416ff, 0x3ff356c55f929ff1,
	0x3ff371a7373aa9cb, 0x3ff38cae6d05d866, 0x3ff3a7db34e59ff7, 0x3ff3c32dc313a8e5,
	0x3ff3dea64c123422, 0x3ff3fa4504ac801c, 0x3ff4160a21f72e2a, 0x3ff431f5d950a897,
	0x3ff44e086061892d, 0x3ff46a41ed1d0057, 0x3ff486a2b5c13cd0, 0x3ff4a32af0d7d3de,
	0x3ff4bfdad5362a27, 0x3ff4dcb299fddd0d, 0x3ff4f9b2769d2ca7, 0x3ff516daa2cf6642,
	0x3ff5342b569d4f82, 0x3ff551a4ca5d920f, 0x3ff56f4736b527da, 0x3ff58d12d497c7fd,
	0x3ff5ab07dd485429, 0x3ff5c9268a5946b7, 0x3ff5e76f15ad2148, 0x3ff605e1b976dc09,
	0x3ff6247eb03a5585, 0x3ff6434634ccc320, 0x3ff6623882552225, 0x3ff68155d44ca973,
	0x3ff6a09e667f3bcd, 0x3ff6c012750bdabf, 0x3ff6dfb23c651a2f, 0x3ff6ff7df9519484,
	0x3ff71f75e8ec5f74, 0x3ff73f9a48a58174, 0x3ff75feb564267c9, 0x3ff780694fde5d3f,
	0x3ff7a11473eb0187, 0x3ff7c1ed0130c132, 0x3ff7e2f336cf4e62, 0x3ff80427543e1a12,
	0x3ff82589994cce13, 0x3ff8471a4623c7ad, 0x3ff868d99b4492ed, 0x3ff88ac7d98a6699,
	0x3ff8ace5422aa0db, 0x3ff8cf3216b5448c, 0x3ff8f1ae99157736, 0x3ff9145b0b91ffc6,
	0x3ff93737b0cdc5e5, 0x3ff95a44cbc8520f, 0x3ff97d829fde4e50, 0x3ff9a0f170ca07ba,
	0x3ff9c49182a3f090, 0x3ff9e86319e32323, 0x3ffa0c667b5de565, 0x3ffa309bec4a2d33,
	0x3ffa5503b23e255d, 0x3ffa799e1330b358, 0x3ffa9e6b5579fdbf, 0x3ffac36bbfd3f37a,
	0x3ffae89f995ad3ad, 0x3ffb0e07298db666, 0x3ffb33a2b84f15fb, 0x3ffb59728de5593a,
	0x3ffb7f76f2fb5e47, 0x3ffba5b030a1064a, 0x3ffbcc1e904bc1d2, 0x3ffbf2c25bd71e09,
	0x3ffc199bdd85529c, 0x3ffc40ab5fffd07a, 0x3ffc67f12e57d14b, 0x3ffc8f6d9406e7b5,
	0x3ffcb720dcef9069, 0x3ffcdf0b555dc3fa, 0x3ffd072d4a07897c, 0x3ffd2f87080d89f2,
	0x3ffd5818dcfba487, 0x3ffd80e316c98398, 0x3ffda9e603db3285, 0x3ffdd321f301b460,
	0x3ffdfc97337b9b5f, 0x3ffe264614f5a129, 0x3ffe502ee78b3ff6, 0x3ffe7a51fbc74c83,
	0x3ffea4afa2a490da, 0x3ffecf482d8e67f1, 0x3ffefa1bee615a27, 0x3fff252b376bba97,
	0x3fff50765b6e4540, 0x3fff7bfdad9cbe14, 0x3fffa7c1819e90d8, 0x3fffd3c22b8f71f1,
}

const (
	// ln2/128 split so that k·expL1 is exact for every |k| < 2^17 (expL1
	// has 35 significant bits), and expL2 = ln2/128 - expL1.
	expL1   = 0.005415212347998022
	expL2   = 1.2655086083325438e-13
	expInvL = 184.6649652337873 // 128/ln2
	// Adding 1.5·2^52 rounds to an integer and leaves it in the low
	// mantissa bits.
	expShifter = 0x1.8p52
	// Below ln(2^-1022) the result would be subnormal: weights that small
	// are 0.
	expUnderflow = -708.3964185322641
)

// expNeg is e^x for x <= 0 (0 below expUnderflow). The two summing loops of
// the sampler repeat this body inline, since the compiler will not inline
// it; TestExpInlineCopies keeps them identical.
func expNeg(x float64) float64 {
	if !(x > expUnderflow) {
		return 0
	}
	t := float64(x*expInvL) + expShifter
	k := math.Float64bits(t) - math.Float64bits(expShifter)
	kf := t - expShifter
	r := float64(x-float64(kf*expL1)) - float64(kf*expL2)
	p := math.FMA(math.FMA(math.FMA(math.FMA(1.0/24, r, 1.0/6), r, 0.5), r, 1), r, 1)
	return math.Float64frombits(exp2Tab[k&127]+(k>>7)<<52) * p
}
