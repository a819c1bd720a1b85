/* qpack.h: the VRAM layout of the block-quantized weight types (Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0 in a mixed stack, Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4) and
 * the dequantization of a run of 8 weights, shared by the device (nvcc:
 * mma.cuh's loader, numerics.cuh's load8), the upload (host.cuh) and a Go
 * test compiled by gcc through cgo (qpack.go), which holds every run to
 * package quant's dequantization bit for bit. Plain C11 and CUDA C++.
 *
 * Layout. A matrix is packed as the tensor-core product streams it (mma.cuh
 * WRun, host.cuh pack_tiles): per 16-row tile and 32-column group a block
 * of 64 runs of 8 codes, lane l = 4g + q's run of row g (columns
 * 8q..8q+7) at l and of row g + 8 at 32 + l. Each 8-row half of a tile has
 * one type (qp_plan refuses a half whose rows differ), so the QKV and
 * gate/up stacks may mix types by part. A half's 32 runs are a plane of
 * wa bytes a run (the low 2, 4 or 8 bits of each code), then a plane of wb
 * bytes a run (the 1 or 2 bits above them: Q3_K, Q5_*, Q6_K), so a lane
 * reads aligned 1, 2, 4 or 8-byte words; a block is 32 (wa + wb) bytes a
 * half, a multiple of 16 (cp.async's unit), at most 512 (the ring's stage).
 * The bits inside a run are ordered for the decoder (qp_pack_run): the even
 * codes' bits apart from the odd codes', so that a few masks give the
 * codes of pairs (2i, 2i + 1) as two byte vectors.
 *
 * The scales keep the file's bytes, one record per row and block (legacy
 * types, 32 columns) or super-block (K-quants and IQ4_XS, 256 columns),
 * padded to 4 bytes where the file's are not (Q3_K 14 -> 16, Q6_K
 * 18 -> 20): rows of a half one after another (qp_tile.stride bytes a row),
 * each half's rows from a 16-byte boundary. A lane reads its row's record
 * as it dequantizes (read-only loads).
 *
 * Numerics: exactly ggml's reference dequantization in float32, operation
 * for operation (x = A·v, or A·v + B, A and B computed from the record as
 * ggml does; v the code as an exact float), without fused multiply-adds
 * (device: __fmul_rn, __fadd_rn; host: a rounding store), so the device and
 * the CPU reference get the same bits; the product then rounds once to
 * BF16. */
#ifndef RINGLM_QPACK_H
#define RINGLM_QPACK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ringlm_cuda.h"

#ifdef __CUDACC__
#define QP_HD __host__ __device__
/* qp_run: inlined into each caller, where a constant type folds its
 * switches away (mma.cuh's decoders of the common types). */
#define QP_HDI __host__ __device__ __forceinline__
#else
#define QP_HD
#define QP_HDI inline
#endif

/* qp_fmt_of is a constant expression in C++ (mma.cuh's typed decoders). */
#ifdef __cplusplus
#define QP_CONSTEXPR constexpr
#else
#define QP_CONSTEXPR
#endif

/* The device's type of a matrix in this layout (DMat.type); never a ggml id. */
#define RLM_TYPE_QANY 1000

/* A type's layout: plane bytes a run (wa, wb), scale record bytes (rec),
 * log2 of the 32-column groups a record covers (gsh), the codes' bias
 * (v = code - bias), whether x has an offset term (off), and the file's
 * block (blk elements in bb bytes). */
typedef struct {
  int32_t wa, wb, rec, gsh, bias, off, blk, bb;
} qp_fmt;

