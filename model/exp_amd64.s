//go:build amd64 && !purego

#include "textflag.h"

// softmax of attention's scores and the FFN's swiglu, in the operations
// of softmaxGo, swigluGo and exp32 (attention.go), sixteen elements at a
// time; see there for the order.

DATA expc<>+0(SB)/4, $0xc2fc0000  // -126
DATA expc<>+4(SB)/4, $0x3fb8aa3b  // log2(e)
DATA expc<>+8(SB)/4, $0xbf317200  // -ln2 hi
DATA expc<>+12(SB)/4, $0xb5bfbe8e // -ln2 lo
DATA expc<>+16(SB)/4, $0x3f800000 // 1/0!
DATA expc<>+20(SB)/4, $0x3f800000 // 1/1!
DATA expc<>+24(SB)/4, $0x3f000000 // 1/2!
DATA expc<>+28(SB)/4, $0x3e2aaaab // 1/3!
DATA expc<>+32(SB)/4, $0x3d2aaaab // 1/4!
DATA expc<>+36(SB)/4, $0x3c088889 // 1/5!
DATA expc<>+40(SB)/4, $0x3ab60b61 // 1/6!
DATA expc<>+44(SB)/4, $0xff800000 // -Inf
DATA expc<>+48(SB)/4, $127
DATA expc<>+52(SB)/4, $-126
DATA expc<>+56(SB)/4, $-127
DATA expc<>+60(SB)/4, $0
DATA expc<>+64(SB)/8, $1.0
DATA expc<>+72(SB)/4, $0x39500d01 // 1/7!
DATA expc<>+76(SB)/4, $0x42b20000 // 89
DATA expc<>+80(SB)/4, $0x80000000 // -0: the sign bit
GLOBL expc<>(SB), RODATA|NOPTR, $84

// EXPCONSTS16 loads EXP16's constants but Z27 (89).
#define EXPCONSTS16 \
	VBROADCASTSS expc<>+0(SB), Z20; \
	VBROADCASTSS expc<>+4(SB), Z21; \
	VBROADCASTSS expc<>+8(SB), Z22; \
	VBROADCASTSS expc<>+12(SB), Z23; \
	VBROADCASTSS expc<>+16(SB), Z13; \
	VBROADCASTSS expc<>+20(SB), Z14; \
	VBROADCASTSS expc<>+24(SB), Z15; \
	VBROADCASTSS expc<>+28(SB), Z16; \
	VBROADCASTSS expc<>+32(SB), Z17; \
	VBROADCASTSS expc<>+36(SB), Z18; \
	VBROADCASTSS expc<>+40(SB), Z19; \
	VPBROADCASTD expc<>+48(SB), Z24; \
	VPBROADCASTD expc<>+52(SB), Z25

// EXP16(x, k, r, p, s) leaves exp32 of Z(x) in Z(x) (AVX-512; the
// constants in Z13..Z25 and Z27 as loaded by softmaxAVX512). The clamps
// keep a NaN: VMAXPS and VMINPS answer their second source when either
// is NaN.
#define EXP16(x, k, r, p, s) \
	VMAXPS x, Z20, x; \
	VMINPS x, Z27, x; \
	VMULPS Z21, x, k; \
	VRNDSCALEPS $0, k, k; \
	VMOVAPS x, r; \
	VFMADD231PS Z22, k, r; \
	VFMADD231PS Z23, k, r; \
	VBROADCASTSS expc<>+72(SB), p; \
	VFMADD213PS Z19, r, p; \
	VFMADD213PS Z18, r, p; \
	VFMADD213PS Z17, r, p; \
	VFMADD213PS Z16, r, p; \
	VFMADD213PS Z15, r, p; \
	VFMADD213PS Z14, r, p; \
	VFMADD213PS Z13, r, p; \
	VCVTPS2DQ k, s; \
	VPCMPD $5, Z25, s, K2; \
	VPADDD Z24, s, s; \
	VPSLLD $23, s, s; \
	VMOVDQA32.Z s, K2, s; \
	VMULPS s, p, x

// SUM16 adds the 16 float32 lanes of Z0 as float64 to Z10 (lanes 0-7)
// and Z11 (8-15), through Z5.
#define SUM16 \
	VCVTPS2PD Y0, Z5; \
	VADDPD Z5, Z10, Z10; \
	VEXTRACTF64X4 $1, Z0, Y5; \
	VCVTPS2PD Y5, Z5; \
	VADDPD Z5, Z11, Z11

