//go:build amd64 && !purego

#include "textflag.h"

// The Q5_0 kernels of few.go (AVX-512 F/BW/VL and VNNI): rows of Q5_0
// against 1, 2 or 4 Q8_0 inputs. A row's block takes eight dword lanes,
// lane l holding its elements 4l..4l+3: the int32 lanes of Dot's Q5_0
// (lanes.go), each converted and fused-multiply-added with the block's
// d = dw·dy into the accumulator of its block mod 4, as Dot does lane by
// lane; the four accumulators are folded as Dot folds them. One input
// takes a row to a 256-bit vector, more inputs two rows to a 512-bit one.
//
// A row's block (d F16, qh 4 bytes, qs 16 bytes) is decoded without a
// transposition: its 16 bytes of nibbles go to both 128-bit lanes of the
// row's vector (or half), the upper copy shifted down by 4 (elements
// 16-31), and the fifth bits come from qh as a mask register (bit e for
// byte e; a second row's in bits 32-63). The q5 stay unsigned (0-31) for
// VPDPBUSD, and each input block's -16·Σ of each four quants, its
// correction for the offset of 16, starts the lane sums.
//
// Argument layout of every kernel: func(w *byte, ldw uintptr, nb int,
// xq *byte, xc *int32, xd *float32, np int, out *float32, ldo uintptr,
// rs uintptr, n int): rows r at w + r·ldw; the inputs as Few lays them
// out (per block np inputs: 32 quants each at xq, 8 corrections at xc,
// the scale at xd; the kernels read the first 1, 2 or 4); input t's
// result for row r to out + t·ldo + r·rs, for the first n inputs (the
// 4-input kernel; the others store all theirs).

// q5shift: the dword shifts 0, 4, 0, 4 of the 128-bit lanes (low and
// high nibbles of each row's 16 bytes).
DATA q5shift<>+0(SB)/8, $0
DATA q5shift<>+8(SB)/8, $0
DATA q5shift<>+16(SB)/8, $0x0000000400000004
DATA q5shift<>+24(SB)/8, $0x0000000400000004
DATA q5shift<>+32(SB)/8, $0
DATA q5shift<>+40(SB)/8, $0
DATA q5shift<>+48(SB)/8, $0x0000000400000004
DATA q5shift<>+56(SB)/8, $0x0000000400000004
GLOBL q5shift<>(SB), RODATA|NOPTR, $64

// Q5ARGS: R8 row 0, R9 row 4, R12 ldw, R13 3·ldw; BX the groups of four
// blocks, CX the blocks after them; SI, DX, DI the inputs' quants,
// corrections and scales, R10 the bytes of a block of the first two,
// R11 of the scales; Z2 0x0F bytes, Z3 0x10 bytes, Z4 q5shift, K7 the
// upper half of 16 lanes.
#define Q5ARGS \
	MOVQ w+0(FP), R8; \
	MOVQ ldw+8(FP), R12; \
	LEAQ (R12)(R12*2), R13; \
	LEAQ (R8)(R12*4), R9; \
	MOVQ nb+16(FP), CX; \
	MOVQ CX, BX; \
	SHRQ $2, BX; \
	ANDQ $3, CX; \
	MOVQ xq+24(FP), SI; \
	MOVQ xc+32(FP), DX; \
	MOVQ xd+40(FP), DI; \
	MOVQ np+48(FP), R10; \
	MOVQ R10, R11; \
	SHLQ $5, R10; \
	SHLQ $2, R11; \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z2; \
	MOVL $0x10101010, AX; \
	VPBROADCASTD AX, Z3; \
	VMOVDQU64 q5shift<>(SB), Z4; \
	MOVL $0xff00, AX; \
	KMOVW AX, K7

// Q5PAIR(a, b, o, W, YD, ZD, KA, KB): W = the q5 of the blocks at o of
// rows a and b (lanes 0-7 row a's four-element groups 0-7, lanes 8-15 row
// b's), ZD their scales as float32 (row a's in lanes 0-7, b's in 8-15).
#define Q5PAIR(a, b, o, W, YD, ZD, KA, KB) \
	VBROADCASTI32X4 6+o a, W; \
	VBROADCASTI32X4 6+o b, K7, W; \
	KMOVD 2+o a, KA; \
	KMOVD 2+o b, KB; \
	VPSRLVD Z4, W, W; \
	VPANDD Z2, W, W; \
	KUNPCKDQ KA, KB, KA; \
	VPADDB Z3, W, KA, W; \
	VPBROADCASTW o a, YD; \
	VPBROADCASTW o b, K7, YD; \
	VCVTPH2PS YD, ZD