/* qp_fmt_of fills f for type t; 0 for a type this layout does not hold. */
QP_HD static QP_CONSTEXPR inline int qp_fmt_of(uint32_t t, qp_fmt *f) {
  qp_fmt r = {4, 0, 2, 0, 0, 0, 32, 18};
  switch (t) {
    case RLM_TYPE_Q4_0: r.bias = 8; break;
    case RLM_TYPE_Q4_1: r.rec = 4; r.off = 1; r.bb = 20; break;
    case RLM_TYPE_Q5_0: r.wb = 1; r.bias = 16; r.bb = 22; break;
    case RLM_TYPE_Q5_1: r.wb = 1; r.rec = 4; r.off = 1; r.bb = 24; break;
    case RLM_TYPE_Q8_0: r.wa = 8; r.bias = 128; r.bb = 34; break;
    case RLM_TYPE_IQ4_NL: r.bias = 128; break;
    case RLM_TYPE_MXFP4: r.rec = 1; r.bias = 128; r.bb = 17; break;
    case RLM_TYPE_Q2_K: r.wa = 2; r.rec = 20; r.gsh = 3; r.off = 1; r.blk = 256; r.bb = 84; break;
    case RLM_TYPE_Q3_K: r.wa = 2; r.wb = 1; r.rec = 16; r.gsh = 3; r.bias = 4; r.blk = 256; r.bb = 110; break;
    case RLM_TYPE_Q4_K: r.rec = 16; r.gsh = 3; r.off = 1; r.blk = 256; r.bb = 144; break;
    case RLM_TYPE_Q5_K: r.wb = 1; r.rec = 16; r.gsh = 3; r.off = 1; r.blk = 256; r.bb = 176; break;
    case RLM_TYPE_Q6_K: r.wb = 2; r.rec = 20; r.gsh = 3; r.bias = 32; r.blk = 256; r.bb = 210; break;
    case RLM_TYPE_IQ4_XS: r.rec = 8; r.gsh = 3; r.bias = 128; r.blk = 256; r.bb = 136; break;
    default: return 0;
  }
  *f = r;
  return 1;
}

/* A tile's record (32 bytes; the device loads it as two uint4). lay: the
 * halves' types and plane widths (qp_lay). */
typedef struct {
  uint32_t code16;    /* the tile's first block, in 16-byte units from the codes' base */
  uint32_t lay;
  uint32_t sc[2];     /* each half's first scale row, in bytes from the scales' base */
  uint32_t stride[2]; /* scale bytes a row of each half */
  uint32_t pf[2];     /* each half's record bytes | gsh << 16 */
} qp_tile;

/* lay: type of the low half (bits 0-7), of the high half (8-15); wa, wb of
 * the low half (16-19, 20-23), of the high half (24-27, 28-31). */
QP_HD static inline uint32_t qp_lay_type(uint32_t lay, int h) { return (lay >> (8 * h)) & 0xFF; }
QP_HD static inline int qp_lay_wa(uint32_t lay, int h) { return (int)((lay >> (16 + 8 * h)) & 15); }
QP_HD static inline int qp_lay_wb(uint32_t lay, int h) { return (int)((lay >> (20 + 8 * h)) & 15); }
/* The half's first byte in a block, and the block's bytes. */
QP_HD static inline int qp_lay_half(uint32_t lay, int h) { return h ? 32 * (qp_lay_wa(lay, 0) + qp_lay_wb(lay, 0)) : 0; }
QP_HD static inline int qp_lay_block(uint32_t lay) { return qp_lay_half(lay, 1) + 32 * (qp_lay_wa(lay, 1) + qp_lay_wb(lay, 1)); }

/* ---- loads: read-only global loads on the device, plain on the host
 * (little-endian, as the GGUF bytes) ---- */
QP_HD static inline uint32_t qp_ld8(const uint8_t *p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return p[0];
#endif
}
QP_HD static inline uint32_t qp_ld16(const uint8_t *p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned short *>(p));
#else
  return (uint32_t)p[0] | (uint32_t)p[1] << 8;
#endif
}
QP_HD static inline uint32_t qp_ld32(const uint8_t *p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned int *>(p));
#else
  return qp_ld16(p) | qp_ld16(p + 2) << 16;
#endif
}
/* A 16-byte record as four words. */
typedef struct {
  uint32_t w[4];
} qp_w4;
QP_HD static inline qp_w4 qp_ld128(const uint8_t *p) {
  qp_w4 r;
#ifdef __CUDA_ARCH__
  const uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
  r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
#else
  for (int i = 0; i < 4; i++) r.w[i] = qp_ld32(p + 4 * i);
#endif
  return r;
}
/* Byte k (0..15) of a record in registers, without indexing an array. */
QP_HD static inline uint32_t qp_byte(qp_w4 r, int k) {
  const uint32_t lo = (k & 4) ? r.w[1] : r.w[0], hi = (k & 4) ? r.w[3] : r.w[2];
  return (((k & 8) ? hi : lo) >> (8 * (k & 3))) & 0xFF;
}

