#pragma once
// host.cuh: the host API of ringlm_cuda.h (extern "C"): rlm_probe, the
// pinned arena (rlm_host_alloc, rlm_host_free), rlm_create (weights and
// buffers to the GPU) and rlm_destroy, rlm_get_info, rlm_start (the one
// cooperative launch of persistent), rlm_wait, rlm_query, rlm_read_logits,
// rlm_copy_bandwidth. Included by device.cu after the kernel it launches.

namespace {

void seterr(char *err, size_t n, const char *fmt, ...) {
  if (!err || n == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

#define CKR(call, ret)                                                                  \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      seterr(err, errlen, "%s: %s (%s)", #call, cudaGetErrorString(e_), cudaGetErrorName(e_)); \
      return ret;                                                                       \
    }                                                                                   \
  } while (0)

}  // namespace

#ifdef RLM_MAINMOD
// The block-quantized module (device_q.cu; make cuda CUDA_QUANT=0 leaves
// it out): the same kernel with the QANY product, compiled as a module of
// its own so that this one stays free of it. Its kernel and grid-barrier
// state, when the library has it (weak: null otherwise).
extern "C" const void *rlm_qmod_kernel(void) __attribute__((weak));
extern "C" int rlm_qmod_gbar(void **p) __attribute__((weak));
// The tensor-core module (device_tc.cu; make cuda CUDA_TC=0 leaves it
// out): the kernel without the CUDA-core phases, for every other model
// whose products and attention run on the tensor cores.
extern "C" const void *rlm_tcmod_kernel(void) __attribute__((weak));
extern "C" int rlm_tcmod_gbar(void **p) __attribute__((weak));

struct rlm_ctx {
  int device = 0;
  Dev h{};          // host copy of the device struct
  Dev *dptr = nullptr;
  std::vector<void *> allocs;
  std::vector<DLayer> layers;
  cudaStream_t stream = nullptr, side = nullptr;
  rlm_info info{};
  bool started = false, waited = false;
  int wait_rc = 0;
  char wait_err[512] = {0};
  size_t shmem = 0;
  bool qmod = false;   // some matrix is block-quantized: the kernel is device_q.cu's
  bool tcmod = false;  // otherwise, the tensor-core phases and attention: device_tc.cu's
  // The kernel this context launches and its grid barrier's state.
  const void *kernel() const {
    return qmod ? rlm_qmod_kernel() : tcmod ? rlm_tcmod_kernel() : (const void *)persistent;
  }
  cudaError_t gbar(void **p) const {
    if (qmod) return rlm_qmod_gbar(p) == 0 ? cudaSuccess : cudaErrorInvalidSymbol;
    if (tcmod) return rlm_tcmod_gbar(p) == 0 ? cudaSuccess : cudaErrorInvalidSymbol;
    return cudaGetSymbolAddress(p, g_bar);
  }
};
#endif

// Bytes of n weights as the device keeps them (Q8_0: int8 quants plus a
// float scale per 32; the other block types: about the file's, qpack.h).
static size_t type_bytes(uint32_t t, uint64_t n) {
  switch (t) {
    case RLM_TYPE_F32: return n * 4;
    case RLM_TYPE_F16:
    case RLM_TYPE_BF16: return n * 2;
    case RLM_TYPE_Q8_0: return n + n / 32 * 4;
  }
  qp_fmt f;
  return qp_fmt_of(t, &f) ? n / f.blk * f.bb : 0;
}

static const char *type_name(uint32_t t) {
  switch (t) {
    case RLM_TYPE_F32: return "F32";
    case RLM_TYPE_F16: return "F16";
    case RLM_TYPE_BF16: return "BF16";
    case RLM_TYPE_Q4_0: return "Q4_0";
    case RLM_TYPE_Q4_1: return "Q4_1";
    case RLM_TYPE_Q5_0: return "Q5_0";
    case RLM_TYPE_Q5_1: return "Q5_1";
    case RLM_TYPE_Q8_0: return "Q8_0";
    case RLM_TYPE_Q2_K: return "Q2_K";
    case RLM_TYPE_Q3_K: return "Q3_K";
    case RLM_TYPE_Q4_K: return "Q4_K";
    case RLM_TYPE_Q5_K: return "Q5_K";
    case RLM_TYPE_Q6_K: return "Q6_K";
    case RLM_TYPE_IQ4_NL: return "IQ4_NL";
    case RLM_TYPE_IQ4_XS: return "IQ4_XS";
    case RLM_TYPE_MXFP4: return "MXFP4";
  }
  return "an unknown type";
}
#define RLM_TYPES_READ "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4"

// A stack of block-quantized parts as qpack.h lays it out, in host memory.
struct QHost {
  std::vector<qp_tile> tiles;
  std::vector<uint8_t> codes, scales;
  int rows = 0, cols = 0;
};

