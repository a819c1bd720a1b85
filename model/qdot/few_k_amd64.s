//go:build amd64 && !purego

#include "textflag.h"
#include "kscales_amd64.h"

// The Q4_K and Q6_K kernels of few_k.go (AVX-512 F/BW/VL and VNNI): rows
// against 1, 2 or 4 Q8_K inputs, one row at a time, its super-block in
// 256-bit vectors, Dot's eight lanes in the dword lanes.
//
// Argument layout of every kernel: func(w *byte, ldw uintptr, rows int,
// nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo
// uintptr, n int): rows r < rows of nb super-blocks at w + r·ldw; the
// inputs as Few lays them out (per super-block np inputs: 256 reordered
// quants each at xq, at xc the Q6_K corrections (256 bytes) or the Q4_K
// sub-block sums (16 bytes), the scale at xd; the kernels read the first
// 1, 2 or 4); input t's result for row r to out + t·ldo + 4r, for the
// first n inputs (the 4-input kernel; the others store all theirs).
//
// Registers: R8 the row's super-block, R13 the row, CX super-blocks left;
// SI, DX, DI the inputs' quants, xc and scales; Y9 kshuf, Y10 kperm, Y11
// 0x0F bytes, Y13 0x30 bytes; input t's integer lanes of a super-block in
// Y20+t, its float lanes (Dot's sums) in Y24+t, its sumf in X28+t.

// kshuf (VPSHUFB, each 128 bits) pairs bytes l and l+8 in word l; kperm
// (VPERMW) then puts word l of the low 128 bits and word l of the high
// beside each other, in dword l: bytes l, l+8, l+16, l+24 of the 32.
DATA kshuf<>+0(SB)/8, $0x0b030a0209010800
DATA kshuf<>+8(SB)/8, $0x0f070e060d050c04
DATA kshuf<>+16(SB)/8, $0x0b030a0209010800
DATA kshuf<>+24(SB)/8, $0x0f070e060d050c04
GLOBL kshuf<>(SB), RODATA|NOPTR, $32
DATA kperm<>+0(SB)/8, $0x0009000100080000
DATA kperm<>+8(SB)/8, $0x000b0003000a0002
DATA kperm<>+16(SB)/8, $0x000d0005000c0004
DATA kperm<>+24(SB)/8, $0x000f0007000e0006
GLOBL kperm<>(SB), RODATA|NOPTR, $32

// KARGS: the constants, R13 the first row.
#define KARGS \
	MOVQ w+0(FP), R13; \
	VMOVDQU kshuf<>(SB), Y9; \
	VMOVDQU kperm<>(SB), Y10; \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Y11; \
	MOVL $0x30303030, AX; \
	VPBROADCASTD AX, Y13

// KROW: R8 the row, CX its super-blocks, SI, DX, DI the inputs' first.
#define KROW \
	MOVQ R13, R8; \
	MOVQ nb+24(FP), CX; \
	MOVQ xq+32(FP), SI; \
	MOVQ xc+40(FP), DX; \
	MOVQ xd+48(FP), DI

// KNEXT(bb, xcs): the row and the inputs to the next super-block (bb
// bytes; 1<<xcs bytes of xc an input).
#define KNEXT(bb, xcs) \
	ADDQ $bb, R8; \
	MOVQ np+56(FP), AX; \
	LEAQ (DI)(AX*4), DI; \
	MOVQ AX, BX; \
	SHLQ $xcs, BX; \
	ADDQ BX, DX; \
	SHLQ $8, AX; \
	ADDQ AX, SI

// KPREFETCH: 256 bytes of the row (or the next), 2 KiB ahead: the rows
// are read one after another, one stream, which the hardware prefetchers
// alone left at about 15 GB/s (18 with this).
#define KPREFETCH \
	PREFETCHT0 2048(R8); \
	PREFETCHT0 2112(R8); \
	PREFETCHT0 2176(R8); \
	PREFETCHT0 2240(R8)

