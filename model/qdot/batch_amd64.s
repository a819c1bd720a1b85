//go:build amd64 && !purego

#include "textflag.h"

// The batch kernels of batch.go (AVX-512 F/BW/VL and VNNI).

// iota16 is the int32 lanes 0, 1, …, 15 (also for few_amd64.s).
DATA ·iota16+0(SB)/8, $0x0000000100000000
DATA ·iota16+8(SB)/8, $0x0000000300000002
DATA ·iota16+16(SB)/8, $0x0000000500000004
DATA ·iota16+24(SB)/8, $0x0000000700000006
DATA ·iota16+32(SB)/8, $0x0000000900000008
DATA ·iota16+40(SB)/8, $0x0000000b0000000a
DATA ·iota16+48(SB)/8, $0x0000000d0000000c
DATA ·iota16+56(SB)/8, $0x0000000f0000000e
GLOBL ·iota16(SB), RODATA|NOPTR, $64

DATA lane15<>+0(SB)/4, $15
GLOBL lane15<>(SB), RODATA|NOPTR, $4

// ARGS12 loads the twelve-row kernels' first arguments: the rows at R8,
// R9, R10, R11 (rows 0, 3, 6, 9) and R12 apart, the blocks CX, the
// batch's quants SI and scales DI.
#define ARGS12 \
	MOVQ w+0(FP), R8; \
	MOVQ ldw+8(FP), R12; \
	LEAQ (R8)(R12*2), R9; ADDQ R12, R9; \
	LEAQ (R9)(R12*2), R10; ADDQ R12, R10; \
	LEAQ (R10)(R12*2), R11; ADDQ R12, R11; \
	MOVQ nb+16(FP), CX; \
	MOVQ xq+24(FP), SI; \
	MOVQ xd+32(FP), DI

// func q8PrepVNNI(w *byte, ldw uintptr, rows int, nb int, corr *int32, dw *float32)
// For rows Q8_0 rows at w, ldw bytes apart, of nb blocks: corr[12b+r] =
// -128·Σ quants of block b of row r, dw[12b+r] its scale as float32.
TEXT ·q8PrepVNNI(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), R12
	MOVQ rows+16(FP), R9
	MOVQ corr+32(FP), R10
	MOVQ dw+40(FP), R11
	MOVL $0x80808080, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VPXOR Y14, Y14, Y14

row:
	MOVQ SI, DI
	MOVQ nb+24(FP), CX
	XORQ BX, BX

block:
	VPXOR 2(DI), Y15, Y0 // quants + 128, unsigned
	VPSADBW Y14, Y0, Y0  // four sums of eight
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDQ X1, X0, X0
	VMOVD X0, AX         // Σ(q+128) = Σq + 4096
	SHLL $7, AX
	MOVL $524288, DX     // -128·Σq = 128·4096 - 128·Σ(q+128)
	SUBL AX, DX
	MOVL DX, (R10)(BX*4)
	MOVWLZX (DI), AX
	VMOVD AX, X2
	VCVTPH2PS X2, X2
	VMOVSS X2, (R11)(BX*4)
	ADDQ $34, DI
	ADDQ $12, BX
	DECQ CX
	JNZ  block
	ADDQ R12, SI
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ R9
	JNZ  row
	VZEROUPPER
	RET

// INIT(r, Z): Z = the correction of row r's block (R13: corr).
#define INIT(r, Z) VPBROADCASTD 4*r(R13), Z

// DP(addr, Z): Z += Σ4 (activations Z24) · (the 4 bytes at addr, every lane).
#define DP(addr, Z) VPDPBUSD.BCST addr, Z24, Z

// FIN(r, Z, F): F += float(Z) · (dx Z25 · dw of row r) (DX: dw).
#define FIN(r, Z, F) \
	VCVTDQ2PS Z, Z; \
	VMULPS.BCST 4*r(DX), Z25, Z26; \
	VMULPS Z26, Z, Z; \
	VADDPS Z, F, F

// ZERO12 zeroes twelve Z registers.
#define ZERO12(a, b, c, d, e, f, g, h, i, j, k, l) \
	VPXORD a, a, a; VPXORD b, b, b; VPXORD c, c, c; \
	VPXORD d, d, d; VPXORD e, e, e; VPXORD f, f, f; \
	VPXORD g, g, g; VPXORD h, h, h; VPXORD i, i, i; \
	VPXORD j, j, j; VPXORD k, k, k; VPXORD l, l, l

// DPROW: one row (R8) against the block's eight 4-byte groups, into Z0.
#define DPROW \
	VMOVDQU32 0(SI), Z24; DP(2(R8), Z0); \
	VMOVDQU32 64(SI), Z24; DP(6(R8), Z0); \
	VMOVDQU32 128(SI), Z24; DP(10(R8), Z0); \
	VMOVDQU32 192(SI), Z24; DP(14(R8), Z0); \
	VMOVDQU32 256(SI), Z24; DP(18(R8), Z0); \
	VMOVDQU32 320(SI), Z24; DP(22(R8), Z0); \
	VMOVDQU32 384(SI), Z24; DP(26(R8), Z0); \
	VMOVDQU32 448(SI), Z24; DP(30(R8), Z0)

