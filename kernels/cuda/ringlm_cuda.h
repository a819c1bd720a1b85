/* ringlm_cuda.h: the C ABI of libringlm_cuda.so, the CUDA device.
 *
 * Go (package kernels/cuda) loads the library with dlopen and calls these
 * functions through dlsym'd pointers; nothing here needs CUDA headers, so
 * cgo builds without the CUDA toolkit.
 *
 * Life of a device:
 *   rlm_create   uploads the weights (from the mmap'd GGUF) and allocates
 *                the KV pool and the work buffers, all in VRAM;
 *   rlm_host_alloc gives the pinned, mapped memory that holds the arena;
 *   rlm_start    launches the persistent kernel on the arena (once);
 *   rlm_wait     blocks until the kernel has exited (after STOP, or a fault);
 *   rlm_destroy  frees everything.
 * Functions return 0 on success and a negative value on failure, with a
 * message (NUL-terminated, truncated to errlen) in err.
 */
#ifndef RINGLM_CUDA_H
#define RINGLM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RLM_CUDA_ABI 4

/* ggml type ids. The device reads F32, F16, BF16 and Q8_0 weights (Q8_0
 * blocks become int8 quants plus float scales in VRAM), and the block types
 * below at their own bit width (qpack.h: code planes in the tensor-core
 * product's order plus the file's scale bytes), and keeps an F16 KV cache. */
#define RLM_TYPE_F32 0
#define RLM_TYPE_F16 1
#define RLM_TYPE_Q4_0 2
#define RLM_TYPE_Q4_1 3
#define RLM_TYPE_Q5_0 6
#define RLM_TYPE_Q5_1 7
#define RLM_TYPE_Q8_0 8
#define RLM_TYPE_Q2_K 10
#define RLM_TYPE_Q3_K 11
#define RLM_TYPE_Q4_K 12
#define RLM_TYPE_Q5_K 13
#define RLM_TYPE_Q6_K 14
#define RLM_TYPE_IQ4_NL 20
#define RLM_TYPE_IQ4_XS 23
#define RLM_TYPE_BF16 30
#define RLM_TYPE_MXFP4 39

/* A weight matrix in host memory (the GGUF mapping): rows × cols elements,
 * row-major, ggml-encoded in type. data NULL: absent. */
typedef struct rlm_matrix {
  const void *data;
  uint64_t bytes;
  uint32_t type;
  uint32_t rows;
  uint32_t cols;
  uint32_t pad_;
} rlm_matrix;

/* One transformer block. Vectors are float32 arrays in host memory (NULL:
 * absent). Fused layouts (phi3): q holds the Q, K and V rows and k, v are
 * absent; up holds the gate rows then the up rows and gate is absent. */
typedef struct rlm_layer {
  const float *attn_norm; /* dim */
  rlm_matrix q, k, v;     /* q_dim × dim, kv_dim × dim, kv_dim × dim */
  const float *q_bias;    /* q_dim, or NULL */
  const float *k_bias;    /* kv_dim, or NULL */
  const float *v_bias;    /* kv_dim, or NULL */
  rlm_matrix out;         /* dim × q_dim */
  const float *ffn_norm;  /* dim */
  rlm_matrix gate, up;    /* ffn × dim each (or up: 2·ffn × dim, fused) */
  rlm_matrix down;        /* dim × ffn */
} rlm_layer;

typedef struct rlm_model {
  uint32_t abi; /* RLM_CUDA_ABI */
  uint32_t n_layer;
  uint32_t dim;
  uint32_t n_head;
  uint32_t n_kv_head;
  uint32_t head_dim;
  uint32_t ffn;
  uint32_t vocab;
  uint32_t rope_dim;  /* rotated dimensions of a head (≤ head_dim, even) */
  uint32_t rope_neox; /* 1: pairs (i, i + rope_dim/2); 0: pairs (2i, 2i+1) */
  float rope_base;
  float rope_scale;         /* positions are multiplied by it (1 = none) */
  float norm_eps;           /* RMSNorm epsilon */
  uint32_t window;          /* sliding attention window: a token at p sees
                               max(0, p - window + 1)..p (0: all of 0..p) */
  const float *rope_factor; /* rope_dim/2 frequency divisors, or NULL */
  rlm_matrix embed;         /* vocab × dim */
  rlm_matrix output;        /* vocab × dim; data == embed.data when tied */
  const float *out_norm;    /* dim */
  const rlm_layer *layers;  /* n_layer */
} rlm_model;