// Q5IN(t, W, ZD, X, C, A, T, ACC): ACC += (dw·dy)·float(C + W·X) lane by
// lane, for input t's block (X its quants in both halves, C its
// corrections, dy at 4t(DI)) against the rows' q5 W and scales ZD.
#define Q5IN(t, W, ZD, X, C, A, T, ACC) \
	VMOVDQA64 C, A; \
	VPDPBUSD X, W, A; \
	VCVTDQ2PS A, A; \
	VMULPS.BCST 4*t(DI), ZD, T; \
	VFMADD231PS A, T, ACC

// Q5INM: Q5IN with the corrections read from memory.
#define Q5INM(t, W, ZD, X, A, T, ACC) \
	VBROADCASTI64X4 32*t(DX), A; \
	VPDPBUSD X, W, A; \
	VCVTDQ2PS A, A; \
	VMULPS.BCST 4*t(DI), ZD, T; \
	VFMADD231PS A, T, ACC

// INPUT(t, X): X = input t's quants of the block, in both halves.
#define INPUT(t, X) VBROADCASTI64X4 32*t(SI), X

// NEXTIN: the inputs to the next block.
#define NEXTIN \
	ADDQ R10, SI; \
	ADDQ R10, DX; \
	ADDQ R11, DI

// PREFETCH(a): the row at a, 256 and 320 bytes ahead (about three groups
// of four blocks); the hardware's prefetchers alone leave the kernel
// waiting on memory.
#define PREFETCH(a) \
	PREFETCHT0 256 a; \
	PREFETCHT0 320 a

// FOLD(A0, A1, A2, A3, T): A0 = Dot's sum of the four accumulators of a
// pair of rows, row a's in lane 0, row b's in lane 8 (or of one row in a
// 256-bit vector, in lane 0): v = (A0+A1)+(A2+A3) per lane, then
// ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)) in each row's eight lanes.
#define FOLD(A0, A1, A2, A3, T) \
	VADDPS A1, A0, A0; \
	VADDPS A3, A2, A2; \
	VADDPS A2, A0, A0; \
	VSHUFF32X4 $0xb1, A0, A0, T; \
	VADDPS T, A0, A0; \
	VPERMILPS $0x4e, A0, T; \
	VADDPS T, A0, A0; \
	VPERMILPS $0xb1, A0, T; \
	VADDPS T, A0, A0

// STOREPAIR(Z, X, a, b): lane 0 of Z (X its low part) to a, lane 8 to b.
#define STOREPAIR(Z, X, a, b) \
	VMOVSS X, a; \
	VEXTRACTF32X4 $2, Z, X0; \
	VMOVSS X0, b

// OUTARGS: BX input 0's results, AX ldo, R12 rs, R13 3·rs, R9 BX+4·rs.
#define OUTARGS \
	MOVQ out+56(FP), BX; \
	MOVQ ldo+64(FP), AX; \
	MOVQ rs+72(FP), R12; \
	LEAQ (R12)(R12*2), R13; \
	LEAQ (BX)(R12*4), R9

#define ZERO4(a, b, c, d) VPXORD a, a, a; VPXORD b, b, b; VPXORD c, c, c; VPXORD d, d, d

// Q5LOOP(PF, B0, B1, B2, B3, group, tail, done): the blocks of a kernel,
// Z16-Z31 zeroed first: groups of four (B0-B3 the blocks at 0, 22, 44,
// 66 of a group, PF its prefetches), then the 0-3 blocks left (B0-B2).
#define Q5LOOP(PF, B0, B1, B2, B3, group, tail, done) \
	ZERO4(Z16, Z17, Z18, Z19); \
	ZERO4(Z20, Z21, Z22, Z23); \
	ZERO4(Z24, Z25, Z26, Z27); \
	ZERO4(Z28, Z29, Z30, Z31); \
	TESTQ BX, BX; \
	JZ    tail; \
group: \
	PF; \
	B0; \
	B1; \
	B2; \
	B3; \
	ADDQ $88, R8; \
	DECQ BX; \
	JNZ  group; \
tail: \
	TESTQ CX, CX; \
	JZ    done; \
	B0; \
	CMPQ  CX, $2; \
	JLT   done; \
	B1; \
	CMPQ  CX, $3; \
	JLT   done; \
	B2; \
done:

// PF4, PF2: the prefetches of four rows and of two.
#define PF2 PREFETCH((R8)); PREFETCH((R8)(R12*1))
#define PF4 PF2; PREFETCH((R8)(R12*2)); PREFETCH((R8)(R13*1))