/* ---- exact float arithmetic shared by both sides ---- */
#ifdef __CUDA_ARCH__
#define QP_MUL(a, b) __fmul_rn((a), (b))
#define QP_ADD(a, b) __fadd_rn((a), (b))
#else
/* A store through volatile rounds the product alone: no contraction into
 * a fused multiply-add whatever the compiler's -ffp-contract. */
static inline float qp_mul_(float a, float b) {
  volatile float r = a * b;
  return r;
}
static inline float qp_add_(float a, float b) {
  volatile float r = a + b;
  return r;
}
#define QP_MUL(a, b) qp_mul_((a), (b))
#define QP_ADD(a, b) qp_add_((a), (b))
#endif

QP_HD static inline float qp_f32(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, 4);
  return f;
#endif
}
/* An IEEE half's value (exact). */
QP_HD static inline float qp_f16(uint32_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half((unsigned short)h));
#else
  const uint32_t s = (h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 1023;
  if (e == 0) {  /* zero and the subnormals: m · 2^-24, exact */
    const float v = (float)m * 5.9604644775390625e-08f;
    return s ? -v : v;
  }
  if (e == 31) return qp_f32(s | 0x7F800000u | m << 13);
  return qp_f32(s | (e + 112) << 23 | m << 13);
#endif
}
/* ggml_e8m0_to_fp32_half: 2^(e-128). */
QP_HD static inline float qp_e8m0_half(uint32_t e) { return qp_f32(e < 2 ? 0x00200000u << e : (e - 1) << 23); }

/* prmt's default mode: byte n of the result is byte (s >> 4n) & 7 of y:x
 * (s's nibbles have their top bit clear here). */
QP_HD static inline uint32_t qp_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, s);
#else
  const uint64_t v = (uint64_t)y << 32 | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; n++) r |= (uint32_t)(v >> (8 * ((s >> (4 * n)) & 7)) & 0xFF) << (8 * n);
  return r;
#endif
}
/* Four 4-bit indices (sel's low 4 nibbles) into a 16-byte table. */
QP_HD static inline uint32_t qp_tab16(uint32_t t0, uint32_t t1, uint32_t t2, uint32_t t3, uint32_t sel) {
  const uint32_t lo = qp_perm(t0, t1, sel & 0x7777), hi = qp_perm(t2, t3, sel & 0x7777);
  const uint32_t m = qp_perm(0, 0xFFFFFFFFu, (sel >> 1) & 0x4444);  /* 0xFF where the index is 8..15 */
  return lo ^ ((lo ^ hi) & m);
}
/* Four 2-bit fields of x (bits 0-7) as the low bits of four bytes. */
QP_HD static inline uint32_t qp_spread2(uint32_t x) {
  uint32_t t = (x & 0x0F) | (x & 0xF0) << 12;
  return (t | t << 6) & 0x03030303u;
}
/* Four bits of x (bits 0-3) as bit 0 of four bytes. */
QP_HD static inline uint32_t qp_spread1(uint32_t x) { return ((x & 15) * 0x00204081u) & 0x01010101u; }

/* ggml's grids, biased by 128: kvalues_iq4nl and kvalues_mxfp4 (doubled E2M1). */
#define QP_W(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)

/* qp_run dequantizes one run: y[k] is column 8q + k of 32-column group j
 * of a row, from the run's planes (a: plane A's bytes, b: plane B's, as
 * qp_pack_run writes them) and the row's scale records srow. In three
 * parts, which mma.cuh's decoders of the common types also call (the
 * record's loads first, before they wait for the planes): qp_codes, the
 * codes; qp_ab, A and B from the record; qp_apply, x = A·v (+ B). */
typedef struct {
  float A, B;
} qp_ab_t;