// qany_build lays out up to np parts stacked by rows (parts without data
// skipped; all of cols columns): device row i is stacked row (*perm)[i]
// (-1: a zero row) when perm is set. False, with the reason in err, for a
// part of a type qpack.h does not hold, rows that are not whole blocks, or
// an 8-row half of the product's tiles whose rows differ in type (the
// parts of a stack may change type only at multiples of 8 device rows).
static bool qany_build(const rlm_matrix *parts, int np, const std::vector<int> *perm, const char *what, QHost &out,
                       char *err, size_t errlen) {
  std::vector<const uint8_t *> src;
  std::vector<uint32_t> typ;
  out.cols = 0;
  for (int i = 0; i < np; i++) {
    if (!parts[i].data) continue;
    const rlm_matrix &p = parts[i];
    qp_fmt f;
    if (!out.cols) out.cols = (int)p.cols;
    if (!qp_fmt_of(p.type, &f) || (int)p.cols != out.cols || p.cols % f.blk ||
        (p.bytes && p.bytes < (uint64_t)p.rows * (p.cols / f.blk) * f.bb)) {
      seterr(err, errlen, "%s: a part of type %s with %u columns (%llu bytes for %u rows) in a stack of %d columns", what,
             type_name(p.type), p.cols, (unsigned long long)p.bytes, p.rows, out.cols);
      return false;
    }
    const size_t rb = (size_t)(p.cols / f.blk) * f.bb;
    for (uint32_t r = 0; r < p.rows; r++) {
      src.push_back(reinterpret_cast<const uint8_t *>(p.data) + r * rb);
      typ.push_back(p.type);
    }
  }
  if (perm) {
    std::vector<const uint8_t *> ps(perm->size(), nullptr);
    std::vector<uint32_t> pt(perm->size(), 0);
    for (size_t i = 0; i < perm->size(); i++) {
      const int r = (*perm)[i];
      if (r >= (int)src.size()) {
        seterr(err, errlen, "%s: %zu rows, the layout wants row %d", what, src.size(), r);
        return false;
      }
      if (r >= 0) ps[i] = src[r], pt[i] = typ[r];
    }
    src.swap(ps);
    typ.swap(pt);
  }
  out.rows = (int)src.size();
  out.tiles.assign((src.size() + 15) / 16, qp_tile{});
  size_t nc = 0, ns = 0;
  int bad = 0;
  const int rc = qp_plan(out.rows, out.cols, src.data(), typ.data(), out.tiles.data(), &nc, &ns, &bad);
  if (rc) {
    seterr(err, errlen,
           rc == -1 ? "%s: device row %d (%s) shares an 8-row half of the tensor-core product's tiles with rows of another type "
                      "(the parts of a stack may differ in type only at multiples of 8 rows)"
                    : "%s: device row %d: type %s with rows of that many columns is not read",
           what, bad, type_name(typ[bad]));
    return false;
  }
  out.codes.assign(nc, 0);
  out.scales.assign(ns, 0);
  qp_fill(out.rows, out.cols, src.data(), out.tiles.data(), out.codes.data(), out.scales.data());
  return true;
}

// A float as BF16, rounded to nearest even (a NaN stays a NaN): what the
// product's pack_bf16 gives for it.
static uint16_t bf16_rne(float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);
}

// pack_tiles rearranges a row-major matrix (rows × cols elements of esz
// bytes; cols a multiple of 32) into the order the tensor-core product
// reads (mma.cuh WRun): per 16-row tile and 32-column group, 64 runs of 8
// elements, lane l = 4g + q's run of row g (columns 8q..8q+7) at l and of
// row g + 8 at 32 + l; groups in order, tiles in order; rows past the
// matrix zero. A warp then streams its tile as one contiguous range.
static std::vector<uint8_t> pack_tiles(const std::vector<uint8_t> &src, size_t rows, size_t cols, size_t esz) {
  const size_t t16 = (rows + 15) / 16, groups = cols / 32, run = 8 * esz, blk = 64 * run;
  std::vector<uint8_t> out(t16 * groups * blk, 0);
  for (size_t t = 0; t < t16; t++)
    for (size_t j = 0; j < groups; j++)
      for (size_t l = 0; l < 32; l++)
        for (size_t h = 0; h < 2; h++) {
          const size_t r = t * 16 + l / 4 + 8 * h;
          if (r < rows) memcpy(&out[(t * groups + j) * blk + (32 * h + l) * run], &src[(r * cols + 32 * j + 8 * (l % 4)) * esz], run);
        }
  return out;
}

// choose_nk splits a matrix of rows × cols for the tensor-core product:
// the chunks of its 32-column groups that spread it best over grid blocks,
// at least 4 groups a chunk. The cost, in a tile unit's time, adds
//  - the slowest block's share of the matrix at many rows (units of
//    kGemmRows rows);
//  - the same at one row, where a matrix of 2 to kWarps chunks takes
//    gemm_local_t's units (kWarps / nk m16 tiles with all their chunks);
//  - the chunks' partial sums at 16 rows, spread over the grid: 4 bytes
//    written and read per chunk and output against 2 × cols bytes of
//    weights per row.
// The Llama-3.2-1B QKV matrix gets 8 chunks (96 units at one row, one
// round) rather than 11 (192 units, two rounds, five warps idle), and its
// LM head one rather than 5 (no partial sums: 8 MB a chunk at 16 rows, and
// 5 GB of scratch for 2048 rows no longer allocated): batch 1 −1.2%,
// 16 −3.4%, 64 −1.5%, 256 −3.2% (bench/logs/issue15-round67-nk.log). It
// depends on the shape and the grid only, never on a step.
static int choose_nk(int rows, int cols, int grid) {
  const int tiles = (rows + kGemmRows - 1) / kGemmRows, t16 = (rows + 15) / 16, groups = cols / 32;
  int best = 1;
  double best_cost = 1e30;
  for (int nk = 1; nk <= groups / 4 || nk == 1; nk++) {
    const double waves = (double)((tiles * nk + grid - 1) / grid);
    double cost = waves / nk;
    if (nk > 1) cost += (double)tiles / grid * nk * (4.0 * kSmallM) / cols;
    if (nk > 1 && nk <= kWarps) {
      const int per = kWarps / nk, units = (t16 + per - 1) / per;
      cost += (double)((units + grid - 1) / grid) / nk;
    } else {
      cost += waves / nk;
    }
    if (cost < best_cost - 1e-12) best_cost = cost, best = nk;
  }
  return best;
}

#ifdef RLM_MAINMOD
extern "C" {

int rlm_probe(char *err, size_t errlen) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    seterr(err, errlen, "no CUDA device: %s", cudaGetErrorString(e));
    return -1;
  }
  if (n == 0) {
    seterr(err, errlen, "no CUDA device");
    return -1;
  }
  return n;
}

