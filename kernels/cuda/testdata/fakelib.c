/* fakelib.c: a stand-in for libringlm_cuda.so with no GPU, for the Go
 * package's tests of its cgo path (loading, descriptors, allocator, start,
 * wait, fault, destroy). Its "kernel" is a host thread that speaks the ring
 * protocol: every sampling entry gets token (slot * 31 + n) % vocab, where n
 * counts the slot's samples. Environment, read when called:
 *   RLM_FAKE_PROBE       rlm_probe fails with this text
 *   RLM_FAKE_CREATE_ERR  rlm_create fails with this text
 *   RLM_FAKE_FAULT_AFTER the kernel dies at that STEP (0-based) with an error
 * Built by the tests: gcc -shared -fPIC -I.. fakelib.c -lpthread */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ring.h"
#include "ringlm_cuda.h"

struct rlm_ctx {
  rlm_info info;
  void *arena;
  pthread_t th;
  int started, joined, running, rc, fault_after;
  uint32_t vocab, slots;
  uint32_t *samples;
  float *logits;
  char err[256];
};

static void seterr(char *e, size_t n, const char *msg) {
  if (e && n) snprintf(e, n, "%s", msg);
}

int rlm_probe(char *err, size_t n) {
  const char *p = getenv("RLM_FAKE_PROBE");
  if (p && *p) {
    seterr(err, n, p);
    return -1;
  }
  return 1;
}

void *rlm_host_alloc(uint64_t bytes, char *err, size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 4096, bytes) != 0) {
    seterr(err, n, "posix_memalign failed");
    return NULL;
  }
  memset(p, 0, bytes);
  return p;
}

int rlm_host_free(void *p, char *err, size_t n) {
  (void)err;
  (void)n;
  free(p);
  return 0;
}

static uint64_t mat_bytes(const rlm_matrix *m) { return m->data ? m->bytes : 0; }

rlm_ctx *rlm_create(const rlm_model *m, const rlm_opts *o, char *err, size_t n) {
  const char *f = getenv("RLM_FAKE_CREATE_ERR");
  if (f && *f) {
    seterr(err, n, f);
    return NULL;
  }
  if (m->abi != RLM_CUDA_ABI) {
    seterr(err, n, "ABI mismatch");
    return NULL;
  }
  if (!m->embed.data || !m->output.data || !m->out_norm || !m->layers || m->vocab == 0 || o->slots == 0) {
    seterr(err, n, "incomplete model descriptor");
    return NULL;
  }
  rlm_ctx *c = calloc(1, sizeof *c);
  snprintf(c->info.name, sizeof c->info.name, "Fake GPU");
  c->info.sm_count = 1;
  c->info.grid_blocks = o->grid_blocks ? (int32_t)o->grid_blocks : 1;
  c->info.threads = 1;
  snprintf(c->info.kernel, sizeof c->info.kernel, "fake");
  c->info.num_blocks = o->num_blocks ? o->num_blocks : 64;
  uint64_t w = mat_bytes(&m->embed) + (m->output.data != m->embed.data ? mat_bytes(&m->output) : 0);
  for (uint32_t l = 0; l < m->n_layer; l++) {
    const rlm_layer *L = &m->layers[l];
    /* Touch every vector: a bad pointer faults here, in the test. */
    volatile float s = L->attn_norm[0] + L->attn_norm[m->dim - 1] + L->ffn_norm[m->dim - 1];
    (void)s;
    w += mat_bytes(&L->q) + mat_bytes(&L->k) + mat_bytes(&L->v) + mat_bytes(&L->out) + mat_bytes(&L->gate) +
         mat_bytes(&L->up) + mat_bytes(&L->down);
  }
  c->info.weight_bytes = w;
  c->vocab = m->vocab;
  c->slots = o->slots;
  c->samples = calloc(o->slots, sizeof(uint32_t));
  c->logits = calloc((size_t)o->slots * m->vocab, sizeof(float));
  for (uint32_t i = 0; i < o->slots * m->vocab; i++) c->logits[i] = (float)(i % m->vocab) * 0.5f;
  const char *fa = getenv("RLM_FAKE_FAULT_AFTER");
  c->fault_after = fa && *fa ? atoi(fa) : -1;
  return c;
}

int rlm_get_info(rlm_ctx *c, rlm_info *out) {
  *out = c->info;
  return 0;
}

