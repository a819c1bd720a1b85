//go:build amd64 && !purego

#include "textflag.h"

// AVX2 + FMA + F16C kernels of the CPU forward; see simd_amd64.go for the
// dispatch and the exact summation order (it depends only on the length).
// Register use in the dot kernels: SI weights/a, DI x/b, CX count,
// Y0..Y7 the eight accumulators A0..A7, Y8..Y15 operands.

#define ZERO_ACCS \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

// REDUCE leaves s = ((A0+A1)+(A2+A3)) + ((A4+A5)+(A6+A7)), reduced
// across lanes as (V0+V4 + V2+V6) + (V1+V5 + V3+V7), in X0's low lane.
#define REDUCE \
	VADDPS Y1, Y0, Y0; \
	VADDPS Y3, Y2, Y2; \
	VADDPS Y5, Y4, Y4; \
	VADDPS Y7, Y6, Y6; \
	VADDPS Y2, Y0, Y0; \
	VADDPS Y6, Y4, Y4; \
	VADDPS Y4, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0

// ---------------------------------------------------------------- dot

// DOT8(acc): acc += a[0:8]*b[0:8], advance by 8.
#define DOT8(acc) \
	VMOVUPS (SI), Y8; \
	VFMADD231PS (DI), Y8, acc; \
	ADDQ $32, SI; \
	ADDQ $32, DI; \
	SUBQ $8, CX

// func dotAVX2(a, b []float32) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-52
	MOVQ a_base+0(FP), SI
	MOVQ a_len+8(FP), CX
	MOVQ b_base+24(FP), DI
	ZERO_ACCS
	CMPQ CX, $64
	JLT  rem

