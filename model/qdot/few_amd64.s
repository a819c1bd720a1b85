//go:build amd64 && !purego

#include "textflag.h"

// The kernels of few.go (AVX-512 F/BW/VL and VNNI): 16 Q8_0 rows against
// 1, 2, 4 or 8 inputs, the vector lanes being the rows.
//
// Per block: the 16 rows' 32 quants (8 dwords each) are loaded two rows
// to a register, flipped to unsigned (+128), and transposed so that Z8+j
// holds dword j of every row (lane r: row r); each input's dword j is
// broadcast from memory against it (VPDPBUSD), its sum starting at the
// input's correction -128·Σq of the block. The rows' F16 scales go to Z18
// as float32, and each input's lane sum becomes Dot's float step:
// F += float(sumi) · (dw · dx).
//
// Argument layout of every kernel: func(w *byte, ldw uintptr, nb int, xq
// *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr,
// n int): rows r at w + r·ldw; the inputs as Few lays them out (per
// block, for each input: 32 quants, its scale, its correction); input t's
// result for row r to out + t·ldo + r·rs, for the first n inputs.

// FEWARGS: R8, R9, R10, R11 rows 0, 4, 8, 12; R12 ldw, R13 3·ldw; CX the
// blocks; SI, DI, DX the inputs' quants, scales, corrections; Z16 0x80 in
// every byte.
#define FEWARGS \
	MOVQ w+0(FP), R8; \
	MOVQ ldw+8(FP), R12; \
	LEAQ (R12)(R12*2), R13; \
	LEAQ (R8)(R12*4), R9; \
	LEAQ (R9)(R12*4), R10; \
	LEAQ (R10)(R12*4), R11; \
	MOVQ nb+16(FP), CX; \
	MOVQ xq+24(FP), SI; \
	MOVQ xd+32(FP), DI; \
	MOVQ xc+40(FP), DX; \
	MOVL $0x80808080, AX; \
	VPBROADCASTD AX, Z16

// EACHROW(M): M(r, the address of row r's block) for the 16 rows.
#define EACHROW(M) \
	M(0, (R8)); \
	M(1, (R8)(R12*1)); \
	M(2, (R8)(R12*2)); \
	M(3, (R8)(R13*1)); \
	M(4, (R9)); \
	M(5, (R9)(R12*1)); \
	M(6, (R9)(R12*2)); \
	M(7, (R9)(R13*1)); \
	M(8, (R10)); \
	M(9, (R10)(R12*1)); \
	M(10, (R10)(R12*2)); \
	M(11, (R10)(R13*1)); \
	M(12, (R11)); \
	M(13, (R11)(R12*1)); \
	M(14, (R11)(R12*2)); \
	M(15, (R11)(R13*1))

// SCALE(r, blk): row r's F16 scale to the frame's sc, by scalar loads and
// stores, which leave the vector units to the products (a VPGATHERDD of
// the 16 took longer).
#define SCALE(r, blk) \
	MOVWLZX blk, AX; \
	MOVW AX, sc-32+2*r(SP)

// PREFETCH(r, blk): row r, 256 bytes (7.5 blocks) ahead; the hardware's
// prefetchers alone leave the kernel waiting on memory.
#define PREFETCH(r, blk) PREFETCHT0 256 blk

// PAIR(Y, Z, lo, hi): Z = the quants of the blocks at lo and hi.
#define PAIR(Y, Z, lo, hi) \
	VMOVDQU 2 lo, Y; \
	VINSERTI64X4 $1, 2 hi, Z, Z

