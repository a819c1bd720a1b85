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

// q6kOrder puts Q6_K's sixteen int8 scales in the order 0,2,1,3, 4,6,5,7,
// … so that, widened to int16, dword i holds the pair of scales that
// VPMADDWD needs against two interleaved sub-blocks (see LANES).
DATA q6kOrder<>+0(SB)/8, $0x0705060403010200
DATA q6kOrder<>+8(SB)/8, $0x0f0d0e0c0b090a08
GLOBL q6kOrder<>(SB), RODATA|NOPTR, $16

// q6kIdx: VPERMD indices 2i (low lane) and 2i+1 (high lane), i < 4.
DATA q6kIdx<>+0(SB)/8, $0x0000000000000000
DATA q6kIdx<>+8(SB)/8, $0x0000000000000000
DATA q6kIdx<>+16(SB)/8, $0x0000000100000001
DATA q6kIdx<>+24(SB)/8, $0x0000000100000001
DATA q6kIdx<>+32(SB)/8, $0x0000000200000002
DATA q6kIdx<>+40(SB)/8, $0x0000000200000002
DATA q6kIdx<>+48(SB)/8, $0x0000000300000003
DATA q6kIdx<>+56(SB)/8, $0x0000000300000003
DATA q6kIdx<>+64(SB)/8, $0x0000000400000004
DATA q6kIdx<>+72(SB)/8, $0x0000000400000004
DATA q6kIdx<>+80(SB)/8, $0x0000000500000005
DATA q6kIdx<>+88(SB)/8, $0x0000000500000005
DATA q6kIdx<>+96(SB)/8, $0x0000000600000006
DATA q6kIdx<>+104(SB)/8, $0x0000000600000006
DATA q6kIdx<>+112(SB)/8, $0x0000000700000007
DATA q6kIdx<>+120(SB)/8, $0x0000000700000007
GLOBL q6kIdx<>(SB), RODATA|NOPTR, $128

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

// HSUMI(Y, X, XT): X[0] = the sum of Y's eight int32 lanes.
#define HSUMI(Y, X, XT) \
	VEXTRACTI128 $1, Y, XT; \
	VPADDD XT, X, X; \
	VPSHUFD $0x4e, X, XT; \
	VPADDD XT, X, X; \
	VPSHUFD $0xb1, X, XT; \
	VPADDD XT, X, X

#define HSUM1 HSUMI(Y0, X0, X1)

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

// ------------------------------------------------- the eight-lane K-quants
//
// Register use: SI super-block, DI reordered quants (Acts.qp), DX scales,
// R8 bsums, R9 pair sums·32, CX super-blocks left; Y10 and Y11 the integer
// lanes of the current super-block (see LANES), Y14 the eight float lanes
// (sums), X15 sumf; Y12 permK, Y13 0x0F bytes, Y9 the scales.
//
// With the quants reordered, VPMADDUBSW of a sub-block's 32 bytes gives
// in its low 128 bits eight words w_l = a[l]·q[l] + a[l+8]·q[l+8] and in
// its high 128 bits the same for elements 16-31: word l belongs to lane l.

// LANES(P, Q, S): interleave the words of sub-block products P and Q and
// multiply-add them with the scale pairs S (low word P's scale, high word
// Q's): Y10 gathers lanes 0-3, Y11 lanes 4-7, each twice (low and high
// 128 bits). Clobbers Y5, Y6.
#define LANES(P, Q, S) \
	VPUNPCKLWD Q, P, Y5; \
	VPUNPCKHWD Q, P, Y6; \
	VPMADDWD S, Y5, Y5; \
	VPMADDWD S, Y6, Y6; \
	VPADDD Y5, Y10, Y10; \
	VPADDD Y6, Y11, Y11

// LANESDONE(doff): sums[l] += (F16 at doff(SI) · d) · float(lane l).
#define LANESDONE(doff) \
	VPERM2I128 $0x20, Y11, Y10, Y0; \
	VPERM2I128 $0x31, Y11, Y10, Y1; \
	VPADDD Y1, Y0, Y0; \
	VCVTDQ2PS Y0, Y0; \
	F16X1(doff, X1); \
	VMULSS (DX), X1, X1; \
	VBROADCASTSS X1, Y1; \
	VMULPS Y1, Y0, Y0; \
	VADDPS Y0, Y14, Y14

// K4SCALES: Q4_K/Q5_K's scales (scaleMinK4) as int16 in both halves of Y9
// (dword g = the pair of scales of sub-blocks 2g, 2g+1) and the mins as
// int16 in X8. Clobbers AX, BX, R9-R12.
#define K4SCALES \
	MOVL 4(SI), AX; \
	MOVL 8(SI), BX; \
	MOVL 12(SI), R9; \
	MOVL AX, R10; \
	ANDL $0x3f3f3f3f, R10; \
	MOVL R9, R11; \
	ANDL $0x0f0f0f0f, R11; \
	MOVL AX, R12; \
	SHRL $6, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ORL R12, R11; \
	MOVL BX, R12; \
	ANDL $0x3f3f3f3f, R12; \
	SHRL $4, R9; \
	ANDL $0x0f0f0f0f, R9; \
	SHRL $6, BX; \
	ANDL $0x03030303, BX; \
	SHLL $4, BX; \
	ORL BX, R9; \
	SHLQ $32, R11; \
	ORQ R11, R10; \
	SHLQ $32, R9; \
	ORQ R9, R12; \
	VMOVQ R10, X9; \
	VPMOVZXBW X9, X9; \
	VINSERTI128 $1, X9, Y9, Y9; \
	VMOVQ R12, X8; \
	VPMOVZXBW X8, X8

