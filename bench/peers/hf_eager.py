#!/usr/bin/env python3
"""HuggingFace transformers eager `model.generate` decode throughput on a
ringlm synthetic GGUF.

The transformers model (LlamaForCausalLM / Qwen2ForCausalLM / Phi3ForCausalLM,
per the GGUF's architecture) is built in bf16 on the GPU from the GGUF's
weights (gguf_load.build_hf: Q/K unpermuted for llama, RoPE as llama.cpp, as
tools/hf_oracle.py does). Nothing is compiled; the cache is transformers'
default (dynamic) unless --cache-implementation names another.

Per batch size: prompts [i, 1, 2, 3] (as ringlm's BenchmarkDecode), greedy,
min_new_tokens = max_new_tokens so EOS does not stop a sequence. After a
warm-up generate, t(N) = generate with N = --steps new tokens and t(1) =
generate with 1 new token (prefill + first token), each timed between cuda
synchronizes, best of --repeat; ms/step = (t(N) - t(1)) / (N - 1),
tok/s = batch / step time.

Example:
  python3 bench/peers/hf_eager.py --gguf /tmp/llama-3.2-1b-bf16.gguf --batch 1,16,64,256 --steps 64 --json out.json
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402


def main():
    ap = common.parser("hf_eager.py", __doc__, default_steps=64)
    ap.add_argument("--repeat", type=int, default=2, help="timings of each generate, best kept (default 2)")
    ap.add_argument("--attn", default="sdpa", help="transformers attention implementation (default sdpa)")
    ap.add_argument("--cache-implementation", default=None,
                    help="GenerationConfig.cache_implementation (default: transformers' dynamic cache)")
    args = ap.parse_args()
    bs = common.batches(args.batch)
    if args.steps < 2:
        raise SystemExit("hf_eager: --steps must be at least 2")

    import torch
    import transformers

    import gguf_load

    torch.set_grad_enabled(False)
    common.seed_all(args.seed)
    env = common.environment()
    if not torch.cuda.is_available():
        raise SystemExit("hf_eager: no CUDA device")
    g = gguf_load.open_gguf(args.gguf, log=common.log)
    res = common.Result("hf_eager", args, env, gguf_load.hparams(g), gguf_load.weight_bytes(g))
    if not args.no_copy_bw:
        res.floor(common.copy_bandwidth())
    model, hp = gguf_load.build_hf(g, torch.bfloat16, "cuda", attn=args.attn, log=common.log)
    del g
    eos = hp["eos"] if hp["eos"] is not None else 1

    def config(n):
        kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, num_beams=1, eos_token_id=eos,
                  pad_token_id=eos, bos_token_id=hp["bos"], temperature=None, top_p=None, top_k=None)
        if args.cache_implementation:
            kw["cache_implementation"] = args.cache_implementation
        return transformers.GenerationConfig(**kw)

    def timed(ids, mask, n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config(n))
        torch.cuda.synchronize()
        return time.perf_counter() - t0, out

    last_s = 0.0
    for B in bs:
        if not res.fits(B, last_s):
            continue
        t_batch = time.perf_counter()
        try:
            ids = torch.tensor(common.prompts(B, hp["vocab"]), dtype=torch.int64, device="cuda")
            mask = torch.ones_like(ids)
            t0 = time.perf_counter()
            timed(ids, mask, 4)  # warm-up
            warm_s = time.perf_counter() - t0
            t1 = min(timed(ids, mask, 1)[0] for _ in range(max(1, args.repeat)))
            tn, out = None, None
            for _ in range(max(1, args.repeat)):
                t, o = timed(ids, mask, args.steps)
                if tn is None or t < tn:
                    tn, out = t, o
            new = out.shape[1] - ids.shape[1]
            if new != args.steps:
                raise SystemExit(f"hf_eager: generate made {new} new tokens, asked {args.steps}")
            ms = (tn - t1) / (args.steps - 1) * 1e3
            res.row(batch=B, steps=args.steps, ms_per_step=ms, tok_s=B / (ms / 1e3), t_1_s=t1, t_n_s=tn,
                    warmup_s=warm_s, seq0_tokens=out[0, ids.shape[1]:ids.shape[1] + 8].tolist(),
                    peak_gib=torch.cuda.max_memory_allocated() / 2**30)
            del out
        except torch.cuda.OutOfMemoryError as e:
            common.log(f"hf_eager: batch {B}: out of memory ({e}); skipped")
            res.row(batch=B, error="out of memory")
        torch.cuda.empty_cache()
        last_s = time.perf_counter() - t_batch
    res.done()
    common.log("hf_eager: done")


if __name__ == "__main__":
    main()