// KPERM(Y): the reorder of the 32 bytes in Y (see kshuf, kperm).
#define KPERM(Y) \
	VPSHUFB Y9, Y, Y; \
	VPERMW Y, Y10, Y

// F16(off, X): X[0] = the F16 value at off(R8) as float32.
#define F16(off, X) \
	MOVWLZX off(R8), AX; \
	VMOVD AX, X; \
	VCVTPH2PS X, X

// FSTEP(t, T, U, S, D): input t's float lanes S += (D·dy)·float(T+U),
// as Dot's sums[l] += d·float(lane l), d = dw·dy.
#define FSTEP(t, T, U, S, D) \
	VPADDD U, T, T; \
	VCVTDQ2PS T, T; \
	VMULSS 4*t(DI), D, X14; \
	VBROADCASTSS X14, Y14; \
	VMULPS Y14, T, T; \
	VADDPS T, S, S

// LANESUM(t, S, F): F += S's lanes 0-7 in order, Dot's last sum; then
// F to input t's result of the row (out in BX, ldo in R9).
#define LANESUM(S, F) \
	VMOVUPS S, lanes-32(SP); \
	VADDSS lanes-32(SP), F, F; \
	VADDSS lanes-28(SP), F, F; \
	VADDSS lanes-24(SP), F, F; \
	VADDSS lanes-20(SP), F, F; \
	VADDSS lanes-16(SP), F, F; \
	VADDSS lanes-12(SP), F, F; \
	VADDSS lanes-8(SP), F, F; \
	VADDSS lanes-4(SP), F, F; \
	VMOVSS F, (BX); \
	ADDQ R9, BX

// ZEROIN(T, S, F): input's integer lanes, float lanes and sumf to 0.
#define ZEROT(T) VPXORD T, T, T
#define ZEROSF(S, F) VPXORD S, S, S; VPXORD F, F, F

// ---------------------------------------------------------------- Q4_K
//
// A super-block (144 bytes): d, dmin (F16), 12 bytes of six-bit scales
// and mins, 128 bytes of nibbles (chunk c of 32: sub-block 2c in the low
// nibbles, 2c+1 in the high). Y5 holds the scales of sub-blocks 0-3 as
// word pairs (sc, sc), in both 128-bit halves, Y6 those of 4-7; X7 the
// eight mins as words; X12 d, X15 dmin.

// K4SCALES: Y5, Y6, X7 from the row's scales (scaleMinK4); clobbers AX,
// BX, R9-R12.
#define K4SCALES \
	K4SCALEBYTES(R8); \
	VMOVQ R10, X5; \
	VPMOVZXBW X5, X5; \
	VPUNPCKHWD X5, X5, X6; \
	VPUNPCKLWD X5, X5, X5; \
	VINSERTI128 $1, X5, Y5, Y5; \
	VINSERTI128 $1, X6, Y6, Y6; \
	VMOVQ R12, X7; \
	VPMOVZXBW X7, X7

// K4CHUNK(c, SC, SUBA, SUBB): chunk c's two sub-blocks, 2c and 2c+1,
// into the inputs' integer lanes (SUBA, SUBB), their scales from SC.
#define K4CHUNK(c, SC, SUBA, SUBB) \
	VMOVDQU 16+32*c(R8), Y0; \
	KPERM(Y0); \
	VPSRLW $4, Y0, Y2; \
	VPAND Y11, Y0, Y1; \
	VPAND Y11, Y2, Y2; \
	VPSHUFD $(0x55*(2*c%4)), SC, Y3; \
	VPSHUFD $(0x55*(2*c%4+1)), SC, Y4; \
	SUBA(2*c, Y1, Y3); \
	SUBB(2*c+1, Y2, Y4)

