//go:build amd64 && !purego

#include "textflag.h"

// BCASTD(v, R): every dword of R = the constant v (clobbers AX).
#define BCASTD(v, R) \
	MOVL $v, AX; \
	VPBROADCASTD AX, R

// The batch kernels of batch_k.go (AVX-512 F/BW/VL and VNNI): prepared
// rows against a batch of 16 inputs, one input per vector lane.

DATA kiota<>+0(SB)/8, $0x0000000100000000
DATA kiota<>+8(SB)/8, $0x0000000300000002
DATA kiota<>+16(SB)/8, $0x0000000500000004
DATA kiota<>+24(SB)/8, $0x0000000700000006
DATA kiota<>+32(SB)/8, $0x0000000900000008
DATA kiota<>+40(SB)/8, $0x0000000b0000000a
DATA kiota<>+48(SB)/8, $0x0000000d0000000c
DATA kiota<>+56(SB)/8, $0x0000000f0000000e
GLOBL kiota<>(SB), RODATA|NOPTR, $64

// KLANES(ldo, mask): Z27 = the lanes' byte offsets t·ldo, AX = the mask
// of the inputs the batch holds.
#define KLANES(ldo, mask) \
	VPBROADCASTD ldo, Z27; \
	VPMULLD kiota<>(SB), Z27, Z27; \
	MOVWLZX mask, AX

// KSCATTER(Z, off): out[t·ldo + off] = lane t of Z for the inputs in AX
// (DI: out).
#define KSCATTER(Z, off) \
	KMOVW AX, K1; \
	VSCATTERDPS Z, K1, off(DI)(Z27*1)

#define ZERO8(a, b, c, d, e, f, g, h) \
	VPXORD a, a, a; VPXORD b, b, b; VPXORD c, c, c; VPXORD d, d, d; \
	VPXORD e, e, e; VPXORD f, f, f; VPXORD g, g, g; VPXORD h, h, h

// ------------------------------------------------------------- K-quants
//
// A prepared super-block (kRec = 608 bytes, batch_k.go): at 32p + 4l the
// dword of lane l of the sub-block at position p; at 256 + 4l lane l's
// correction; at 288 + 32i + 4l scale pair i; at 544 + 4l d (the same
// for every l); at 576 the mins, at 592 dmin. Lane l reads the rows at
// p + 4l, so that every offset is a constant.
//
// Twelve rows: rows 3i, 3i+1, 3i+2 at Ri, Ri+R12, Ri+2·R12 for R8-R11
// (the row addresses A below). The kernels take a super-block at a time
// (its records stay in L1 for its eight lanes): Z0-Z11 the rows' d·dx,
// Z12-Z23 their integer lanes of one lane l; each lane's float sums live
// in tmp (DX), 768 bytes a lane, after the rows' sumf (BX).

// KROWS(off): R8-R11 = the rows at p+off, R12 = ldp.
#define KROWS(off) \
	MOVQ p+0(FP), R8; \
	ADDQ off, R8; \
	MOVQ ldp+8(FP), R12; \
	LEAQ (R8)(R12*2), R9; ADDQ R12, R9; \
	LEAQ (R9)(R12*2), R10; ADDQ R12, R10; \
	LEAQ (R10)(R12*2), R11; ADDQ R12, R11

// KADVANCE(n): the rows n bytes on.
#define KADVANCE(n) \
	ADDQ n, R8; ADDQ n, R9; ADDQ n, R10; ADDQ n, R11

#define ZERO12(a, b, c, d, e, f, g, h, i, j, k, l) \
	ZERO8(a, b, c, d, e, f, g, h); \
	VPXORD i, i, i; VPXORD j, j, j; VPXORD k, k, k; VPXORD l, l, l

// KMIN(A, S, T): the mins of row A's super-block: S -= (dmin·dx) ·
// float(Σ bsums·mins) (Z24-Z27 the batch's bsum pairs, Z30 dx).
#define KMIN(A, S, T) \
	VPXORD T, T, T; \
	VPDPWSSD.BCST 576 A, Z24, T; \
	VPDPWSSD.BCST 580 A, Z25, T; \
	VPDPWSSD.BCST 584 A, Z26, T; \
	VPDPWSSD.BCST 588 A, Z27, T; \
	VCVTDQ2PS T, T; \
	VBROADCASTSS 592 A, Z28; \
	VMULPS Z30, Z28, Z28; \
	VMULPS T, Z28, T; \
	VSUBPS T, S, S

// KSTORE: tmp (BX) = Z0-Z11, the rows' sumf before the lanes.
#define KSTORE \
	VMOVUPS Z0, 0(BX); \
	VMOVUPS Z1, 64(BX); \
	VMOVUPS Z2, 128(BX); \
	VMOVUPS Z3, 192(BX); \
	VMOVUPS Z4, 256(BX); \
	VMOVUPS Z5, 320(BX); \
	VMOVUPS Z6, 384(BX); \
	VMOVUPS Z7, 448(BX); \
	VMOVUPS Z8, 512(BX); \
	VMOVUPS Z9, 576(BX); \
	VMOVUPS Z10, 640(BX); \
	VMOVUPS Z11, 704(BX)

// KSTART: the lanes' sums (tmp after sumf) zeroed, the rows and the
// batch at the first super-block.
#define KSTART \
	VPXORD Z24, Z24, Z24; \
	LEAQ 768(BX), DX; \
	MOVQ $96, CX; \
kzero: ; \
	VMOVUPS Z24, (DX); \
	ADDQ $64, DX; \
	DECQ CX; \
	JNZ  kzero; \
	KROWS($0); \
	MOVQ xq+24(FP), SI; \
	MOVQ xd+32(FP), DI; \
	MOVQ nb+16(FP), CX

// KDX: Z0-Z11 = the rows' d·dx of the super-block (in Dot's operand order).
#define KDX \
	VMOVUPS (DI), Z30; \
	VBROADCASTSS 544(R8), Z0; VMULPS Z30, Z0, Z0; \
	VBROADCASTSS 544(R8)(R12*1), Z1; VMULPS Z30, Z1, Z1; \
	VBROADCASTSS 544(R8)(R12*2), Z2; VMULPS Z30, Z2, Z2; \
	VBROADCASTSS 544(R9), Z3; VMULPS Z30, Z3, Z3; \
	VBROADCASTSS 544(R9)(R12*1), Z4; VMULPS Z30, Z4, Z4; \
	VBROADCASTSS 544(R9)(R12*2), Z5; VMULPS Z30, Z5, Z5; \
	VBROADCASTSS 544(R10), Z6; VMULPS Z30, Z6, Z6; \
	VBROADCASTSS 544(R10)(R12*1), Z7; VMULPS Z30, Z7, Z7; \
	VBROADCASTSS 544(R10)(R12*2), Z8; VMULPS Z30, Z8, Z8; \
	VBROADCASTSS 544(R11), Z9; VMULPS Z30, Z9, Z9; \
	VBROADCASTSS 544(R11)(R12*1), Z10; VMULPS Z30, Z10, Z10; \
	VBROADCASTSS 544(R11)(R12*2), Z11; VMULPS Z30, Z11, Z11