// func softmaxAVX512(x *float32, n int, scale float32)
TEXT ·softmaxAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), BX
	VBROADCASTSS scale+16(FP), Z31
	MOVQ BX, CX
	ANDQ $15, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1 // the tail's lanes
	MOVQ BX, R8
	SHRQ $4, R8  // whole 16s

	// x *= scale, and the maximum.
	VBROADCASTSS expc<>+44(SB), Z30
	MOVQ SI, DI
	MOVQ R8, CX
	TESTQ CX, CX
	JZ   tail1

loop1:
	VMULPS (DI), Z31, Z0
	VMOVUPS Z0, (DI)
	VMAXPS Z0, Z30, Z30
	ADDQ $64, DI
	DECQ CX
	JNZ  loop1

tail1:
	KORTESTW K1, K1
	JZ   max
	VMULPS.Z (DI), Z31, K1, Z0
	VMOVUPS Z0, K1, (DI)
	VMAXPS Z0, Z30, K1, Z30

max:
	VEXTRACTF64X4 $1, Z30, Y0
	VMAXPS Y0, Y30, Y30
	VEXTRACTF32X4 $1, Y30, X0
	VMAXPS X0, X30, X30
	VMOVHLPS X30, X30, X0
	VMAXPS X0, X30, X30
	VMOVSHDUP X30, X0
	VMAXSS X0, X30, X30
	VBROADCASTSS X30, Z29

	// e = exp32(x - max), and Σ e in float64 lanes.
	EXPCONSTS16
	VBROADCASTSS expc<>+76(SB), Z27
	VPXORQ Z10, Z10, Z10
	VPXORQ Z11, Z11, Z11
	MOVQ SI, DI
	MOVQ R8, CX
	TESTQ CX, CX
	JZ   tail2

loop2:
	VMOVUPS (DI), Z0
	VSUBPS Z29, Z0, Z0
	EXP16(Z0, Z1, Z2, Z3, Z4)
	VMOVUPS Z0, (DI)
	SUM16
	ADDQ $64, DI
	DECQ CX
	JNZ  loop2

tail2:
	KORTESTW K1, K1
	JZ   fold
	VMOVUPS.Z (DI), K1, Z0
	VSUBPS Z29, Z0, Z0
	EXP16(Z0, Z1, Z2, Z3, Z4)
	VMOVAPS.Z Z0, K1, Z0
	VMOVUPS Z0, K1, (DI)
	SUM16

fold:
	VADDPD Z11, Z10, Z10
	VEXTRACTF64X4 $1, Z10, Y11
	VADDPD Y11, Y10, Y10
	VEXTRACTF64X2 $1, Y10, X11
	VADDPD X11, X10, X10
	VUNPCKHPD X10, X10, X11
	VADDSD X11, X10, X10
	VMOVSD expc<>+64(SB), X12
	VDIVSD X10, X12, X12
	VCVTSD2SS X12, X12, X12
	VBROADCASTSS X12, Z12

	// x *= 1/Σ.
	MOVQ SI, DI
	MOVQ R8, CX
	TESTQ CX, CX
	JZ   tail3

loop3:
	VMULPS (DI), Z12, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	DECQ CX
	JNZ  loop3

tail3:
	KORTESTW K1, K1
	JZ   done
	VMULPS.Z (DI), Z12, K1, Z0
	VMOVUPS Z0, K1, (DI)

done:
	VZEROUPPER
	RET

// AVX2: whole 16s only; softmax (simd_amd64.go) does the rest in Go.

// EXPCONSTS8 loads EXP8's constants into Y4..Y15.
#define EXPCONSTS8 \
	VBROADCASTSS expc<>+0(SB), Y4; \
	VBROADCASTSS expc<>+4(SB), Y5; \
	VBROADCASTSS expc<>+8(SB), Y6; \
	VBROADCASTSS expc<>+12(SB), Y7; \
	VPBROADCASTD expc<>+56(SB), Y8; \
	VBROADCASTSS expc<>+16(SB), Y9; \
	VBROADCASTSS expc<>+20(SB), Y10; \
	VBROADCASTSS expc<>+24(SB), Y11; \
	VBROADCASTSS expc<>+28(SB), Y12; \
	VBROADCASTSS expc<>+32(SB), Y13; \
	VBROADCASTSS expc<>+36(SB), Y14; \
	VBROADCASTSS expc<>+40(SB), Y15

