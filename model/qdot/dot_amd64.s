//go:build amd64 && !purego

#include "textflag.h"
#include "kscales_amd64.h"

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

// nibShift: dword shifts 0 (low 128 bits) and 4 (high), for the low and
// high nibbles of 16 bytes read into both halves.
DATA nibShift<>+0(SB)/8, $0
DATA nibShift<>+8(SB)/8, $0
DATA nibShift<>+16(SB)/8, $0x0000000400000004
DATA nibShift<>+24(SB)/8, $0x0000000400000004
GLOBL nibShift<>(SB), RODATA|NOPTR, $32

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

// iq4nlTable and mxfp4Table: kvaluesIQ4NL and kvaluesMXFP4, in both lanes.
DATA iq4nlTable<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA iq4nlTable<>+8(SB)/8, $0x7159453526190d01
DATA iq4nlTable<>+16(SB)/8, $0xf6eaddcfbfad9881
DATA iq4nlTable<>+24(SB)/8, $0x7159453526190d01
GLOBL iq4nlTable<>(SB), RODATA|NOPTR, $32

DATA mxfp4Table<>+0(SB)/8, $0x0c08060403020100
DATA mxfp4Table<>+8(SB)/8, $0xf4f8fafcfdfeff00
DATA mxfp4Table<>+16(SB)/8, $0x0c08060403020100
DATA mxfp4Table<>+24(SB)/8, $0xf4f8fafcfdfeff00
GLOBL mxfp4Table<>(SB), RODATA|NOPTR, $32

// q2kOrder puts Q2_K's sixteen scale bytes in the order 0,2,4,6,1,3,5,7,
// 8,10,…: widened to dwords, each half super-block's scales land in the
// lanes of its phaddd-reduced sub-block sums.
DATA q2kOrder<>+0(SB)/8, $0x0705030106040200
DATA q2kOrder<>+8(SB)/8, $0x0f0d0b090e0c0a08
GLOBL q2kOrder<>(SB), RODATA|NOPTR, $16

// IQ4_XS: the dword shifts that bring 32-block i's scale bits down.
DATA iq4xsShiftL<>+0(SB)/8, $0x0000000400000000
DATA iq4xsShiftL<>+8(SB)/8, $0x0000000c00000008
DATA iq4xsShiftL<>+16(SB)/8, $0x0000001400000010
DATA iq4xsShiftL<>+24(SB)/8, $0x0000001c00000018
GLOBL iq4xsShiftL<>(SB), RODATA|NOPTR, $32
DATA iq4xsShiftH<>+0(SB)/8, $0x0000000200000000
DATA iq4xsShiftH<>+8(SB)/8, $0x0000000600000004
DATA iq4xsShiftH<>+16(SB)/8, $0x0000000a00000008
DATA iq4xsShiftH<>+24(SB)/8, $0x0000000e0000000c
GLOBL iq4xsShiftH<>(SB), RODATA|NOPTR, $32

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

// ------------------------------------------------ the 32-element blocks
//
// Register use: SI weight blocks, DI quants, DX scales d, R8 the
// activations' Σq per block (Q8_0, int16) or s (Q8_1, float32), CX blocks
// left, X15 sumf; Y14 int16 ones, Y13 0x0F bytes; GROUP8 takes Y0-Y3, the
// INT macros Y8, Y9 and X4, the float parts X9 and X10.

// BLOCKS32(INT, bb, sb, CORR8, FLOAT8, CORR1, FLOAT1): the loop of a
// 32-block kernel over CX blocks of bb bytes, R8 advancing sb bytes a
// block: eight blocks at a time (GROUP8(INT), the integer sums corrected
// by CORR8 and turned into the eight contributions by FLOAT8, in Y0), then
// one at a time (CORR1, FLOAT1, in X0); every contribution is added to
// sumf in block order.
#define BLOCKS32(INT, bb, sb, CORR8, FLOAT8, CORR1, FLOAT1) \
loop8: \
	CMPQ CX, $8; \
	JLT  tail; \
	GROUP8(INT); \
	CORR8; \
	VCVTDQ2PS Y0, Y0; \
	FLOAT8; \
	ADD8(Y0, X0); \
	ADDQ $8*bb, SI; \
	ADDQ $8*32, DI; \
	ADDQ $8*4, DX; \
	ADDQ $8*sb, R8; \
	SUBQ $8, CX; \
	JMP  loop8; \