/* The codes of columns 2i (*E) and 2i + 1 (*O) of the run in byte i. */
static QP_HDI void qp_codes(uint32_t t, uint64_t a, uint32_t b, uint32_t *E_, uint32_t *O_) {
  const uint32_t lo32 = (uint32_t)a;
  uint32_t E = 0, O = 0;
  switch (t) {
    case RLM_TYPE_Q4_0:
    case RLM_TYPE_Q5_0:
    case RLM_TYPE_Q4_1:
    case RLM_TYPE_Q5_1:
    case RLM_TYPE_Q4_K:
    case RLM_TYPE_Q5_K:
    case RLM_TYPE_Q6_K:
      E = lo32 & 0x0F0F0F0Fu;
      O = (lo32 >> 4) & 0x0F0F0F0Fu;
      break;
    case RLM_TYPE_Q2_K:
    case RLM_TYPE_Q3_K:
      E = qp_spread2(lo32 & 0xFF);
      O = qp_spread2((lo32 >> 8) & 0xFF);
      break;
    case RLM_TYPE_Q8_0:
      E = lo32 ^ 0x80808080u;
      O = (uint32_t)(a >> 32) ^ 0x80808080u;
      break;
    case RLM_TYPE_IQ4_NL:
    case RLM_TYPE_IQ4_XS:
      E = qp_tab16(QP_W(1, 24, 45, 63), QP_W(79, 93, 106, 118), QP_W(129, 141, 153, 166), QP_W(181, 197, 217, 241), lo32);
      O = qp_tab16(QP_W(1, 24, 45, 63), QP_W(79, 93, 106, 118), QP_W(129, 141, 153, 166), QP_W(181, 197, 217, 241), lo32 >> 16);
      break;
    case RLM_TYPE_MXFP4:
      E = qp_tab16(QP_W(128, 129, 130, 131), QP_W(132, 134, 136, 140), QP_W(128, 127, 126, 125), QP_W(124, 122, 120, 116), lo32);
      O = qp_tab16(QP_W(128, 129, 130, 131), QP_W(132, 134, 136, 140), QP_W(128, 127, 126, 125), QP_W(124, 122, 120, 116), lo32 >> 16);
      break;
  }
  /* The bits above the low plane. */
  if (t == RLM_TYPE_Q5_0 || t == RLM_TYPE_Q5_1 || t == RLM_TYPE_Q5_K) {
    E |= qp_spread1(b) << 4;
    O |= qp_spread1(b >> 4) << 4;
  } else if (t == RLM_TYPE_Q3_K) {
    E |= qp_spread1(b) << 2;
    O |= qp_spread1(b >> 4) << 2;
  } else if (t == RLM_TYPE_Q6_K) {
    E |= qp_spread2(b & 0xFF) << 4;
    O |= qp_spread2((b >> 8) & 0xFF) << 4;
  }
  *E_ = E;
  *O_ = O;
}

/* A and B of group j (lane quarter q) as ggml computes them, from the
 * row's scale records srow. */
