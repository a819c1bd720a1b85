//go:build amd64 && !purego

#include "textflag.h"

// AVX2 integer dot products; see qdot.go for what each computes. The
// integer parts are exact whatever the grouping; the float parts follow
// the Go kernels operation by operation (vector lanes doing, per block, the
// scalar's operations), so the results are the Go kernels' bits.
//
// Argument layout of every kernel: func(w *byte, v *view, nb int) float32,
// view = {q *int8, d *float32, s *float32, sums *int16, pair *int16}.

// ------------------------------------------------------------ constants

// permK reorders each 16 bytes as 0,8,1,9,…,7,15: the layout of the Q8_K
// quants the assembly reads (Acts.qp), so that VPMADDUBSW's pairs hold
// elements i and i+8, which belong to the same lane of the reference.
DATA permK<>+0(SB)/8, $0x0b030a0209010800
DATA permK<>+8(SB)/8, $0x0f070e060d050c04
DATA permK<>+16(SB)/8, $0x0b030a0209010800
DATA permK<>+24(SB)/8, $0x0f070e060d050c04
GLOBL permK<>(SB), RODATA|NOPTR, $32

// spreadQH sends byte i/8 of a broadcast dword to byte i (Q5 high bits).
DATA spreadQH<>+0(SB)/8, $0x0000000000000000
DATA spreadQH<>+8(SB)/8, $0x0101010101010101
DATA spreadQH<>+16(SB)/8, $0x0202020202020202
DATA spreadQH<>+24(SB)/8, $0x0303030303030303
GLOBL spreadQH<>(SB), RODATA|NOPTR, $32

// ----------------------------------------------------- shared macros

// BCAST32(v, Y): every dword of Y = the constant v (clobbers AX).
#define BCAST32(v, Y, X) \
	MOVL $v, AX; \
	VMOVD AX, X; \
	VPBROADCASTD X, Y

// ONES16(Y): sixteen int16 ones.
#define ONES16(Y) \
	VPCMPEQW Y, Y, Y; \
	VPSRLW $15, Y, Y

// ADD4(X): X15 += X[0]; X15 += X[1]; X15 += X[2]; X15 += X[3] (clobbers X10).
#define ADD4(X) \
	VADDSS X, X15, X15; \
	VMOVSHDUP X, X10; \
	VADDSS X10, X15, X15; \
	VMOVHLPS X, X, X10; \
	VADDSS X10, X15, X15; \
	VPSHUFD $3, X, X10; \
	VADDSS X10, X15, X15

// ADD8(Y, X): the eight lanes of Y added to X15 in order (clobbers Y).
#define ADD8(Y, X) \
	ADD4(X); \
	VEXTRACTF128 $1, Y, X; \
	ADD4(X)

// HSUM1: X0[0] = the sum of Y0's eight int32 lanes.
#define HSUM1 \
	VEXTRACTI128 $1, Y0, X1; \
	VPADDD X1, X0, X0; \
	VPSHUFD $0x4e, X0, X1; \
	VPADDD X1, X0, X0; \
	VPSHUFD $0xb1, X0, X1; \
	VPADDD X1, X0, X0

// GROUP8(INT): Y0 lane k = the integer sum of block k of the next eight,
// INT(k, V) leaving block k's partial sums in the eight lanes of V.
#define GROUP8(INT) \
	INT(0, Y0); \
	INT(1, Y1); \
	VPHADDD Y1, Y0, Y0; \
	INT(2, Y1); \
	INT(3, Y2); \
	VPHADDD Y2, Y1, Y1; \
	VPHADDD Y1, Y0, Y0; \
	INT(4, Y1); \
	INT(5, Y2); \
	VPHADDD Y2, Y1, Y1; \
	INT(6, Y2); \
	INT(7, Y3); \
	VPHADDD Y3, Y2, Y2; \
	VPHADDD Y2, Y1, Y1; \
	VPERM2I128 $0x20, Y1, Y0, Y2; \
	VPERM2I128 $0x31, Y1, Y0, Y3; \
	VPADDD Y3, Y2, Y0

// F16X8(stride, off): X9 = the F16 values at off(SI) + k·stride, k < 8.
#define F16X8(stride, off) \
	MOVWLZX off(SI), AX; \
	VMOVD AX, X9; \
	VPINSRW $1, stride+off(SI), X9, X9; \
	VPINSRW $2, 2*stride+off(SI), X9, X9; \
	VPINSRW $3, 3*stride+off(SI), X9, X9; \
	VPINSRW $4, 4*stride+off(SI), X9, X9; \
	VPINSRW $5, 5*stride+off(SI), X9, X9; \
	VPINSRW $6, 6*stride+off(SI), X9, X9; \
	VPINSRW $7, 7*stride+off(SI), X9, X9