tail: \
	TESTQ CX, CX; \
	JZ    done; \
	INT(0, Y0); \
	HSUM1; \
	CORR1; \
	VCVTDQ2PS X0, X0; \
	FLOAT1; \
	VADDSS X0, X15, X15; \
	ADDQ $bb, SI; \
	ADDQ $32, DI; \
	ADDQ $4, DX; \
	ADDQ $sb, R8; \
	DECQ CX; \
	JMP  tail; \
done: \
	VMOVSS X15, ret+24(FP); \
	VZEROUPPER; \
	RET

#define NONE

// OFFSET8(sh), OFFSET1(sh): sumi -= Σq·2^sh, for weights stored with an
// offset of 2^sh (Q4_0: 8, Q5_0: 16) and multiplied unsigned.
#define OFFSET8(sh) \
	VPMOVSXWD (R8), Y1; \
	VPSLLD $sh, Y1, Y1; \
	VPSUBD Y1, Y0, Y0

#define OFFSET1(sh) \
	MOVWLSX (R8), AX; \
	SHLL $sh, AX; \
	VMOVD AX, X1; \
	VPSUBD X1, X0, X0

// The float parts, as the Go kernels form them per block (eight lanes, or
// one). DXDY: float(sumi)·(dx·dy) (Q8_0, Q5_0, IQ4_NL; products commute).
#define DXDY8(bb) \
	F16X8(bb, 0); \
	VCVTPH2PS X9, Y9; \
	VMULPS (DX), Y9, Y9; \
	VMULPS Y9, Y0, Y0

#define DXDY1 \
	F16X1(0, X9); \
	VMULSS (DX), X9, X9; \
	VMULSS X9, X0, X0

// Q4_0: (float(sumi)·dx)·dy.
#define Q40F8 \
	F16X8(18, 0); \
	VCVTPH2PS X9, Y9; \
	VMULPS Y9, Y0, Y0; \
	VMULPS (DX), Y0, Y0

#define Q40F1 \
	F16X1(0, X9); \
	VMULSS X9, X0, X0; \
	VMULSS (DX), X0, X0

// With a min (Q4_1, Q5_1): (dx·dy)·float(sumi) + m·s.
#define MIN8(bb) \
	DXDY8(bb); \
	F16X8(bb, 2); \
	VCVTPH2PS X9, Y9; \
	VMULPS (R8), Y9, Y9; \
	VADDPS Y9, Y0, Y0

#define MIN1 \
	DXDY1; \
	F16X1(2, X9); \
	VMULSS (R8), X9, X9; \
	VADDSS X9, X0, X0

// MXFP4: (dy·e8m0Half(e))·float(sumi); R9 = e8m0Table.
#define E8M0(k, X) \
	MOVBLZX 17*k(SI), AX; \
	VPINSRD $(k&3), (R9)(AX*4), X, X

#define MXF8 \
	E8M0(0, X9); \
	E8M0(1, X9); \
	E8M0(2, X9); \
	E8M0(3, X9); \
	E8M0(4, X10); \
	E8M0(5, X10); \
	E8M0(6, X10); \
	E8M0(7, X10); \
	VINSERTI128 $1, X10, Y9, Y9; \
	VMULPS (DX), Y9, Y9; \
	VMULPS Y9, Y0, Y0

#define MXF1 \
	MOVBLZX (SI), AX; \
	VMOVSS (R9)(AX*4), X9; \
	VMULSS (DX), X9, X9; \
	VMULSS X9, X0, X0

// NIB16(off, Y, X): Y = the 32 nibbles of the 16 bytes at off(SI), low
// nibbles (elements 0-15) then high (16-31). Clobbers X4.
#define NIB16(off, Y, X) \
	VMOVDQU off(SI), X; \
	VPSRLW $4, X, X4; \
	VINSERTI128 $1, X4, Y, Y; \
	VPAND Y13, Y, Y