// K4DOT(t, j, W, S, T): input t's sub-block j against the weights W,
// scales S: T += S·(the pairs' products).
#define K4DOT(t, j, W, S, T) \
	VPMADDUBSW 256*(t)+32*(j)(SI), W, Y8; \
	VPDPWSSD Y8, S, T

// The even sub-blocks go to Y20+t, the odd ones to Y16+t: two chains
// of VPDPWSSD, not one of eight (its latency held the kernel back).
#define K4SUB1A(j, W, S) K4DOT(0, j, W, S, Y20)
#define K4SUB2A(j, W, S) K4SUB1A(j, W, S); K4DOT(1, j, W, S, Y21)
#define K4SUB4A(j, W, S) K4SUB2A(j, W, S); K4DOT(2, j, W, S, Y22); K4DOT(3, j, W, S, Y23)
#define K4SUB1B(j, W, S) K4DOT(0, j, W, S, Y16)
#define K4SUB2B(j, W, S) K4SUB1B(j, W, S); K4DOT(1, j, W, S, Y17)
#define K4SUB4B(j, W, S) K4SUB2B(j, W, S); K4DOT(2, j, W, S, Y18); K4DOT(3, j, W, S, Y19)

// K4MINS(t, F): F -= (dmin·dy)·float(Σ mins·sub-block sums), Dot's step.
#define K4MINS(t, F) \
	VPMADDWD 16*t(DX), X7, X8; \
	VPSHUFD $0x4e, X8, X14; \
	VPADDD X14, X8, X8; \
	VPSHUFD $0xb1, X8, X14; \
	VPADDD X14, X8, X8; \
	VCVTDQ2PS X8, X8; \
	VMULSS 4*t(DI), X15, X14; \
	VMULSS X8, X14, X14; \
	VSUBSS X14, F, F

// K4FIN(t): input t's steps of the super-block.
#define K4FIN(t, T, U, S, F) \
	K4MINS(t, F); \
	FSTEP(t, T, U, S, X12)

// K4SUPER(ZT, SUBA, SUBB, FIN): one super-block of the row against the
// inputs.
#define K4SUPER(ZT, SUBA, SUBB, FIN) \
	K4SCALES; \
	F16(0, X12); \
	F16(2, X15); \
	ZT; \
	K4CHUNK(0, Y5, SUBA, SUBB); \
	K4CHUNK(1, Y5, SUBA, SUBB); \
	K4CHUNK(2, Y6, SUBA, SUBB); \
	K4CHUNK(3, Y6, SUBA, SUBB); \
	FIN; \
	KNEXT(144, 4)

// ---------------------------------------------------------------- Q6_K
//
// A super-block (210 bytes): ql[128] (low four bits), qh[64] (high two),
// scales[16] (int8, one per 16 elements), d (F16). Half h (elements
// 128h..128h+127) is sub-blocks 4h..4h+3: sub-block 4h+k takes the low
// (k < 2) or high nibbles of ql[64h+32(k%2)+l] and bits 2k, 2k+1 of
// qh[32h+l], l < 32. Y5 holds the scale pairs (sc 2j, sc 2j+1) of
// sub-blocks 0-3 as words in both 128-bit halves, Y6 those of 4-7; X12 d.