// KINIT: the rows' integer lanes = their corrections.
#define KINIT \
	VPBROADCASTD 256(R8), Z12; \
	VPBROADCASTD 256(R8)(R12*1), Z13; \
	VPBROADCASTD 256(R8)(R12*2), Z14; \
	VPBROADCASTD 256(R9), Z15; \
	VPBROADCASTD 256(R9)(R12*1), Z16; \
	VPBROADCASTD 256(R9)(R12*2), Z17; \
	VPBROADCASTD 256(R10), Z18; \
	VPBROADCASTD 256(R10)(R12*1), Z19; \
	VPBROADCASTD 256(R10)(R12*2), Z20; \
	VPBROADCASTD 256(R11), Z21; \
	VPBROADCASTD 256(R11)(R12*1), Z22; \
	VPBROADCASTD 256(R11)(R12*2), Z23

// KFIN(r, L, D): the lane's sum of row r += float(L)·D.
#define KFIN(r, L, D) \
	VCVTDQ2PS L, L; \
	VMULPS D, L, L; \
	VMOVUPS 64*r(DX), Z31; \
	VADDPS L, Z31, Z31; \
	VMOVUPS Z31, 64*r(DX)

// KLANEDONE: the lane's integer sums into its float sums; the next lane.
#define KLANEDONE \
	KFIN(0, Z12, Z0); \
	KFIN(1, Z13, Z1); \
	KFIN(2, Z14, Z2); \
	KFIN(3, Z15, Z3); \
	KFIN(4, Z16, Z4); \
	KFIN(5, Z17, Z5); \
	KFIN(6, Z18, Z6); \
	KFIN(7, Z19, Z7); \
	KFIN(8, Z20, Z8); \
	KFIN(9, Z21, Z9); \
	KFIN(10, Z22, Z10); \
	KFIN(11, Z23, Z11); \
	KADVANCE($4); \
	ADDQ $512, SI; \
	ADDQ $768, DX

// KSUM(r): row r's sumf plus its eight lane sums in lane order, scattered
// to its outputs (DI: out, Z27 and AX from KLANES).
#define KSUM(r) \
	VMOVUPS 64*r(BX), Z0; \
	VADDPS 768+64*r(BX), Z0, Z0; \
	VADDPS 1536+64*r(BX), Z0, Z0; \
	VADDPS 2304+64*r(BX), Z0, Z0; \
	VADDPS 3072+64*r(BX), Z0, Z0; \
	VADDPS 3840+64*r(BX), Z0, Z0; \
	VADDPS 4608+64*r(BX), Z0, Z0; \
	VADDPS 5376+64*r(BX), Z0, Z0; \
	VADDPS 6144+64*r(BX), Z0, Z0; \
	KSCATTER(Z0, 4*r)

#define KOUT \
	KSUM(0); KSUM(1); KSUM(2); KSUM(3); KSUM(4); KSUM(5); \
	KSUM(6); KSUM(7); KSUM(8); KSUM(9); KSUM(10); KSUM(11)

// K4ROW(pos, scp, A, L, T): L += the scale pair scp · the sums of row A's
// sub-blocks at positions pos and pos+1 with the batch's (Z24, Z25): the
// first sum (< 2^15) in the high word of T, the second in the low.
#define K4ROW(pos, scp, A, L, T) \
	VPXORD T, T, T; \
	VPDPBUSD.BCST 32*pos A, Z24, T; \
	VPSLLD $16, T, T; \
	VPDPBUSD.BCST 32*pos+32 A, Z25, T; \
	VPDPWSSD.BCST 288+32*scp A, T, L

// K4JP(i, a, b): the rows' pair i of positions (2i, 2i+1), holding
// sub-blocks a and b.
#define K4JP(i, a, b) \
	VMOVDQU32 64*a(SI), Z24; \
	VMOVDQU32 64*b(SI), Z25; \
	K4ROW(2*i, i, (R8), Z12, Z26); \
	K4ROW(2*i, i, (R8)(R12*1), Z13, Z27); \
	K4ROW(2*i, i, (R8)(R12*2), Z14, Z28); \
	K4ROW(2*i, i, (R9), Z15, Z29); \
	K4ROW(2*i, i, (R9)(R12*1), Z16, Z26); \
	K4ROW(2*i, i, (R9)(R12*2), Z17, Z27); \
	K4ROW(2*i, i, (R10), Z18, Z28); \
	K4ROW(2*i, i, (R10)(R12*1), Z19, Z29); \
	K4ROW(2*i, i, (R10)(R12*2), Z20, Z26); \
	K4ROW(2*i, i, (R11), Z21, Z27); \
	K4ROW(2*i, i, (R11)(R12*1), Z22, Z28); \
	K4ROW(2*i, i, (R11)(R12*2), Z23, Z29)

// Q6ROW(j, A, L, W): L += the scales of groups 2j, 2j+1 · the word sums
// of row A's dword of sub-block j with the batch's (Z24).
#define Q6ROW(j, A, L, W) \
	VPBROADCASTD 32*j A, W; \
	VPMADDUBSW W, Z24, W; \
	VPDPWSSD.BCST 288+32*j A, W, L

#define Q6J(j) \
	VMOVDQU32 64*j(SI), Z24; \
	Q6ROW(j, (R8), Z12, Z25); \
	Q6ROW(j, (R8)(R12*1), Z13, Z26); \
	Q6ROW(j, (R8)(R12*2), Z14, Z27); \
	Q6ROW(j, (R9), Z15, Z28); \
	Q6ROW(j, (R9)(R12*1), Z16, Z29); \
	Q6ROW(j, (R9)(R12*2), Z17, Z25); \
	Q6ROW(j, (R10), Z18, Z26); \
	Q6ROW(j, (R10)(R12*1), Z19, Z27); \
	Q6ROW(j, (R10)(R12*2), Z20, Z28); \
	Q6ROW(j, (R11), Z21, Z29); \
	Q6ROW(j, (R11)(R12*1), Z22, Z25); \
	Q6ROW(j, (R11)(R12*2), Z23, Z26)

// func kBatchVNNI(p *byte, ldp uintptr, nb int, xq *byte, xd *float32, xs *int32, out *float32, ldo uintptr, mask uint16, tmp *float32)
// Q4_K and Q5_K rows, or Q6_K rows where xs (the batch's bsum pairs, for
// the mins) is nil.
TEXT ·kBatchVNNI(SB), NOSPLIT, $0-80
	MOVQ tmp+72(FP), BX
	ZERO12(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11)
	MOVQ xs+40(FP), DX
	TESTQ DX, DX
	JZ   kstore
	KROWS($0)
	MOVQ xd+32(FP), DI
	MOVQ nb+16(FP), CX

kmins:
	VMOVDQU32 0(DX), Z24
	VMOVDQU32 64(DX), Z25
	VMOVDQU32 128(DX), Z26
	VMOVDQU32 192(DX), Z27
	VMOVUPS (DI), Z30
	KMIN((R8), Z0, Z12)
	KMIN((R8)(R12*1), Z1, Z13)
	KMIN((R8)(R12*2), Z2, Z14)
	KMIN((R9), Z3, Z15)
	KMIN((R9)(R12*1), Z4, Z16)
	KMIN((R9)(R12*2), Z5, Z17)
	KMIN((R10), Z6, Z18)
	KMIN((R10)(R12*1), Z7, Z19)
	KMIN((R10)(R12*2), Z8, Z20)
	KMIN((R11), Z9, Z21)
	KMIN((R11)(R12*1), Z10, Z22)
	KMIN((R11)(R12*2), Z11, Z23)
	KADVANCE($608)
	ADDQ $256, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  kmins

kstore:
	KSTORE
	KSTART

kblock:
	KDX
	LEAQ 768(BX), DX
	MOVQ $8, R13