// ------------------------------------------------------------ 1 input
//
// Four rows, one to a 256-bit vector (R8, R8+ldw, R8+2·ldw, R8+3·ldw),
// accumulator k of row r in Y16+4k+r; Y0, Y1 the input's quants and
// corrections. The four rows' d = dw·dy are formed at once (Y15), and
// each row takes its own from there (VPERMPS, the indices in Y9-Y12).
// Against two rows to a 512-bit vector this saves the merging of the two
// rows' loads and of their scales, about a tenth of the time. (Forming
// the d of a group of blocks ahead, from a gather or from scalar copies
// of the scales, and broadcasting them from memory was no faster.)

// D4(o): the frame's d = the four rows' dw·dy of the blocks at o.
#define D4(o) \
	MOVWLZX o (R8), AX; \
	VMOVD AX, X15; \
	VPINSRW $1, o (R8)(R12*1), X15, X15; \
	VPINSRW $2, o (R8)(R12*2), X15, X15; \
	VPINSRW $3, o (R8)(R13*1), X15, X15; \
	VCVTPH2PS X15, X15; \
	VMULPS.BCST (DI), X15, X15

// Q5ROW(I, a, o, W, K, A, ACC): ACC += d·float(Y1 + q5·Y0), the q5 of
// the block at a+o decoded as in Q5PAIR, in one 256-bit vector; d the
// row's lane of Y15, by the indices I.
#define Q5ROW(I, a, o, W, K, A, ACC) \
	VBROADCASTI128 6+o a, W; \
	KMOVD 2+o a, K; \
	VPSRLVD Y4, W, W; \
	VPAND Y2, W, W; \
	VPADDB Y3, W, K, W; \
	VMOVDQA Y1, A; \
	VPDPBUSD Y0, W, A; \
	VCVTDQ2PS A, A; \
	VPERMPS Y15, I, W; \
	VFMADD231PS A, W, ACC

// BLOCK1(o, a0, a1, a2, a3): the block at o into the accumulators a0-a3
// of rows 0-3.
#define BLOCK1(o, a0, a1, a2, a3) \
	VMOVDQU (SI), Y0; \
	VMOVDQU (DX), Y1; \
	D4(o); \
	Q5ROW(Y9, (R8), o, Y5, K1, Y6, a0); \
	Q5ROW(Y10, (R8)(R12*1), o, Y7, K2, Y8, a1); \
	Q5ROW(Y11, (R8)(R12*2), o, Y5, K3, Y6, a2); \
	Q5ROW(Y12, (R8)(R13*1), o, Y7, K4, Y8, a3); \
	NEXTIN

#define B10 BLOCK1(0, Y16, Y17, Y18, Y19)
#define B11 BLOCK1(22, Y20, Y21, Y22, Y23)
#define B12 BLOCK1(44, Y24, Y25, Y26, Y27)
#define B13 BLOCK1(66, Y28, Y29, Y30, Y31)

// func q50Few1VNNI(w *byte, ldw uintptr, nb int, xq *byte, xc *int32, xd *float32, np int, out *float32, ldo uintptr, rs uintptr, n int)
TEXT ·q50Few1VNNI(SB), NOSPLIT, $0-88
	Q5ARGS
	VPXORD Y9, Y9, Y9
	MOVL $1, AX
	VPBROADCASTD AX, Y10
	MOVL $2, AX
	VPBROADCASTD AX, Y11
	MOVL $3, AX
	VPBROADCASTD AX, Y12
	Q5LOOP(PF4, B10, B11, B12, B13, group1, tail1, fold1)
	FOLD(Y16, Y20, Y24, Y28, Y0)
	FOLD(Y17, Y21, Y25, Y29, Y1)
	FOLD(Y18, Y22, Y26, Y30, Y2)
	FOLD(Y19, Y23, Y27, Y31, Y3)
	OUTARGS
	VMOVSS X16, (BX)
	VMOVSS X17, (BX)(R12*1)
	VMOVSS X18, (BX)(R12*2)
	VMOVSS X19, (BX)(R13*1)
	VZEROUPPER
	RET

// ----------------------------------------------------------- 2 inputs
//
// Four rows (pairs R8, R8+ldw and R8+2·ldw, R8+3·ldw), accumulator k of
// pair p and input t in Z16+8t+2k+p; Z0, Z1 input 0's quants and
// corrections, Z13, Z14 input 1's.