// K6HALF(h, SC, SUBA, SUBB): half h's four sub-blocks into the inputs'
// integer lanes (SUBA the even ones, SUBB the odd), their scales from
// SC. The three chunks of 32 bytes are
// reordered first (one reorder for the two sub-blocks of a chunk); the
// high bits are masked to bits 4-5 and merged (VPTERNLOGD: (A & 0x0F) |
// B).
#define K6HALF(h, SC, SUBA, SUBB) \
	VMOVDQU 64*h(R8), Y0; \
	VMOVDQU 64*h+32(R8), Y1; \
	VMOVDQU 128+32*h(R8), Y2; \
	KPERM(Y0); \
	KPERM(Y1); \
	KPERM(Y2); \
	VPSRLW $4, Y0, Y3; \
	VPSRLW $4, Y1, Y4; \
	VPSLLW $4, Y2, Y12; \
	VPANDD Y13, Y12, Y12; \
	VPTERNLOGD $0xec, Y11, Y12, Y0; \
	VPSLLW $2, Y2, Y12; \
	VPANDD Y13, Y12, Y12; \
	VPTERNLOGD $0xec, Y11, Y12, Y1; \
	VPANDD Y13, Y2, Y12; \
	VPTERNLOGD $0xec, Y11, Y12, Y3; \
	VPSRLW $2, Y2, Y12; \
	VPANDD Y13, Y12, Y12; \
	VPTERNLOGD $0xec, Y11, Y12, Y4; \
	VPSHUFD $0x00, SC, Y2; \
	SUBA(4*h, Y0, Y2); \
	VPSHUFD $0x55, SC, Y12; \
	SUBB(4*h+1, Y1, Y12); \
	VPSHUFD $0xaa, SC, Y2; \
	SUBA(4*h+2, Y3, Y2); \
	VPSHUFD $0xff, SC, Y12; \
	SUBB(4*h+3, Y4, Y12)

// K6DOT(t, j, W, S, T): as K4DOT, less the pairs' corrections.
#define K6DOT(t, j, W, S, T) \
	VPMADDUBSW 256*(t)+32*(j)(SI), W, Y8; \
	VPSUBW 256*(t)+32*(j)(DX), Y8, Y8; \
	VPDPWSSD Y8, S, T

#define K6SUB1A(j, W, S) K6DOT(0, j, W, S, Y20)
#define K6SUB2A(j, W, S) K6SUB1A(j, W, S); K6DOT(1, j, W, S, Y21)
#define K6SUB4A(j, W, S) K6SUB2A(j, W, S); K6DOT(2, j, W, S, Y22); K6DOT(3, j, W, S, Y23)
#define K6SUB1B(j, W, S) K6DOT(0, j, W, S, Y16)
#define K6SUB2B(j, W, S) K6SUB1B(j, W, S); K6DOT(1, j, W, S, Y17)
#define K6SUB4B(j, W, S) K6SUB2B(j, W, S); K6DOT(2, j, W, S, Y18); K6DOT(3, j, W, S, Y19)

// K6FIN(t): input t's step of the super-block (the d at 208 in X15).
#define K6FIN(t, T, U, S, F) FSTEP(t, T, U, S, X15)

// K6SUPER(ZT, SUBA, SUBB, FIN): one super-block of the row against the
// inputs.
#define K6SUPER(ZT, SUBA, SUBB, FIN) \
	VPMOVSXBW 192(R8), Y6; \
	VPERMQ $0x44, Y6, Y5; \
	VPERMQ $0xee, Y6, Y6; \
	F16(208, X15); \
	ZT; \
	K6HALF(0, Y5, SUBA, SUBB); \
	K6HALF(1, Y6, SUBA, SUBB); \
	FIN; \
	KNEXT(210, 8)

// ------------------------------------------------------------- kernels
//
// KERNEL(SUPER, ZSF, ZT, SUBA, SUBB, FIN, STORE, loop, sb, next): the rows one
// by one, each through its super-blocks (SUPER), its inputs' results
// stored by STORE (which may skip to next); BX and R9 are free at the
// end of a row.
#define KERNEL(SUPER, ZSF, ZT, SUBA, SUBB, FIN, STORE, loop, sb, next) \
	KARGS; \
	MOVQ rows+16(FP), AX; \
	MOVQ AX, left-40(SP); \
	MOVQ out+64(FP), AX; \
	MOVQ AX, row-48(SP); \
loop: \
	KROW; \
	ZSF; \
sb: \
	KPREFETCH; \
	SUPER(ZT, SUBA, SUBB, FIN); \
	DECQ CX; \
	JNZ  sb; \
	MOVQ row-48(SP), BX; \
	MOVQ ldo+72(FP), R9; \
	STORE; \