klane:
	KINIT
	CMPQ xs+40(FP), $0
	JEQ  kq6
	K4JP(0, 0, 2)
	K4JP(1, 1, 3)
	K4JP(2, 4, 6)
	K4JP(3, 5, 7)
	JMP  kdone

kq6:
	Q6J(0)
	Q6J(1)
	Q6J(2)
	Q6J(3)
	Q6J(4)
	Q6J(5)
	Q6J(6)
	Q6J(7)

kdone:
	KLANEDONE
	DECQ R13
	JNZ  klane
	KADVANCE($576)
	ADDQ $64, DI
	DECQ CX
	JNZ  kblock
	MOVQ out+48(FP), DI
	KLANES(ldo+56(FP), mask+64(FP))
	KOUT
	VZEROUPPER
	RET

// ------------------------------------------------- K-quant preparation
//
// A super-block's 256 quants, decoded to bytes in registers of 64 (two
// sub-blocks each), are turned by KTRANS into the dwords the kernels read
// and stored whole: Q4_K and Q5_K keep the order their nibbles come in
// (sub-blocks 0, 2, 1, 3, 4, 6, 5, 7), Q6_K the natural one. Constants:
// Z31 kperm, Z30 kshuf, Z29 bytes of 1, Z28 bytes of 0x0F, Z27 zero.

// kperm (VPERMD) and kshuf (VPSHUFB) turn the 32 bytes of a sub-block
// (element i at byte i) into eight dwords, dword l holding elements l,
// l+8, l+16, l+24.
DATA kperm<>+0(SB)/8, $0x0000000200000000
DATA kperm<>+8(SB)/8, $0x0000000600000004
DATA kperm<>+16(SB)/8, $0x0000000300000001
DATA kperm<>+24(SB)/8, $0x0000000700000005
DATA kperm<>+32(SB)/8, $0x0000000a00000008
DATA kperm<>+40(SB)/8, $0x0000000e0000000c
DATA kperm<>+48(SB)/8, $0x0000000b00000009
DATA kperm<>+56(SB)/8, $0x0000000f0000000d
GLOBL kperm<>(SB), RODATA|NOPTR, $64
DATA kshuf<>+0(SB)/8, $0x0d0905010c080400
DATA kshuf<>+8(SB)/8, $0x0f0b07030e0a0602
DATA kshuf<>+16(SB)/8, $0x0d0905010c080400
DATA kshuf<>+24(SB)/8, $0x0f0b07030e0a0602
DATA kshuf<>+32(SB)/8, $0x0d0905010c080400
DATA kshuf<>+40(SB)/8, $0x0f0b07030e0a0602
DATA kshuf<>+48(SB)/8, $0x0d0905010c080400
DATA kshuf<>+56(SB)/8, $0x0f0b07030e0a0602
GLOBL kshuf<>(SB), RODATA|NOPTR, $64

// k4scp: VPERMW indices of the Q4_K/Q5_K scale pairs of the kernel:
// (scale b, scale a) of the sub-blocks (a, b) = (0, 2), (1, 3) (first 64
// bytes), (4, 6), (5, 7), each eight times.
DATA k4scp<>+0(SB)/8, $0x0000000200000002
DATA k4scp<>+8(SB)/8, $0x0000000200000002
DATA k4scp<>+16(SB)/8, $0x0000000200000002
DATA k4scp<>+24(SB)/8, $0x0000000200000002
DATA k4scp<>+32(SB)/8, $0x0001000300010003
DATA k4scp<>+40(SB)/8, $0x0001000300010003
DATA k4scp<>+48(SB)/8, $0x0001000300010003
DATA k4scp<>+56(SB)/8, $0x0001000300010003
DATA k4scp<>+64(SB)/8, $0x0004000600040006
DATA k4scp<>+72(SB)/8, $0x0004000600040006
DATA k4scp<>+80(SB)/8, $0x0004000600040006
DATA k4scp<>+88(SB)/8, $0x0004000600040006
DATA k4scp<>+96(SB)/8, $0x0005000700050007
DATA k4scp<>+104(SB)/8, $0x0005000700050007
DATA k4scp<>+112(SB)/8, $0x0005000700050007
DATA k4scp<>+120(SB)/8, $0x0005000700050007
GLOBL k4scp<>(SB), RODATA|NOPTR, $128

// k4corr: VPERMW indices of the scales of the prepared registers
// [0|2], [1|3], [4|6], [5|7] (sub-blocks), each scale in every word of its
// half.
DATA k4corr<>+0(SB)/8, $0x0000000000000000
DATA k4corr<>+8(SB)/8, $0x0000000000000000
DATA k4corr<>+16(SB)/8, $0x0000000000000000
DATA k4corr<>+24(SB)/8, $0x0000000000000000
DATA k4corr<>+32(SB)/8, $0x0002000200020002
DATA k4corr<>+40(SB)/8, $0x0002000200020002
DATA k4corr<>+48(SB)/8, $0x0002000200020002
DATA k4corr<>+56(SB)/8, $0x0002000200020002
DATA k4corr<>+64(SB)/8, $0x0001000100010001
DATA k4corr<>+72(SB)/8, $0x0001000100010001
DATA k4corr<>+80(SB)/8, $0x0001000100010001
DATA k4corr<>+88(SB)/8, $0x0001000100010001
DATA k4corr<>+96(SB)/8, $0x0003000300030003
DATA k4corr<>+104(SB)/8, $0x0003000300030003
DATA k4corr<>+112(SB)/8, $0x0003000300030003
DATA k4corr<>+120(SB)/8, $0x0003000300030003
DATA k4corr<>+128(SB)/8, $0x0004000400040004
DATA k4corr<>+136(SB)/8, $0x0004000400040004
DATA k4corr<>+144(SB)/8, $0x0004000400040004
DATA k4corr<>+152(SB)/8, $0x0004000400040004
DATA k4corr<>+160(SB)/8, $0x0006000600060006
DATA k4corr<>+168(SB)/8, $0x0006000600060006
DATA k4corr<>+176(SB)/8, $0x0006000600060006
DATA k4corr<>+184(SB)/8, $0x0006000600060006
DATA k4corr<>+192(SB)/8, $0x0005000500050005
DATA k4corr<>+200(SB)/8, $0x0005000500050005
DATA k4corr<>+208(SB)/8, $0x0005000500050005
DATA k4corr<>+216(SB)/8, $0x0005000500050005
DATA k4corr<>+224(SB)/8, $0x0007000700070007
DATA k4corr<>+232(SB)/8, $0x0007000700070007
DATA k4corr<>+240(SB)/8, $0x0007000700070007
DATA k4corr<>+248(SB)/8, $0x0007000700070007
GLOBL k4corr<>(SB), RODATA|NOPTR, $256

// k5bits: the fifth bits of Q5_K sub-blocks 0 and 2 in the bytes of qh.
DATA k5bits<>+0(SB)/8, $0x0101010101010101
DATA k5bits<>+8(SB)/8, $0x0101010101010101
DATA k5bits<>+16(SB)/8, $0x0101010101010101
DATA k5bits<>+24(SB)/8, $0x0101010101010101
DATA k5bits<>+32(SB)/8, $0x0404040404040404
DATA k5bits<>+40(SB)/8, $0x0404040404040404
DATA k5bits<>+48(SB)/8, $0x0404040404040404
DATA k5bits<>+56(SB)/8, $0x0404040404040404
GLOBL k5bits<>(SB), RODATA|NOPTR, $64