// The integer parts: INT(k, V) leaves block k's partial sums in V's lanes.

// Q8_0: w·q, the sign of w moved onto q.
#define Q80INT(k, V) \
	VMOVDQU 34*k+2(SI), Y8; \
	VMOVDQU 32*k(DI), V; \
	VPSIGNB Y8, V, V; \
	VPABSB Y8, Y8; \
	VPMADDUBSW V, Y8, V; \
	VPMADDWD Y14, V, V

// Q4_0, Q4_1: nibble·q (Q4_0's -8 is OFFSET's).
#define Q40INT(k, V) \
	NIB16(18*k+2, Y8, X8); \
	VPMADDUBSW 32*k(DI), Y8, V; \
	VPMADDWD Y14, V, V

#define Q41INT(k, V) \
	NIB16(20*k+4, Y8, X8); \
	VPMADDUBSW 32*k(DI), Y8, V; \
	VPMADDWD Y14, V, V

// Q5HIGH(off): Y9 byte i = 16 if bit i of the dword at off(SI) is set.
// Y12 = spreadQH, Y11 = 1,2,4,…,128 repeated, Y7 = 0x10 bytes.
#define Q5HIGH(off) \
	VPBROADCASTD off(SI), Y9; \
	VPSHUFB Y12, Y9, Y9; \
	VPAND Y11, Y9, Y9; \
	VPCMPEQB Y11, Y9, Y9; \
	VPAND Y7, Y9, Y9

#define Q5CONSTS \
	VMOVDQU spreadQH<>(SB), Y12; \
	MOVQ $0x8040201008040201, AX; \
	MOVQ AX, X11; \
	VPBROADCASTQ X11, Y11; \
	BCAST32(0x10101010, Y7, X7)

// Q5_0, Q5_1: q5·q (Q5_0's -16 is OFFSET's).
#define Q50INT(k, V) \
	Q5HIGH(22*k+2); \
	NIB16(22*k+6, Y8, X8); \
	VPOR Y9, Y8, Y8; \
	VPMADDUBSW 32*k(DI), Y8, V; \
	VPMADDWD Y14, V, V

#define Q51INT(k, V) \
	Q5HIGH(24*k+4); \
	NIB16(24*k+8, Y8, X8); \
	VPOR Y9, Y8, Y8; \
	VPMADDUBSW 32*k(DI), Y8, V; \
	VPMADDWD Y14, V, V

// IQ4_NL, MXFP4: table[nibble]·q, the table in Y12 (signed values: the
// sign moves onto q).
#define LUTINT(stride, off, k, V) \
	NIB16(stride*k+off, Y8, X8); \
	VPSHUFB Y8, Y12, Y8; \
	VMOVDQU 32*k(DI), V; \
	VPSIGNB Y8, V, V; \
	VPABSB Y8, Y8; \
	VPMADDUBSW V, Y8, V; \
	VPMADDWD Y14, V, V

#define IQ4NLINT(k, V) LUTINT(18, 2, k, V)
#define MXFP4INT(k, V) LUTINT(17, 1, k, V)

#define CONSTS32 \
	ONES16(Y14); \
	BCAST32(0x0f0f0f0f, Y13, X13)

// func dotQ8_0AVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	CONSTS32
	BLOCKS32(Q80INT, 34, 0, NONE, DXDY8(34), NONE, DXDY1)

// func dotQ4_0AVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ4_0AVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	CONSTS32
	BLOCKS32(Q40INT, 18, 2, OFFSET8(3), Q40F8, OFFSET1(3), Q40F1)

// func dotQ4_1AVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ4_1AVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	MOVQ 16(BX), R8
	CONSTS32
	BLOCKS32(Q41INT, 20, 4, NONE, MIN8(20), NONE, MIN1)