// F16X1(off, X): X[0] = the F16 value at off(SI) as float32.
#define F16X1(off, X) \
	MOVWLZX off(SI), AX; \
	VMOVD AX, X; \
	VCVTPH2PS X, X

// LOAD_ARGS: SI weights, DI quants, DX scales, R8 sums, CX block count,
// X15 = 0.
#define LOAD_ARGS \
	MOVQ w+0(FP), SI; \
	MOVQ v+8(FP), BX; \
	MOVQ nb+16(FP), CX; \
	MOVQ 0(BX), DI; \
	MOVQ 8(BX), DX; \
	MOVQ 24(BX), R8; \
	VXORPS X15, X15, X15

// ------------------------------------------------------------ Q8_0

// Q80INT(k, V): block k's w·q in V's lanes (the sign of w moved onto q).
#define Q80INT(k, V) \
	VMOVDQU 34*k+2(SI), Y8; \
	VMOVDQU 32*k(DI), V; \
	VPSIGNB Y8, V, V; \
	VPABSB Y8, Y8; \
	VPMADDUBSW V, Y8, V; \
	VPMADDWD Y14, V, V

// func dotQ8_0AVX2(w *byte, v *view, nb int) float32
// Per block: sumf += float(sumi) * (dx*dy).
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	ONES16(Y14)

q80loop:
	CMPQ CX, $8
	JLT  q80tail
	GROUP8(Q80INT)
	VCVTDQ2PS Y0, Y0
	F16X8(34, 0)
	VCVTPH2PS X9, Y9
	VMULPS (DX), Y9, Y9
	VMULPS Y9, Y0, Y0
	ADD8(Y0, X0)
	ADDQ $8*34, SI
	ADDQ $8*32, DI
	ADDQ $8*4, DX
	SUBQ $8, CX
	JMP  q80loop

q80tail:
	TESTQ CX, CX
	JZ    q80done
	Q80INT(0, Y0)
	HSUM1
	VCVTDQ2PS X0, X0
	F16X1(0, X9)
	VMULSS (DX), X9, X9
	VMULSS X9, X0, X0
	VADDSS X0, X15, X15
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JMP  q80tail

q80done:
	VMOVSS X15, ret+24(FP)
	VZEROUPPER
	RET

// ------------------------------------------------------------ Q4_0

// NIB16(off, Y, X): Y = the 32 nibbles of the 16 bytes at off(SI), low
// nibbles (elements 0-15) then high (16-31); Y13 = 0x0F bytes (clobbers X4).
#define NIB16(off, Y, X) \
	VMOVDQU off(SI), X; \
	VPSRLW $4, X, X4; \
	VINSERTI128 $1, X4, Y, Y; \
	VPAND Y13, Y, Y

// Q40INT(k, V): block k's Σ nibble·q (the -8 is taken off afterwards).
#define Q40INT(k, V) \
	NIB16(18*k+2, Y8, X8); \
	VPMADDUBSW 32*k(DI), Y8, V; \
	VPMADDWD Y14, V, V

// func dotQ4_0AVX2(w *byte, v *view, nb int) float32
// Per block: sumi = Σ nibble·q - 8·Σq; sumf += (float(sumi)*dx) * dy.
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	ONES16(Y14)
	BCAST32(0x0f0f0f0f, Y13, X13)

q40loop:
	CMPQ CX, $8
	JLT  q40tail
	GROUP8(Q40INT)
	VPMOVSXWD (R8), Y1
	VPSLLD $3, Y1, Y1
	VPSUBD Y1, Y0, Y0
	VCVTDQ2PS Y0, Y0
	F16X8(18, 0)
	VCVTPH2PS X9, Y9
	VMULPS Y9, Y0, Y0
	VMULPS (DX), Y0, Y0
	ADD8(Y0, X0)
	ADDQ $8*18, SI
	ADDQ $8*32, DI
	ADDQ $8*4, DX
	ADDQ $8*2, R8
	SUBQ $8, CX
	JMP  q40loop

q40tail:
	TESTQ CX, CX
	JZ    q40done
	Q40INT(0, Y0)
	HSUM1
	MOVWLSX (R8), AX
	SHLL $3, AX
	VMOVD AX, X1
	VPSUBD X1, X0, X0
	VCVTDQ2PS X0, X0
	F16X1(0, X9)
	VMULSS X9, X0, X0
	VMULSS (DX), X0, X0
	VADDSS X0, X15, X15
	ADDQ $18, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $2, R8
	DECQ CX
	JMP  q40tail

q40done:
	VMOVSS X15, ret+24(FP)
	VZEROUPPER
	RET