// BLOCK2(o, a, b, c, d): the block at o into the accumulators a, b
// (input 0, pairs 0 and 1) and c, d (input 1).
#define BLOCK2(o, a, b, c, d) \
	INPUT(0, Z0); \
	VBROADCASTI64X4 (DX), Z1; \
	INPUT(1, Z13); \
	VBROADCASTI64X4 32(DX), Z14; \
	Q5PAIR((R8), (R8)(R12*1), o, Z5, Y6, Z6, K1, K2); \
	Q5IN(0, Z5, Z6, Z0, Z1, Z7, Z8, a); \
	Q5IN(1, Z5, Z6, Z13, Z14, Z11, Z12, c); \
	Q5PAIR((R8)(R12*2), (R8)(R13*1), o, Z9, Y10, Z10, K3, K4); \
	Q5IN(0, Z9, Z10, Z0, Z1, Z7, Z8, b); \
	Q5IN(1, Z9, Z10, Z13, Z14, Z11, Z12, d); \
	NEXTIN

#define B20 BLOCK2(0, Z16, Z17, Z24, Z25)
#define B21 BLOCK2(22, Z18, Z19, Z26, Z27)
#define B22 BLOCK2(44, Z20, Z21, Z28, Z29)
#define B23 BLOCK2(66, Z22, Z23, Z30, Z31)

// func q50Few2VNNI(w *byte, ldw uintptr, nb int, xq *byte, xc *int32, xd *float32, np int, out *float32, ldo uintptr, rs uintptr, n int)
TEXT ·q50Few2VNNI(SB), NOSPLIT, $0-88
	Q5ARGS
	Q5LOOP(PF4, B20, B21, B22, B23, group2, tail2, fold2)
	FOLD(Z16, Z18, Z20, Z22, Z0)
	FOLD(Z17, Z19, Z21, Z23, Z1)
	FOLD(Z24, Z26, Z28, Z30, Z2)
	FOLD(Z25, Z27, Z29, Z31, Z3)
	OUTARGS
	STOREPAIR(Z16, X16, (BX), (BX)(R12*1))
	STOREPAIR(Z17, X17, (BX)(R12*2), (BX)(R13*1))
	ADDQ AX, BX
	STOREPAIR(Z24, X24, (BX), (BX)(R12*1))
	STOREPAIR(Z25, X25, (BX)(R12*2), (BX)(R13*1))
	VZEROUPPER
	RET

// ----------------------------------------------------------- 4 inputs
//
// Two rows (R8, R8+ldw), accumulator k of input t in Z16+4t+k; Z0, Z1,
// Z13, Z14 the inputs' quants, their corrections read from memory.

// BLOCK4(o, a, b, c, d): the block at o into the accumulators a-d of
// inputs 0-3.
#define BLOCK4(o, a, b, c, d) \
	INPUT(0, Z0); \
	INPUT(1, Z1); \
	INPUT(2, Z13); \
	INPUT(3, Z14); \
	Q5PAIR((R8), (R8)(R12*1), o, Z5, Y6, Z6, K1, K2); \
	Q5INM(0, Z5, Z6, Z0, Z7, Z8, a); \
	Q5INM(1, Z5, Z6, Z1, Z9, Z10, b); \
	Q5INM(2, Z5, Z6, Z13, Z11, Z12, c); \
	Q5INM(3, Z5, Z6, Z14, Z7, Z8, d); \
	NEXTIN

#define B40 BLOCK4(0, Z16, Z20, Z24, Z28)
#define B41 BLOCK4(22, Z17, Z21, Z25, Z29)
#define B42 BLOCK4(44, Z18, Z22, Z26, Z30)
#define B43 BLOCK4(66, Z19, Z23, Z27, Z31)

// STOREIF(t, Z, X): input t's results (rows 0 and 1) if n > t; BX moves
// to input t+1's.
#define STOREIF(t, Z, X) \
	CMPQ CX, $t; \
	JLE  done4; \
	STOREPAIR(Z, X, (BX), (BX)(R12*1)); \
	ADDQ AX, BX

// func q50Few4VNNI(w *byte, ldw uintptr, nb int, xq *byte, xc *int32, xd *float32, np int, out *float32, ldo uintptr, rs uintptr, n int)
TEXT ·q50Few4VNNI(SB), NOSPLIT, $0-88
	Q5ARGS
	Q5LOOP(PF2, B40, B41, B42, B43, group4, tail4, fold4)
	FOLD(Z16, Z17, Z18, Z19, Z0)
	FOLD(Z20, Z21, Z22, Z23, Z1)
	FOLD(Z24, Z25, Z26, Z27, Z2)
	FOLD(Z28, Z29, Z30, Z31, Z3)
	OUTARGS
	MOVQ n+80(FP), CX
	STOREIF(0, Z16, X16)
	STOREIF(1, Z20, X20)
	STOREIF(2, Z24, X24)
	STOREIF(3, Z28, X28)

done4:
	VZEROUPPER
	RET