void *rlm_host_alloc(uint64_t bytes, char *err, size_t errlen) {
  void *p = nullptr;
  cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) {
    seterr(err, errlen, "cudaHostAlloc(%llu bytes): %s", (unsigned long long)bytes, cudaGetErrorString(e));
    return nullptr;
  }
  memset(p, 0, bytes);
  return p;
}

int rlm_host_free(void *p, char *err, size_t errlen) {
  cudaError_t e = cudaFreeHost(p);
  if (e != cudaSuccess) {
    seterr(err, errlen, "cudaFreeHost: %s", cudaGetErrorString(e));
    return -1;
  }
  return 0;
}

static void *dalloc(rlm_ctx *c, size_t bytes, cudaError_t *e) {
  void *p = nullptr;
  *e = cudaMalloc(&p, bytes ? bytes : 1);
  if (*e == cudaSuccess) {
    c->allocs.push_back(p);
    cudaMemset(p, 0, bytes ? bytes : 1);
  }
  return p;
}

void rlm_destroy(rlm_ctx *c) {
  if (!c) return;
  cudaSetDevice(c->device);
  if (c->started && !c->waited) {
    // The kernel still runs: the host must have sent STOP; wait for it.
    cudaStreamSynchronize(c->stream);
  }
  for (void *p : c->allocs) cudaFree(p);
  if (c->stream) cudaStreamDestroy(c->stream);
  if (c->side) cudaStreamDestroy(c->side);
  delete c;
}

rlm_ctx *rlm_create(const rlm_model *m, const rlm_opts *o, char *err, size_t errlen) {
  if (!m || !o || m->abi != RLM_CUDA_ABI) {
    seterr(err, errlen, "ABI mismatch: library %d, caller %u", RLM_CUDA_ABI, m ? m->abi : 0);
    return nullptr;
  }
  if (m->head_dim > RLM_MAX_HEAD_DIM || m->head_dim % 2 || m->dim % 8 || m->ffn % 8 || (m->n_head * m->head_dim) % 8 ||
      m->n_kv_head == 0 || m->n_head % m->n_kv_head) {
    seterr(err, errlen, "unsupported shape: dim %u, ffn %u, heads %u/%u, head_dim %u (need head_dim ≤ %d, widths multiple of 8)",
           m->dim, m->ffn, m->n_head, m->n_kv_head, m->head_dim, RLM_MAX_HEAD_DIM);
    return nullptr;
  }
  if (o->kv_type != RLM_TYPE_F16) {
    seterr(err, errlen, "KV type %u: the CUDA device keeps a float16 KV cache", o->kv_type);
    return nullptr;
  }
  auto okType = [](uint32_t t) {
    return t == RLM_TYPE_F32 || t == RLM_TYPE_F16 || t == RLM_TYPE_BF16 || t == RLM_TYPE_Q8_0;
  };
  auto qType = [](uint32_t t) {
    qp_fmt f;
    return qp_fmt_of(t, &f) != 0;
  };
  rlm_ctx *c = new rlm_ctx();
  c->device = o->device;
  // From here failures must free c.
  auto bail = [&]() { rlm_destroy(c); return (rlm_ctx *)nullptr; };
#define CK(call) CKR(call, bail())
  CK(cudaSetDevice(o->device));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, o->device));
  snprintf(c->info.name, sizeof c->info.name, "%.127s", prop.name);
  c->info.sm_count = prop.multiProcessorCount;
  if (!prop.cooperativeLaunch) {
    seterr(err, errlen, "%s cannot launch cooperative kernels", prop.name);
    return bail();
  }
  CK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking));
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));
  c->info.total_bytes = total_b;

  // Weights: sizes first, to fail early with what is needed.
  const uint32_t qd = m->n_head * m->head_dim, kvd = m->n_kv_head * m->head_dim;
  uint64_t wbytes = 0;
  auto matBytes = [&](const rlm_matrix &x) { return (uint64_t)type_bytes(x.type, (uint64_t)x.rows * x.cols); };
  wbytes += matBytes(m->embed);
  if (m->output.data && m->output.data != m->embed.data) wbytes += matBytes(m->output);
  else wbytes += matBytes(m->embed);  // tied: the tensor-core head reads a packed copy (at most this)
  for (uint32_t l = 0; l < m->n_layer; l++) {
    const rlm_layer &L = m->layers[l];
    wbytes += matBytes(L.q) + matBytes(L.k) + matBytes(L.v) + matBytes(L.out) + matBytes(L.gate) + matBytes(L.up) + matBytes(L.down);
    wbytes += 4ull * (2 * m->dim + qd + 2 * kvd);
  }
  if (wbytes + (256ull << 20) > free_b) {
    seterr(err, errlen, "the model needs %.2f GiB of GPU memory (plus work buffers); %s has %.2f GiB free of %.2f",
           wbytes / 1073741824.0, prop.name, free_b / 1073741824.0, total_b / 1073741824.0);
    return bail();
  }
  cudaError_t ae;
  // Allocations inside the lambdas below report through ok.