loop64:
	VMOVUPS 0(SI), Y8
	VMOVUPS 32(SI), Y9
	VMOVUPS 64(SI), Y10
	VMOVUPS 96(SI), Y11
	VMOVUPS 128(SI), Y12
	VMOVUPS 160(SI), Y13
	VMOVUPS 192(SI), Y14
	VMOVUPS 224(SI), Y15
	VFMADD231PS 0(DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS 64(DI), Y10, Y2
	VFMADD231PS 96(DI), Y11, Y3
	VFMADD231PS 128(DI), Y12, Y4
	VFMADD231PS 160(DI), Y13, Y5
	VFMADD231PS 192(DI), Y14, Y6
	VFMADD231PS 224(DI), Y15, Y7
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $64, CX
	CMPQ CX, $64
	JGE  loop64

rem:
	CMPQ CX, $8
	JLT  reduce
	DOT8(Y0)
	CMPQ CX, $8
	JLT  reduce
	DOT8(Y1)
	CMPQ CX, $8
	JLT  reduce
	DOT8(Y2)
	CMPQ CX, $8
	JLT  reduce
	DOT8(Y3)
	CMPQ CX, $8
	JLT  reduce
	DOT8(Y4)
	CMPQ CX, $8
	JLT  reduce
	DOT8(Y5)
	CMPQ CX, $8
	JLT  reduce
	DOT8(Y6)

reduce:
	REDUCE
	TESTQ CX, CX
	JZ    done

tail:
	VMOVSS      (SI), X1
	VFMADD231SS (DI), X1, X0
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         tail

done:
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET

// ------------------------------------------------- fused F16 row · x

#define DOTF16_8(acc) \
	VCVTPH2PS (SI), Y8; \
	VFMADD231PS (DI), Y8, acc; \
	ADDQ $16, SI; \
	ADDQ $32, DI; \
	SUBQ $8, CX

// func dotF16AVX2(w []byte, x []float32) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-52
	MOVQ w_base+0(FP), SI
	MOVQ x_base+24(FP), DI
	MOVQ x_len+32(FP), CX
	ZERO_ACCS
	CMPQ CX, $64
	JLT  rem

loop64:
	VCVTPH2PS 0(SI), Y8
	VCVTPH2PS 16(SI), Y9
	VCVTPH2PS 32(SI), Y10
	VCVTPH2PS 48(SI), Y11
	VCVTPH2PS 64(SI), Y12
	VCVTPH2PS 80(SI), Y13
	VCVTPH2PS 96(SI), Y14
	VCVTPH2PS 112(SI), Y15
	VFMADD231PS 0(DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS 64(DI), Y10, Y2
	VFMADD231PS 96(DI), Y11, Y3
	VFMADD231PS 128(DI), Y12, Y4
	VFMADD231PS 160(DI), Y13, Y5
	VFMADD231PS 192(DI), Y14, Y6
	VFMADD231PS 224(DI), Y15, Y7
	ADDQ $128, SI
	ADDQ $256, DI
	SUBQ $64, CX
	CMPQ CX, $64
	JGE  loop64

rem:
	CMPQ CX, $8
	JLT  reduce
	DOTF16_8(Y0)
	CMPQ CX, $8
	JLT  reduce
	DOTF16_8(Y1)
	CMPQ CX, $8
	JLT  reduce
	DOTF16_8(Y2)
	CMPQ CX, $8
	JLT  reduce
	DOTF16_8(Y3)
	CMPQ CX, $8
	JLT  reduce
	DOTF16_8(Y4)
	CMPQ CX, $8
	JLT  reduce
	DOTF16_8(Y5)
	CMPQ CX, $8
	JLT  reduce
	DOTF16_8(Y6)

reduce:
	REDUCE
	TESTQ CX, CX
	JZ    done

tail:
	MOVWLZX     (SI), AX
	VMOVD       AX, X1
	VCVTPH2PS   X1, X1
	VFMADD231SS (DI), X1, X0
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         tail

done:
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET

// ------------------------------------------------ fused BF16 row · x

#define DOTBF16_8(acc) \
	VPMOVZXWD (SI), Y8; \
	VPSLLD $16, Y8, Y8; \
	VFMADD231PS (DI), Y8, acc; \
	ADDQ $16, SI; \
	ADDQ $32, DI; \
	SUBQ $8, CX

// func dotBF16AVX2(w []byte, x []float32) float32
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-52
	MOVQ w_base+0(FP), SI
	MOVQ x_base+24(FP), DI
	MOVQ x_len+32(FP), CX
	ZERO_ACCS
	CMPQ CX, $64
	JLT  rem

loop64:
	VPMOVZXWD 0(SI), Y8
	VPMOVZXWD 16(SI), Y9
	VPMOVZXWD 32(SI), Y10
	VPMOVZXWD 48(SI), Y11
	VPMOVZXWD 64(SI), Y12
	VPMOVZXWD 80(SI), Y13
	VPMOVZXWD 96(SI), Y14
	VPMOVZXWD 112(SI), Y15
	VPSLLD $16, Y8, Y8
	VPSLLD $16, Y9, Y9
	VPSLLD $16, Y10, Y10
	VPSLLD $16, Y11, Y11
	VPSLLD $16, Y12, Y12
	VPSLLD $16, Y13, Y13
	VPSLLD $16, Y14, Y14
	VPSLLD $16, Y15, Y15
	VFMADD231PS 0(DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS 64(DI), Y10, Y2
	VFMADD231PS 96(DI), Y11, Y3
	VFMADD231PS 128(DI), Y12, Y4
	VFMADD231PS 160(DI), Y13, Y5
	VFMADD231PS 192(DI), Y14, Y6
	VFMADD231PS 224(DI), Y15, Y7
	ADDQ $128, SI
	ADDQ $256, DI
	SUBQ $64, CX
	CMPQ CX, $64
	JGE  loop64

rem:
	CMPQ CX, $8
	JLT  reduce
	DOTBF16_8(Y0)
	CMPQ CX, $8
	JLT  reduce
	DOTBF16_8(Y1)
	CMPQ CX, $8
	JLT  reduce
	DOTBF16_8(Y2)
	CMPQ CX, $8
	JLT  reduce
	DOTBF16_8(Y3)
	CMPQ CX, $8
	JLT  reduce
	DOTBF16_8(Y4)
	CMPQ CX, $8
	JLT  reduce
	DOTBF16_8(Y5)
	CMPQ CX, $8
	JLT  reduce
	DOTBF16_8(Y6)

reduce:
	REDUCE
	TESTQ CX, CX
	JZ    done

tail:
	MOVWLZX     (SI), AX
	SHLL        $16, AX
	VMOVD       AX, X1
	VFMADD231SS (DI), X1, X0
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JNZ         tail

done:
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET

// ----------------------------------------------- fused Q8_0 row · x

// Q8SCALE(off, y): broadcast the F16 scale at off(SI) as float32 into y.
#define Q8SCALE(off, y, x) \
	MOVWLZX off(SI), AX; \
	VMOVD AX, x; \
	VCVTPH2PS x, x; \
	VBROADCASTSS x, y

// Q8DOT(off, scale, tmp, xoff, acc): acc += (scale*float32(q[off:off+8]))*x[xoff/4:]
#define Q8DOT(off, scale, tmp, xoff, acc) \
	VPMOVSXBD off(SI), tmp; \
	VCVTDQ2PS tmp, tmp; \
	VMULPS scale, tmp, tmp; \
	VFMADD231PS xoff(DI), tmp, acc

// func dotQ8_0AVX2(w []byte, x []float32) float32
// len(x) is a multiple of 32; w holds len(x)/32 blocks of 34 bytes.
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-52
	MOVQ w_base+0(FP), SI
	MOVQ x_base+24(FP), DI
	MOVQ x_len+32(FP), CX
	SHRQ $5, CX
	ZERO_ACCS
	CMPQ CX, $2
	JLT  rem

loop2:
	Q8SCALE(0, Y8, X8)
	Q8SCALE(34, Y12, X12)
	Q8DOT(2, Y8, Y9, 0, Y0)
	Q8DOT(10, Y8, Y10, 32, Y1)
	Q8DOT(18, Y8, Y11, 64, Y2)
	Q8DOT(26, Y8, Y9, 96, Y3)
	Q8DOT(36, Y12, Y13, 128, Y4)
	Q8DOT(44, Y12, Y14, 160, Y5)
	Q8DOT(52, Y12, Y15, 192, Y6)
	Q8DOT(60, Y12, Y13, 224, Y7)
	ADDQ $68, SI
	ADDQ $256, DI
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  loop2

rem:
	TESTQ CX, CX
	JZ    reduce
	Q8SCALE(0, Y8, X8)
	Q8DOT(2, Y8, Y9, 0, Y0)
	Q8DOT(10, Y8, Y10, 32, Y1)
	Q8DOT(18, Y8, Y11, 64, Y2)
	Q8DOT(26, Y8, Y9, 96, Y3)

reduce:
	REDUCE
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET

// ------------------------------------------------------ row conversions

// func rowF16AVX2(dst []float32, src []byte) (special bool)
TEXT ·rowF16AVX2(SB), NOSPLIT, $0-49
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	MOVL $0x7c007c00, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15 // exponent mask of 16 halves
	VPXOR Y14, Y14, Y14   // lanes whose exponent is all ones
	XORL  DX, DX
	CMPQ  CX, $16
	JLT   rem8

loop16:
	VMOVDQU (SI), Y0
	VPAND   Y15, Y0, Y1
	VPCMPEQW Y15, Y1, Y1
	VPOR    Y1, Y14, Y14
	VCVTPH2PS X0, Y2
	VEXTRACTI128 $1, Y0, X3
	VCVTPH2PS X3, Y3
	VMOVUPS Y2, (DI)
	VMOVUPS Y3, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	CMPQ CX, $16
	JGE  loop16

rem8:
	CMPQ CX, $8
	JLT  tail
	VMOVDQU (SI), X0
	VPAND   X15, X0, X1
	VPCMPEQW X15, X1, X1
	VPOR    Y1, Y14, Y14
	VCVTPH2PS X0, Y2
	VMOVUPS Y2, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX

tail:
	TESTQ CX, CX
	JZ    done

tailloop:
	MOVWLZX (SI), AX
	MOVL    AX, BX
	ANDL    $0x7c00, BX
	CMPL    BX, $0x7c00
	JNE     conv
	MOVL    $1, DX

conv:
	VMOVD     AX, X0
	VCVTPH2PS X0, X0
	VMOVSS    X0, (DI)
	ADDQ      $2, SI
	ADDQ      $4, DI
	DECQ      CX
	JNZ       tailloop

done:
	VPTEST Y14, Y14
	SETNE  AL
	ORB    DL, AL
	MOVB   AL, special+48(FP)
	VZEROUPPER
	RET

// func rowBF16AVX2(dst []float32, src []byte)
TEXT ·rowBF16AVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	CMPQ CX, $32
	JLT  rem8

loop32:
	VPMOVZXWD 0(SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPMOVZXWD 32(SI), Y2
	VPMOVZXWD 48(SI), Y3
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VPSLLD $16, Y2, Y2
	VPSLLD $16, Y3, Y3
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	CMPQ CX, $32
	JGE  loop32

rem8:
	CMPQ CX, $8
	JLT  tail
	VPMOVZXWD (SI), Y0
	VPSLLD  $16, Y0, Y0
	VMOVDQU Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  rem8

tail:
	TESTQ CX, CX
	JZ    done

tailloop:
	MOVWLZX (SI), AX
	SHLL    $16, AX
	MOVL    AX, (DI)
	ADDQ    $2, SI
	ADDQ    $4, DI
	DECQ    CX
	JNZ     tailloop

done:
	VZEROUPPER
	RET

// Q8ROW(off, scale, tmp, doff): dst[doff/4:][:8] = scale*float32(q[off:off+8])
#define Q8ROW(off, scale, tmp, doff) \
	VPMOVSXBD off(SI), tmp; \
	VCVTDQ2PS tmp, tmp; \
	VMULPS scale, tmp, tmp; \
	VMOVUPS tmp, doff(DI)

// func rowQ8_0AVX2(dst []float32, src []byte)
TEXT ·rowQ8_0AVX2(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	SHRQ $5, CX
	TESTQ CX, CX
	JZ   done

loop:
	Q8SCALE(0, Y8, X8)
	Q8ROW(2, Y8, Y0, 0)
	Q8ROW(10, Y8, Y1, 32)
	Q8ROW(18, Y8, Y2, 64)
	Q8ROW(26, Y8, Y3, 96)
	ADDQ $34, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loop

done:
	VZEROUPPER
	RET
