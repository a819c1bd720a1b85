/* ringcheck decodes ring records with kernels/cuda/ring.h and prints their
 * fields, so that cheader_test.go can compare them with what Go encoded.
 * Input on stdin: a tag byte, then the record's bytes:
 *   H u64 arena_size + header   -> "H <rlm_header_check result>"
 *   S submit record             -> "S op slot id off len first count tokens sample"
 *   C completion record         -> "C kind slot step ..." (fields by kind)
 *   E step entry                -> "E slot n_tokens token_off flags"
 *   P slot parameter block      -> "P <every field>"
 * Valid C11 and C++11. */
#include <stdio.h>
#include <string.h>

#include "ring.h"

static int readn(void *p, size_t n) { return fread(p, 1, n, stdin) == n; }

int main(void) {
    unsigned char tag;
    while (readn(&tag, 1)) {
        if (tag == 'H') {
            uint64_t size;
            rlm_header h;
            if (!readn(&size, sizeof size) || !readn(&h, sizeof h)) return 2;
            printf("H %d\n", rlm_header_check(&h, size));
        } else if (tag == 'S') {
            rlm_submit s;
            if (!readn(&s, sizeof s)) return 2;
            printf("S %u %u %llu %u %u %u %u %u %u\n", s.op, s.slot, (unsigned long long)s.id, s.payload_off,
                   s.payload_len, s.grant_first, s.grant_count, s.step_tokens, s.step_sample);
        } else if (tag == 'C') {
            rlm_completion c;
            if (!readn(&c, sizeof c)) return 2;
            printf("C %u %u %llu", c.kind, c.slot, (unsigned long long)c.step);
            if (c.kind == RLM_KIND_TOKEN)
                printf(" %u %.9g %u %u", c.u.token.token, (double)c.u.token.logprob, c.u.token.finish, c.u.token.position);
            else if (c.kind == RLM_KIND_STEP_DONE)
                printf(" %llu %llu", (unsigned long long)c.u.step_done.start_ns, (unsigned long long)c.u.step_done.end_ns);
            else if (c.kind == RLM_KIND_ERROR)
                printf(" %u %u", c.u.err.code, c.u.err.detail);
            else if (c.kind == RLM_KIND_TOP_LOGPROBS)
                printf(" %u %.9g %u %.9g", c.u.top.token0, (double)c.u.top.logprob0, c.u.top.token1,
                       (double)c.u.top.logprob1);
            printf("\n");
        } else if (tag == 'E') {
            rlm_step_entry e;
            if (!readn(&e, sizeof e)) return 2;
            printf("E %u %u %u %u\n", e.slot, e.n_tokens, e.token_off, e.flags);
        } else if (tag == 'P') {
            rlm_slot_params p;
            unsigned i;
            if (!readn(&p, sizeof p)) return 2;
            printf("P %.9g %.9g %.9g %u %.9g %d %.9g %.9g %llu %u %u %u %u %u %u %u", (double)p.temperature,
                   (double)p.top_p, (double)p.min_p, p.top_k, (double)p.repeat_penalty, p.repeat_last_n,
                   (double)p.presence, (double)p.frequency,
                   (unsigned long long)p.seed_lo | (unsigned long long)p.seed_hi << 32, p.max_tokens, p.start_pos,
                   p.n_stop, p.n_bias, p.flags, p.n_hist, p.n_eos);
            for (i = 0; i < RLM_MAX_EOS; i++) printf(" %u", p.eos[i]);
            printf(" %u %u\n", p.prompt_len, p.n_top);
        } else {
            return 3;
        }
    }
    return 0;
}