// ROWS: Z8-Z15 = the 16 rows' block, transposed, +128; Z18 their scales.
// Z0-Z3 hold rows 0-3 beside rows 4-7, Z4-Z7 rows 8-11 beside 12-15;
// the dword unpacks leave, per 128-bit lane, one dword of four rows, and
// VSHUFI32X4 gathers the four lanes of a dword in row order.
#define ROWS \
	PAIR(Y0, Z0, (R8), (R9)); \
	PAIR(Y1, Z1, (R8)(R12*1), (R9)(R12*1)); \
	PAIR(Y2, Z2, (R8)(R12*2), (R9)(R12*2)); \
	PAIR(Y3, Z3, (R8)(R13*1), (R9)(R13*1)); \
	PAIR(Y4, Z4, (R10), (R11)); \
	PAIR(Y5, Z5, (R10)(R12*1), (R11)(R12*1)); \
	PAIR(Y6, Z6, (R10)(R12*2), (R11)(R12*2)); \
	PAIR(Y7, Z7, (R10)(R13*1), (R11)(R13*1)); \
	EACHROW(SCALE); \
	EACHROW(PREFETCH); \
	VPXORD Z16, Z0, Z0; \
	VPXORD Z16, Z1, Z1; \
	VPXORD Z16, Z2, Z2; \
	VPXORD Z16, Z3, Z3; \
	VPXORD Z16, Z4, Z4; \
	VPXORD Z16, Z5, Z5; \
	VPXORD Z16, Z6, Z6; \
	VPXORD Z16, Z7, Z7; \
	VPUNPCKLDQ Z1, Z0, Z8; \
	VPUNPCKHDQ Z1, Z0, Z9; \
	VPUNPCKLDQ Z3, Z2, Z10; \
	VPUNPCKHDQ Z3, Z2, Z11; \
	VPUNPCKLDQ Z5, Z4, Z12; \
	VPUNPCKHDQ Z5, Z4, Z13; \
	VPUNPCKLDQ Z7, Z6, Z14; \
	VPUNPCKHDQ Z7, Z6, Z15; \
	VPUNPCKLQDQ Z10, Z8, Z0; \
	VPUNPCKHQDQ Z10, Z8, Z1; \
	VPUNPCKLQDQ Z11, Z9, Z2; \
	VPUNPCKHQDQ Z11, Z9, Z3; \
	VPUNPCKLQDQ Z14, Z12, Z4; \
	VPUNPCKHQDQ Z14, Z12, Z5; \
	VPUNPCKLQDQ Z15, Z13, Z6; \
	VPUNPCKHQDQ Z15, Z13, Z7; \
	VSHUFI32X4 $0x88, Z4, Z0, Z8; \
	VSHUFI32X4 $0xdd, Z4, Z0, Z12; \
	VSHUFI32X4 $0x88, Z5, Z1, Z9; \
	VSHUFI32X4 $0xdd, Z5, Z1, Z13; \
	VSHUFI32X4 $0x88, Z6, Z2, Z10; \
	VSHUFI32X4 $0xdd, Z6, Z2, Z14; \
	VSHUFI32X4 $0x88, Z7, Z3, Z11; \
	VSHUFI32X4 $0xdd, Z7, Z3, Z15; \
	VCVTPH2PS sc-32(SP), Z18

// The inputs' part, in the order of the groups j (not input by input),
// so that consecutive VPDPBUSDs are independent: CORR(t, A) starts input
// t's sum A at its correction, DP(t, j, A) adds its group j, FIN(t, A, F)
// adds the block's float step to F. The sums live in Z0-Z7, free once
// the rows are transposed.
#define CORR(t, A) VPBROADCASTD 4*t(DX), A
#define DP(t, j, V, A) VPDPBUSD.BCST 32*t+4*j(SI), V, A

// GROUPSn: the n inputs' groups 0-7 (the rows' groups are Z8-Z15).
#define DP2(j, V) DP(0, j, V, Z0); DP(1, j, V, Z1)
#define DP4(j, V) DP(0, j, V, Z0); DP(1, j, V, Z1); DP(2, j, V, Z2); DP(3, j, V, Z3)
#define DP8(j, V) DP4(j, V); DP(4, j, V, Z4); DP(5, j, V, Z5); DP(6, j, V, Z6); DP(7, j, V, Z7)
#define GROUPS2 DP2(0, Z8); DP2(1, Z9); DP2(2, Z10); DP2(3, Z11); DP2(4, Z12); DP2(5, Z13); DP2(6, Z14); DP2(7, Z15)
#define GROUPS4 DP4(0, Z8); DP4(1, Z9); DP4(2, Z10); DP4(3, Z11); DP4(4, Z12); DP4(5, Z13); DP4(6, Z14); DP4(7, Z15)
#define GROUPS8 DP8(0, Z8); DP8(1, Z9); DP8(2, Z10); DP8(3, Z11); DP8(4, Z12); DP8(5, Z13); DP8(6, Z14); DP8(7, Z15)
#define FIN(t, A, F) \
	VCVTDQ2PS A, A; \
	VMULPS.BCST 4*t(DI), Z18, Z19; \
	VMULPS Z19, A, A; \
	VADDPS A, F, F

// NEXT(n): the rows and the n inputs to the next block.
#define NEXT(n) \
	ADDQ $34, R8; \
	ADDQ $34, R9; \
	ADDQ $34, R10; \
	ADDQ $34, R11; \
	ADDQ $32*n, SI; \
	ADDQ $4*n, DI; \
	ADDQ $4*n, DX; \
	DECQ CX