// q6shift: VPSRLVW counts of Q6_K's high bits of the sub-blocks [4c|4c+1]
// and [4c+2|4c+3] of a half c.
DATA q6shift<>+0(SB)/8, $0x0000000000000000
DATA q6shift<>+8(SB)/8, $0x0000000000000000
DATA q6shift<>+16(SB)/8, $0x0000000000000000
DATA q6shift<>+24(SB)/8, $0x0000000000000000
DATA q6shift<>+32(SB)/8, $0x0002000200020002
DATA q6shift<>+40(SB)/8, $0x0002000200020002
DATA q6shift<>+48(SB)/8, $0x0002000200020002
DATA q6shift<>+56(SB)/8, $0x0002000200020002
DATA q6shift<>+64(SB)/8, $0x0004000400040004
DATA q6shift<>+72(SB)/8, $0x0004000400040004
DATA q6shift<>+80(SB)/8, $0x0004000400040004
DATA q6shift<>+88(SB)/8, $0x0004000400040004
DATA q6shift<>+96(SB)/8, $0x0006000600060006
DATA q6shift<>+104(SB)/8, $0x0006000600060006
DATA q6shift<>+112(SB)/8, $0x0006000600060006
DATA q6shift<>+120(SB)/8, $0x0006000600060006
GLOBL q6shift<>(SB), RODATA|NOPTR, $128

// q6scp: VPERMD indices of the Q6_K scale pairs of sub-blocks [2m|2m+1]
// (m < 4), each eight times.
DATA q6scp<>+0(SB)/8, $0x0000000000000000
DATA q6scp<>+8(SB)/8, $0x0000000000000000
DATA q6scp<>+16(SB)/8, $0x0000000000000000
DATA q6scp<>+24(SB)/8, $0x0000000000000000
DATA q6scp<>+32(SB)/8, $0x0000000100000001
DATA q6scp<>+40(SB)/8, $0x0000000100000001
DATA q6scp<>+48(SB)/8, $0x0000000100000001
DATA q6scp<>+56(SB)/8, $0x0000000100000001
DATA q6scp<>+64(SB)/8, $0x0000000200000002
DATA q6scp<>+72(SB)/8, $0x0000000200000002
DATA q6scp<>+80(SB)/8, $0x0000000200000002
DATA q6scp<>+88(SB)/8, $0x0000000200000002
DATA q6scp<>+96(SB)/8, $0x0000000300000003
DATA q6scp<>+104(SB)/8, $0x0000000300000003
DATA q6scp<>+112(SB)/8, $0x0000000300000003
DATA q6scp<>+120(SB)/8, $0x0000000300000003
DATA q6scp<>+128(SB)/8, $0x0000000400000004
DATA q6scp<>+136(SB)/8, $0x0000000400000004
DATA q6scp<>+144(SB)/8, $0x0000000400000004
DATA q6scp<>+152(SB)/8, $0x0000000400000004
DATA q6scp<>+160(SB)/8, $0x0000000500000005
DATA q6scp<>+168(SB)/8, $0x0000000500000005
DATA q6scp<>+176(SB)/8, $0x0000000500000005
DATA q6scp<>+184(SB)/8, $0x0000000500000005
DATA q6scp<>+192(SB)/8, $0x0000000600000006
DATA q6scp<>+200(SB)/8, $0x0000000600000006
DATA q6scp<>+208(SB)/8, $0x0000000600000006
DATA q6scp<>+216(SB)/8, $0x0000000600000006
DATA q6scp<>+224(SB)/8, $0x0000000700000007
DATA q6scp<>+232(SB)/8, $0x0000000700000007
DATA q6scp<>+240(SB)/8, $0x0000000700000007
DATA q6scp<>+248(SB)/8, $0x0000000700000007
GLOBL q6scp<>(SB), RODATA|NOPTR, $256

#define KPREPCONST \
	MOVQ p+0(FP), DI; \
	MOVQ w+8(FP), SI; \
	MOVQ nb+16(FP), CX; \
	VMOVDQU64 kperm<>(SB), Z31; \
	VMOVDQU64 kshuf<>(SB), Z30; \
	BCASTD(0x01010101, Z29); \
	BCASTD(0x0f0f0f0f, Z28); \
	VPXORD Z27, Z27, Z27

// KTRANS(Z): each sub-block of Z to its eight lane dwords.
#define KTRANS(Z) \
	VPERMD Z, Z31, Z; \
	VPSHUFB Z30, Z, Z

// KNIBBLES(Z, H): Z = the low nibbles of Z, H the high ones.
#define KNIBBLES(Z, H) \
	VPSRLW $4, Z, H; \
	VPANDD Z28, H, H; \
	VPANDD Z28, Z, Z

// KCORR(W, S): Z9 += the scales S (word pairs) · the word sums of the
// dwords of W.
#define KCORR(W, S) \
	VPMADDUBSW W, Z29, Z10; \
	VPDPWSSD S, Z10, Z9

// KSTOREW: the four registers of quants Z0, Z2, Z1, Z3 stored, their
// corrections summed with the scales Z5-Z8 (each register's) and stored:
// -128·Σ, the two halves (sub-blocks) added.
#define KSTOREW \
	VMOVDQU64 Z0, 0(DI); \
	VMOVDQU64 Z2, 64(DI); \
	VMOVDQU64 Z1, 128(DI); \
	VMOVDQU64 Z3, 192(DI); \
	VPXORD Z9, Z9, Z9; \
	KCORR(Z0, Z5); \
	KCORR(Z2, Z6); \
	KCORR(Z1, Z7); \
	KCORR(Z3, Z8); \
	VEXTRACTI64X4 $1, Z9, Y10; \
	VPADDD Y10, Y9, Y9; \
	VPSLLD $7, Y9, Y9; \
	VPSUBD Y9, Y27, Y9; \
	VMOVDQU Y9, 256(DI)

// KD(off): the F16 at off(SI) as float32, in every dword of 544(DI).
#define KD(off) \
	MOVWLZX off(SI), AX; \
	VMOVD AX, X10; \
	VCVTPH2PS X10, X10; \
	VPBROADCASTD X10, Y10; \
	VMOVDQU Y10, 544(DI)

// K45SCALES: Q4_K/Q5_K's scales (scaleMinK4, as ggml's kmask code) as
// words in X4, its mins stored as words, its d and dmin, the kernel's
// scale pairs; Z5-Z8 the scales of the prepared registers. Clobbers AX,
// BX, DX, R8-R11, Z10.
#define K45SCALES \
	MOVL 4(SI), AX; \
	MOVL 8(SI), BX; \
	MOVL 12(SI), DX; \
	MOVL DX, R8; SHRL $4, R8; ANDL $0x0f0f0f0f, R8; \
	MOVL BX, R9; SHRL $6, R9; ANDL $0x03030303, R9; SHLL $4, R9; ORL R9, R8; \
	MOVL BX, R10; ANDL $0x3f3f3f3f, R10; \
	MOVL DX, R9; ANDL $0x0f0f0f0f, R9; \
	MOVL AX, R11; SHRL $6, R11; ANDL $0x03030303, R11; SHLL $4, R11; ORL R11, R9; \
	ANDL $0x3f3f3f3f, AX; \
	VMOVD AX, X4; VPINSRD $1, R9, X4, X4; VPMOVZXBW X4, X4; \
	VMOVD R10, X10; VPINSRD $1, R8, X10, X10; VPMOVZXBW X10, X10; \
	VMOVDQU X10, 576(DI); \
	VMOVDQU64 X27, 592(DI); \
	MOVWLZX 2(SI), AX; VMOVD AX, X10; VCVTPH2PS X10, X10; VMOVSS X10, 592(DI); \
	KD(0); \
	VPERMW Z4, Z26, Z10; VMOVDQU64 Z10, 288(DI); \
	VPERMW Z4, Z25, Z10; VMOVDQU64 Z10, 352(DI); \
	VMOVDQU64 Z27, 416(DI); \
	VMOVDQU64 Z27, 480(DI); \
	VPERMW Z4, Z24, Z5; \
	VPERMW Z4, Z23, Z6; \
	VPERMW Z4, Z22, Z7; \
	VPERMW Z4, Z21, Z8