static QP_HDI qp_ab_t qp_ab(uint32_t t, const uint8_t *srow, int j, int q) {
  qp_fmt f;
  if (!qp_fmt_of(t, &f)) f.rec = f.gsh = 0;
  const uint8_t *p = srow + (size_t)(j >> f.gsh) * f.rec;
  const int s = j & 7, sub = 2 * s + (q >> 1);  /* the group in its super-block; the lane's 16-column sub-block */
  qp_ab_t r = {0.f, 0.f};
  switch (t) {
    case RLM_TYPE_Q4_0:
    case RLM_TYPE_Q5_0:
    case RLM_TYPE_Q8_0:
    case RLM_TYPE_IQ4_NL:
      r.A = qp_f16(qp_ld16(p));
      break;
    case RLM_TYPE_Q4_1:
    case RLM_TYPE_Q5_1: {
      const uint32_t w = qp_ld32(p);
      r.A = qp_f16(w & 0xFFFF);
      r.B = qp_f16(w >> 16);
      break;
    }
    case RLM_TYPE_MXFP4:
      r.A = qp_e8m0_half(qp_ld8(p));
      break;
    case RLM_TYPE_Q2_K: {  /* scales[16], d, dmin: d·(sc & 15), dmin·(sc >> 4) */
      const uint32_t sc = qp_ld8(p + sub), w = qp_ld32(p + 16);
      r.A = QP_MUL(qp_f16(w & 0xFFFF), (float)(int)(sc & 15));
      r.B = -QP_MUL(qp_f16(w >> 16), (float)(int)(sc >> 4));
      break;
    }
    case RLM_TYPE_Q3_K: {  /* scales[12], d: d·(6-bit scale - 32) */
      const qp_w4 w = qp_ld128(p);
      const uint32_t lo = (qp_byte(w, sub & 7) >> (4 * (sub >> 3))) & 15, hi = (qp_byte(w, 8 + (sub & 3)) >> (2 * (sub >> 2))) & 3;
      r.A = QP_MUL(qp_f16(w.w[3] & 0xFFFF), (float)((int)(lo | hi << 4) - 32));
      break;
    }
    case RLM_TYPE_Q4_K:
    case RLM_TYPE_Q5_K: {  /* d, dmin, scales[12]: get_scale_min_k4 of sub-block s */
      const qp_w4 w = qp_ld128(p);
      const uint32_t qa = qp_byte(w, 4 + s), qb = qp_byte(w, 8 + s), qc = qp_byte(w, s);  /* q[s], q[s+4], q[s-4] */
      const uint32_t sc = s < 4 ? (qa & 63) : ((qb & 15) | (qc >> 6) << 4);
      const uint32_t m = s < 4 ? (qb & 63) : ((qb >> 4) | (qa >> 6) << 4);
      r.A = QP_MUL(qp_f16(w.w[0] & 0xFFFF), (float)(int)sc);
      r.B = -QP_MUL(qp_f16(w.w[0] >> 16), (float)(int)m);
      break;
    }
    case RLM_TYPE_Q6_K: {  /* scales[16] (int8), d: d·sc */
      const int sc = (int)(int8_t)(uint8_t)qp_ld8(p + sub);
      r.A = QP_MUL(qp_f16(qp_ld16(p + 16)), (float)sc);
      break;
    }
    case RLM_TYPE_IQ4_XS: {  /* d, scales_h, scales_l[4]: d·(6-bit scale - 32) */
      const uint32_t w0 = qp_ld32(p), w1 = qp_ld32(p + 4);
      const uint32_t ls = ((w1 >> (4 * s)) & 15) | ((w0 >> (16 + 2 * s)) & 3) << 4;
      r.A = QP_MUL(qp_f16(w0 & 0xFFFF), (float)((int)ls - 32));
      break;
    }
  }
  return r;
}

/* y from the codes: v = code - bias, exactly (2^23 + code as float bits,
 * minus 2^23 + bias), x = A·v, plus B for the types with an offset. */
static QP_HDI void qp_apply(uint32_t t, uint32_t E, uint32_t O, qp_ab_t ab, float *y) {
  qp_fmt f;
  if (!qp_fmt_of(t, &f)) f.bias = f.off = 0;
  const float base = (float)(8388608 + f.bias);
  for (int i = 0; i < 4; i++) {
    const float ve = QP_ADD(qp_f32(qp_perm(E, 0x4B000000u, 0x7440u | (uint32_t)i)), -base);
    const float vo = QP_ADD(qp_f32(qp_perm(O, 0x4B000000u, 0x7440u | (uint32_t)i)), -base);
    float xe = QP_MUL(ab.A, ve), xo = QP_MUL(ab.A, vo);
    if (f.off) {
      xe = QP_ADD(xe, ab.B);
      xo = QP_ADD(xo, ab.B);
    }
    y[2 * i] = xe;
    y[2 * i + 1] = xo;
  }
}

static QP_HDI void qp_run(uint32_t t, uint64_t a, uint32_t b, const uint8_t *srow, int j, int q, float *y) {
  uint32_t E, O;
  qp_codes(t, a, b, &E, &O);
  qp_apply(t, E, O, qp_ab(t, srow, j, q), y);
}

/* The K-quants' records (qp_ab's Q4_K, Q5_K and Q6_K cases) unpacked once a
 * super-block into four words and two floats (mma.cuh's gemm_group_q keeps
 * them in registers), so that a group's A and B take a few operations: the
 * same values by the same float operations (TestQuantRecMatchesAB). */