#define DALLOC_OR(ptr, type, count, onfail)                                                    \
  do {                                                                                         \
    ptr = (type *)dalloc(c, sizeof(type) * (size_t)(count), &ae);                              \
    if (ae != cudaSuccess) {                                                                   \
      seterr(err, errlen, "cudaMalloc(%s, %.1f MiB): %s", #ptr, sizeof(type) * (double)(count) / 1048576.0, cudaGetErrorString(ae)); \
      onfail;                                                                                  \
    }                                                                                          \
  } while (0)
#define DALLOC(ptr, type, count) DALLOC_OR(ptr, type, count, return bail())
  auto upload = [&](const void *src, size_t bytes, void *dst) -> bool {
    return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  };
  // A device matrix from up to three host matrices stacked by rows; with
  // perm, device row i is stacked row perm[i] (-1: a zero row), so the
  // matrix has perm->size() rows.
  // The block-quantized types other than Q8_0 alone (and Q8_0 in a stack
  // with them) go to VRAM at their own width in the tensor-core product's
  // order (qpack.h, RLM_TYPE_QANY), the embedding too (its rows are
  // read by load8 in that order); the CUDA-core phases do not read them.
  auto stack = [&](DMat *out, const rlm_matrix *parts, int np, const char *what, const std::vector<int> *perm,
                   bool pack) -> bool {
    // The first part with data sets the type and width (phi3's fused
    // tensors come as the first or the last part of a stack, the others null).
    uint32_t rows = 0, cols = 0, type = 0;
    for (int i = 0; i < np; i++)
      if (parts[i].data) {
        cols = parts[i].cols;
        type = parts[i].type;
        break;
      }
    bool qany = true, mixed = false;
    for (int i = 0; i < np; i++)
      if (parts[i].data) {
        qany = qany && qType(parts[i].type);
        mixed = mixed || parts[i].type != type;
      }
    if (qany && (mixed || type != RLM_TYPE_Q8_0 || c->qmod)) {
      // rlm_create has refused such a model already where the library has
      // no block-quantized module or the CUDA-core phases run (c->qmod).
      QHost q;
      if (!qany_build(parts, np, perm, what, q, err, errlen)) return false;
      char *dw;
      uint8_t *dsc;
      qp_tile *dt;
      DALLOC_OR(dw, char, q.codes.size(), return false);
      DALLOC_OR(dsc, uint8_t, q.scales.size(), return false);
      DALLOC_OR(dt, qp_tile, q.tiles.size(), return false);
      if (!upload(q.codes.data(), q.codes.size(), dw) || !upload(q.scales.data(), q.scales.size(), dsc) ||
          !upload(q.tiles.data(), q.tiles.size() * sizeof(qp_tile), dt)) {
        seterr(err, errlen, "%s: upload failed", what);
        return false;
      }
      *out = DMat{dw, RLM_TYPE_QANY, q.rows, q.cols, nullptr, 1, dt, dsc};
      return true;
    }
    for (int i = 0; i < np; i++) {
      if (!parts[i].data) continue;
      if (!okType(parts[i].type) || parts[i].type != type || parts[i].cols != cols) {
        seterr(err, errlen, "%s: %s with %u columns (after %s) not supported by the CUDA device (" RLM_TYPES_READ
               "; the float types one per stack)", what, type_name(parts[i].type), parts[i].cols, type_name(type));
        return false;
      }
      rows += parts[i].rows;
    }
    if (type == RLM_TYPE_Q8_0 && cols % 32) {
      seterr(err, errlen, "%s: Q8_0 rows of %u columns", what, cols);
      return false;
    }
    // Q8_0: GGUF blocks of {f16 scale, 32 int8} become an int8 matrix and
    // a float scale matrix, so the kernel loads aligned 8-byte runs.
    const bool q8 = type == RLM_TYPE_Q8_0;
    const size_t nb = cols / 32;
    const size_t rb = q8 ? cols : type_bytes(type, cols);  // bytes of a row of the (quant) matrix
    std::vector<uint8_t> buf((size_t)rows * rb);
    std::vector<float> sc(q8 ? (size_t)rows * nb : 0);
    size_t row = 0;
    for (int i = 0; i < np; i++) {
      if (!parts[i].data) continue;
      const uint8_t *src = reinterpret_cast<const uint8_t *>(parts[i].data);
      const size_t n = parts[i].rows;
      if (q8) {
        for (size_t blk = 0; blk < n * nb; blk++) {
          const uint8_t *p = src + blk * 34;
          __half_raw hr;
          hr.x = (unsigned short)(p[0] | (p[1] << 8));
          sc[row * nb + blk] = __half2float(__half(hr));
          memcpy(&buf[(row * nb + blk) * 32], p + 2, 32);
        }
      } else {
        memcpy(&buf[row * rb], src, n * rb);
      }
      row += n;
    }
    if (perm) {
      std::vector<uint8_t> pb(perm->size() * rb, 0);
      std::vector<float> ps(q8 ? perm->size() * nb : 0, 0.f);
      for (size_t i = 0; i < perm->size(); i++) {
        const int r = (*perm)[i];
        if (r < 0) continue;
        memcpy(&pb[i * rb], &buf[(size_t)r * rb], rb);
        if (q8) memcpy(&ps[i * nb], &sc[(size_t)r * nb], nb * 4);
      }
      buf.swap(pb);
      sc.swap(ps);
      rows = (uint32_t)perm->size();
    }
    if (pack && c->qmod && (type == RLM_TYPE_F16 || type == RLM_TYPE_F32)) {
      // device_q.cu's module multiplies BF16 and the block-quantized types
      // only: F16 and F32 rows as BF16, rounded as the product rounds them.
      std::vector<uint8_t> b16((size_t)rows * cols * 2);
      for (size_t e = 0; e < (size_t)rows * cols; e++) {
        float v;
        if (type == RLM_TYPE_F16) {
          __half_raw hr;
          hr.x = (unsigned short)(buf[2 * e] | (buf[2 * e + 1] << 8));
          v = __half2float(__half(hr));
        } else {
          memcpy(&v, &buf[4 * e], 4);
        }
        const uint16_t h = bf16_rne(v);
        b16[2 * e] = (uint8_t)h;
        b16[2 * e + 1] = (uint8_t)(h >> 8);
      }
      buf.swap(b16);
      type = RLM_TYPE_BF16;
    }
    if (pack) {  // the tensor-core product's order (pack_tiles); Q8_0 scales padded to whole tiles
      buf = pack_tiles(buf, rows, cols, q8 ? 1 : type_bytes(type, 1));
      if (q8) sc.resize((size_t)(rows + 15) / 16 * 16 * nb, 0.f);
    }
    char *dst;
    float *ds = nullptr;
    DALLOC_OR(dst, char, buf.size(), return false);
    if (q8) DALLOC_OR(ds, float, sc.size(), return false);
    if (!upload(buf.data(), buf.size(), dst) || (q8 && !upload(sc.data(), sc.size() * 4, ds))) {
      seterr(err, errlen, "%s: upload failed", what);
      return false;
    }
    *out = DMat{dst, (int)type, (int)rows, (int)cols, ds, 1};
    return true;
  };
  auto vec = [&](const float *src, size_t n, float **out) -> bool {
    float *p;
    DALLOC_OR(p, float, n, return false);
    if (src && !upload(src, n * 4, p)) return false;
    *out = p;
    return true;
  };
  Dev &d = c->h;
  d.n_layer = m->n_layer;
  d.dim = m->dim;
  d.n_head = m->n_head;
  d.n_kv = m->n_kv_head;
  d.hd = m->head_dim;
  d.ffn = m->ffn;
  d.vocab = m->vocab;
  d.rope_dim = m->rope_dim;
  d.neox = m->rope_neox;
  d.rope_scale = m->rope_scale;
  d.eps = m->norm_eps;
  // A window wider than any int position never cuts: none.
  d.window = m->window > 0x7fffffffu ? 0 : (int)m->window;
  // The matrix phases run on the tensor cores (matmul.cuh) unless
  // RINGLM_CUDA_GEMV=1 asks for the CUDA-core phases, or a width is not a
  // whole number of 32-column groups.
  {
    const char *pe = getenv("RINGLM_CUDA_GEMV");
    const bool gemv = pe && *pe && strcmp(pe, "0") != 0;
    d.mma = !gemv && m->dim % 32 == 0 && m->ffn % 32 == 0 && qd % 32 == 0 && m->rope_dim % 2 == 0;
    // Attention on the tensor cores (attn_tc.cuh) unless RINGLM_CUDA_ATTN=cores
    // or the head dimension is not one it takes (32, 64, 96, 128: attn_tc_ok).
    const char *pa = getenv("RINGLM_CUDA_ATTN");
    d.attn_tc = attn_tc_ok(d.hd) && !(pa && strcmp(pa, "cores") == 0);
    const int group = d.n_head / d.n_kv;
    d.a_hpt = min(group, 16);
    d.a_nsub = (group + d.a_hpt - 1) / d.a_hpt;
    d.a_tpt = 16 / d.a_hpt;
  }
  // Row orders of the permuted matrices: QKV by RoPE pairs (qkv_pair),
  // gate and up interleaved by eights; device row 16i + j (j < 8) holds a
  // pair's first row, 16i + 8 + j its second.
  std::vector<int> qkv_perm, gu_perm;
  if (d.mma) {
    const int npairs = (int)(qd + 2 * kvd) / 2;
    qkv_perm.assign((size_t)(npairs + 7) / 8 * 16, -1);
    for (int p = 0; p < npairs; p++) {
      const QKVPair pr = qkv_pair(p, d.n_head, d.n_kv, d.hd, d.rope_dim, d.neox);
      qkv_perm[(p / 8) * 16 + p % 8] = pr.r0;
      qkv_perm[(p / 8) * 16 + 8 + p % 8] = pr.r1;
    }
    gu_perm.assign(2 * (size_t)m->ffn, -1);
    for (int r = 0; r < d.ffn; r++) {
      gu_perm[(r / 8) * 16 + r % 8] = r;
      gu_perm[(r / 8) * 16 + 8 + r % 8] = d.ffn + r;
    }
  }
  {
    std::vector<float> inv(m->rope_dim / 2);
    for (uint32_t i = 0; i < inv.size(); i++) {
      inv[i] = (float)(1.0 / pow((double)m->rope_base, (double)((float)(2 * i) / (float)m->rope_dim)));
      if (m->rope_factor) inv[i] /= m->rope_factor[i];
    }
    float *p;
    if (!vec(inv.data(), inv.size(), &p)) return bail();
    d.inv_freq = p;
  }
  // A model with block-quantized weights (other than Q8_0) runs on
  // device_q.cu's kernel (c->qmod), on the tensor-core phases.
  {
    auto blockq = [&](const rlm_matrix &x) { return x.data && qType(x.type) && x.type != RLM_TYPE_Q8_0; };
    const rlm_matrix *first = blockq(m->embed) ? &m->embed : blockq(m->output) ? &m->output : nullptr;
    const char *what = first == &m->embed ? "token_embd" : "output";
    for (uint32_t l = 0; l < m->n_layer && !first; l++) {
      const rlm_layer &S = m->layers[l];
      const rlm_matrix *ms[7] = {&S.q, &S.k, &S.v, &S.out, &S.gate, &S.up, &S.down};
      static const char *const names[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
      for (int i = 0; i < 7 && !first; i++)
        if (blockq(*ms[i])) first = ms[i], what = names[i];
    }
    if (first) {
      if (!rlm_qmod_kernel) {
        seterr(err, errlen, "%s: %s weights: this CUDA library was built without the block-quantized types; "
               "make cuda without CUDA_QUANT=0 builds one that reads them", what, type_name(first->type));
        return bail();
      }
      if (!d.mma) {
        seterr(err, errlen, "%s: %s weights are read by the tensor-core product only; the CUDA-core phases (RINGLM_CUDA_GEMV=1, or "
               "widths that are not multiples of 32) read F32, F16, BF16 and Q8_0", what, type_name(first->type));
        return bail();
      }
      if (!d.attn_tc) {
        if (attn_tc_ok(d.hd))
          seterr(err, errlen, "%s: %s weights run with the tensor-core attention only; RINGLM_CUDA_ATTN=cores is for F32, F16, "
                 "BF16 and Q8_0 models", what, type_name(first->type));
        else
          seterr(err, errlen, "%s: %s weights run with the tensor-core attention only, which takes head dimensions 32, 64, 96 "
                 "and 128, not %d", what, type_name(first->type), d.hd);
        return bail();
      }
      c->qmod = true;
    }
  }
  // The other models whose products and attention both run on the tensor
  // cores run device_tc.cu's kernel, when the library has it;
  // RINGLM_CUDA_TCMOD=0 keeps device.cu's, for comparisons.
  if (!c->qmod && d.mma && d.attn_tc && rlm_tcmod_kernel) {
    const char *pt = getenv("RINGLM_CUDA_TCMOD");
    c->tcmod = !(pt && strcmp(pt, "0") == 0);
  }
  if (!stack(&d.embed, &m->embed, 1, "token_embd", nullptr, false)) return bail();
  if (m->output.data && m->output.data != m->embed.data) {
    if (!stack(&d.output, &m->output, 1, "output", nullptr, d.mma)) return bail();
  } else if (d.mma && d.embed.type != RLM_TYPE_QANY) {  // tied: the head reads a packed copy, the embedding phase the rows
    if (!stack(&d.output, &m->embed, 1, "output (tied)", nullptr, true)) return bail();
  } else {
    // The CUDA-core head reads the rows; a block-quantized embedding (only
    // ever with the tensor-core phases: c->qmod) is in the product's order already.
    d.output = d.embed;
  }
  {
    float *p;
    if (!vec(m->out_norm, m->dim, &p)) return bail();
    d.out_norm = p;
  }
  c->layers.resize(m->n_layer);
  for (uint32_t l = 0; l < m->n_layer; l++) {
    const rlm_layer &S = m->layers[l];
    DLayer &L = c->layers[l];
    float *p;
    if (!vec(S.attn_norm, m->dim, &p)) return bail();
    L.attn_norm = p;
    if (!vec(S.ffn_norm, m->dim, &p)) return bail();
    L.ffn_norm = p;
    const rlm_matrix qkv[3] = {S.q, S.k, S.v};
    if (!stack(&L.qkv, qkv, 3, "attn_qkv", d.mma ? &qkv_perm : nullptr, d.mma)) return bail();
    if ((uint32_t)L.qkv.rows != (d.mma ? (uint32_t)qkv_perm.size() : qd + 2 * kvd)) {
      seterr(err, errlen, "layer %u: QKV has %d rows, want %u", l, L.qkv.rows, qd + 2 * kvd);
      return bail();
    }
    L.qkv_bias = nullptr;
    if (S.q_bias || S.k_bias || S.v_bias) {
      std::vector<float> b(qd + 2 * kvd, 0.f);
      if (S.q_bias) memcpy(b.data(), S.q_bias, qd * 4);
      if (S.k_bias) memcpy(b.data() + qd, S.k_bias, kvd * 4);
      if (S.v_bias) memcpy(b.data() + qd + kvd, S.v_bias, kvd * 4);
      if (!vec(b.data(), b.size(), &p)) return bail();
      L.qkv_bias = p;
    }
    if (!stack(&L.o, &S.out, 1, "attn_output", nullptr, d.mma)) return bail();
    const rlm_matrix gu[2] = {S.gate, S.up};
    if (!stack(&L.gu, gu, 2, "ffn_gate/up", d.mma ? &gu_perm : nullptr, d.mma)) return bail();
    if ((uint32_t)L.gu.rows != 2 * m->ffn) {
      seterr(err, errlen, "layer %u: gate+up has %d rows, want %u", l, L.gu.rows, 2 * m->ffn);
      return bail();
    }
    if (!stack(&L.down, &S.down, 1, "ffn_down", nullptr, d.mma)) return bail();
  }
  // Grid size: one block per SM (the kernel is written for 512 threads, RLM_THREADS).
  c->shmem = sizeof(float) * kSmemFloats + kRingBytes;
  CK(cudaFuncSetAttribute(c->kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c->shmem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, c->kernel(), kThreads, c->shmem));
  if (per_sm < 1) {
    seterr(err, errlen, "the persistent kernel does not fit on an SM of %s", prop.name);
    return bail();
  }
  int grid = prop.multiProcessorCount * per_sm;
  if (o->grid_blocks > 0 && (int)o->grid_blocks < grid) grid = o->grid_blocks;
  c->info.grid_blocks = grid;
  c->info.threads = kThreads;
  snprintf(c->info.kernel, sizeof c->info.kernel, "%s", c->qmod ? "block-quantized" : c->tcmod ? "tensor-core" : "general");

  // Each matrix's chunks for the tensor-core products, from its shape
  // and the grid only.
  if (d.mma) {
    d.output.nk = choose_nk(d.output.rows, d.output.cols, grid);
    for (DLayer &L : c->layers) {
      L.qkv.nk = choose_nk(L.qkv.rows, L.qkv.cols, grid);
      L.o.nk = choose_nk(L.o.rows, L.o.cols, grid);
      L.gu.nk = choose_nk(L.gu.rows, L.gu.cols, grid);
      L.down.nk = choose_nk(L.down.rows, L.down.cols, grid);
    }
  }
  {
    DLayer *p;
    DALLOC(p, DLayer, m->n_layer);
    CK(cudaMemcpy(p, c->layers.data(), sizeof(DLayer) * m->n_layer, cudaMemcpyHostToDevice));
    d.layers = p;
  }
  c->info.weight_bytes = wbytes;

  // Work buffers.
  d.trap_step = o->trap_step;
  d.slots = o->slots;
  d.bs = o->block_size ? o->block_size : 16;
  d.max_bpb = o->max_blocks_per_slot;
  d.ctx = d.max_bpb * d.bs;
  d.ctx_limit = o->context > 0 && (int)o->context <= d.ctx ? (int)o->context : d.ctx;
  d.max_tok = o->max_step_tokens;
  if (d.slots <= 0 || d.max_bpb <= 0 || d.max_tok <= 0) {
    seterr(err, errlen, "slots %u, max_blocks_per_slot %u and max_step_tokens %u must be positive", o->slots,
           o->max_blocks_per_slot, o->max_step_tokens);
    return bail();
  }
  size_t before = 0;
  CK(cudaMemGetInfo(&before, &total_b));
  const int T = d.max_tok, V = d.vocab;
  DALLOC(d.slot, Slot, d.slots);
  DALLOC(d.btab, int, (size_t)d.slots * d.max_bpb);
  DALLOC(d.hist, int, (size_t)d.slots * d.ctx);
  DALLOC(d.stop_ids, int, (size_t)d.slots * kMaxStop);
  DALLOC(d.bias_tok, int, (size_t)d.slots * kMaxBias);
  DALLOC(d.bias_val, float, (size_t)d.slots * kMaxBias);
  DALLOC(d.x, float, (size_t)T * d.dim);
  DALLOC(d.inv, float, max(T, d.slots));
  DALLOC(d.rope_cs, float2, (size_t)T * 64);
  DALLOC(d.q, float, (size_t)T * qd);
  DALLOC(d.att, float, (size_t)T * qd);
  DALLOC(d.h, float, (size_t)T * d.ffn);
  if (d.mma) {  // the products' inputs in BF16 above 16 rows (state.cuh)
    DALLOC(d.xb, __nv_bfloat16, (size_t)max(T, d.slots) * d.dim);
    DALLOC(d.ab, __nv_bfloat16, (size_t)T * qd);
    DALLOC(d.hb, __nv_bfloat16, (size_t)T * d.ffn);
  }
  DALLOC(d.t_slot, int, T);
  DALLOC(d.t_pos, int, T);
  DALLOC(d.t_id, int, T);
  DALLOC(d.t_kv, size_t, T);
  DALLOC(d.a_tile, int4, T);
  // Warp groups' chunk partials of wide heads (attn_part: up to 64 they stay in shared memory).
  if (d.attn_tc && d.hd > 64) DALLOC(d.apart, float, (size_t)grid * kWarps * attn_part_floats(d.hd));
  DALLOC(d.r_tok, int, d.slots);
  DALLOC(d.r_slot, int, d.slots);
  DALLOC(d.r_fast, int, d.slots);
  DALLOC(d.r_best, unsigned long long, d.slots);
  DALLOC(d.r_finite, int, d.slots);
  DALLOC(d.r_comp, unsigned long long, d.slots);
  DALLOC(d.logits, float, (size_t)d.slots * V);
  DALLOC(d.w_scr, double, (size_t)grid * V);
  DALLOC(d.bits_scr, unsigned, (size_t)grid * (V / 32 + 1));
  DALLOC(d.cnt_scr, int, (size_t)grid * V);
  if (d.mma) {
    // The products' scratch: partial sums for the matrices of several
    // chunks, counters for every (pass, tile).
    size_t part = 0, cnt = 0;
    auto need = [&](const DMat &w, int rows) {
      const size_t tiles = (w.rows + kGemmRows - 1) / kGemmRows, passes = (rows + kPass - 1) / kPass;
      if (w.nk > 1) part = max(part, (size_t)w.nk * rows * tiles * kGemmRows);
      cnt = max(cnt, passes * tiles);
    };
    need(d.output, max(T, d.slots));
    for (const DLayer &L : c->layers) {
      need(L.qkv, T);
      need(L.o, T);
      need(L.gu, T);
      need(L.down, T);
    }
    DALLOC(d.gpart, float, part);
    DALLOC(d.gcnt, int, cnt);
  }
  DALLOC(d.pblk, unsigned long long, grid);
  d.stage_cap = max(4 * d.slots * 4, (int)RLM_SLOT_PARAMS_WORDS + kMaxStop + 2 * kMaxBias + d.ctx);
  d.stage_cap = max(d.stage_cap, 4 * 4096);
  DALLOC(d.stage, unsigned, d.stage_cap);
  size_t after = 0;
  CK(cudaMemGetInfo(&after, &total_b));
  c->info.work_bytes = before > after ? before - after : 0;

  // KV pool.
  const uint64_t per_block = 2ull * d.n_layer * d.n_kv * d.bs * d.hd * sizeof(__half);
  uint64_t nb = o->num_blocks;
  if (nb == 0) {
    uint64_t budget = after > (512ull << 20) ? (after - (512ull << 20)) * 9 / 10 : 0;
    if (o->kv_max_bytes && budget > o->kv_max_bytes) budget = o->kv_max_bytes;
    nb = budget / per_block;
  }
  if (nb == 0 || nb * per_block + (64ull << 20) > after) {
    seterr(err, errlen, "the KV pool needs %.2f GiB for %llu blocks of %u positions (%.2f MiB each); %.2f GiB free after the weights",
           (double)(max(nb, (uint64_t)1) * per_block) / 1073741824.0, (unsigned long long)max(nb, (uint64_t)1), d.bs,
           per_block / 1048576.0, after / 1073741824.0);
    return bail();
  }
  d.num_blocks = (int)nb;
  DALLOC(d.kcache, __half, nb * per_block / 4);
  DALLOC(d.vcache, __half, nb * per_block / 4);
  c->info.num_blocks = (uint32_t)nb;
  c->info.kv_bytes = nb * per_block;
  CK(cudaMemGetInfo(&after, &total_b));
  c->info.free_bytes = after;
  return c;
#undef CK
}

int rlm_get_info(rlm_ctx *c, rlm_info *out) {
  if (!c || !out) return -1;
  *out = c->info;
  return 0;
}

int rlm_start(rlm_ctx *c, void *arena, uint64_t arena_bytes, char *err, size_t errlen) {
  if (c->started) {
    seterr(err, errlen, "the kernel is already running");
    return -1;
  }
  const int chk = rlm_header_check((const rlm_header *)arena, arena_bytes);
  if (chk != 0) {
    seterr(err, errlen, "arena header refused (check %d)", chk);
    return -1;
  }
  CKR(cudaSetDevice(c->device), -1);
  void *dev_arena = nullptr;
  CKR(cudaHostGetDevicePointer(&dev_arena, arena, 0), -1);
  Dev &d = c->h;
  d.arena = (char *)dev_arena;
  d.n_tok = d.n_rows = d.stop = d.executed = 0;
  d.sub_cons = d.cprod = d.ccons = 0;
  d.steps_seen = 0;
  {
    const char *pe = getenv("RINGLM_CUDA_PROFILE");
    d.profile = pe && *pe && strcmp(pe, "0") != 0 ? (strcmp(pe, "2") == 0 ? 2 : 1) : 0;
    memset(d.prof, 0, sizeof d.prof);
    memset(d.gprof, 0, sizeof d.gprof);
    memset(d.pbusy, 0, sizeof d.pbusy);
    memset(d.pslow, 0, sizeof d.pslow);
    memset(d.psync, 0, sizeof d.psync);
    memset(d.pstep_slow, 0, sizeof d.pstep_slow);
    memset(d.pstep_done, 0, sizeof d.pstep_done);
    memset(d.aprof, 0, sizeof d.aprof);
    d.prof_last = 0;
  }
  if (!c->dptr) {
    cudaError_t ae;
    c->dptr = (Dev *)dalloc(c, sizeof(Dev), &ae);
    if (ae != cudaSuccess) {
      seterr(err, errlen, "cudaMalloc: %s", cudaGetErrorString(ae));
      return -1;
    }
  }
  CKR(cudaMemcpy(c->dptr, &d, sizeof(Dev), cudaMemcpyHostToDevice), -1);
  {
    void *gb = nullptr;  // the grid barrier's state (gsync), in case a kernel before left it mid-barrier
    CKR(c->gbar(&gb), -1);
    CKR(cudaMemsetAsync(gb, 0, sizeof(GridBar), c->stream), -1);
  }
  void *args[] = {&c->dptr};
  CKR(cudaLaunchCooperativeKernel(c->kernel(), dim3(c->info.grid_blocks), dim3(kThreads), args, c->shmem, c->stream), -1);
  c->info.launches++;
  c->started = true;
  c->waited = false;
  return 0;
}

int rlm_wait(rlm_ctx *c, char *err, size_t errlen) {
  if (!c->started) {
    seterr(err, errlen, "the kernel was not started");
    return -1;
  }
  if (c->waited) {
    if (c->wait_rc) seterr(err, errlen, "%s", c->wait_err);
    return c->wait_rc;
  }
  cudaSetDevice(c->device);
  cudaError_t e = cudaStreamSynchronize(c->stream);
  c->waited = true;
  if (e != cudaSuccess) {
    snprintf(c->wait_err, sizeof c->wait_err, "the persistent kernel failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    c->wait_rc = -1;
    seterr(err, errlen, "%s", c->wait_err);
    return -1;
  }
  c->started = false;  // may be started again on a fresh arena
  return 0;
}

int rlm_query(rlm_ctx *c, char *err, size_t errlen) {
  if (!c->started) return c->wait_rc ? -1 : 0;
  cudaSetDevice(c->device);
  cudaError_t e = cudaStreamQuery(c->stream);
  if (e == cudaErrorNotReady) return 1;
  if (e == cudaSuccess) return 0;
  seterr(err, errlen, "the persistent kernel failed: %s", cudaGetErrorString(e));
  return -1;
}

int rlm_read_logits(rlm_ctx *c, uint32_t row, float *out, uint32_t n, char *err, size_t errlen) {
  if (row >= (uint32_t)c->h.slots || n > (uint32_t)c->h.vocab) {
    seterr(err, errlen, "row %u / count %u out of range", row, n);
    return -1;
  }
  CKR(cudaSetDevice(c->device), -1);
  CKR(cudaMemcpyAsync(out, c->h.logits + (size_t)row * c->h.vocab, (size_t)n * 4, cudaMemcpyDeviceToHost, c->side), -1);
  CKR(cudaStreamSynchronize(c->side), -1);
  return 0;
}

int rlm_copy_bandwidth(rlm_ctx *c, uint64_t bytes, double *gbps, char *err, size_t errlen) {
  CKR(cudaSetDevice(c->device), -1);
  void *a = nullptr, *b = nullptr;
  CKR(cudaMalloc(&a, bytes), -1);
  if (cudaMalloc(&b, bytes) != cudaSuccess) {
    cudaFree(a);
    seterr(err, errlen, "cudaMalloc(%llu) for the copy benchmark failed", (unsigned long long)bytes);
    return -1;
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, c->side);  // warm-up
  const int reps = 10;
  cudaEventRecord(e0, c->side);
  for (int i = 0; i < reps; i++) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, c->side);
  cudaEventRecord(e1, c->side);
  cudaError_t e = cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  if (e != cudaSuccess) {
    seterr(err, errlen, "copy benchmark: %s", cudaGetErrorString(e));
    return -1;
  }
  *gbps = 2.0 * (double)bytes * reps / (ms * 1e-3) / 1e9;
  return 0;
}

}  // extern "C"
#endif  // RLM_MAINMOD