#define K45CONST \
	KPREPCONST; \
	VMOVDQU64 k4scp<>(SB), Z26; \
	VMOVDQU64 k4scp<>+64(SB), Z25; \
	VMOVDQU64 k4corr<>(SB), Z24; \
	VMOVDQU64 k4corr<>+64(SB), Z23; \
	VMOVDQU64 k4corr<>+128(SB), Z22; \
	VMOVDQU64 k4corr<>+192(SB), Z21

// func q4kPrepVNNI(p *byte, w *byte, nb int)
// Prepares a Q4_K row of nb super-blocks (144 bytes: d, dmin, scales,
// qs).
TEXT ·q4kPrepVNNI(SB), NOSPLIT, $0-24
	K45CONST

q4kp:
	K45SCALES
	VMOVDQU64 16(SI), Z0
	VMOVDQU64 80(SI), Z1
	KNIBBLES(Z0, Z2)
	KNIBBLES(Z1, Z3)
	KTRANS(Z0)
	KTRANS(Z2)
	KTRANS(Z1)
	KTRANS(Z3)
	KSTOREW
	ADDQ $144, SI
	ADDQ $608, DI
	DECQ CX
	JNZ  q4kp
	VZEROUPPER
	RET

// Q5HIGH(Z, S): the fifth bits selected by the bytes S in qh (Z11) add 16
// to the bytes of Z (Z19: bytes of 0x10).
#define Q5HIGH(Z, S) \
	VPTESTMB S, Z11, K1; \
	VPADDB Z19, Z, K1, Z

// func q5kPrepVNNI(p *byte, w *byte, nb int)
// Prepares a Q5_K row of nb super-blocks (176 bytes: d, dmin, scales,
// qh, qs).
TEXT ·q5kPrepVNNI(SB), NOSPLIT, $0-24
	K45CONST
	VMOVDQU64 k5bits<>(SB), Z20
	BCASTD(0x10101010, Z19)
	VPSLLW $1, Z20, Z18
	VPSLLW $4, Z20, Z17
	VPSLLW $5, Z20, Z16

q5kp:
	K45SCALES
	VMOVDQU64 48(SI), Z0
	VMOVDQU64 112(SI), Z1
	KNIBBLES(Z0, Z2)
	KNIBBLES(Z1, Z3)
	VBROADCASTI64X4 16(SI), Z11
	Q5HIGH(Z0, Z20)
	Q5HIGH(Z2, Z18)
	Q5HIGH(Z1, Z17)
	Q5HIGH(Z3, Z16)
	KTRANS(Z0)
	KTRANS(Z2)
	KTRANS(Z1)
	KTRANS(Z3)
	KSTOREW
	ADDQ $176, SI
	ADDQ $608, DI
	DECQ CX
	JNZ  q5kp
	VZEROUPPER
	RET

// Q6HIGH(Z, C): Z |= the two high bits of each byte, from qh (Z11)
// shifted by the word counts C (Z18: bytes of 3).
#define Q6HIGH(Z, C) \
	VPSRLVW C, Z11, Z10; \
	VPANDD Z18, Z10, Z10; \
	VPSLLW $4, Z10, Z10; \
	VPORD Z10, Z, Z

// Q6SCP(m, off, Z): Z = the scale pairs of sub-blocks 2m, 2m+1 (each
// eight times; Z4: the sixteen scales as words), stored at off(DI).
#define Q6SCP(m, off, Z) \
	VMOVDQU64 q6scp<>+64*m(SB), Z10; \
	VPERMD Z4, Z10, Z; \
	VMOVDQU64 Z, off(DI)

// func q6kPrepVNNI(p *byte, w *byte, nb int)
// Prepares a Q6_K row of nb super-blocks (210 bytes: ql, qh, scales, d).
TEXT ·q6kPrepVNNI(SB), NOSPLIT, $0-24
	KPREPCONST
	VMOVDQU64 q6shift<>(SB), Z26
	VMOVDQU64 q6shift<>+64(SB), Z25
	BCASTD(0x03030303, Z18)
	BCASTD(0x20202020, Z17)

q6kp:
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	KNIBBLES(Z0, Z2)
	KNIBBLES(Z1, Z3)
	VBROADCASTI64X4 128(SI), Z11
	Q6HIGH(Z0, Z26)
	Q6HIGH(Z2, Z25)
	VBROADCASTI64X4 160(SI), Z11
	Q6HIGH(Z1, Z26)
	Q6HIGH(Z3, Z25)
	VPSUBB Z17, Z0, Z0
	VPSUBB Z17, Z2, Z2
	VPSUBB Z17, Z1, Z1
	VPSUBB Z17, Z3, Z3
	KTRANS(Z0)
	KTRANS(Z2)
	KTRANS(Z1)
	KTRANS(Z3)
	VPMOVSXBW 192(SI), Y4
	Q6SCP(0, 288, Z5)
	Q6SCP(1, 352, Z6)
	Q6SCP(2, 416, Z7)
	Q6SCP(3, 480, Z8)
	KSTOREW
	KD(208)
	VMOVDQU64 Y27, 576(DI)
	ADDQ $210, SI
	ADDQ $608, DI
	DECQ CX
	JNZ  q6kp
	VZEROUPPER
	RET

// ------------------------------------------------------------- Q5_0
//
// Three rows (R8, R12 apart) against a Q8_0 batch (SI quants, DI scales):
// Z0-Z7, Z8-Z15, Z16-Z23 the rows' eight float lanes of one accumulator
// (blocks ≡ k mod 4), Z24-Z26 the rows' d = dx·dw of the block (in Dot's
// operand order, as every float operation here).

// Q50J(j, A0, A1, A2): the rows' group j (elements 4j..4j+3) of the
// block: A += d · float(correction + Σ4 w·(q+128)).
#define Q50J(j, A0, A1, A2) \
	VMOVDQU32 64*j(SI), Z27; \
	VPBROADCASTD 32+4*j(R8), Z28; \
	VPDPBUSD.BCST 4*j(R8), Z27, Z28; \
	VPBROADCASTD 32+4*j(R8)(R12*1), Z29; \
	VPDPBUSD.BCST 4*j(R8)(R12*1), Z27, Z29; \
	VPBROADCASTD 32+4*j(R8)(R12*2), Z30; \
	VPDPBUSD.BCST 4*j(R8)(R12*2), Z27, Z30; \
	VCVTDQ2PS Z28, Z28; \
	VFMADD231PS Z24, Z28, A0; \
	VCVTDQ2PS Z29, Z29; \
	VFMADD231PS Z25, Z29, A1; \
	VCVTDQ2PS Z30, Z30; \
	VFMADD231PS Z26, Z30, A2