QP_HD static QP_CONSTEXPR inline int qp_rec_cached(uint32_t t) {
  return t == RLM_TYPE_Q4_K || t == RLM_TYPE_Q5_K || t == RLM_TYPE_Q6_K;
}
/* p: the row's record of the super-block; q: the lane's quarter. */
static QP_HDI void qp_rec_load(uint32_t t, const uint8_t *p, int q, uint32_t *w, float *d) {
  if (t == RLM_TYPE_Q6_K) { /* scales[16] (int8), d at 16: the lane's sub-blocks 2s + q/2 */
    const uint32_t o = (uint32_t)(q >> 1), sel = o | (2 + o) << 4 | (4 + o) << 8 | (6 + o) << 12;
    w[0] = qp_perm(qp_ld32(p), qp_ld32(p + 4), sel);   /* s = 0..3 */
    w[1] = qp_perm(qp_ld32(p + 8), qp_ld32(p + 12), sel); /* s = 4..7 */
    w[2] = w[3] = 0;
    d[0] = qp_f16(qp_ld16(p + 16));
    d[1] = 0.f;
  } else { /* Q4_K, Q5_K: d, dmin, scales[12]; get_scale_min_k4 for every s at once */
    const qp_w4 r = qp_ld128(p);
    const uint32_t Q0 = r.w[1], Q1 = r.w[2], Q2 = r.w[3];
    w[0] = Q0 & 0x3F3F3F3Fu;                                           /* sc, s = 0..3 */
    w[1] = (Q2 & 0x0F0F0F0Fu) | ((Q0 >> 6) & 0x03030303u) << 4;        /* sc, s = 4..7 */
    w[2] = Q1 & 0x3F3F3F3Fu;                                           /* m, s = 0..3 */
    w[3] = ((Q2 >> 4) & 0x0F0F0F0Fu) | ((Q1 >> 6) & 0x03030303u) << 4; /* m, s = 4..7 */
    d[0] = qp_f16(r.w[0] & 0xFFFF);
    d[1] = qp_f16(r.w[0] >> 16);
  }
}
/* A and B of group s (0..7) of the super-block, as qp_ab computes them. */
static QP_HDI qp_ab_t qp_rec_ab(uint32_t t, const uint32_t *w, const float *d, int s) {
  qp_ab_t r = {0.f, 0.f};
  if (t == RLM_TYPE_Q6_K) {
    const int sc = (int)(int8_t)(uint8_t)(qp_perm(w[0], w[1], (uint32_t)s) & 0xFF);
    r.A = QP_MUL(d[0], (float)sc);
  } else {
    const uint32_t sc = qp_perm(w[0], w[1], (uint32_t)s) & 0xFF, m = qp_perm(w[2], w[3], (uint32_t)s) & 0xFF;
    r.A = QP_MUL(d[0], (float)(int)sc);
    r.B = -QP_MUL(d[1], (float)(int)m);
  }
  return r;
}

/* ---- host: packing (rlm_create, rlm_test_gemm_q and the Go test) ---- */

/* The 32 codes of group j of a row in the file's layout (the value is
 * code - bias, IQ4 and MXFP4: grid[code]; Q3_K's code is its low two bits
 * | its hmask bit << 2). */
static inline void qp_group_codes(uint32_t t, const uint8_t *row, int j, uint8_t *c) {
  qp_fmt f;
  qp_fmt_of(t, &f);
  if (f.blk == 32) {
    const uint8_t *blk = row + (size_t)j * f.bb;
    if (t == RLM_TYPE_Q8_0) {
      memcpy(c, blk + 2, 32);
      return;
    }
    const int qs = t == RLM_TYPE_Q4_1 ? 4 : t == RLM_TYPE_Q5_0 ? 6 : t == RLM_TYPE_Q5_1 ? 8 : t == RLM_TYPE_MXFP4 ? 1 : 2;
    const uint32_t qh = t == RLM_TYPE_Q5_0 ? qp_ld32(blk + 2) : t == RLM_TYPE_Q5_1 ? qp_ld32(blk + 4) : 0;
    for (int k = 0; k < 32; k++)
      c[k] = (uint8_t)(((k < 16 ? blk[qs + k] : blk[qs + k - 16] >> 4) & 15) | ((qh >> k) & 1) << 4);
    return;
  }
  const uint8_t *sb = row + (size_t)(j >> 3) * f.bb;
  for (int k = 0; k < 32; k++) {
    const int e = 32 * (j & 7) + k, h = e / 128, kk = (e / 32) % 4, l = e % 32;
    switch (t) {
      case RLM_TYPE_Q2_K: c[k] = (uint8_t)((sb[16 + 32 * h + l] >> (2 * kk)) & 3); break;
      case RLM_TYPE_Q3_K:
        c[k] = (uint8_t)(((sb[32 + 32 * h + l] >> (2 * kk)) & 3) | ((sb[l] >> (e / 32)) & 1) << 2);
        break;
      case RLM_TYPE_Q4_K: c[k] = (uint8_t)((sb[16 + 32 * (e / 64) + l] >> (4 * ((e / 32) % 2))) & 15); break;
      case RLM_TYPE_Q5_K:
        c[k] = (uint8_t)(((sb[48 + 32 * (e / 64) + l] >> (4 * ((e / 32) % 2))) & 15) | ((sb[16 + l] >> (e / 32)) & 1) << 4);
        break;
      case RLM_TYPE_Q6_K:
        c[k] = (uint8_t)(((sb[64 * h + 32 * (kk % 2) + l] >> (4 * (kk / 2))) & 15) | ((sb[128 + 32 * h + l] >> (2 * kk)) & 3) << 4);
        break;
      case RLM_TYPE_IQ4_XS: c[k] = (uint8_t)((k < 16 ? sb[8 + 16 * (j & 7) + k] : sb[8 + 16 * (j & 7) + k - 16] >> 4) & 15); break;
    }
  }
}

