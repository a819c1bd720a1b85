//go:build amd64 && !purego

#include "textflag.h"

// BCASTD(v, R): every dword of R = the constant v (clobbers AX).
#define BCASTD(v, R) \
	MOVL $v, AX; \
	VPBROADCASTD AX, R

// The AVX-512 quantizers of acts_amd64.go: quantize32 and quantize256
// (acts.go) sixteen elements at a time, the same bits. A block's scale
// comes from its largest magnitude, found as the largest of the
// magnitudes' bits (the same order for finite floats); bits of 0x7f800000
// or more mean an infinity or NaN, which the Go code finds as a NaN sum
// of v·0.

// QREDUCE(OP, Z, Y, X): X[0] = the dwords of Z combined by OP (VPMAXUD:
// the largest, unsigned; VPADDD: the sum). Clobbers Z, Z26.
#define QREDUCE(OP, Z, Y, X) \
	VEXTRACTI64X4 $1, Z, Y26; \
	OP Y26, Y, Y; \
	VEXTRACTI32X4 $1, Y, X26; \
	OP X26, X, X; \
	VPSHUFD $0x4e, X, X26; \
	OP X26, X, X; \
	VPSHUFD $0xb1, X, X26; \
	OP X26, X, X

// ROUNDAWAY(Z, T): Z = roundAway(Z) as int32 (|Z| < 2^23): trunc(Z), one
// more in magnitude where the dropped fraction (exact) is at least 1/2.
// Z31 magnitude mask, Z29 0.5, Z28 int32 ones. Clobbers T, Z27, K1.
#define ROUNDAWAY(Z, T) \
	VRNDSCALEPS $11, Z, T; \
	VSUBPS T, Z, Z27; \
	VPANDD Z31, Z27, Z27; \
	VCMPPS $0x1d, Z29, Z27, K1; \
	VPSRAD $31, Z, Z; \
	VPORD Z28, Z, Z; \
	VCVTTPS2DQ T, T; \
	VPADDD Z, T, K1, T; \
	VMOVDQA64 T, Z