static void pause_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static void *kernel(void *arg) {
  rlm_ctx *c = arg;
  void *base = c->arena;
  const rlm_header *h = base;
  rlm_ring_ctl *sc = rlm_submit_ctl(base, h), *cc = rlm_completion_ctl(base, h);
  uint64_t cons = rlm_load_acquire(&sc->cons), cprod = rlm_load_acquire(&cc->prod);
  int steps = 0;
#define EMIT(kind_, slot_, id_, body)                                   \
  do {                                                                  \
    while (cprod - rlm_load_acquire(&cc->cons) >= h->compl_cap) {       \
      rlm_store_release(&cc->prod, cprod);                              \
      pause_us(20);                                                     \
    }                                                                   \
    rlm_completion *r_ = rlm_completion_at(base, h, cprod);             \
    memset(r_, 0, sizeof *r_);                                          \
    r_->kind = (kind_);                                                 \
    r_->slot = (slot_);                                                 \
    r_->step = (id_);                                                   \
    body;                                                               \
    cprod++;                                                            \
  } while (0)
  for (;;) {
    if (cons == rlm_load_acquire(&sc->prod)) {
      pause_us(20);
      continue;
    }
    const rlm_submit *r = rlm_submit_at(base, h, cons);
    int stop = 0;
    switch (r->op) {
    case RLM_OP_OPEN_SLOT:
      if (r->slot < c->slots) c->samples[r->slot] = 0;
      break;
    case RLM_OP_STEP: {
      if (c->fault_after >= 0 && steps == c->fault_after) {
        snprintf(c->err, sizeof c->err, "fake kernel: an illegal memory access was encountered");
        c->rc = -1;
        __atomic_store_n(&c->running, 0, __ATOMIC_RELEASE);
        return NULL;
      }
      steps++;
      const rlm_step_entry *e = (const rlm_step_entry *)(rlm_staging(base, h) + r->payload_off);
      for (uint32_t i = 0; i < r->slot; i++) {
        if (!(e[i].flags & RLM_ENTRY_SAMPLE)) continue;
        uint32_t s = e[i].slot, k = ++c->samples[s];
        EMIT(RLM_KIND_TOKEN, s, r->id, { r_->u.token.token = (s * 31 + k) % c->vocab; r_->u.token.position = k; });
      }
      EMIT(RLM_KIND_STEP_DONE, r->slot, r->id, { r_->u.step_done.start_ns = (uint64_t)steps * 1000; r_->u.step_done.end_ns = (uint64_t)steps * 1000 + 500; });
      break;
    }
    case RLM_OP_CLOSE_SLOT:
      EMIT(RLM_KIND_SLOT_CLOSED, r->slot, r->id, {});
      break;
    case RLM_OP_STOP:
      EMIT(RLM_KIND_STOPPED, 0, r->id, {});
      stop = 1;
      break;
    default:
      break;
    }
    cons++;
    rlm_store_release(&sc->cons, cons);
    rlm_store_release(&cc->prod, cprod);
    if (stop) break;
  }
  __atomic_store_n(&c->running, 0, __ATOMIC_RELEASE);
  return NULL;
}

int rlm_start(rlm_ctx *c, void *arena, uint64_t arena_bytes, char *err, size_t n) {
  if (c->started) {
    seterr(err, n, "already started");
    return -1;
  }
  int chk = rlm_header_check((const rlm_header *)arena, arena_bytes);
  if (chk != 0) {
    seterr(err, n, "arena header refused");
    return -1;
  }
  c->arena = arena;
  c->started = 1;
  c->running = 1;
  c->info.launches++;
  pthread_create(&c->th, NULL, kernel, c);
  return 0;
}

int rlm_wait(rlm_ctx *c, char *err, size_t n) {
  if (!c->started) {
    seterr(err, n, "not started");
    return -1;
  }
  if (!c->joined) {
    pthread_join(c->th, NULL);
    c->joined = 1;
  }
  if (c->rc) seterr(err, n, c->err);
  return c->rc;
}

int rlm_query(rlm_ctx *c, char *err, size_t n) {
  if (__atomic_load_n(&c->running, __ATOMIC_ACQUIRE)) return 1;
  if (c->rc) seterr(err, n, c->err);
  return c->rc;
}

int rlm_read_logits(rlm_ctx *c, uint32_t row, float *out, uint32_t cnt, char *err, size_t n) {
  if (row >= c->slots || cnt > c->vocab) {
    seterr(err, n, "row or count out of range");
    return -1;
  }
  memcpy(out, c->logits + (size_t)row * c->vocab, cnt * sizeof(float));
  return 0;
}

int rlm_copy_bandwidth(rlm_ctx *c, uint64_t bytes, double *gbps, char *err, size_t n) {
  (void)c;
  (void)bytes;
  (void)err;
  (void)n;
  *gbps = 1234.5;
  return 0;
}

void rlm_destroy(rlm_ctx *c) {
  if (!c) return;
  if (c->started && !c->joined) pthread_join(c->th, NULL);
  free(c->samples);
  free(c->logits);
  free(c);
}