// ------------------------------------------- the FMA-lane 32-blocks
//
// ggml's AVX2 order (lanes.go): per block, the eight int32 lanes of
// VPMADDUBSW+VPMADDWD turned to float and fused-multiply-added with the
// block's d into one of four accumulators Y0-Y3 (block b into b mod 4);
// FOLDLANES adds them up. Y14 int16 ones, Y13 0x0F bytes; a block takes
// Y8-Y10 and X4.

// FMALANE(doff, k, ACC): ACC += (F16 at doff(SI) · dy[k]) · float(Y8).
#define FMALANE(doff, k, ACC) \
	VCVTDQ2PS Y8, Y8; \
	F16X1(doff, X9); \
	VMULSS 4*k(DX), X9, X9; \
	VBROADCASTSS X9, Y9; \
	VFMADD231PS Y9, Y8, ACC

// DX4(bb): the scales d = dx·dy of the next four blocks (bb bytes each, the
// F16 dx at their start) to the frame's d0-d3, one conversion for four.
#define DX4(bb) \
	MOVWLZX (SI), AX; \
	VMOVD AX, X9; \
	VPINSRW $1, bb(SI), X9, X9; \
	VPINSRW $2, 2*bb(SI), X9, X9; \
	VPINSRW $3, 3*bb(SI), X9, X9; \
	VCVTPH2PS X9, X9; \
	VMULPS (DX), X9, X9; \
	VMOVUPS X9, d0-16(SP)

// FMAD4(k, ACC): ACC += d_k · float(Y8), d_k from DX4.
#define FMAD4(k, ACC) \
	VCVTDQ2PS Y8, Y8; \
	VBROADCASTSS d0-16+4*k(SP), Y9; \
	VFMADD231PS Y9, Y8, ACC

// FOLDLANES: X0[0] = ((Y0+Y1)+(Y2+Y3)) folded as hsum_float_8.
#define FOLDLANES \
	VADDPS Y1, Y0, Y0; \
	VADDPS Y3, Y2, Y2; \
	VADDPS Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0

// Q50LANES(k, ACC): block k of Q5_0, its scale converted alone (the
// tail); Q50LANES4 takes it from DX4.
#define Q50LANES(k, ACC) \
	Q50INT8(k); \
	FMALANE(22*k, k, ACC)

#define Q50LANES4(k, ACC) \
	Q50INT8(k); \
	FMAD4(k, ACC)

// Q50INT8(k): Y8 = the eight int32 lanes of block k: the unsigned q5
// (nibble, and 0x10 where the fifth bit is set) times the quants, less
// 16·(the pair's quants) from Acts.pair (R9) for the offset. The 16 bytes
// of nibbles are read into both halves and shifted by 0 and 4 (Y6).
// Y12 = spreadQH, Y11 = 1,2,4,…,128 repeated, Y7 = 0x10 bytes.
#define Q50INT8(k) \
	VPBROADCASTD 22*k+2(SI), Y9; \
	VPSHUFB Y12, Y9, Y9; \
	VPAND Y11, Y9, Y9; \
	VPCMPEQB Y11, Y9, Y9; \
	VPAND Y7, Y9, Y9; \
	VBROADCASTI128 22*k+6(SI), Y8; \
	VPSRLVD Y6, Y8, Y8; \
	VPAND Y13, Y8, Y8; \
	VPOR Y9, Y8, Y8; \
	VPMADDUBSW 32*k(DI), Y8, Y8; \
	VPSUBW 32*k(R9), Y8, Y8; \
	VPMADDWD Y14, Y8, Y8

// func dotQ5_0AVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ5_0AVX2(SB), NOSPLIT, $16-28
	LOAD_ARGS
	CONSTS32
	VMOVDQU spreadQH<>(SB), Y12
	MOVQ $0x8040201008040201, AX
	MOVQ AX, X11
	VPBROADCASTQ X11, Y11
	BCAST32(0x10101010, Y7, X7)
	MOVQ 32(BX), R9
	VMOVDQU nibShift<>(SB), Y6
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