// Q50ZERO: the 24 accumulators of a class zeroed.
#define Q50ZERO \
	ZERO8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7); \
	ZERO8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15); \
	ZERO8(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)

// Q50BLOCK: one block of the three rows into the accumulators; the next
// block of the class (R8 the rows, SI the batch's quants, DI its scales).
#define Q50BLOCK \
	VMOVUPS (DI), Z31; \
	VBROADCASTSS 64(R8), Z24; \
	VMULPS Z31, Z24, Z24; \
	VBROADCASTSS 64(R8)(R12*1), Z25; \
	VMULPS Z31, Z25, Z25; \
	VBROADCASTSS 64(R8)(R12*2), Z26; \
	VMULPS Z31, Z26, Z26; \
	Q50J(0, Z0, Z8, Z16); \
	Q50J(1, Z1, Z9, Z17); \
	Q50J(2, Z2, Z10, Z18); \
	Q50J(3, Z3, Z11, Z19); \
	Q50J(4, Z4, Z12, Z20); \
	Q50J(5, Z5, Z13, Z21); \
	Q50J(6, Z6, Z14, Z22); \
	Q50J(7, Z7, Z15, Z23); \
	ADDQ $288, R8; \
	ADDQ $2048, SI; \
	ADDQ $256, DI

// Q50CLASS(k, loop, done): the accumulators = the sums of the blocks
// k, k+4, … (R9 p, R10 xq, R11 xd, R13 nb).
#define Q50CLASS(k, loop, done) \
	Q50ZERO; \
	LEAQ 3-k(R13), CX; \
	SHRQ $2, CX; \
	JZ   done; \
	LEAQ 72*k(R9), R8; \
	LEAQ 512*k(R10), SI; \
	LEAQ 64*k(R11), DI; \
loop: ; \
	Q50BLOCK; \
	DECQ CX; \
	JNZ  loop; \
done:

// Q50FOLD(a, b, c, d, e, f, g, h, off): the eight lanes a-h of a row
// folded into a as foldLanes, scattered to the row's outputs at off.
#define Q50FOLD(a, b, c, d, e, f, g, h, off) \
	VADDPS e, a, a; VADDPS g, c, c; VADDPS c, a, a; \
	VADDPS f, b, b; VADDPS h, d, d; VADDPS d, b, b; \
	VADDPS b, a, a; \
	KSCATTER(a, off)