typedef struct rlm_opts {
  int32_t device;               /* CUDA ordinal */
  uint32_t slots;               /* sequences at once */
  uint32_t block_size;          /* KV positions per block */
  uint32_t max_blocks_per_slot; /* block-table length: ceil(context / block_size) */
  uint32_t max_step_tokens;     /* tokens in one STEP (the token budget) */
  uint32_t num_blocks;          /* KV blocks; 0: as many as free memory allows */
  uint64_t kv_max_bytes;        /* cap on the KV pool when num_blocks is 0 (0: none) */
  uint32_t kv_type;             /* must be RLM_TYPE_F16 */
  uint32_t grid_blocks;         /* persistent blocks; 0: one per SM × occupancy */
  uint32_t trap_step;           /* fault injection for tests: the kernel traps on its n-th STEP (0: never) */
  uint32_t context;             /* positions a slot may hold (0: max_blocks_per_slot × block_size) */
} rlm_opts;

typedef struct rlm_info {
  char name[128];            /* the GPU's name */
  int32_t sm_count;
  int32_t grid_blocks;       /* blocks of the persistent kernel */
  int32_t threads;           /* threads per block */
  uint32_t num_blocks;       /* KV blocks allocated */
  uint64_t weight_bytes;     /* VRAM taken by the weights */
  uint64_t kv_bytes;         /* VRAM taken by the KV pool */
  uint64_t work_bytes;       /* VRAM taken by activations, logits, state */
  uint64_t free_bytes;       /* free VRAM after everything */
  uint64_t total_bytes;      /* the GPU's memory */
  uint64_t launches;         /* kernel launches since rlm_create */
  char kernel[32];           /* the module whose kernel runs: "tensor-core" (device_tc.cu),
                                "block-quantized" (device_q.cu) or "general" (device.cu) */
} rlm_info;

typedef struct rlm_ctx rlm_ctx;

/* rlm_probe: the number of CUDA devices (> 0), or a negative value and
 * why there is none (no driver, no device). */
int rlm_probe(char *err, size_t errlen);

/* Pinned host memory, mapped into the device's address space
 * (cudaHostAlloc with Mapped | Portable), zeroed. NULL on failure. */
void *rlm_host_alloc(uint64_t bytes, char *err, size_t errlen);
int rlm_host_free(void *p, char *err, size_t errlen);

/* rlm_create uploads the model and allocates the KV pool. A model or pool
 * that does not fit fails here with the sizes needed and free. */
rlm_ctx *rlm_create(const rlm_model *m, const rlm_opts *o, char *err, size_t errlen);
int rlm_get_info(rlm_ctx *c, rlm_info *out);

/* rlm_start launches the persistent kernel on an arena from
 * rlm_host_alloc (header already written by the host). It may be called
 * again only after rlm_wait returned 0 (a clean STOP). Setting
 * RINGLM_CUDA_PROFILE=1 in the environment makes the kernel add up each
 * phase's time and print the totals when it stops. */
int rlm_start(rlm_ctx *c, void *arena, uint64_t arena_bytes, char *err, size_t errlen);

/* rlm_wait blocks until the kernel exits: 0 after STOP, negative with the
 * CUDA error otherwise. rlm_query does not block: 1 still running, 0
 * exited cleanly, negative: failed. */
int rlm_wait(rlm_ctx *c, char *err, size_t errlen);
int rlm_query(rlm_ctx *c, char *err, size_t errlen);

/* rlm_read_logits copies the float32 logits that the last STEP with a
 * sampling entry computed for its row-th sampling entry (entries with
 * SAMPLE, in entry order) into out[0..n). The sampler cleans and adjusts
 * them in place (bias, penalties), so they are the model's raw logits only
 * for greedy rows without bias or penalties. Meant for tests, between
 * steps (the kernel keeps running). */