// OUTARGS: BX out, AX ldo, DX the inputs to store, Z17 the lanes' output
// offsets r·rs.
#define OUTARGS \
	MOVQ out+48(FP), BX; \
	MOVQ ldo+56(FP), AX; \
	MOVQ n+72(FP), DX; \
	VPBROADCASTD rs+64(FP), Z17; \
	VPMULLD ·iota16(SB), Z17, Z17

// STORE(F): input F's 16 results to BX; then BX to the next input's.
#define STORE(F) \
	KXNORW K1, K1, K1; \
	VSCATTERDPS F, K1, (BX)(Z17*1); \
	ADDQ AX, BX

// STOREIF(k, F, done): STORE(F) if the inputs to store (DX) are k or
// more, else on to done.
#define STOREIF(k, F, done) \
	CMPQ DX, $k; \
	JLT  done; \
	STORE(F)

// The n-input kernels' parts: the sums of the block (CORRSn), the float
// steps into Z24-Z31 (FINSn), zeroed first (ZEROn), stored (STORESn).
#define ZERO2 VPXORD Z24, Z24, Z24; VPXORD Z25, Z25, Z25
#define ZERO4 ZERO2; VPXORD Z26, Z26, Z26; VPXORD Z27, Z27, Z27
#define ZERO8 ZERO4; VPXORD Z28, Z28, Z28; VPXORD Z29, Z29, Z29; VPXORD Z30, Z30, Z30; VPXORD Z31, Z31, Z31
#define CORRS2 CORR(0, Z0); CORR(1, Z1)
#define CORRS4 CORRS2; CORR(2, Z2); CORR(3, Z3)
#define CORRS8 CORRS4; CORR(4, Z4); CORR(5, Z5); CORR(6, Z6); CORR(7, Z7)
#define FINS2 FIN(0, Z0, Z24); FIN(1, Z1, Z25)
#define FINS4 FINS2; FIN(2, Z2, Z26); FIN(3, Z3, Z27)
#define FINS8 FINS4; FIN(4, Z4, Z28); FIN(5, Z5, Z29); FIN(6, Z6, Z30); FIN(7, Z7, Z31)
#define STORES2(done) STORE(Z24); STOREIF(2, Z25, done)
#define STORES4(done) STORES2(done); STOREIF(3, Z26, done); STOREIF(4, Z27, done)
#define STORES8(done) STORES4(done); STOREIF(5, Z28, done); STOREIF(6, Z29, done); STOREIF(7, Z30, done); STOREIF(8, Z31, done)

// FEW(n, ZERO, CORRS, GROUPS, FINS, STORES, loop, done): the n-input
// kernel, of the parts above for n.
#define FEW(n, ZERO, CORRS, GROUPS, FINS, STORES, loop, done) \
	FEWARGS; \
	ZERO; \
loop: \
	ROWS; \
	CORRS; \
	GROUPS; \
	FINS; \
	NEXT(n); \
	JNZ loop; \
	OUTARGS; \
	STORES(done); \
done: \
	VZEROUPPER; \
	RET

// func q8Few1VNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr, n int)
TEXT ·q8Few1VNNI(SB), NOSPLIT, $32-80
	FEWARGS
	VPXORD Z24, Z24, Z24

block1:
	ROWS
	// One input: its groups in two sums, even and odd, for two chains.
	CORR(0, Z0)
	VPXORD Z1, Z1, Z1
	DP(0, 0, Z8, Z0)
	DP(0, 1, Z9, Z1)
	DP(0, 2, Z10, Z0)
	DP(0, 3, Z11, Z1)
	DP(0, 4, Z12, Z0)
	DP(0, 5, Z13, Z1)
	DP(0, 6, Z14, Z0)
	DP(0, 7, Z15, Z1)
	VPADDD Z1, Z0, Z0
	FIN(0, Z0, Z24)
	NEXT(1)
	JNZ block1

	OUTARGS
	STORE(Z24)
	VZEROUPPER
	RET

// func q8Few2VNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr, n int)
TEXT ·q8Few2VNNI(SB), NOSPLIT, $32-80
	FEW(2, ZERO2, CORRS2, GROUPS2, FINS2, STORES2, block2, done2)

// func q8Few4VNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr, n int)
TEXT ·q8Few4VNNI(SB), NOSPLIT, $32-80
	FEW(4, ZERO4, CORRS4, GROUPS4, FINS4, STORES4, block4, done4)

// func q8Few8VNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, xc *int32, out *float32, ldo uintptr, rs uintptr, n int)
TEXT ·q8Few8VNNI(SB), NOSPLIT, $32-80
	FEW(8, ZERO8, CORRS8, GROUPS8, FINS8, STORES8, block8, done8)