// DPJ(j): the twelve rows against 4-byte group j of the block (rows r at
// R8, R9, R10, R11 for r/3, plus (r%3)·R12).
#define DPJ(j) \
	VMOVDQU32 64*j(SI), Z24; \
	DP(2+4*j(R8), Z0); \
	DP(2+4*j(R8)(R12*1), Z1); \
	DP(2+4*j(R8)(R12*2), Z2); \
	DP(2+4*j(R9), Z3); \
	DP(2+4*j(R9)(R12*1), Z4); \
	DP(2+4*j(R9)(R12*2), Z5); \
	DP(2+4*j(R10), Z6); \
	DP(2+4*j(R10)(R12*1), Z7); \
	DP(2+4*j(R10)(R12*2), Z8); \
	DP(2+4*j(R11), Z9); \
	DP(2+4*j(R11)(R12*1), Z10); \
	DP(2+4*j(R11)(R12*2), Z11)

// SCATTER(Z, off): out[t*ldo + off] = lane t of Z for the inputs in K1
// (Z27: the lanes' byte offsets t*ldo; BX: out).
#define SCATTER(Z, off) \
	KMOVW AX, K1; \
	VSCATTERDPS Z, K1, off(BX)(Z27*1)

// NEXTBLOCK12 moves the twelve rows (R8-R11), the batch's quants (SI)
// and scales (DI) to the next block.
#define NEXTBLOCK12 \
	ADDQ $34, R8; ADDQ $34, R9; ADDQ $34, R10; ADDQ $34, R11; \
	ADDQ $512, SI; ADDQ $64, DI

// LANES(ldo, mask) sets Z27 to the lanes' byte offsets t·ldo and AX to
// the mask of the inputs the batch holds, for SCATTER.
#define LANES(ldo, mask) \
	VPBROADCASTD ldo, Z27; \
	VPMULLD ·iota16(SB), Z27, Z27; \
	MOVWLZX mask, AX

// func q8BatchVNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, corr *int32, dw *float32, out *float32, ldo uintptr, mask uint16)
TEXT ·q8BatchVNNI(SB), NOSPLIT, $0-74
	ARGS12
	MOVQ corr+40(FP), R13
	MOVQ dw+48(FP), DX
	ZERO12(Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)

block:
	INIT(0, Z0)
	INIT(1, Z1)
	INIT(2, Z2)
	INIT(3, Z3)
	INIT(4, Z4)
	INIT(5, Z5)
	INIT(6, Z6)
	INIT(7, Z7)
	INIT(8, Z8)
	INIT(9, Z9)
	INIT(10, Z10)
	INIT(11, Z11)
	DPJ(0)
	DPJ(1)
	DPJ(2)
	DPJ(3)
	DPJ(4)
	DPJ(5)
	DPJ(6)
	DPJ(7)
	VMOVUPS (DI), Z25
	FIN(0, Z0, Z12)
	FIN(1, Z1, Z13)
	FIN(2, Z2, Z14)
	FIN(3, Z3, Z15)
	FIN(4, Z4, Z16)
	FIN(5, Z5, Z17)
	FIN(6, Z6, Z18)
	FIN(7, Z7, Z19)
	FIN(8, Z8, Z20)
	FIN(9, Z9, Z21)
	FIN(10, Z10, Z22)
	FIN(11, Z11, Z23)
	NEXTBLOCK12
	ADDQ $48, R13
	ADDQ $48, DX
	DECQ CX
	JNZ  block

	MOVQ out+56(FP), BX
	LANES(ldo+64(FP), mask+72(FP))
	SCATTER(Z12, 0)
	SCATTER(Z13, 4)
	SCATTER(Z14, 8)
	SCATTER(Z15, 12)
	SCATTER(Z16, 16)
	SCATTER(Z17, 20)
	SCATTER(Z18, 24)
	SCATTER(Z19, 28)
	SCATTER(Z20, 32)
	SCATTER(Z21, 36)
	SCATTER(Z22, 40)
	SCATTER(Z23, 44)
	VZEROUPPER
	RET

// func q8Batch1VNNI(w *byte, nb int, xq *byte, xd *float32, corr *int32, dw *float32, out *float32, ldo uintptr, mask uint16)
// One row: corr and dw point at its entries, 12 apart block by block.
TEXT ·q8Batch1VNNI(SB), NOSPLIT, $0-66
	MOVQ w+0(FP), R8
	MOVQ nb+8(FP), CX
	MOVQ xq+16(FP), SI
	MOVQ xd+24(FP), DI
	MOVQ corr+32(FP), R13
	MOVQ dw+40(FP), DX
	VPXORD Z12, Z12, Z12