// K4MINS: sumf -= (dmin·d) · float(Σ bsums[j]·min[j/2]).
#define K4MINS \
	VPUNPCKLWD X8, X8, X6; \
	VPUNPCKHWD X8, X8, X7; \
	VINSERTI128 $1, X7, Y6, Y6; \
	VPMADDWD (R8), Y6, Y6; \
	HSUMI(Y6, X6, X7); \
	VCVTDQ2PS X6, X6; \
	F16X1(2, X1); \
	VMULSS (DX), X1, X1; \
	VMULSS X6, X1, X1; \
	VSUBSS X1, X15, X15

// K4NIBBLES(off, g): Y0, Y1 = sub-blocks 2g and 2g+1 of the 128 bytes of
// nibbles at off(SI) (low and high nibbles of bytes 32g..32g+31).
#define K4NIBBLES(off, g) \
	VMOVDQU off+32*g(SI), Y0; \
	VPSRLW $4, Y0, Y1; \
	VPAND Y13, Y0, Y0; \
	VPAND Y13, Y1, Y1

// K4PRODUCTS(g): the reordered products of Y0, Y1 with the quants, into
// the lanes with the scales of sub-blocks 2g, 2g+1.
#define K4PRODUCTS(g) \
	VPSHUFB Y12, Y0, Y0; \
	VPSHUFB Y12, Y1, Y1; \
	VPMADDUBSW 64*g(DI), Y0, Y0; \
	VPMADDUBSW 64*g+32(DI), Y1, Y1; \
	VPSHUFD $(0x55*g), Y9, Y4; \
	LANES(Y0, Y1, Y4)

#define Q4KGROUP(g) \
	K4NIBBLES(16, g); \
	K4PRODUCTS(g)

// FOLD8: sumf += sums[0], …, sums[7] in order, then return sumf.
#define FOLD8 \
	ADD8(Y14, X14); \
	VMOVSS X15, ret+24(FP); \
	VZEROUPPER; \
	RET

// func dotQ4_KAVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	VXORPS Y14, Y14, Y14
	BCAST32(0x0f0f0f0f, Y13, X13)
	VMOVDQU permK<>(SB), Y12

q4kloop:
	TESTQ CX, CX
	JZ    q4kdone
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	K4SCALES
	K4MINS
	Q4KGROUP(0)
	Q4KGROUP(1)
	Q4KGROUP(2)
	Q4KGROUP(3)
	LANESDONE(0)
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R8
	DECQ CX
	JMP  q4kloop

q4kdone:
	FOLD8

// Q6KPROD(U, off): U = reordered unsigned 6-bit quants · q - 32·pair sums:
// the products of (u-32) with the quants, pairwise.
#define Q6KPROD(U, off) \
	VPSHUFB Y12, U, U; \
	VPMADDUBSW off(DI), U, U; \
	VPSUBW off(R9), U, U

// Q6KHALF(h): elements 128h..128h+127: ql at 64h (low nibbles: elements
// 0-31, 32-63; high nibbles: 64-95, 96-127), two bits each from qh at
// 128+32h; Y7 = 0x30 bytes.
#define Q6KHALF(h) \
	VMOVDQU 64*h(SI), Y0; \
	VMOVDQU 64*h+32(SI), Y1; \
	VMOVDQU 128+32*h(SI), Y2; \
	VPAND Y13, Y0, Y3; \
	VPSLLW $4, Y2, Y4; \
	VPAND Y7, Y4, Y4; \
	VPOR Y4, Y3, Y3; \
	VPAND Y13, Y1, Y4; \
	VPSLLW $2, Y2, Y5; \
	VPAND Y7, Y5, Y5; \
	VPOR Y5, Y4, Y4; \
	VPSRLW $4, Y0, Y0; \
	VPAND Y13, Y0, Y0; \
	VPAND Y7, Y2, Y5; \
	VPOR Y5, Y0, Y0; \
	VPSRLW $4, Y1, Y1; \
	VPAND Y13, Y1, Y1; \
	VPSRLW $2, Y2, Y2; \
	VPAND Y7, Y2, Y2; \
	VPOR Y2, Y1, Y1; \
	Q6KPROD(Y3, 128*h); \
	Q6KPROD(Y4, 128*h+32); \
	Q6KPROD(Y0, 128*h+64); \
	Q6KPROD(Y1, 128*h+96); \
	VMOVDQU q6kIdx<>+64*h(SB), Y2; \
	VPERMD Y9, Y2, Y2; \
	LANES(Y3, Y4, Y2); \
	VMOVDQU q6kIdx<>+64*h+32(SB), Y2; \
	VPERMD Y9, Y2, Y2; \
	LANES(Y0, Y1, Y2)

// func dotQ6_KAVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	MOVQ 32(BX), R9
	VXORPS Y14, Y14, Y14
	BCAST32(0x0f0f0f0f, Y13, X13)
	BCAST32(0x30303030, Y7, X7)
	VMOVDQU permK<>(SB), Y12

q6kloop:
	TESTQ CX, CX
	JZ    q6kdone
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	VMOVDQU 192(SI), X9
	VPSHUFB q6kOrder<>(SB), X9, X9
	VPMOVSXBW X9, Y9
	Q6KHALF(0)
	Q6KHALF(1)
	LANESDONE(208)
	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $256, R9
	DECQ CX
	JMP  q6kloop

q6kdone:
	FOLD8
