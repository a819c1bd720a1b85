// K4SCALEBYTES(B): the six-bit scales and mins of the Q4_K/Q5_K
// super-block at B (12 bytes at B+4; scaleMinK4), as bytes: scales 0-7
// in R10 (scale j in byte j), mins 0-7 in R12. Clobbers AX, BX, R9, R11.
// For dot_amd64.s and few_k_amd64.s.
#define K4SCALEBYTES(B) \
	MOVL 4(B), AX; \
	MOVL 8(B), BX; \
	MOVL 12(B), R9; \
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
	ORQ R9, R12
