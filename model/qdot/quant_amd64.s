//go:build amd64 && !purego

#include "textflag.h"

// quantQ8_0AVX512 quantizes 32-element blocks to Q8_0 as quantize32 does
// (acts.go), bit for bit: amax = max|x| (the order of a max does not
// matter), d = amax/127, id = 1/d (0 where d is 0), q = x·id rounded half
// away from zero. The rounding: t = trunc(x·id), and t ± 1 where the
// fraction x·id - t (exact) is at least one half; an infinite or NaN
// x·id (id infinite) truncates to the integer indefinite 0x80000000, as
// Go's conversion does on amd64, whose low byte is 0.
//
// Register use: SI x, DI q, DX d, R8 sums, R9 pair, CX blocks left, BX
// blocks done; Z31 0x7fffffff (|·|), Z30 the largest float32, Z29 0.5,
// Z28 1.0, Z27 the sign bit; X26 127.0.

// ROUNDAWAY(X, T, F, S, K): T = the 16 values of X rounded half away from
// zero, as int32; F, S, K are scratch. Where 1/d is infinite every x·id
// of the block is infinite or NaN, and every lane 0x80000000, whose low
// byte is Go's 0 and whose 32 copies sum to 0 (mod 2^32), as Go's zeros.
#define ROUNDAWAY(X, T, F, S, K) \
	VRNDSCALEPS $0x0b, X, T; \
	VSUBPS      T, X, F; \
	VANDPS      Z31, F, F; \
	VCMPPS      $0x1d, Z29, F, K; \
	VANDPS      Z27, X, S; \
	VORPS       Z28, S, S; \
	VADDPS      S, T, K, T; \
	VCVTTPS2DQ  T, T

// func quantQ8_0AVX512(x *float32, q *int8, d *float32, sums *int16, pair *int16, nb int) int
// Quantizes up to nb blocks and returns how many: it stops before a block
// holding an infinity or a NaN, which the caller quantizes.
TEXT ·quantQ8_0AVX512(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ d+16(FP), DX
	MOVQ sums+24(FP), R8
	MOVQ pair+32(FP), R9
	MOVQ nb+40(FP), CX
	XORQ BX, BX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z31
	MOVL $0x7f7fffff, AX
	VPBROADCASTD AX, Z30
	MOVL $0x3f000000, AX
	VPBROADCASTD AX, Z29
	MOVL $0x3f800000, AX
	VPBROADCASTD AX, Z28
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z27
	MOVL $0x42fe0000, AX
	VMOVD AX, X26
	TESTQ CX, CX
	JZ    done

block:
	VMOVUPS 0(SI), Z0
	VMOVUPS 64(SI), Z1
	VANDPS  Z31, Z0, Z2
	VANDPS  Z31, Z1, Z3
	VCMPPS  $0x12, Z30, Z2, K1 // |x| <= max: false for infinities and NaNs
	VCMPPS  $0x12, Z30, Z3, K2
	KANDW   K2, K1, K1
	KORTESTW K1, K1
	JCC     done               // not all 16 + 16 finite

	// amax, then d and id.
	VMAXPS       Z3, Z2, Z2
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS       Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VMAXPS       X3, X2, X2
	VPERMILPS    $0x4e, X2, X3
	VMAXPS       X3, X2, X2
	VPERMILPS    $0xb1, X2, X3
	VMAXSS       X3, X2, X2
	VDIVSS       X26, X2, X4   // d
	VXORPS       X5, X5, X5    // id = 0 where d is 0
	VUCOMISS     X5, X4
	JEQ          scaled
	VDIVSS       X4, X28, X5   // id = 1/d

scaled:
	VBROADCASTSS X5, Z5
	VMULPS       Z5, Z0, Z0
	VMULPS       Z5, Z1, Z1
	ROUNDAWAY(Z0, Z6, Z7, Z8, K3)
	ROUNDAWAY(Z1, Z9, Z10, Z11, K4)

	// The stored scale, rounded to F16.
	VCVTPS2PH $0, X4, X4
	VCVTPH2PS X4, X4
	VMOVSS    X4, (DX)

	// The quants.
	VPMOVDB Z6, X10
	VMOVDQU X10, 0(DI)
	VPMOVDB Z9, X11
	VMOVDQU X11, 16(DI)

	// pair[i] = 16·(q[2i] + q[2i+1]), in 16 bits.
	VPSRLQ  $32, Z6, Z12
	VPADDD  Z12, Z6, Z12
	VPMOVQW Z12, X12
	VPSRLQ  $32, Z9, Z13
	VPADDD  Z13, Z9, Z13
	VPMOVQW Z13, X13
	VINSERTI128 $1, X13, Y12, Y12
	VPSLLW  $4, Y12, Y12
	VMOVDQU Y12, (R9)

	// Σq.
	VPADDD        Z9, Z6, Z6
	VEXTRACTI64X4 $1, Z6, Y7
	VPADDD        Y7, Y6, Y6
	VEXTRACTI128  $1, Y6, X7
	VPADDD        X7, X6, X6
	VPSHUFD       $0x4e, X6, X7
	VPADDD        X7, X6, X6
	VPSHUFD       $0xb1, X6, X7
	VPADDD        X7, X6, X6
	VMOVD         X6, AX
	MOVW          AX, (R8)

	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $2, R8
	ADDQ $32, R9
	INCQ BX
	DECQ CX
	JNZ  block

done:
	MOVQ BX, ret+48(FP)
	VZEROUPPER
	RET