loop4:
	CMPQ CX, $4
	JLT  tail
	DX4(22)
	Q50LANES4(0, Y0)
	Q50LANES4(1, Y1)
	Q50LANES4(2, Y2)
	Q50LANES4(3, Y3)
	ADDQ $4*22, SI
	ADDQ $4*32, DI
	ADDQ $4*32, R9
	ADDQ $4*4, DX
	SUBQ $4, CX
	JMP  loop4

tail:
	TESTQ CX, CX
	JZ    done
	Q50LANES(0, Y0)
	CMPQ  CX, $2
	JLT   done
	Q50LANES(1, Y1)
	CMPQ  CX, $3
	JLT   done
	Q50LANES(2, Y2)

done:
	FOLDLANES
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotQ5_1AVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ5_1AVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	MOVQ 16(BX), R8
	CONSTS32
	Q5CONSTS
	BLOCKS32(Q51INT, 24, 4, NONE, MIN8(24), NONE, MIN1)

// func dotIQ4_NLAVX2(w *byte, v *view, nb int) float32
TEXT ·dotIQ4_NLAVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	CONSTS32
	VMOVDQU iq4nlTable<>(SB), Y12
	BLOCKS32(IQ4NLINT, 18, 0, NONE, DXDY8(18), NONE, DXDY1)

// func dotMXFP4AVX2(w *byte, v *view, nb int) float32
TEXT ·dotMXFP4AVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	LEAQ ·e8m0Table(SB), R9
	CONSTS32
	VMOVDQU mxfp4Table<>(SB), Y12
	BLOCKS32(MXFP4INT, 17, 0, NONE, MXF8, NONE, MXF1)

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
	K4SCALEBYTES(SI); \
	VMOVQ R10, X9; \
	VPMOVZXBW X9, X9; \
	VINSERTI128 $1, X9, Y9, Y9; \
	VMOVQ R12, X8; \
	VPMOVZXBW X8, X8

// K4MINS: sumf -= (dmin·d) · float(Σ bsums[j]·min[j/2]). Clobbers Y5, Y6.
#define K4MINS \
	VPUNPCKLWD X8, X8, X6; \
	VPUNPCKHWD X8, X8, X5; \
	VINSERTI128 $1, X5, Y6, Y6; \
	VPMADDWD (R8), Y6, Y6; \
	HSUMI(Y6, X6, X5); \
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

// SUPER(bb, BODY, doff): the loop of an eight-lane kernel over CX
// super-blocks of bb bytes: BODY gathers a super-block's integer lanes in
// Y10/Y11, LANESDONE scales them by the F16 d at doff; R8 (bsums) and R9
// (pair sums) advance with the quants. Then FOLD8.
#define SUPER(bb, BODY, doff) \
	VXORPS Y14, Y14, Y14; \
	VMOVDQU permK<>(SB), Y12; \
loop: \
	TESTQ CX, CX; \
	JZ    done; \
	VPXOR Y10, Y10, Y10; \
	VPXOR Y11, Y11, Y11; \
	BODY; \
	LANESDONE(doff); \
	ADDQ $bb, SI; \
	ADDQ $256, DI; \
	ADDQ $4, DX; \
	ADDQ $32, R8; \
	ADDQ $256, R9; \
	DECQ CX; \
	JMP  loop; \
done: \
	FOLD8

// SCALES16(X): sixteen int8 scales in X (one per 16 elements) to int16 in
// Y9, in q6kOrder's order.
#define SCALES16(X) \
	VPSHUFB q6kOrder<>(SB), X, X; \
	VPMOVSXBW X, Y9

// PAIRLANES(h, S, U0, U1, U2, U3): the products U0-U3 of elements
// 128h..128h+127 (sub-blocks 8h..8h+7, two per register) into the lanes
// with their scales from Y9 (S is scratch).
#define PAIRLANES(h, S, U0, U1, U2, U3) \
	VMOVDQU q6kIdx<>+64*h(SB), S; \
	VPERMD Y9, S, S; \
	LANES(U0, U1, S); \
	VMOVDQU q6kIdx<>+64*h+32(SB), S; \
	VPERMD Y9, S, S; \
	LANES(U2, U3, S)