/* A row's scale records: the header bytes of each block or super-block in
 * the file's order, padded to qp_fmt.rec. */
static inline void qp_row_scales(uint32_t t, const uint8_t *row, int cols, uint8_t *out) {
  qp_fmt f;
  qp_fmt_of(t, &f);
  for (int b = 0; b < cols / f.blk; b++) {
    const uint8_t *blk = row + (size_t)b * f.bb;
    uint8_t *r = out + (size_t)b * f.rec;
    memset(r, 0, (size_t)f.rec);
    switch (t) {
      case RLM_TYPE_Q2_K:
        memcpy(r, blk, 16);
        memcpy(r + 16, blk + 80, 4);
        break;
      case RLM_TYPE_Q3_K: memcpy(r, blk + 96, 14); break;
      case RLM_TYPE_Q6_K: memcpy(r, blk + 192, 18); break;
      default: memcpy(r, blk, (size_t)f.rec); break;  /* the header leads the block */
    }
  }
}

/* A run's 8 codes as its planes: the even codes' bits in the low part of
 * each plane, the odd codes' in the high part (qp_run's E and O). */
static inline void qp_pack_run(uint32_t t, const uint8_t *c, uint64_t *a, uint32_t *b) {
  uint64_t A = 0;
  uint32_t B = 0;
  for (int i = 0; i < 4; i++) {
    const uint32_t e = c[2 * i], o = c[2 * i + 1];
    switch (t) {
      case RLM_TYPE_Q8_0: A |= (uint64_t)e << (8 * i) | (uint64_t)o << (32 + 8 * i); break;
      case RLM_TYPE_IQ4_NL:
      case RLM_TYPE_IQ4_XS:
      case RLM_TYPE_MXFP4: A |= (uint64_t)(e & 15) << (4 * i) | (uint64_t)(o & 15) << (16 + 4 * i); break;
      case RLM_TYPE_Q2_K:
      case RLM_TYPE_Q3_K:
        A |= (uint64_t)(e & 3) << (2 * i) | (uint64_t)(o & 3) << (8 + 2 * i);
        B |= (e >> 2 & 1) << i | (o >> 2 & 1) << (4 + i);
        break;
      default:  /* 4-bit low plane: nibble k is code k */
        A |= (uint64_t)(e & 15) << (8 * i) | (uint64_t)(o & 15) << (8 * i + 4);
        if (t == RLM_TYPE_Q6_K) B |= (e >> 4 & 3) << (2 * i) | (o >> 4 & 3) << (8 + 2 * i);
        else B |= (e >> 4 & 1) << i | (o >> 4 & 1) << (4 + i);
        break;
    }
  }
  *a = A;
  *b = B;
}

static inline size_t qp_align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* qp_plan lays out a matrix of rows device rows (src[r]: row r's file
 * bytes, NULL for a zero row; typ[r]: its type) and cols columns: tiles
 * (ceil(rows / 16) records) and the bytes of the codes and the scales.
 * 0 on success; -1: the rows of an 8-row half differ in type (*bad: the
 * first such row); -2: a row's type is not held or cols is not a whole
 * number of its blocks (*bad: the row). */