// func q50BatchVNNI(p *byte, ldp uintptr, nb int, xq *byte, xd *float32, out *float32, ldo uintptr, mask uint16, tmp *float32)
// The classes in turn: acc0 stored, acc0+acc1 stored, acc2 stored, then
// (acc0+acc1) + (acc2+acc3) in the registers, in foldLanes' order.
TEXT ·q50BatchVNNI(SB), NOSPLIT, $0-72
	MOVQ p+0(FP), R9
	MOVQ ldp+8(FP), R12
	MOVQ nb+16(FP), R13
	MOVQ xq+24(FP), R10
	MOVQ xd+32(FP), R11
	MOVQ tmp+64(FP), BX
	Q50CLASS(0, c0, c0done)
	VMOVUPS Z0, 0(BX)
	VMOVUPS Z1, 64(BX)
	VMOVUPS Z2, 128(BX)
	VMOVUPS Z3, 192(BX)
	VMOVUPS Z4, 256(BX)
	VMOVUPS Z5, 320(BX)
	VMOVUPS Z6, 384(BX)
	VMOVUPS Z7, 448(BX)
	VMOVUPS Z8, 512(BX)
	VMOVUPS Z9, 576(BX)
	VMOVUPS Z10, 640(BX)
	VMOVUPS Z11, 704(BX)
	VMOVUPS Z12, 768(BX)
	VMOVUPS Z13, 832(BX)
	VMOVUPS Z14, 896(BX)
	VMOVUPS Z15, 960(BX)
	VMOVUPS Z16, 1024(BX)
	VMOVUPS Z17, 1088(BX)
	VMOVUPS Z18, 1152(BX)
	VMOVUPS Z19, 1216(BX)
	VMOVUPS Z20, 1280(BX)
	VMOVUPS Z21, 1344(BX)
	VMOVUPS Z22, 1408(BX)
	VMOVUPS Z23, 1472(BX)
	Q50CLASS(1, c1, c1done)
	VMOVUPS 0(BX), Z24; VADDPS Z0, Z24, Z24; VMOVUPS Z24, 0(BX)
	VMOVUPS 64(BX), Z24; VADDPS Z1, Z24, Z24; VMOVUPS Z24, 64(BX)
	VMOVUPS 128(BX), Z24; VADDPS Z2, Z24, Z24; VMOVUPS Z24, 128(BX)
	VMOVUPS 192(BX), Z24; VADDPS Z3, Z24, Z24; VMOVUPS Z24, 192(BX)
	VMOVUPS 256(BX), Z24; VADDPS Z4, Z24, Z24; VMOVUPS Z24, 256(BX)
	VMOVUPS 320(BX), Z24; VADDPS Z5, Z24, Z24; VMOVUPS Z24, 320(BX)
	VMOVUPS 384(BX), Z24; VADDPS Z6, Z24, Z24; VMOVUPS Z24, 384(BX)
	VMOVUPS 448(BX), Z24; VADDPS Z7, Z24, Z24; VMOVUPS Z24, 448(BX)
	VMOVUPS 512(BX), Z24; VADDPS Z8, Z24, Z24; VMOVUPS Z24, 512(BX)
	VMOVUPS 576(BX), Z24; VADDPS Z9, Z24, Z24; VMOVUPS Z24, 576(BX)
	VMOVUPS 640(BX), Z24; VADDPS Z10, Z24, Z24; VMOVUPS Z24, 640(BX)
	VMOVUPS 704(BX), Z24; VADDPS Z11, Z24, Z24; VMOVUPS Z24, 704(BX)
	VMOVUPS 768(BX), Z24; VADDPS Z12, Z24, Z24; VMOVUPS Z24, 768(BX)
	VMOVUPS 832(BX), Z24; VADDPS Z13, Z24, Z24; VMOVUPS Z24, 832(BX)
	VMOVUPS 896(BX), Z24; VADDPS Z14, Z24, Z24; VMOVUPS Z24, 896(BX)
	VMOVUPS 960(BX), Z24; VADDPS Z15, Z24, Z24; VMOVUPS Z24, 960(BX)
	VMOVUPS 1024(BX), Z24; VADDPS Z16, Z24, Z24; VMOVUPS Z24, 1024(BX)
	VMOVUPS 1088(BX), Z24; VADDPS Z17, Z24, Z24; VMOVUPS Z24, 1088(BX)
	VMOVUPS 1152(BX), Z24; VADDPS Z18, Z24, Z24; VMOVUPS Z24, 1152(BX)
	VMOVUPS 1216(BX), Z24; VADDPS Z19, Z24, Z24; VMOVUPS Z24, 1216(BX)
	VMOVUPS 1280(BX), Z24; VADDPS Z20, Z24, Z24; VMOVUPS Z24, 1280(BX)
	VMOVUPS 1344(BX), Z24; VADDPS Z21, Z24, Z24; VMOVUPS Z24, 1344(BX)
	VMOVUPS 1408(BX), Z24; VADDPS Z22, Z24, Z24; VMOVUPS Z24, 1408(BX)
	VMOVUPS 1472(BX), Z24; VADDPS Z23, Z24, Z24; VMOVUPS Z24, 1472(BX)
	Q50CLASS(2, c2, c2done)
	VMOVUPS Z0, 1536(BX)
	VMOVUPS Z1, 1600(BX)
	VMOVUPS Z2, 1664(BX)
	VMOVUPS Z3, 1728(BX)
	VMOVUPS Z4, 1792(BX)
	VMOVUPS Z5, 1856(BX)
	VMOVUPS Z6, 1920(BX)
	VMOVUPS Z7, 1984(BX)
	VMOVUPS Z8, 2048(BX)
	VMOVUPS Z9, 2112(BX)
	VMOVUPS Z10, 2176(BX)
	VMOVUPS Z11, 2240(BX)
	VMOVUPS Z12, 2304(BX)
	VMOVUPS Z13, 2368(BX)
	VMOVUPS Z14, 2432(BX)
	VMOVUPS Z15, 2496(BX)
	VMOVUPS Z16, 2560(BX)
	VMOVUPS Z17, 2624(BX)
	VMOVUPS Z18, 2688(BX)
	VMOVUPS Z19, 2752(BX)
	VMOVUPS Z20, 2816(BX)
	VMOVUPS Z21, 2880(BX)
	VMOVUPS Z22, 2944(BX)
	VMOVUPS Z23, 3008(BX)
	Q50CLASS(3, c3, c3done)
	VMOVUPS 1536(BX), Z24; VADDPS Z0, Z24, Z0
	VMOVUPS 1600(BX), Z24; VADDPS Z1, Z24, Z1
	VMOVUPS 1664(BX), Z24; VADDPS Z2, Z24, Z2
	VMOVUPS 1728(BX), Z24; VADDPS Z3, Z24, Z3
	VMOVUPS 1792(BX), Z24; VADDPS Z4, Z24, Z4
	VMOVUPS 1856(BX), Z24; VADDPS Z5, Z24, Z5
	VMOVUPS 1920(BX), Z24; VADDPS Z6, Z24, Z6
	VMOVUPS 1984(BX), Z24; VADDPS Z7, Z24, Z7
	VMOVUPS 2048(BX), Z24; VADDPS Z8, Z24, Z8
	VMOVUPS 2112(BX), Z24; VADDPS Z9, Z24, Z9
	VMOVUPS 2176(BX), Z24; VADDPS Z10, Z24, Z10
	VMOVUPS 2240(BX), Z24; VADDPS Z11, Z24, Z11
	VMOVUPS 2304(BX), Z24; VADDPS Z12, Z24, Z12
	VMOVUPS 2368(BX), Z24; VADDPS Z13, Z24, Z13
	VMOVUPS 2432(BX), Z24; VADDPS Z14, Z24, Z14
	VMOVUPS 2496(BX), Z24; VADDPS Z15, Z24, Z15
	VMOVUPS 2560(BX), Z24; VADDPS Z16, Z24, Z16
	VMOVUPS 2624(BX), Z24; VADDPS Z17, Z24, Z17
	VMOVUPS 2688(BX), Z24; VADDPS Z18, Z24, Z18
	VMOVUPS 2752(BX), Z24; VADDPS Z19, Z24, Z19
	VMOVUPS 2816(BX), Z24; VADDPS Z20, Z24, Z20
	VMOVUPS 2880(BX), Z24; VADDPS Z21, Z24, Z21
	VMOVUPS 2944(BX), Z24; VADDPS Z22, Z24, Z22
	VMOVUPS 3008(BX), Z24; VADDPS Z23, Z24, Z23
	VMOVUPS 0(BX), Z24; VADDPS Z0, Z24, Z0
	VMOVUPS 64(BX), Z24; VADDPS Z1, Z24, Z1
	VMOVUPS 128(BX), Z24; VADDPS Z2, Z24, Z2
	VMOVUPS 192(BX), Z24; VADDPS Z3, Z24, Z3
	VMOVUPS 256(BX), Z24; VADDPS Z4, Z24, Z4
	VMOVUPS 320(BX), Z24; VADDPS Z5, Z24, Z5
	VMOVUPS 384(BX), Z24; VADDPS Z6, Z24, Z6
	VMOVUPS 448(BX), Z24; VADDPS Z7, Z24, Z7
	VMOVUPS 512(BX), Z24; VADDPS Z8, Z24, Z8
	VMOVUPS 576(BX), Z24; VADDPS Z9, Z24, Z9
	VMOVUPS 640(BX), Z24; VADDPS Z10, Z24, Z10
	VMOVUPS 704(BX), Z24; VADDPS Z11, Z24, Z11
	VMOVUPS 768(BX), Z24; VADDPS Z12, Z24, Z12
	VMOVUPS 832(BX), Z24; VADDPS Z13, Z24, Z13
	VMOVUPS 896(BX), Z24; VADDPS Z14, Z24, Z14
	VMOVUPS 960(BX), Z24; VADDPS Z15, Z24, Z15
	VMOVUPS 1024(BX), Z24; VADDPS Z16, Z24, Z16
	VMOVUPS 1088(BX), Z24; VADDPS Z17, Z24, Z17
	VMOVUPS 1152(BX), Z24; VADDPS Z18, Z24, Z18
	VMOVUPS 1216(BX), Z24; VADDPS Z19, Z24, Z19
	VMOVUPS 1280(BX), Z24; VADDPS Z20, Z24, Z20
	VMOVUPS 1344(BX), Z24; VADDPS Z21, Z24, Z21
	VMOVUPS 1408(BX), Z24; VADDPS Z22, Z24, Z22
	VMOVUPS 1472(BX), Z24; VADDPS Z23, Z24, Z23
	MOVQ out+40(FP), DI
	KLANES(ldo+48(FP), mask+56(FP))
	Q50FOLD(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, 0)
	Q50FOLD(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, 4)
	Q50FOLD(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, 8)
	VZEROUPPER
	RET

// NIBBLES32(off): Y0 = the 32 nibbles of the 16 bytes at off(SI): the low
// ones (elements 0-15), then the high (16-31). Y15: bytes of 0x0F.
#define NIBBLES32(off) \
	VMOVDQU off(SI), X0; \
	VPSRLW $4, X0, X1; \
	VINSERTI128 $1, X1, Y0, Y0; \
	VPAND Y15, Y0, Y0