#define Q4KBODY \
	K4SCALES; \
	K4MINS; \
	Q4KGROUP(0); \
	Q4KGROUP(1); \
	Q4KGROUP(2); \
	Q4KGROUP(3)

// func dotQ4_KAVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ4_KAVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	BCAST32(0x0f0f0f0f, Y13, X13)
	SUPER(144, Q4KBODY, 0)

// Q5KGROUP(g, HLO, HHI): as Q4KGROUP, with the fifth bits from qh (Y8):
// HLO and HHI move bits 2g and 2g+1 of each byte to bit 4 of Y2; Y7 =
// 0x10 bytes.
#define Q5KGROUP(g, HLO, HHI) \
	K4NIBBLES(48, g); \
	HLO; \
	VPAND Y7, Y2, Y2; \
	VPOR Y2, Y0, Y0; \
	HHI; \
	VPAND Y7, Y2, Y2; \
	VPOR Y2, Y1, Y1; \
	K4PRODUCTS(g)

#define Q5HL0 VPSLLW $4, Y8, Y2
#define Q5HH0 VPSLLW $3, Y8, Y2
#define Q5HL1 VPSLLW $2, Y8, Y2
#define Q5HH1 VPSLLW $1, Y8, Y2
#define Q5HL2 VMOVDQU Y8, Y2
#define Q5HH2 VPSRLW $1, Y8, Y2
#define Q5HL3 VPSRLW $2, Y8, Y2
#define Q5HH3 VPSRLW $3, Y8, Y2

#define Q5KBODY \
	K4SCALES; \
	K4MINS; \
	VMOVDQU 16(SI), Y8; \
	Q5KGROUP(0, Q5HL0, Q5HH0); \
	Q5KGROUP(1, Q5HL1, Q5HH1); \
	Q5KGROUP(2, Q5HL2, Q5HH2); \
	Q5KGROUP(3, Q5HL3, Q5HH3)

// func dotQ5_KAVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ5_KAVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	BCAST32(0x0f0f0f0f, Y13, X13)
	BCAST32(0x10101010, Y7, X7)
	SUPER(176, Q5KBODY, 0)

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
	PAIRLANES(h, Y2, Y3, Y4, Y0, Y1)

#define Q6KBODY \
	VMOVDQU 192(SI), X9; \
	SCALES16(X9); \
	Q6KHALF(0); \
	Q6KHALF(1)

// func dotQ6_KAVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ6_KAVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	MOVQ 32(BX), R9
	BCAST32(0x0f0f0f0f, Y13, X13)
	BCAST32(0x30303030, Y7, X7)
	SUPER(210, Q6KBODY, 208)

// ------------------------------------------------------------ Q2_K

// Q2KSUB(j, V): V = the 32 two-bit quants at shift 2j of Y0, times the
// quants: low 128 bits sub-block 2j's partial sums, high 128 bits 2j+1's.
// Y13 = 0x03 bytes.
#define Q2KSUB(h, j, V) \
	VPSRLW $(2*j), Y0, V; \
	VPAND Y13, V, V; \
	VPSHUFB Y12, V, V; \
	VPMADDUBSW 128*h+32*j(DI), V, V; \
	VPMADDWD Y14, V, V

// Q2KHALF(h, S): Y11 += (sub-block sums of elements 128h..128h+127) ·
// their scales S (dwords s[8h], s[8h+2], s[8h+4], s[8h+6] | s[8h+1], …).
#define Q2KHALF(h, S) \
	VMOVDQU 16+32*h(SI), Y0; \
	Q2KSUB(h, 0, Y1); \
	Q2KSUB(h, 1, Y2); \
	Q2KSUB(h, 2, Y3); \
	Q2KSUB(h, 3, Y4); \
	VPHADDD Y2, Y1, Y1; \
	VPHADDD Y4, Y3, Y3; \
	VPHADDD Y3, Y1, Y1; \
	VPMULLD S, Y1, Y1; \
	VPADDD Y1, Y11, Y11