// EXP8(x) leaves exp32 of Y(x) in Y(x); constants as loaded by
// EXPCONSTS8 (and memory), scratch Y1..Y3.
#define EXP8(x) \
	VMAXPS x, Y4, x; \
	VBROADCASTSS expc<>+76(SB), Y1; \
	VMINPS x, Y1, x; \
	VMULPS Y5, x, Y1; \
	VROUNDPS $0, Y1, Y1; \
	VMOVAPS x, Y2; \
	VFMADD231PS Y6, Y1, Y2; \
	VFMADD231PS Y7, Y1, Y2; \
	VBROADCASTSS expc<>+72(SB), Y3; \
	VFMADD213PS Y15, Y2, Y3; \
	VFMADD213PS Y14, Y2, Y3; \
	VFMADD213PS Y13, Y2, Y3; \
	VFMADD213PS Y12, Y2, Y3; \
	VFMADD213PS Y11, Y2, Y3; \
	VFMADD213PS Y10, Y2, Y3; \
	VFMADD213PS Y9, Y2, Y3; \
	VCVTPS2DQ Y1, Y1; \
	VPCMPGTD Y8, Y1, Y2; \
	VPBROADCASTD expc<>+48(SB), x; \
	VPADDD x, Y1, Y1; \
	VPSLLD $23, Y1, Y1; \
	VPAND Y2, Y1, Y1; \
	VMULPS Y1, Y3, x

// func scaleMaxAVX2(x *float32, n int, scale float32) float32
TEXT ·scaleMaxAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	VBROADCASTSS scale+16(FP), Y15
	VBROADCASTSS expc<>+44(SB), Y14

loop:
	VMULPS (DI), Y15, Y0
	VMOVUPS Y0, (DI)
	VMAXPS Y0, Y14, Y14
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
	VEXTRACTF128 $1, Y14, X0
	VMAXPS X0, X14, X14
	VMOVHLPS X14, X14, X0
	VMAXPS X0, X14, X14
	VMOVSHDUP X14, X0
	VMAXSS X0, X14, X14
	VMOVSS X14, ret+24(FP)
	VZEROUPPER
	RET

// func expSumAVX2(x *float32, n int, mx float32, lanes *[16]float64)
// n is a multiple of 16; lanes receives the float64 sums of each lane.
TEXT ·expSumAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), DI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	EXPCONSTS8
	// The lanes' sums stay in memory: sixteen registers hold the
	// constants and operands.
	VXORPD Y0, Y0, Y0
	MOVQ lanes+24(FP), SI
	VMOVUPD Y0, 0(SI)
	VMOVUPD Y0, 32(SI)
	VMOVUPD Y0, 64(SI)
	VMOVUPD Y0, 96(SI)
	XORQ AX, AX

loop:
	VMOVUPS (DI), Y0
	VBROADCASTSS mx+16(FP), Y1
	VSUBPS Y1, Y0, Y0
	EXP8(Y0)
	VMOVUPS Y0, (DI)
	VCVTPS2PD X0, Y1
	VADDPD 0(SI)(AX*1), Y1, Y1
	VMOVUPD Y1, 0(SI)(AX*1)
	VEXTRACTF128 $1, Y0, X0
	VCVTPS2PD X0, Y1
	VADDPD 32(SI)(AX*1), Y1, Y1
	VMOVUPD Y1, 32(SI)(AX*1)
	XORQ $64, AX // lanes 0-7, then 8-15
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
	RET

// func swigluAVX512(out, gate, up *float32, n int)
// n is a multiple of 16.
TEXT ·swigluAVX512(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	JZ   sdone
	EXPCONSTS16
	VBROADCASTSS expc<>+80(SB), Z26
	VBROADCASTSS expc<>+76(SB), Z27

sloop:
	VMOVUPS (SI), Z6
	VXORPS Z26, Z6, Z0 // -g
	EXP16(Z0, Z1, Z2, Z3, Z4)
	VADDPS Z13, Z0, Z0 // 1 + e
	VDIVPS Z0, Z6, Z6  // g / (1 + e)
	VMULPS (DX), Z6, Z6
	VMOVUPS Z6, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  sloop

sdone:
	VZEROUPPER
	RET

// func swigluAVX2(out, gate, up *float32, n int)
// n is a multiple of 8.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   sdone
	EXPCONSTS8

sloop:
	VBROADCASTSS expc<>+80(SB), Y0
	VXORPS (SI), Y0, Y0 // -g
	EXP8(Y0)
	VADDPS Y9, Y0, Y0 // 1 + e
	VMOVUPS (SI), Y1
	VDIVPS Y0, Y1, Y1 // g / (1 + e)
	VMULPS (DX), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  sloop

sdone:
	VZEROUPPER
	RET
