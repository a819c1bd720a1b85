//go:build amd64 && !purego

#include "textflag.h"

// AVX2 + F16C row conversions of the CPU forward, bit for bit those of
// simd_generic.go (the products are in tiles_amd64.s).

// Q8SCALE(off, y): broadcast the F16 scale at off(SI) as float32 into y.
#define Q8SCALE(off, y, x) \
	MOVWLZX off(SI), AX; \
	VMOVD AX, x; \
	VCVTPH2PS x, x; \
	VBROADCASTSS x, y

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