// func dotQ2_KAVX2(w *byte, v *view, nb int) float32
// Per super-block: sumf += (d*dall)*float(isum) - (d*dmin)*float(summs).
TEXT ·dotQ2_KAVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	ONES16(Y14)
	BCAST32(0x03030303, Y13, X13)
	BCAST32(0x0f0f0f0f, Y10, X10)
	VMOVDQU permK<>(SB), Y12

q2kloop:
	TESTQ CX, CX
	JZ    q2kdone
	VMOVDQU (SI), X6
	VPAND X10, X6, X7
	VPSHUFB q2kOrder<>(SB), X7, X7
	VPMOVZXBD X7, Y8
	VPSRLDQ $8, X7, X7
	VPMOVZXBD X7, Y7
	VPSRLW $4, X6, X6
	VPAND X10, X6, X6
	VPMOVZXBW X6, Y6
	VPMADDWD (R8), Y6, Y6
	HSUMI(Y6, X6, X5)
	VPXOR Y11, Y11, Y11
	Q2KHALF(0, Y8)
	Q2KHALF(1, Y7)
	HSUMI(Y11, X11, X1)
	VCVTDQ2PS X11, X11
	F16X1(80, X1)
	VMULSS (DX), X1, X1
	VMULSS X11, X1, X1
	VCVTDQ2PS X6, X6
	F16X1(82, X2)
	VMULSS (DX), X2, X2
	VMULSS X6, X2, X2
	VSUBSS X2, X1, X1
	VADDSS X1, X15, X15
	ADDQ $84, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R8
	DECQ CX
	JMP  q2kloop

q2kdone:
	VMOVSS X15, ret+24(FP)
	VZEROUPPER
	RET

// ------------------------------------------------------------ Q3_K

// Q3KSCALES: the sixteen 6-bit scales (see dotQ3_K) minus 32, as int16 in
// Y9 in q6kOrder's order. Clobbers AX, BX, R10-R13, Y5.
#define Q3KSCALES \
	MOVL 96(SI), AX; \
	MOVL 100(SI), BX; \
	MOVL 104(SI), R10; \
	MOVL AX, R11; \
	ANDL $0x0f0f0f0f, R11; \
	MOVL R10, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ORL R12, R11; \
	MOVL BX, R12; \
	ANDL $0x0f0f0f0f, R12; \
	MOVL R10, R13; \
	SHRL $2, R13; \
	ANDL $0x03030303, R13; \
	SHLL $4, R13; \
	ORL R13, R12; \
	SHRL $4, AX; \
	ANDL $0x0f0f0f0f, AX; \
	MOVL R10, R13; \
	SHRL $4, R13; \
	ANDL $0x03030303, R13; \
	SHLL $4, R13; \
	ORL R13, AX; \
	SHRL $4, BX; \
	ANDL $0x0f0f0f0f, BX; \
	SHRL $6, R10; \
	ANDL $0x03030303, R10; \
	SHLL $4, R10; \
	ORL R10, BX; \
	SHLQ $32, R12; \
	ORQ R12, R11; \
	SHLQ $32, BX; \
	ORQ BX, AX; \
	VMOVQ R11, X9; \
	VPINSRQ $1, AX, X9, X9; \
	BCAST32(0x20202020, Y5, X5); \
	VPSUBB X5, X9, X9; \
	SCALES16(X9)

// Q3KU(h, j, U, HB): U = the products, pairwise, of elements
// 128h+32j..+31 (two bits at shift 2j of Y0, the third from hmask's bit
// 4h+j, moved to bit 2 of Y5 by HB) with the quants, less 4·pair sums.
// Y13 = 0x03 bytes, Y7 = 0x04 bytes, Y8 = hmask.
#define Q3KU(h, j, U, HB) \
	VPSRLW $(2*j), Y0, U; \
	VPAND Y13, U, U; \
	HB; \
	VPAND Y7, Y5, Y5; \
	VPOR Y5, U, U; \
	VPSHUFB Y12, U, U; \
	VPMADDUBSW 128*h+32*j(DI), U, U; \
	VMOVDQU 128*h+32*j(R9), Y6; \
	VPSRAW $3, Y6, Y6; \
	VPSUBW Y6, U, U