// func quantQ8_0AVX512(x *float32, q *int8, d *float32, sums *int16, pair *int16, nb int)
// quantize32 over nb blocks: q, d (as stored, rounded to F16), sums, and
// Acts.pair.
TEXT ·quantQ8_0AVX512(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ d+16(FP), R8
	MOVQ sums+24(FP), R9
	MOVQ pair+32(FP), R10
	MOVQ nb+40(FP), CX
	BCASTD(0x7fffffff, Z31)
	BCASTD(0x3f000000, Z29) // 0.5
	BCASTD(1, Z28)
	BCASTD(0x01010101, Y25)
	MOVL $0x42fe0000, AX // 127
	VMOVD AX, X24
	MOVL $0x3f800000, AX // 1
	VMOVD AX, X23

q0block:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VPANDD Z31, Z0, Z2
	VPANDD Z31, Z1, Z3
	VPMAXUD Z3, Z2, Z2
	QREDUCE(VPMAXUD, Z2, Y2, X2)
	VMOVD X2, AX
	CMPL AX, $0x7f800000
	JAE  q0bad
	VDIVSS X24, X2, X5 // d = amax/127
	VXORPS X6, X6, X6
	VUCOMISS X6, X5
	JEQ  q0id
	VDIVSS X5, X23, X6 // id = 1/d

q0id:
	VBROADCASTSS X6, Z6
	VMULPS Z6, Z0, Z0
	VMULPS Z6, Z1, Z1
	ROUNDAWAY(Z0, Z7)
	ROUNDAWAY(Z1, Z8)
	VPMOVDB Z0, (DI)
	VPMOVDB Z1, 16(DI)
	VPADDD Z1, Z0, Z0
	QREDUCE(VPADDD, Z0, Y0, X0)
	VMOVD X0, AX
	MOVW AX, (R9)
	VCVTPS2PH $0, X5, X5
	VCVTPH2PS X5, X5
	VMOVSS X5, (R8)

q0pair:
	VMOVDQU (DI), Y0
	VPMADDUBSW Y0, Y25, Y0 // the pairs' sums
	VPSLLW $4, Y0, Y0
	VMOVDQU Y0, (R10)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, R8
	ADDQ $2, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  q0block
	VZEROUPPER
	RET

q0bad: // a NaN scale, zero quants (quantize32)
	VPXORD Y0, Y0, Y0
	VMOVDQU Y0, (DI)
	MOVW $0, (R9)
	MOVL $0x7fc00000, (R8)
	JMP  q0pair

// func quantQ8_KAVX512(x *float32, q *int8, d *float32, bsums *int16, qp *int8, pair *int16, nb int)
// quantize256 over nb super-blocks: q, d, bsums, and Acts.reorder's qp
// and pair.
TEXT ·quantQ8_KAVX512(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ d+16(FP), R8
	MOVQ bsums+24(FP), R9
	MOVQ qp+32(FP), R10
	MOVQ pair+40(FP), R11
	MOVQ nb+48(FP), CX
	BCASTD(0x7fffffff, Z31)
	BCASTD(127, Z30)
	BCASTD(0x80808080, Z29)
	BCASTD(0x01010101, Z28)
	VMOVDQU64 kpairs<>(SB), Z25
	MOVL $0xc2fe0000, AX // -127
	VMOVD AX, X24
	MOVL $0x3f800000, AX // 1
	VMOVD AX, X23
	MOVL $0x08000800, AX // 2048: 16·128 in both words
	VMOVD AX, X22
	VPBROADCASTD X22, X22

kblock:
	// the largest magnitude's bits
	VPANDD (SI), Z31, Z0
	XORQ BX, BX

kmax:
	VPANDD 64(SI)(BX*1), Z31, Z1
	VPMAXUD Z1, Z0, Z0
	ADDQ $64, BX
	CMPQ BX, $960
	JNE  kmax
	QREDUCE(VPMAXUD, Z0, Y0, X0)
	VMOVD X0, AX
	CMPL AX, $0x7f800000
	JAE  kbad
	TESTL AX, AX
	JEQ  kzero

	// mx: the first element of that magnitude
	VPBROADCASTD X0, Z0
	XORQ BX, BX

kfind:
	VPANDD (SI)(BX*4), Z31, Z1
	VPCMPEQD Z0, Z1, K1
	KMOVW K1, DX
	ADDQ $16, BX
	TESTL DX, DX
	JEQ  kfind
	BSFL DX, DX
	SUBQ $16, BX
	ADDQ DX, BX
	VMOVSS (SI)(BX*4), X1
	VDIVSS X1, X24, X2 // iscale = -127/mx
	VDIVSS X2, X23, X3 // d = 1/iscale
	VMOVSS X3, (R8)
	VBROADCASTSS X2, Z2
	XORQ BX, BX

kquant: // q = min(127, nearestInt(iscale·x)), sixteen at a time
	VMULPS (SI)(BX*4), Z2, Z1
	VCVTPS2DQ.RN_SAE Z1, Z1
	VPMINSD Z30, Z1, Z1
	VPMOVDB Z1, (DI)(BX*1)
	ADDQ $16, BX
	CMPQ BX, $256
	JNE  kquant

ksums: // bsums, qp, pair from the 256 quants
	XORQ BX, BX
	MOVQ R9, R12

kgroup:
	VMOVDQU64 (DI)(BX*1), Z1
	VPXORD Z29, Z1, Z3
	VPXORD Z4, Z4, Z4
	VPSADBW Z4, Z3, Z3 // the sums of eight of q+128
	VPMOVQW Z3, X3
	VPHADDW X3, X3, X3 // of sixteen, in words 0-3
	VPSUBW X22, X3, X3
	VMOVQ X3, (R12)
	VPSHUFB Z25, Z1, Z1 // each sixteen as 0,8,1,9,…,7,15
	VMOVDQU64 Z1, (R10)(BX*1)
	VPMADDUBSW Z1, Z28, Z1
	VPSLLW $5, Z1, Z1
	VMOVDQU64 Z1, (R11)(BX*1)
	ADDQ $8, R12
	ADDQ $64, BX
	CMPQ BX, $256
	JNE  kgroup
	ADDQ $1024, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	ADDQ $256, R10
	ADDQ $256, R11
	DECQ CX
	JNZ  kblock
	VZEROUPPER
	RET

kbad: // a NaN scale, zero quants (quantize256)
	MOVL $0x7fc00000, (R8)
	JMP  kclear

kzero:
	MOVL $0, (R8)

kclear:
	VPXORD Z1, Z1, Z1
	VMOVDQU64 Z1, (DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z1, 128(DI)
	VMOVDQU64 Z1, 192(DI)
	JMP  ksums

// kpairs: VPSHUFB's order of Acts.reorder, in each 16 bytes.
DATA kpairs<>+0(SB)/8, $0x0b030a0209010800
DATA kpairs<>+8(SB)/8, $0x0f070e060d050c04
DATA kpairs<>+16(SB)/8, $0x0b030a0209010800
DATA kpairs<>+24(SB)/8, $0x0f070e060d050c04
DATA kpairs<>+32(SB)/8, $0x0b030a0209010800
DATA kpairs<>+40(SB)/8, $0x0f070e060d050c04
DATA kpairs<>+48(SB)/8, $0x0b030a0209010800
DATA kpairs<>+56(SB)/8, $0x0f070e060d050c04
GLOBL kpairs<>(SB), RODATA|NOPTR, $64
