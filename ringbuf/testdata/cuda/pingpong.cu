// pingpong.cu checks kernels/cuda/ring.h on a GPU: a persistent one-thread
// kernel consumes the submit ring through mapped pinned host memory and
// answers on the completion ring, with the header's acquire/release
// helpers; the host checks every completion and times round trips.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -I kernels/cuda ringbuf/testdata/cuda/pingpong.cu -o pingpong
//   ./pingpong [steps]
//
// The "model": an entry's token is (sum of its input tokens) * 31 + slot,
// mod 50000, where the input of a feedback entry is the slot's last token.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ring.h"

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static const uint32_t kSlots = 4, kVocab = 50000, kRunWords = 64;

__device__ uint64_t globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

struct DevCompletions {
    char *base;
    const rlm_header *h;
    rlm_ring_ctl *ctl;
    uint64_t prod, cons;  // cons: last consumer index seen

    __device__ void push(const rlm_completion &c) {
        while (prod - cons == h->compl_cap) {
            rlm_store_release(&ctl->prod, prod);  // never wait on unpublished records
            cons = rlm_load_acquire(&ctl->cons);
            if (prod - cons == h->compl_cap) __nanosleep(256);
        }
        *rlm_completion_at(base, h, prod) = c;
        prod++;
    }
    __device__ void publish() { rlm_store_release(&ctl->prod, prod); }
};

__global__ void device_loop(char *base) {
    const rlm_header *h = (const rlm_header *)base;
    rlm_ring_ctl *sub = rlm_submit_ctl(base, h);
    const uint32_t *stg = rlm_staging(base, h);
    DevCompletions out = {base, h, rlm_completion_ctl(base, h), 0, 0};
    uint32_t last[kSlots] = {0};
    uint64_t cons = 0;
    for (;;) {
        uint64_t prod = rlm_load_acquire(&sub->prod);
        if (prod == cons) {
            __nanosleep(128);
            continue;
        }
        for (; cons < prod; cons++) {
            rlm_submit r = *rlm_submit_at(base, h, cons);
            rlm_completion c;
            memset(&c, 0, sizeof c);
            c.step = r.id;
            if (r.op == RLM_OP_STOP) {
                c.kind = RLM_KIND_STOPPED;
                out.push(c);
                out.publish();
                rlm_store_release(&sub->cons, cons + 1);
                return;
            }
            if (r.op != RLM_OP_STEP || !rlm_staging_ok(h, r.payload_off, r.payload_len) ||
                r.payload_len != r.slot * RLM_STEP_ENTRY_WORDS) {
                c.kind = RLM_KIND_ERROR;
                c.slot = RLM_NO_SLOT;
                c.u.err.code = r.op == RLM_OP_STEP ? RLM_CODE_BAD_PAYLOAD : RLM_CODE_BAD_OP;
                out.push(c);
                continue;
            }
            uint64_t start = globaltimer();
            const rlm_step_entry *e = (const rlm_step_entry *)(stg + r.payload_off);
            for (uint32_t i = 0; i < r.slot; i++) {
                uint64_t sum = 0;
                if (e[i].token_off == RLM_TOKEN_OFF_FEEDBACK) {
                    sum = last[e[i].slot];
                } else {
                    for (uint32_t j = 0; j < e[i].n_tokens; j++) sum += stg[e[i].token_off + j];
                }
                uint32_t tok = (uint32_t)((sum * 31 + e[i].slot) % kVocab);
                last[e[i].slot] = tok;
                c.kind = RLM_KIND_TOKEN;
                c.slot = e[i].slot;
                c.u.token.token = tok;
                c.u.token.position = i;
                out.push(c);
            }
            memset(&c.u, 0, sizeof c.u);
            c.kind = RLM_KIND_STEP_DONE;
            c.slot = r.slot;
            c.u.step_done.start_ns = start;
            c.u.step_done.end_ns = globaltimer();
            out.push(c);
        }
        out.publish();
        rlm_store_release(&sub->cons, cons);  // done with the records and their staging runs
    }
}

struct Host {
    char *base;
    rlm_header *h;
    rlm_ring_ctl *sub, *com;
    uint32_t *stg;
    uint64_t sprod = 0, ccons = 0, steps_done = 0, tokens = 0;
    uint32_t last[kSlots] = {0};
    std::vector<std::vector<uint32_t>> want;  // per step: expected tokens

    // Completions: check them in order, release them.
    void drain() {
        uint64_t cprod = rlm_load_acquire(&com->prod);
        for (; ccons < cprod; ccons++) {
            const rlm_completion *c = rlm_completion_at(base, h, ccons);
            const std::vector<uint32_t> &w = want[c->step];
            if (c->kind == RLM_KIND_TOKEN) {
                if (c->u.token.position >= w.size() || c->u.token.token != w[c->u.token.position]) {
                    fprintf(stderr, "step %llu entry %u: token %u, want %u\n", (unsigned long long)c->step,
                            c->u.token.position, c->u.token.token, w[c->u.token.position]);
                    exit(1);
                }
                tokens++;
            } else if (c->kind == RLM_KIND_STEP_DONE && c->slot == w.size() &&
                       c->u.step_done.end_ns >= c->u.step_done.start_ns) {
                steps_done++;
            } else if (c->kind != RLM_KIND_STOPPED) {
                fprintf(stderr, "unexpected completion kind %u slot %u step %llu\n", c->kind, c->slot,
                        (unsigned long long)c->step);
                exit(1);
            }
        }
        rlm_store_release(&com->cons, ccons);
    }