// func q50PrepVNNI(p *byte, w *byte, nb int)
// Prepares a Q5_0 row of nb blocks (22 bytes: d, qh, qs) as q50Rec-byte
// records: the quants less 16, the corrections, d.
TEXT ·q50PrepVNNI(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ nb+16(FP), CX
	BCASTD(0x0f0f0f0f, Y15)
	BCASTD(0x10101010, Y14)
	BCASTD(0x80808080, Y13)
	VPXOR Y12, Y12, Y12

q50p:
	NIBBLES32(6)
	MOVL 2(SI), AX
	NOTL AX
	KMOVD AX, K1            // the elements whose fifth bit is clear
	VPSUBB Y14, Y0, K1, Y0  // q5-16
	VMOVDQU Y0, (DI)
	VPXOR Y1, Y1, Y1
	VPDPBUSD Y0, Y13, Y1    // 128·Σ4
	VPSUBD Y1, Y12, Y1
	VMOVDQU Y1, 32(DI)
	MOVWLZX (SI), AX
	VMOVD AX, X2
	VCVTPH2PS X2, X2
	VMOVSS X2, 64(DI)
	MOVL $0, 68(DI)
	ADDQ $22, SI
	ADDQ $72, DI
	DECQ CX
	JNZ  q50p
	VZEROUPPER
	RET

// ------------------------------------------------------------- Q4_0
//
// Twelve prepared rows (q40Rec = 40 bytes a block: the quants less 8, the
// correction -128·Σ, d) against a Q8_0 batch, in Dot's order: sumf +=
// (float(sumi)·dw)·dx, block by block. Z0-Z11 the rows' integer sums,
// Z12-Z23 their sumf.

// Q40DP(j): the rows' group j of the block.
#define Q40DP(j) \
	VMOVDQU32 64*j(SI), Z24; \
	VPDPBUSD.BCST 4*j(R8), Z24, Z0; \
	VPDPBUSD.BCST 4*j(R8)(R12*1), Z24, Z1; \
	VPDPBUSD.BCST 4*j(R8)(R12*2), Z24, Z2; \
	VPDPBUSD.BCST 4*j(R9), Z24, Z3; \
	VPDPBUSD.BCST 4*j(R9)(R12*1), Z24, Z4; \
	VPDPBUSD.BCST 4*j(R9)(R12*2), Z24, Z5; \
	VPDPBUSD.BCST 4*j(R10), Z24, Z6; \
	VPDPBUSD.BCST 4*j(R10)(R12*1), Z24, Z7; \
	VPDPBUSD.BCST 4*j(R10)(R12*2), Z24, Z8; \
	VPDPBUSD.BCST 4*j(R11), Z24, Z9; \
	VPDPBUSD.BCST 4*j(R11)(R12*1), Z24, Z10; \
	VPDPBUSD.BCST 4*j(R11)(R12*2), Z24, Z11

// func q40BatchVNNI(p *byte, ldp uintptr, nb int, xq *byte, xd *float32, out *float32, ldo uintptr, mask uint16)
TEXT ·q40BatchVNNI(SB), NOSPLIT, $0-58
	KROWS($0)
	MOVQ nb+16(FP), CX
	MOVQ xq+24(FP), SI
	MOVQ xd+32(FP), DI
	ZERO12(Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)

q40block:
	VPBROADCASTD 32(R8), Z0
	VPBROADCASTD 32(R8)(R12*1), Z1
	VPBROADCASTD 32(R8)(R12*2), Z2
	VPBROADCASTD 32(R9), Z3
	VPBROADCASTD 32(R9)(R12*1), Z4
	VPBROADCASTD 32(R9)(R12*2), Z5
	VPBROADCASTD 32(R10), Z6
	VPBROADCASTD 32(R10)(R12*1), Z7
	VPBROADCASTD 32(R10)(R12*2), Z8
	VPBROADCASTD 32(R11), Z9
	VPBROADCASTD 32(R11)(R12*1), Z10
	VPBROADCASTD 32(R11)(R12*2), Z11
	Q40DP(0)
	Q40DP(1)
	Q40DP(2)
	Q40DP(3)
	Q40DP(4)
	Q40DP(5)
	Q40DP(6)
	Q40DP(7)
	VMOVUPS (DI), Z25
	VCVTDQ2PS Z0, Z0; VMULPS.BCST 36(R8), Z0, Z0; VMULPS Z25, Z0, Z0; VADDPS Z0, Z12, Z12
	VCVTDQ2PS Z1, Z1; VMULPS.BCST 36(R8)(R12*1), Z1, Z1; VMULPS Z25, Z1, Z1; VADDPS Z1, Z13, Z13
	VCVTDQ2PS Z2, Z2; VMULPS.BCST 36(R8)(R12*2), Z2, Z2; VMULPS Z25, Z2, Z2; VADDPS Z2, Z14, Z14
	VCVTDQ2PS Z3, Z3; VMULPS.BCST 36(R9), Z3, Z3; VMULPS Z25, Z3, Z3; VADDPS Z3, Z15, Z15
	VCVTDQ2PS Z4, Z4; VMULPS.BCST 36(R9)(R12*1), Z4, Z4; VMULPS Z25, Z4, Z4; VADDPS Z4, Z16, Z16
	VCVTDQ2PS Z5, Z5; VMULPS.BCST 36(R9)(R12*2), Z5, Z5; VMULPS Z25, Z5, Z5; VADDPS Z5, Z17, Z17
	VCVTDQ2PS Z6, Z6; VMULPS.BCST 36(R10), Z6, Z6; VMULPS Z25, Z6, Z6; VADDPS Z6, Z18, Z18
	VCVTDQ2PS Z7, Z7; VMULPS.BCST 36(R10)(R12*1), Z7, Z7; VMULPS Z25, Z7, Z7; VADDPS Z7, Z19, Z19
	VCVTDQ2PS Z8, Z8; VMULPS.BCST 36(R10)(R12*2), Z8, Z8; VMULPS Z25, Z8, Z8; VADDPS Z8, Z20, Z20
	VCVTDQ2PS Z9, Z9; VMULPS.BCST 36(R11), Z9, Z9; VMULPS Z25, Z9, Z9; VADDPS Z9, Z21, Z21
	VCVTDQ2PS Z10, Z10; VMULPS.BCST 36(R11)(R12*1), Z10, Z10; VMULPS Z25, Z10, Z10; VADDPS Z10, Z22, Z22
	VCVTDQ2PS Z11, Z11; VMULPS.BCST 36(R11)(R12*2), Z11, Z11; VMULPS Z25, Z11, Z11; VADDPS Z11, Z23, Z23
	KADVANCE($40)
	ADDQ $512, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  q40block
	MOVQ out+40(FP), DI
	KLANES(ldo+48(FP), mask+56(FP))
	KSCATTER(Z12, 0)
	KSCATTER(Z13, 4)
	KSCATTER(Z14, 8)
	KSCATTER(Z15, 12)
	KSCATTER(Z16, 16)
	KSCATTER(Z17, 20)
	KSCATTER(Z18, 24)
	KSCATTER(Z19, 28)
	KSCATTER(Z20, 32)
	KSCATTER(Z21, 36)
	KSCATTER(Z22, 40)
	KSCATTER(Z23, 44)
	VZEROUPPER
	RET

// func q40PrepVNNI(p *byte, w *byte, nb int)
// Prepares a Q4_0 row of nb blocks (18 bytes: d, qs).
TEXT ·q40PrepVNNI(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ nb+16(FP), CX
	BCASTD(0x0f0f0f0f, Y15)
	BCASTD(0x08080808, Y14)
	VPXOR Y13, Y13, Y13

q40p:
	NIBBLES32(2)
	VPSADBW Y13, Y0, Y1     // Σ nibbles, in four qwords
	VEXTRACTI128 $1, Y1, X2
	VPADDQ X2, X1, X1
	VPSHUFD $0x4e, X1, X2
	VPADDQ X2, X1, X1
	VMOVD X1, AX
	SHLL $7, AX
	MOVL $32768, DX         // -128·Σ(nibble-8) = 128·256 - 128·Σ nibbles
	SUBL AX, DX
	MOVL DX, 32(DI)
	VPSUBB Y14, Y0, Y0
	VMOVDQU Y0, (DI)
	MOVWLZX (SI), AX
	VMOVD AX, X2
	VCVTPH2PS X2, X2
	VMOVSS X2, 36(DI)
	ADDQ $18, SI
	ADDQ $40, DI
	DECQ CX
	JNZ  q40p
	VZEROUPPER
	RET