static inline int qp_plan(int rows, int cols, const uint8_t *const *src, const uint32_t *typ, qp_tile *tiles,
                          size_t *code_bytes, size_t *scale_bytes, int *bad) {
  uint32_t any = 0;
  int have = 0;
  for (int r = 0; r < rows; r++) {
    qp_fmt f;
    if (!src[r]) continue;
    if (!qp_fmt_of(typ[r], &f) || cols % f.blk) {
      *bad = r;
      return -2;
    }
    if (!have) any = typ[r], have = 1;
  }
  if (!have) any = RLM_TYPE_Q4_0;
  size_t code = 0, scale = 0;
  const int t16 = (rows + 15) / 16, groups = cols / 32;
  for (int t = 0; t < t16; t++) {
    uint32_t ht[2];
    for (int h = 0; h < 2; h++) {
      int set = 0;
      ht[h] = any;
      for (int g = 0; g < 8; g++) {
        const int r = 16 * t + 8 * h + g;
        if (r >= rows || !src[r]) continue;
        if (set && typ[r] != ht[h]) {
          *bad = r;
          return -1;
        }
        ht[h] = typ[r], set = 1;
      }
    }
    qp_tile *T = &tiles[t];
    T->code16 = (uint32_t)(code / 16);
    T->lay = 0;
    for (int h = 0; h < 2; h++) {
      qp_fmt f;
      qp_fmt_of(ht[h], &f);
      T->lay |= ht[h] << (8 * h) | (uint32_t)f.wa << (16 + 8 * h) | (uint32_t)f.wb << (20 + 8 * h);
      T->sc[h] = (uint32_t)scale;
      T->stride[h] = (uint32_t)((groups >> f.gsh) * f.rec);
      T->pf[h] = (uint32_t)f.rec | (uint32_t)f.gsh << 16;
      scale += qp_align16((size_t)8 * T->stride[h]);
    }
    code += (size_t)groups * qp_lay_block(T->lay);
  }
  *code_bytes = code;
  *scale_bytes = scale;
  return 0;
}

/* qp_fill writes the codes and the scales qp_plan laid out (both zeroed
 * before: zero rows stay zero). */
static inline void qp_fill(int rows, int cols, const uint8_t *const *src, const qp_tile *tiles, uint8_t *codes,
                           uint8_t *scales) {
  const int groups = cols / 32;
  uint8_t c[32];
  for (int r = 0; r < rows; r++) {
    if (!src[r]) continue;
    const qp_tile *T = &tiles[r / 16];
    const int h = (r / 8) & 1, g = r % 8, blk = qp_lay_block(T->lay), wa = qp_lay_wa(T->lay, h), wb = qp_lay_wb(T->lay, h);
    const uint32_t t = qp_lay_type(T->lay, h);
    qp_row_scales(t, src[r], cols, scales + T->sc[h] + (size_t)g * T->stride[h]);
    for (int j = 0; j < groups; j++) {
      uint8_t *half = codes + (size_t)T->code16 * 16 + (size_t)j * blk + qp_lay_half(T->lay, h);
      qp_group_codes(t, src[r], j, c);
      for (int q = 0; q < 4; q++) {
        uint64_t a;
        uint32_t b;
        const int lane = 4 * g + q;
        qp_pack_run(t, c + 8 * q, &a, &b);
        for (int i = 0; i < wa; i++) half[lane * wa + i] = (uint8_t)(a >> (8 * i));
        for (int i = 0; i < wb; i++) half[32 * wa + lane * wb + i] = (uint8_t)(b >> (8 * i));
      }
    }
  }
}

/* A lane's run of half h of a block at blk (global or host memory): its
 * planes, as the product's loader reads them from shared memory. */
QP_HD static inline void qp_lane_planes(uint32_t lay, int h, int lane, const uint8_t *blk, uint64_t *a, uint32_t *b) {
  const int wa = qp_lay_wa(lay, h), wb = qp_lay_wb(lay, h);
  const uint8_t *p = blk + qp_lay_half(lay, h);
  uint64_t A = 0;
  uint32_t B = 0;
  for (int i = 0; i < wa; i++) A |= (uint64_t)p[lane * wa + i] << (8 * i);
  for (int i = 0; i < wb; i++) B |= (uint32_t)p[32 * wa + lane * wb + i] << (8 * i);
  *a = A;
  *b = B;
}

#endif /* RINGLM_QPACK_H */