block:
	INIT(0, Z0)
	DPROW
	VMOVUPS (DI), Z25
	FIN(0, Z0, Z12)
	ADDQ $34, R8
	ADDQ $512, SI
	ADDQ $64, DI
	ADDQ $48, R13
	ADDQ $48, DX
	DECQ CX
	JNZ  block

	MOVQ out+48(FP), BX
	LANES(ldo+56(FP), mask+64(FP))
	SCATTER(Z12, 0)
	VZEROUPPER
	RET

// ------------------------------------------------ the correction lane
//
// A batch of at most 15 inputs holds 128 in every byte of lane 15, so
// that lane sums 128·Σw of each row block: the correction, with no pass
// over the rows before (q8PrepVNNI), which a lone batch (a decode step)
// cannot amortize. The scales are converted in the loop.

// LFIN(Z, F, scale): Z -= lane 15 of Z; F += float(Z) · (dx Z25 · the F16
// scale at scale, every lane).
#define LFIN(Z, F, scale) \
	VPERMD Z, Z29, Z26; \
	VPSUBD Z26, Z, Z; \
	VPBROADCASTW scale, Y27; \
	VCVTPH2PS Y27, Z27; \
	VMULPS Z27, Z25, Z27; \
	VCVTDQ2PS Z, Z; \
	VMULPS Z27, Z, Z; \
	VADDPS Z, F, F

// func q8LaneVNNI(w *byte, ldw uintptr, nb int, xq *byte, xd *float32, out *float32, ldo uintptr, rs uintptr, mask uint16)
// Twelve rows at w, w+ldw, …; row r's outputs at out + r·rs.
TEXT ·q8LaneVNNI(SB), NOSPLIT, $0-66
	ARGS12
	VPBROADCASTD lane15<>(SB), Z29
	ZERO12(Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)

lblock:
	ZERO12(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11)
	DPJ(0)
	DPJ(1)
	DPJ(2)
	DPJ(3)
	DPJ(4)
	DPJ(5)
	DPJ(6)
	DPJ(7)
	VMOVUPS (DI), Z25
	LFIN(Z0, Z12, (R8))
	LFIN(Z1, Z13, (R8)(R12*1))
	LFIN(Z2, Z14, (R8)(R12*2))
	LFIN(Z3, Z15, (R9))
	LFIN(Z4, Z16, (R9)(R12*1))
	LFIN(Z5, Z17, (R9)(R12*2))
	LFIN(Z6, Z18, (R10))
	LFIN(Z7, Z19, (R10)(R12*1))
	LFIN(Z8, Z20, (R10)(R12*2))
	LFIN(Z9, Z21, (R11))
	LFIN(Z10, Z22, (R11)(R12*1))
	LFIN(Z11, Z23, (R11)(R12*2))
	NEXTBLOCK12
	DECQ CX
	JNZ  lblock

	MOVQ out+40(FP), BX
	MOVQ rs+56(FP), R12
	LANES(ldo+48(FP), mask+64(FP))
	SCATTER(Z12, 0)
	ADDQ R12, BX
	SCATTER(Z13, 0)
	ADDQ R12, BX
	SCATTER(Z14, 0)
	ADDQ R12, BX
	SCATTER(Z15, 0)
	ADDQ R12, BX
	SCATTER(Z16, 0)
	ADDQ R12, BX
	SCATTER(Z17, 0)
	ADDQ R12, BX
	SCATTER(Z18, 0)
	ADDQ R12, BX
	SCATTER(Z19, 0)
	ADDQ R12, BX
	SCATTER(Z20, 0)
	ADDQ R12, BX
	SCATTER(Z21, 0)
	ADDQ R12, BX
	SCATTER(Z22, 0)
	ADDQ R12, BX
	SCATTER(Z23, 0)
	VZEROUPPER
	RET

// func q8Lane1VNNI(w *byte, nb int, xq *byte, xd *float32, out *float32, ldo uintptr, mask uint16)
TEXT ·q8Lane1VNNI(SB), NOSPLIT, $0-50
	MOVQ w+0(FP), R8
	MOVQ nb+8(FP), CX
	MOVQ xq+16(FP), SI
	MOVQ xd+24(FP), DI
	VPBROADCASTD lane15<>(SB), Z29
	VPXORD Z12, Z12, Z12

lblock:
	VPXORD Z0, Z0, Z0
	DPROW
	VMOVUPS (DI), Z25
	LFIN(Z0, Z12, (R8))
	ADDQ $34, R8
	ADDQ $512, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  lblock

	MOVQ out+32(FP), BX
	LANES(ldo+40(FP), mask+48(FP))
	SCATTER(Z12, 0)
	VZEROUPPER
	RET