    // push writes one record; its staging run is the one of slot i % cap,
    // free because record i - cap has been consumed (the ring had room).
    void push(uint32_t op, uint32_t nent) {
        while (sprod - rlm_load_acquire(&sub->cons) == h->submit_cap) drain();
        uint64_t id = sprod;
        uint32_t off = (uint32_t)(id % h->submit_cap) * kRunWords;
        rlm_submit r;
        memset(&r, 0, sizeof r);
        r.op = op;
        r.id = id;
        std::vector<uint32_t> w;
        if (op == RLM_OP_STEP) {
            rlm_step_entry *e = (rlm_step_entry *)(stg + off);
            uint32_t tok_off = off + nent * RLM_STEP_ENTRY_WORDS;
            for (uint32_t i = 0; i < nent; i++) {
                uint32_t slot = i % kSlots;
                uint64_t sum = 0;
                e[i].slot = slot;
                e[i].flags = RLM_ENTRY_SAMPLE;
                if ((id + i) % 3 == 0) {
                    e[i].n_tokens = 1;
                    e[i].token_off = RLM_TOKEN_OFF_FEEDBACK;
                    sum = last[slot];
                } else {
                    e[i].n_tokens = 1 + (uint32_t)((id * 7 + i) % 5);
                    e[i].token_off = tok_off;
                    for (uint32_t j = 0; j < e[i].n_tokens; j++) {
                        stg[tok_off + j] = (uint32_t)(id * 131 + i * 17 + j) % kVocab;
                        sum += stg[tok_off + j];
                    }
                    tok_off += e[i].n_tokens;
                }
                last[slot] = (uint32_t)((sum * 31 + slot) % kVocab);
                w.push_back(last[slot]);
            }
            r.slot = nent;
            r.payload_off = off;
            r.payload_len = nent * RLM_STEP_ENTRY_WORDS;
        }
        want.push_back(w);
        *rlm_submit_at(base, h, id) = r;
        sprod++;
        rlm_store_release(&sub->prod, sprod);
    }
};

int main(int argc, char **argv) {
    const uint64_t steps = argc > 1 ? strtoull(argv[1], 0, 10) : 200000;
    const uint32_t subcap = 8, comcap = 16, words = subcap * kRunWords;

    // The layout NewLayout(8, 16, 512) produces; rlm_header_check agrees.
    uint64_t off = RLM_HEADER_SIZE, sub_off, com_off, stg_off;
    sub_off = off;
    off += rlm_align_up(RLM_RING_OFF_RECORDS + (uint64_t)subcap * RLM_SUBMIT_SIZE);
    com_off = off;
    off += rlm_align_up(RLM_RING_OFF_RECORDS + (uint64_t)comcap * RLM_COMPLETION_SIZE);
    stg_off = off;
    off += rlm_align_up(4ull * words);

    char *base, *dbase;
    CK(cudaSetDeviceFlags(cudaDeviceMapHost));
    CK(cudaHostAlloc((void **)&base, off, cudaHostAllocMapped));
    memset(base, 0, off);
    rlm_header *h = (rlm_header *)base;
    h->magic = RLM_MAGIC;
    h->version = RLM_VERSION;
    h->header_size = RLM_HEADER_SIZE;
    h->submit_off = sub_off;
    h->submit_cap = subcap;
    h->submit_rec_size = RLM_SUBMIT_SIZE;
    h->compl_off = com_off;
    h->compl_cap = comcap;
    h->compl_rec_size = RLM_COMPLETION_SIZE;
    h->staging_off = stg_off;
    h->staging_words = words;
    h->total_size = off;
    if (int bad = rlm_header_check(h, off)) {
        fprintf(stderr, "header check failed: %d\n", bad);
        return 1;
    }
    CK(cudaHostGetDevicePointer((void **)&dbase, base, 0));

    Host host;
    host.base = base;
    host.h = h;
    host.sub = rlm_submit_ctl(base, h);
    host.com = rlm_completion_ctl(base, h);
    host.stg = rlm_staging(base, h);
    host.want.reserve(steps + 2);

    device_loop<<<1, 1>>>(dbase);
    CK(cudaGetLastError());

    // Streaming: keep the submit ring full.
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t s = 0; s < steps; s++) {
        host.push(RLM_OP_STEP, 1 + (uint32_t)(s % 6));
        host.drain();
    }
    while (host.steps_done < steps) host.drain();
    double stream_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Ping-pong: one step in flight, host publish to STEP_DONE seen.
    std::vector<double> rtt;
    for (int i = 0; i < 20000; i++) {
        uint64_t before = host.steps_done;
        auto t = std::chrono::steady_clock::now();
        host.push(RLM_OP_STEP, 1);
        while (host.steps_done == before) host.drain();
        rtt.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count());
    }
    host.push(RLM_OP_STOP, 0);
    CK(cudaDeviceSynchronize());
    host.drain();
    if (rlm_load_acquire(&host.sub->cons) != host.sprod) {
        fprintf(stderr, "device stopped at %llu of %llu records\n",
                (unsigned long long)rlm_load_acquire(&host.sub->cons), (unsigned long long)host.sprod);
        return 1;
    }
    std::sort(rtt.begin(), rtt.end());
    printf("ok: %llu steps, %llu tokens checked; streaming %.2f us/step; round trip p50 %.2f us, p99 %.2f us\n",
           (unsigned long long)host.steps_done, (unsigned long long)host.tokens, stream_s * 1e6 / steps,
           rtt[rtt.size() / 2], rtt[rtt.size() * 99 / 100]);
    CK(cudaFreeHost(base));
    return 0;
}