int rlm_read_logits(rlm_ctx *c, uint32_t row, float *out, uint32_t n, char *err, size_t errlen);

/* rlm_copy_bandwidth measures device-to-device copy bandwidth (GB/s, read
 * plus write bytes per second) over a buffer of `bytes`. Call it before
 * rlm_start: the persistent kernel would compete for the memory. */
int rlm_copy_bandwidth(rlm_ctx *c, uint64_t bytes, double *gbps, char *err, size_t errlen);

/* rlm_test_sample is for tests: it runs the kernel's own OPEN_SLOT
 * decoding and validation, sampler and finish rule on n rows, one block
 * each, outside the persistent kernel. Row i is a slot opened with the
 * OPEN_SLOT payload words[offs[i] .. offs[i+1]) (as the ring carries it;
 * its history tokens are what the penalties see) that samples the token
 * for position start_pos from logits[i·vocab .. (i+1)·vocab), as its first
 * sampled token (max_tokens 1 finishes it). The answer of row i: bad_word
 * -1 when the payload opened, else the BAD_PARAMS word; the token, its
 * logprob (0 unless asked), the finish reason, and top_n alternatives
 * (RLM_TOP_NONE pads). Optional: a library without it still loads. */
typedef struct rlm_sample_out {
  int32_t bad_word;
  int32_t token;
  float logprob;
  uint32_t finish;
  uint32_t top_tok[20]; /* RLM_MAX_TOP */
  float top_lp[20];
} rlm_sample_out;
int rlm_test_sample(uint32_t vocab, uint32_t n, const uint32_t *words, const uint64_t *offs, const float *logits,
                    rlm_sample_out *out, char *err, size_t errlen);

/* rlm_test_gemm is for tests and measurements: Y = bf16(X) · Wᵀ with the
 * tensor-core tile product (mma.cuh): X is M × K float32 (rounded to bf16
 * on the GPU), W is N × K bf16 bits, Y is M × N float32, all row-major, K a
 * multiple of 32 (at most 8192). One block per SM (or grid_blocks, when
 * fewer, as rlm_options' grid_blocks) takes tiles of weight rows in turn,
 * the matrix split into chunks for that grid as rlm_create splits a
 * phase's. iters > 0 also times that many more runs (*ms: the mean,
 * in milliseconds). Above 16 rows it also runs the product from X
 * already rounded to BF16 on the host (the inputs the persistent kernel's
 * phases hand over then), fails unless every output has the same bits,
 * and times that path. Optional, as rlm_test_sample. */
int rlm_test_gemm(uint32_t M, uint32_t N, uint32_t K, const float *X, const uint16_t *W, float *Y, uint32_t iters,
                  uint32_t grid_blocks, double *ms, char *err, size_t errlen);

/* rlm_test_gemm_q is rlm_test_gemm over block-quantized weights: W is the
 * nparts matrices stacked by rows (N rows in all, K = their columns, at most
 * 8192), in their GGUF encoding (any of the block types above; parts may
 * differ in type at multiples of 8 rows), uploaded as rlm_create uploads a
 * stack (qpack.h); Y is M × N. Optional, as rlm_test_sample. */
int rlm_test_gemm_q(uint32_t M, const float *X, const rlm_matrix *parts, uint32_t nparts, float *Y, uint32_t iters,
                    uint32_t grid_blocks, double *ms, char *err, size_t errlen);

/* rlm_destroy frees everything. If the kernel is still running it first
 * waits for it to exit, so the host must have sent STOP. */
void rlm_destroy(rlm_ctx *c);

/* A kernel fault (an illegal access, a trap) is sticky: the process's CUDA
 * context is lost and, as the CUDA documentation says, only a new process
 * can use the GPU again (cudaDeviceReset in the same process was tried on an
 * H100 and the device stayed "busy or unavailable"). rlm_wait reports the
 * fault; the host fails its requests and exits so a supervisor restarts it. */

#ifdef __cplusplus
}
#endif
#endif