#define Q3KHALF(h, HB0, HB1, HB2, HB3) \
	VMOVDQU 32+32*h(SI), Y0; \
	Q3KU(h, 0, Y1, HB0); \
	Q3KU(h, 1, Y2, HB1); \
	Q3KU(h, 2, Y3, HB2); \
	Q3KU(h, 3, Y4, HB3); \
	PAIRLANES(h, Y0, Y1, Y2, Y3, Y4)

#define Q3HB0 VPSLLW $2, Y8, Y5
#define Q3HB1 VPSLLW $1, Y8, Y5
#define Q3HB2 VMOVDQU Y8, Y5
#define Q3HB3 VPSRLW $1, Y8, Y5
#define Q3HB4 VPSRLW $2, Y8, Y5
#define Q3HB5 VPSRLW $3, Y8, Y5
#define Q3HB6 VPSRLW $4, Y8, Y5
#define Q3HB7 VPSRLW $5, Y8, Y5

#define Q3KBODY \
	Q3KSCALES; \
	VMOVDQU (SI), Y8; \
	Q3KHALF(0, Q3HB0, Q3HB1, Q3HB2, Q3HB3); \
	Q3KHALF(1, Q3HB4, Q3HB5, Q3HB6, Q3HB7)

// func dotQ3_KAVX2(w *byte, v *view, nb int) float32
TEXT ·dotQ3_KAVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	MOVQ 32(BX), R9
	BCAST32(0x03030303, Y13, X13)
	BCAST32(0x04040404, Y7, X7)
	SUPER(110, Q3KBODY, 108)

// ---------------------------------------------------------- IQ4_XS

// IQ4XSINT(k, V): 32-block k's Σ kvalue·q, the values reordered (Y11 =
// permK) to match the reordered quants; Y12 = iq4nlTable.
#define IQ4XSINT(k, V) \
	NIB16(8+16*k, Y8, X8); \
	VPSHUFB Y8, Y12, Y8; \
	VPSHUFB Y11, Y8, Y8; \
	VMOVDQU 32*k(DI), V; \
	VPSIGNB Y8, V, V; \
	VPABSB Y8, Y8; \
	VPMADDUBSW V, Y8, V; \
	VPMADDWD Y14, V, V

// func dotIQ4_XSAVX2(w *byte, v *view, nb int) float32
// Per 32-block b: sumf += ((dx*dy)*float(ls_b-32)) * float(sumi_b).
TEXT ·dotIQ4_XSAVX2(SB), NOSPLIT, $0-28
	LOAD_ARGS
	ONES16(Y14)
	BCAST32(0x0f0f0f0f, Y13, X13)
	VMOVDQU iq4nlTable<>(SB), Y12
	VMOVDQU permK<>(SB), Y11

iq4xsloop:
	TESTQ CX, CX
	JZ    iq4xsdone
	GROUP8(IQ4XSINT)
	VCVTDQ2PS Y0, Y0
	VPBROADCASTD 4(SI), Y1
	VPSRLVD iq4xsShiftL<>(SB), Y1, Y1
	BCAST32(0x0f, Y5, X5)
	VPAND Y5, Y1, Y1
	MOVWLZX 2(SI), AX
	VMOVD AX, X2
	VPBROADCASTD X2, Y2
	VPSRLVD iq4xsShiftH<>(SB), Y2, Y2
	BCAST32(3, Y5, X5)
	VPAND Y5, Y2, Y2
	VPSLLD $4, Y2, Y2
	VPOR Y2, Y1, Y1
	BCAST32(32, Y5, X5)
	VPSUBD Y5, Y1, Y1
	VCVTDQ2PS Y1, Y1
	F16X1(0, X2)
	VMULSS (DX), X2, X2
	VBROADCASTSS X2, Y2
	VMULPS Y1, Y2, Y1
	VMULPS Y1, Y0, Y0
	ADD8(Y0, X0)
	ADDQ $136, SI
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JMP  iq4xsloop

iq4xsdone:
	VMOVSS X15, ret+24(FP)
	VZEROUPPER
	RET
