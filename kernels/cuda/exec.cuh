#pragma once
// exec.cuh: the leader (block 0), the device side of the ring protocol (Go
// twin: kernels/exec.go; the protocol: ringbuf/PROTOCOL.md): it consumes
// submit records, runs the control ops against the slot state, validates a
// STEP and describes it in Dev for the grid, and writes the answers into
// the completion ring (STEP_DONE once the grid is done).
#include "state.cuh"

namespace {

struct Leader {
  Dev &d;
  const rlm_header *h;
  rlm_ring_ctl *sub, *com;
  unsigned *stg;

  __device__ void put(const rlm_completion &c) {
    const uint32_t cap = h->compl_cap;
    while (d.cprod - d.ccons >= cap) {
      rlm_store_release(&com->prod, d.cprod);  // never wait holding unpublished records
      d.ccons = rlm_load_acquire(&com->cons);
      if (d.cprod - d.ccons >= cap) __nanosleep(500);
    }
    *rlm_completion_at(d.arena, h, d.cprod) = c;
    d.cprod++;
  }
  __device__ void publish() {
    __threadfence_system();
    rlm_store_release(&com->prod, d.cprod);
  }
  __device__ void error(uint64_t id, uint32_t slot, uint32_t code, uint32_t detail) {
    rlm_completion c;
    memset(&c, 0, sizeof c);
    c.kind = RLM_KIND_ERROR;
    c.slot = slot;
    c.step = id;
    c.u.err.code = code;
    c.u.err.detail = detail;
    put(c);
  }
  __device__ void simple(uint32_t kind, uint64_t id, uint32_t slot) {
    rlm_completion c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.slot = slot;
    c.step = id;
    put(c);
  }
};

// Copies n staging words from off into d.stage with the whole block.
__device__ void copy_run(Dev &d, const unsigned *stg, uint32_t off, uint32_t n, uint32_t at) {
  for (uint32_t i = threadIdx.x; i < n; i += kThreads) d.stage[at + i] = stg[off + i];
}

// slot_open is OPEN_SLOT after the slot and staging checks: it decodes
// and validates the payload p[0..len) (ringbuf.ParseSlotPayload, then
// sample.Params.Validate, in their order) and opens the slot, or returns
// the word a BAD_PARAMS names. One thread. Its Go twin is Executor.open.
__device__ int slot_open(Dev &d, uint32_t slot, const unsigned *p, uint32_t len) {
  if (len < RLM_SLOT_PARAMS_WORDS) return (int)len;
  const rlm_slot_params *sp = reinterpret_cast<const rlm_slot_params *>(p);
  const uint32_t n_stop = sp->n_stop, n_bias = sp->n_bias, n_hist = sp->n_hist, n_eos = sp->n_eos;
  // The structure.
  if ((uint64_t)RLM_SLOT_PARAMS_WORDS + n_stop + 2ull * n_bias + n_hist != len) return RLM_SP_OFF_N_STOP;
  if (n_stop > (uint32_t)kMaxStop) return RLM_SP_OFF_N_STOP;
  if (n_bias > (uint32_t)kMaxBias) return RLM_SP_OFF_N_BIAS;
  if (n_eos > RLM_MAX_EOS) return RLM_SP_OFF_N_EOS;
  if (sp->flags & ~RLM_SLOT_FLAGS_KNOWN) return RLM_SP_OFF_FLAGS;
  if (sp->n_top > RLM_MAX_TOP || (sp->n_top > 0 && !(sp->flags & RLM_SLOT_LOGPROBS))) return RLM_SP_OFF_N_TOP;
  for (int i = RLM_SP_OFF_N_TOP + 1; i < RLM_SLOT_PARAMS_WORDS; i++)
    if (p[i] != 0) return i;  // reserved
  for (uint32_t i = 1; i < n_bias; i++)  // ascending bias tokens, each once
    if (p[RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i] <= p[RLM_SLOT_PARAMS_WORDS + n_stop + 2 * (i - 1)])
      return RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i;
  // The capacity.
  if (sp->start_pos > (uint32_t)d.ctx_limit || n_hist > sp->start_pos) return RLM_SP_OFF_START_POS;
  // The values, as sample.Params.Validate checks them.
  if (!(sp->temperature >= 0.f) || isinf(sp->temperature)) return RLM_SP_OFF_TEMPERATURE;
  if (!(sp->top_p > 0.f && sp->top_p <= 1.f)) return RLM_SP_OFF_TOP_P;
  if (!(sp->min_p >= 0.f && sp->min_p <= 1.f)) return RLM_SP_OFF_MIN_P;
  if (!(sp->repeat_penalty > 0.f) || isinf(sp->repeat_penalty)) return RLM_SP_OFF_REPEAT_PENALTY;
  if (sp->repeat_last_n < -1) return RLM_SP_OFF_REPEAT_LAST_N;
  if (!(sp->presence >= -2.f && sp->presence <= 2.f)) return RLM_SP_OFF_PRESENCE;
  if (!(sp->frequency >= -2.f && sp->frequency <= 2.f)) return RLM_SP_OFF_FREQUENCY;
  for (uint32_t i = 0; i < n_bias; i++) {
    const uint32_t t = p[RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i];
    const float b = __uint_as_float(p[RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i + 1]);
    if (t >= (uint32_t)d.vocab) return RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i;
    if (!(b >= -100.f && b <= 100.f)) return RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i + 1;
  }
  Slot &s = d.slot[slot];
  s.open = 1;
  s.finished = 0;
  s.last = -1;
  s.sampled = 0;
  s.pos = sp->start_pos;
  s.max_tokens = sp->max_tokens;
  s.flags = sp->flags;
  s.prompt_len = sp->prompt_len;
  s.temperature = sp->temperature;
  s.top_p = sp->top_p;
  s.min_p = sp->min_p;
  s.top_k = sp->top_k;
  s.rep_pen = sp->repeat_penalty;
  s.rep_last_n = sp->repeat_last_n;
  s.presence = sp->presence;
  s.frequency = sp->frequency;
  s.seed = (unsigned long long)sp->seed_lo | ((unsigned long long)sp->seed_hi << 32);
  s.n_stop = n_stop;
  s.n_bias = n_bias;
  s.n_eos = n_eos;
  for (uint32_t i = 0; i < n_eos; i++) s.eos[i] = sp->eos[i];
  s.hist_from = sp->start_pos - n_hist;
  s.gen_from = sp->prompt_len > 0 ? (int)sp->prompt_len : -1;
  s.n_blocks = 0;
  s.n_top = sp->n_top;
  for (uint32_t i = 0; i < n_stop; i++) d.stop_ids[slot * kMaxStop + i] = p[RLM_SLOT_PARAMS_WORDS + i];
  for (uint32_t i = 0; i < n_bias; i++) {
    d.bias_tok[slot * kMaxBias + i] = p[RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i];
    d.bias_val[slot * kMaxBias + i] = __uint_as_float(p[RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i + 1]);
  }
  int *hist = d.hist + (size_t)slot * d.ctx;
  const unsigned *hp = p + RLM_SLOT_PARAMS_WORDS + n_stop + 2 * n_bias;
  // A history token outside the vocabulary is no token: the penalties
  // skip it (-1), as sample.Sampler.Observe ignores it.
  for (uint32_t i = 0; i < n_hist; i++) hist[s.hist_from + i] = hp[i] < (uint32_t)d.vocab ? (int)hp[i] : -1;
  return -1;
}

// The leader (block 0) consumes records until a STEP is ready to run (then
// d.n_tok > 0 or d.n_rows ≥ 0 with the step set up) or STOP. Returns with
// d.stop set, or a step described in d. Runs with all threads of block 0.
__device__ void leader_fetch(Dev &d) {
  __shared__ __align__(16) rlm_submit recs[kRecBatch];
  __shared__ unsigned long long s_prod;
  const rlm_header *h = (const rlm_header *)d.arena;
  Leader L{d, h, rlm_submit_ctl(d.arena, h), rlm_completion_ctl(d.arena, h), rlm_staging(d.arena, h)};
  const unsigned *stg = L.stg;
  for (;;) {
    // Wait for records (publishing what we wrote first).
    if (threadIdx.x == 0) {
      unsigned long long p = rlm_load_acquire(&L.sub->prod);
      int spins = 0;
      while (p == d.sub_cons) {
        if (spins++ == 0) L.publish();
        __nanosleep(spins < 64 ? 100 : 1000);
        p = rlm_load_acquire(&L.sub->prod);
      }
      s_prod = p;
    }
    __syncthreads();
    const unsigned long long prod = s_prod;
    const int nrec = (int)min((unsigned long long)kRecBatch, prod - d.sub_cons);
    // Copy the records with the whole block: 16 bytes a thread.
    for (int i = threadIdx.x; i < nrec * 4; i += kThreads) {
      const uint4 *src = reinterpret_cast<const uint4 *>(rlm_submit_at(d.arena, h, d.sub_cons + i / 4));
      reinterpret_cast<uint4 *>(&recs[i / 4])[i % 4] = src[i % 4];
    }
    __syncthreads();
    for (int ri = 0; ri < nrec; ri++) {
      const rlm_submit r = recs[ri];
      const uint32_t op = r.op;
      bool payload_ok = r.payload_len == 0 || rlm_staging_ok(h, r.payload_off, r.payload_len);
      if (op == RLM_OP_STOP) {
        if (threadIdx.x == 0) {
          L.simple(RLM_KIND_STOPPED, r.id, RLM_NO_SLOT);
          L.publish();
          d.sub_cons += ri + 1;  // the control records before STOP in this batch too
          rlm_store_release(&L.sub->cons, d.sub_cons);
          d.stop = 1;
        }
        __syncthreads();
        return;
      }
      if (op == RLM_OP_OPEN_SLOT) {
        // Copy the payload (without its history when it is longer than
        // any valid one: it fails at or before start_pos, which the words
        // before the history decide), then open the slot with one thread.
        const uint32_t head = RLM_SLOT_PARAMS_WORDS + kMaxStop + 2 * kMaxBias;  // ≤ stage_cap
        if (payload_ok) copy_run(d, stg, r.payload_off, r.payload_len <= (uint32_t)d.stage_cap ? r.payload_len : head, 0);
        __syncthreads();
        if (threadIdx.x == 0) {
          if (r.slot >= (uint32_t)d.slots) L.error(r.id, r.slot, RLM_CODE_BAD_SLOT, r.slot);
          else if (d.slot[r.slot].open) L.error(r.id, r.slot, RLM_CODE_SLOT_STATE, op);
          else if (!payload_ok) L.error(r.id, r.slot, RLM_CODE_BAD_PAYLOAD, r.payload_off);
          else {
            const int bad = slot_open(d, r.slot, d.stage, r.payload_len);
            if (bad >= 0) L.error(r.id, r.slot, RLM_CODE_BAD_PARAMS, (uint32_t)bad);
          }
        }
        __syncthreads();
        continue;
      }
      if (op == RLM_OP_GRANT_BLOCKS) {
        if (threadIdx.x == 0) {
          if (r.slot >= (uint32_t)d.slots) L.error(r.id, r.slot, RLM_CODE_BAD_SLOT, r.slot);
          else if (!d.slot[r.slot].open) L.error(r.id, r.slot, RLM_CODE_SLOT_STATE, op);
          else if (!payload_ok || r.grant_count != r.payload_len || r.grant_first > (uint32_t)d.slot[r.slot].n_blocks ||
                   (uint64_t)r.grant_first + r.grant_count > (uint64_t)d.max_bpb)
            L.error(r.id, r.slot, RLM_CODE_BAD_PAYLOAD, r.payload_off);
          else {
            int bad = -1;
            for (uint32_t i = 0; i < r.grant_count; i++) {
              const uint32_t id = stg[r.payload_off + i];
              if (id >= (uint32_t)d.num_blocks) { bad = (int)id; break; }
            }
            if (bad >= 0) L.error(r.id, r.slot, RLM_CODE_NO_BLOCK, (uint32_t)bad);
            else {
              for (uint32_t i = 0; i < r.grant_count; i++) d.btab[r.slot * d.max_bpb + r.grant_first + i] = stg[r.payload_off + i];
              d.slot[r.slot].n_blocks = max(d.slot[r.slot].n_blocks, (int)(r.grant_first + r.grant_count));
            }
          }
        }
        __syncthreads();
        continue;
      }
      if (op == RLM_OP_CLOSE_SLOT) {
        if (threadIdx.x == 0) {
          if (r.slot >= (uint32_t)d.slots) L.error(r.id, r.slot, RLM_CODE_BAD_SLOT, r.slot);
          else if (!d.slot[r.slot].open) L.error(r.id, r.slot, RLM_CODE_SLOT_STATE, op);
          else {
            d.slot[r.slot].open = 0;
            L.simple(RLM_KIND_SLOT_CLOSED, r.id, r.slot);
          }
        }
        __syncthreads();
        continue;
      }
      if (op != RLM_OP_STEP) {
        if (threadIdx.x == 0) L.error(r.id, RLM_NO_SLOT, RLM_CODE_BAD_OP, op);
        __syncthreads();
        continue;
      }
      // STEP. Fault injection for the tests of fault handling.
      if (threadIdx.x == 0 && ++d.steps_seen == d.trap_step) __trap();
      // Copy the entry list, then validate entry by entry.
      const uint32_t n = r.slot;
      const bool shape_ok = payload_ok && (uint64_t)n * RLM_STEP_ENTRY_WORDS == r.payload_len &&
                            r.payload_len <= (uint32_t)d.stage_cap;
      if (shape_ok) copy_run(d, stg, r.payload_off, r.payload_len, 0);
      __syncthreads();
      __shared__ int s_ok;
      if (threadIdx.x == 0) {
        d.step_start = globaltimer();
        d.step_id = r.id;
        bool ok = shape_ok;
        if (ok) {
          uint64_t toks = 0;
          uint32_t samples = 0;
          for (uint32_t i = 0; i < n; i++) {
            toks += d.stage[i * 4 + RLM_ENT_OFF_N_TOKENS];
            if (d.stage[i * 4 + RLM_ENT_OFF_FLAGS] & RLM_ENTRY_SAMPLE) samples++;
          }
          ok = toks == r.step_tokens && samples == r.step_sample && toks <= (uint64_t)d.max_tok;
        }
        s_ok = ok;
        if (!ok) L.error(r.id, RLM_NO_SLOT, RLM_CODE_BAD_PAYLOAD, r.payload_off);
      }
      __syncthreads();
      if (!s_ok) {
        if (threadIdx.x == 0) {
          rlm_completion c;
          memset(&c, 0, sizeof c);
          c.kind = RLM_KIND_STEP_DONE;
          c.step = r.id;
          c.u.step_done.start_ns = d.step_start;
          c.u.step_done.end_ns = globaltimer();
          L.put(c);
        }
        __syncthreads();
        continue;
      }
      // Entries: thread 0 decides, the block copies token runs.
      __shared__ int s_tok, s_rows, s_exec, s_tiles;
      if (threadIdx.x == 0) s_tok = s_rows = s_exec = s_tiles = 0;
      __syncthreads();
      for (uint32_t i = 0; i < n; i++) {
        const uint32_t eslot = d.stage[i * 4 + RLM_ENT_OFF_SLOT], ntok = d.stage[i * 4 + RLM_ENT_OFF_N_TOKENS];
        const uint32_t toff = d.stage[i * 4 + RLM_ENT_OFF_TOKEN_OFF], flags = d.stage[i * 4 + RLM_ENT_OFF_FLAGS];
        __shared__ int s_run;  // 1: copy tokens from staging, 2: feedback, 0: skip
        if (threadIdx.x == 0) {
          s_run = 0;
          if (eslot >= (uint32_t)d.slots) L.error(r.id, eslot, RLM_CODE_BAD_SLOT, eslot);
          else {
            Slot &s = d.slot[eslot];
            const bool feedback = toff == RLM_TOKEN_OFF_FEEDBACK;
            if (!s.open) L.error(r.id, eslot, RLM_CODE_SLOT_STATE, RLM_OP_STEP);
            else if (s.finished) L.simple(RLM_KIND_SKIPPED, r.id, eslot);
            else if (feedback && (ntok != 1 || s.last < 0)) { L.error(r.id, eslot, RLM_CODE_NO_FEEDBACK, ntok); s.finished = 1; }
            else if (!feedback && (ntok == 0 || !rlm_staging_ok(h, toff, ntok))) { L.error(r.id, eslot, RLM_CODE_BAD_PAYLOAD, toff); s.finished = 1; }
            else if ((s.pos + (int)ntok - 1) / d.bs >= s.n_blocks || s.pos + (int)ntok > d.ctx_limit) { L.error(r.id, eslot, RLM_CODE_NO_BLOCK, s.pos + ntok - 1); s.finished = 1; }
            else s_run = feedback ? 2 : 1;
          }
        }
        __syncthreads();
        if (s_run == 0) continue;
        const int t0 = s_tok;
        if (s_run == 2) {
          if (threadIdx.x == 0) d.t_id[t0] = d.slot[eslot].last;
        } else {
          for (uint32_t j = threadIdx.x; j < ntok; j += kThreads) d.t_id[t0 + j] = (int)stg[toff + j];
        }
        __syncthreads();
        if (threadIdx.x == 0) {
          Slot &s = d.slot[eslot];
          int bad = -1;
          if (s_run == 1)
            for (uint32_t j = 0; j < ntok; j++)
              if ((uint32_t)d.t_id[t0 + j] >= (uint32_t)d.vocab) { bad = j; break; }
          if (bad >= 0) {
            L.error(r.id, eslot, RLM_CODE_BAD_TOKEN, (uint32_t)d.t_id[t0 + bad]);
            s.finished = 1;
          } else {
            int *hist = d.hist + (size_t)eslot * d.ctx;
            for (uint32_t j = 0; j < ntok; j++) {
              d.t_slot[t0 + j] = eslot;
              d.t_pos[t0 + j] = s.pos + j;
              if (s_run == 1) hist[s.pos + j] = d.t_id[t0 + j];
            }
            s.pos += ntok;
            s_tok = t0 + ntok;
            // The entry's attention tiles (attn_tc.cuh): a_tpt tokens each.
            for (uint32_t j = 0; j < ntok; j += d.a_tpt)
              d.a_tile[s_tiles++] = make_int4((int)(t0 + j), (int)min((uint32_t)d.a_tpt, ntok - j), eslot, s.pos - (int)ntok + (int)j);
            s_exec++;
            if (flags & RLM_ENTRY_SAMPLE) {
              d.r_tok[s_rows] = t0 + ntok - 1;
              d.r_slot[s_rows] = eslot;
              d.r_best[s_rows] = 0;
              d.r_finite[s_rows] = 0;
              d.r_fast[s_rows] = s.temperature == 0.f && s.n_bias == 0 && (s.rep_pen == 1.f || s.rep_last_n == 0) &&
                                 s.presence == 0.f && s.frequency == 0.f && !(s.flags & RLM_SLOT_LOGPROBS);
              s_rows++;
            }
          }
        }
        __syncthreads();
      }
      if (threadIdx.x == 0) {
        d.n_tok = s_tok;
        d.n_atile = s_tiles;
        d.n_rows = s_rows;
        d.executed = s_exec;
        // Reserve the TOKEN completions after the errors already written.
        const uint32_t cap = h->compl_cap;
        // A row takes its TOKEN and ceil(n_top/2) TOP_LOGPROBS records.
        unsigned long long need = 1;
        for (int i = 0; i < s_rows; i++) need += 1 + (d.slot[d.r_slot[i]].n_top + 1) / 2;
        if (need > cap) need = cap;  // cannot happen with the engine's ring sizes; never wait forever
        while (d.cprod + need - d.ccons > cap) {
          rlm_store_release(&L.com->prod, d.cprod);
          d.ccons = rlm_load_acquire(&L.com->cons);
          if (d.cprod + need - d.ccons > cap) __nanosleep(500);
        }
        for (int i = 0; i < s_rows; i++) {
          d.r_comp[i] = d.cprod;
          d.cprod += 1 + (d.slot[d.r_slot[i]].n_top + 1) / 2;
        }
        // The records up to this STEP are consumed: their payloads are copied.
        d.sub_cons += ri + 1;
        rlm_store_release(&L.sub->cons, d.sub_cons);
      }
      __syncthreads();
      return;
    }
    // Every copied record was a control op.
    if (threadIdx.x == 0) {
      d.sub_cons += nrec;
      L.publish();
      rlm_store_release(&L.sub->cons, d.sub_cons);
    }
    __syncthreads();
  }
}

__device__ void leader_finish(Dev &d) {
  if (threadIdx.x != 0) return;
  const rlm_header *h = (const rlm_header *)d.arena;
  Leader L{d, h, rlm_submit_ctl(d.arena, h), rlm_completion_ctl(d.arena, h), rlm_staging(d.arena, h)};
  rlm_completion c;
  memset(&c, 0, sizeof c);
  c.kind = RLM_KIND_STEP_DONE;
  c.slot = d.executed;
  c.step = d.step_id;
  c.u.step_done.start_ns = d.step_start;
  c.u.step_done.end_ns = globaltimer();
  L.put(c);
  L.publish();
}

}  // namespace
