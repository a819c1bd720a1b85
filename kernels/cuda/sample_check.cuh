#pragma once
// sample_check.cuh: rlm_test_sample (ringlm_cuda.h), a test-only entry
// point that runs the kernel's own OPEN_SLOT decoding (slot_open), sampler
// (sample_row) and finish rule (take_token) on given payloads and logits,
// so that a Go test can hold them to package sample and kernels.Executor
// case by case. Included by device.cu after host.cuh.

namespace {

static_assert(sizeof(((rlm_sample_out *)0)->top_tok) / sizeof(uint32_t) == RLM_MAX_TOP, "rlm_sample_out holds RLM_MAX_TOP alternatives");

// check_sample: row r opens slot r with its payload, samples, and answers.
__global__ void __launch_bounds__(kThreads, 1) check_sample(Dev *dp, int n, const unsigned *words,
                                                             const unsigned long long *offs, rlm_sample_out *out) {
  Dev &d = *dp;
  __shared__ SampleShared ssh;
  __shared__ unsigned top_tok[RLM_MAX_TOP];
  __shared__ float top_lp[RLM_MAX_TOP];
  __shared__ int s_bad;
  for (int r = blockIdx.x; r < n; r += gridDim.x) {
    if (threadIdx.x == 0) {
      s_bad = slot_open(d, r, words + offs[r], (uint32_t)(offs[r + 1] - offs[r]));
      d.r_slot[r] = r;
    }
    __syncthreads();
    rlm_sample_out &o = out[r];
    if (s_bad >= 0) {
      if (threadIdx.x == 0) {
        memset(&o, 0, sizeof o);
        o.bad_word = s_bad;
      }
      __syncthreads();
      continue;
    }
    int tok;
    float lp;
    sample_row(d, r, ssh, &tok, &lp, top_tok, top_lp);
    if (threadIdx.x == 0) {
      o.bad_word = -1;
      o.token = tok;
      o.logprob = lp;
      o.finish = take_token(d, r, tok);
      const int nt = d.slot[r].n_top;
      for (int k = 0; k < RLM_MAX_TOP; k++) {
        o.top_tok[k] = k < nt ? top_tok[k] : RLM_TOP_NONE;
        o.top_lp[k] = k < nt ? top_lp[k] : 0.f;
      }
    }
    __syncthreads();
  }
}

}  // namespace

extern "C" int rlm_test_sample(uint32_t vocab, uint32_t n, const uint32_t *words, const uint64_t *offs, const float *logits,
                               rlm_sample_out *out, char *err, size_t errlen) {
  if (vocab == 0 || n == 0) {
    seterr(err, errlen, "rlm_test_sample: vocabulary %u, %u rows", vocab, n);
    return -1;
  }
  // The context reaches past every row's start position.
  int ctx = 1;
  for (uint32_t i = 0; i < n; i++)
    if (offs[i + 1] - offs[i] > RLM_SP_OFF_START_POS) ctx = max(ctx, (int)min(words[offs[i] + RLM_SP_OFF_START_POS], 1u << 20) + 1);
  const int grid = (int)min(n, 264u);
  Dev h{};
  h.vocab = (int)vocab;
  h.ctx = h.ctx_limit = ctx;
  h.slots = (int)n;
  std::vector<void *> allocs;
  auto bail = [&]() {
    for (void *p : allocs) cudaFree(p);
    return -1;
  };
  auto alloc = [&](size_t bytes, void **p) -> cudaError_t {
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e == cudaSuccess) {
      allocs.push_back(*p);
      e = cudaMemset(*p, 0, bytes ? bytes : 1);
    }
    return e;
  };
#define TALLOC(ptr, type, count) CKR(alloc(sizeof(type) * (size_t)(count), (void **)&(ptr)), bail())
  unsigned *dwords;
  unsigned long long *doffs;
  rlm_sample_out *dout;
  Dev *dp;
  CKR(cudaSetDevice(0), -1);
  TALLOC(h.slot, Slot, n);
  TALLOC(h.hist, int, (size_t)n * ctx);
  TALLOC(h.stop_ids, int, (size_t)n * kMaxStop);
  TALLOC(h.bias_tok, int, (size_t)n * kMaxBias);
  TALLOC(h.bias_val, float, (size_t)n * kMaxBias);
  TALLOC(h.r_slot, int, n);
  TALLOC(h.logits, float, (size_t)n * vocab);
  TALLOC(h.w_scr, double, (size_t)grid * vocab);
  TALLOC(h.bits_scr, unsigned, (size_t)grid * (vocab / 32 + 1));
  TALLOC(h.cnt_scr, int, (size_t)grid * vocab);
  TALLOC(dwords, unsigned, offs[n] + 1);
  TALLOC(doffs, unsigned long long, n + 1);
  TALLOC(dout, rlm_sample_out, n);
  TALLOC(dp, Dev, 1);
#undef TALLOC
  CKR(cudaMemcpy(h.logits, logits, sizeof(float) * (size_t)n * vocab, cudaMemcpyHostToDevice), bail());
  CKR(cudaMemcpy(dwords, words, sizeof(unsigned) * offs[n], cudaMemcpyHostToDevice), bail());
  CKR(cudaMemcpy(doffs, offs, sizeof(unsigned long long) * (n + 1), cudaMemcpyHostToDevice), bail());
  CKR(cudaMemcpy(dp, &h, sizeof h, cudaMemcpyHostToDevice), bail());
  check_sample<<<grid, kThreads>>>(dp, (int)n, dwords, doffs, dout);
  CKR(cudaGetLastError(), bail());
  CKR(cudaDeviceSynchronize(), bail());
  CKR(cudaMemcpy(out, dout, sizeof(rlm_sample_out) * n, cudaMemcpyDeviceToHost), bail());
  bail();
  return 0;
}