next: \
	ADDQ $4, row-48(SP); \
	ADDQ ldw+8(FP), R13; \
	DECQ left-40(SP); \
	JNZ  loop; \
	VZEROUPPER; \
	RET

#define ZSF1 ZEROSF(Y24, X28)
#define ZSF2 ZSF1; ZEROSF(Y25, X29)
#define ZSF4 ZSF2; ZEROSF(Y26, X30); ZEROSF(Y27, X31)
#define ZT1 ZEROT(Y20); ZEROT(Y16)
#define ZT2 ZT1; ZEROT(Y21); ZEROT(Y17)
#define ZT4 ZT2; ZEROT(Y22); ZEROT(Y18); ZEROT(Y23); ZEROT(Y19)
#define K4FIN1 K4FIN(0, Y20, Y16, Y24, X28)
#define K4FIN2 K4FIN1; K4FIN(1, Y21, Y17, Y25, X29)
#define K4FIN4 K4FIN2; K4FIN(2, Y22, Y18, Y26, X30); K4FIN(3, Y23, Y19, Y27, X31)
#define K6FIN1 K6FIN(0, Y20, Y16, Y24, X28)
#define K6FIN2 K6FIN1; K6FIN(1, Y21, Y17, Y25, X29)
#define K6FIN4 K6FIN2; K6FIN(2, Y22, Y18, Y26, X30); K6FIN(3, Y23, Y19, Y27, X31)
#define STORE1 LANESUM(Y24, X28)
#define STORE2 STORE1; LANESUM(Y25, X29)

// STORE4(next): the first n inputs' results (n at n+80(FP)), then on to
// next.
#define STOREIF4(k, S, F, next) \
	CMPQ n+80(FP), $k; \
	JLE  next; \
	LANESUM(S, F)
#define STORE4(next) \
	STORE1; \
	STOREIF4(1, Y25, X29, next); \
	STOREIF4(2, Y26, X30, next); \
	STOREIF4(3, Y27, X31, next)

// func q4kFew1VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)
TEXT ·q4kFew1VNNI(SB), NOSPLIT, $48-88
	KERNEL(K4SUPER, ZSF1, ZT1, K4SUB1A, K4SUB1B, K4FIN1, STORE1, row41, sb41, next41)

// func q4kFew2VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)
TEXT ·q4kFew2VNNI(SB), NOSPLIT, $48-88
	KERNEL(K4SUPER, ZSF2, ZT2, K4SUB2A, K4SUB2B, K4FIN2, STORE2, row42, sb42, next42)

// func q4kFew4VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)
TEXT ·q4kFew4VNNI(SB), NOSPLIT, $48-88
	KERNEL(K4SUPER, ZSF4, ZT4, K4SUB4A, K4SUB4B, K4FIN4, STORE4(next44), row44, sb44, next44)

// func q6kFew1VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)
TEXT ·q6kFew1VNNI(SB), NOSPLIT, $48-88
	KERNEL(K6SUPER, ZSF1, ZT1, K6SUB1A, K6SUB1B, K6FIN1, STORE1, row61, sb61, next61)

// func q6kFew2VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)
TEXT ·q6kFew2VNNI(SB), NOSPLIT, $48-88
	KERNEL(K6SUPER, ZSF2, ZT2, K6SUB2A, K6SUB2B, K6FIN2, STORE2, row62, sb62, next62)

// func q6kFew4VNNI(w *byte, ldw uintptr, rows int, nb int, xq *byte, xc *byte, xd *float32, np int, out *float32, ldo uintptr, n int)
TEXT ·q6kFew4VNNI(SB), NOSPLIT, $48-88
	KERNEL(K6SUPER, ZSF4, ZT4, K6SUB4A, K6SUB4B, K6FIN4, STORE4(next64), row64, sb64, next64)
