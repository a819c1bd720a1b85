#!/usr/bin/env python3
"""HuggingFace transformers continuous batching (`model.generate_batch`,
transformers 5.x) output throughput on a ringlm synthetic GGUF.

The transformers model is built in bf16 on the GPU from the GGUF's weights
(gguf_load.build_hf). --requests prompts [i, 1, 2, 3] (as ringlm's
BenchmarkDecode) are submitted at once with GenerationConfig(max_new_tokens
= --steps, do_sample=False) and EOS disabled (eos_token_id -1, the value
continuous batching itself uses for "none"). The call is made twice with the
same inputs: the first warms up (CUDA graphs, compilation, cache set-up; kept
with persistent_manager where the API has it), the second is measured.

Reported: output tok/s = generated tokens / wall time of the measured call,
and, where the outputs carry their times (created_time, lifespan), the same
over the span from the first request's creation to the last one's end
(without the manager's start, warm-up and stop); the span figure is the main
one when the API has no persistent_manager (the measured call then warms up
a manager of its own). --batch is accepted for symmetry:
its largest value is the default request count.

Example:
  python3 bench/peers/hf_cb.py --gguf /tmp/llama-3.2-1b-bf16.gguf --requests 256 --steps 64 --json out.json
"""
import inspect
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402


def main():
    ap = common.parser("hf_cb.py", __doc__, default_batch="256", default_steps=64)
    ap.add_argument("--requests", type=int, default=0, help="number of requests (default: the largest --batch, 256)")
    ap.add_argument("--attn", default="sdpa", help="attention implementation the model is built with (default sdpa; "
                                                   "continuous batching switches it to its paged variant)")
    ap.add_argument("--no-warmup-call", action="store_true", help="measure the first call (includes warm-up)")
    args = ap.parse_args()
    n_req = args.requests or max(common.batches(args.batch))

    import torch
    import transformers

    import gguf_load

    torch.set_grad_enabled(False)
    common.seed_all(args.seed)
    env = common.environment()
    if not torch.cuda.is_available():
        raise SystemExit("hf_cb: no CUDA device")
    g = gguf_load.open_gguf(args.gguf, log=common.log)
    res = common.Result("hf_cb", args, env, gguf_load.hparams(g), gguf_load.weight_bytes(g))
    if not args.no_copy_bw:
        res.floor(common.copy_bandwidth())
    model, hp = gguf_load.build_hf(g, torch.bfloat16, "cuda", attn=args.attn, log=common.log)
    del g

    if not hasattr(model, "generate_batch"):
        msg = (f"transformers {transformers.__version__}: {type(model).__name__} has no generate_batch "
               "(continuous batching needs transformers >= 4.54; 5.x expected)")
        common.log("hf_cb: " + msg)
        res.set(error=msg)
        raise SystemExit(2)
    sig = inspect.signature(model.generate_batch)
    params = sig.parameters
    common.log(f"hf_cb: generate_batch{sig}")

    try:
        gen = transformers.GenerationConfig(max_new_tokens=args.steps, do_sample=False, eos_token_id=-1,
                                            pad_token_id=0, bos_token_id=hp["bos"])
    except Exception as e:  # a version that refuses -1: None, which the manager turns into "no EOS"
        common.log(f"hf_cb: GenerationConfig(eos_token_id=-1) refused ({e}); using None")
        gen = transformers.GenerationConfig(max_new_tokens=args.steps, do_sample=False, eos_token_id=None,
                                            pad_token_id=0, bos_token_id=hp["bos"])
    # The manager falls back to the model config's EOS when the generation config has none.
    model.config.eos_token_id = None
    model.generation_config = gen

    inputs = common.prompts(n_req, hp["vocab"])
    kw = {"generation_config": gen}
    if "progress_bar" in params:
        kw["progress_bar"] = False
    if "max_new_tokens" in params or any(p.kind == p.VAR_KEYWORD for p in params.values()):
        kw["max_new_tokens"] = args.steps
    persistent = "persistent_manager" in params and not args.no_warmup_call
    res.set(api={"signature": str(sig), "persistent_manager": persistent})

    def call(first):
        k = dict(kw)
        if persistent:
            k["persistent_manager"] = first
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate_batch(inputs=inputs, **k)
        torch.cuda.synchronize()
        return time.perf_counter() - t0, out

    try:
        if not args.no_warmup_call:
            warm_s, out = call(True)
            common.log(f"hf_cb: warm-up call {warm_s:.1f}s, {count(out)} tokens")
            res.set(warmup_call_s=warm_s)
        wall, out = call(False)
        mgr = getattr(model, "_cached_continuous_batching_manager", None)
        res.set(cb_config=repr(getattr(mgr, "continuous_batching_config", None)))
    finally:
        if persistent and hasattr(model, "destroy_cached_continuous_batching_manager"):
            model.destroy_cached_continuous_batching_manager()
    ntok = count(out)
    lens = [len(tokens(o)) for o in outputs(out)]
    short = sum(1 for n in lens if n < args.steps)
    span = time_span(out)
    row = dict(batch=n_req, requests=n_req, steps=args.steps, tokens=ntok, finished=len(lens),
               short_requests=short, wall_s=wall, tok_s=ntok / wall, tok_s_basis="wall", tok_s_wall=ntok / wall,
               peak_gib=torch.cuda.max_memory_allocated() / 2**30)
    if span:
        row.update(span_s=span, tok_s_span=ntok / span)
        if not persistent:  # the measured call set up (and warmed up) its own manager: leave that out
            row.update(tok_s=ntok / span, tok_s_basis="span")
    if lens:
        row["seq0_tokens"] = list(tokens(outputs(out)[0]))[:8]
    if len(lens) < n_req or short:
        common.log(f"hf_cb: WARNING: {len(lens)} of {n_req} requests returned, {short} with fewer than {args.steps} tokens")
    res.row(**row)
    res.done()
    common.log(f"hf_cb: {ntok} tokens from {len(lens)} requests in {wall:.2f}s: {ntok / wall:.0f} tok/s"
               + (f" ({ntok / span:.0f} tok/s over the requests' own span {span:.2f}s)" if span else ""))


def outputs(out):
    if isinstance(out, dict):
        return list(out.values())
    return list(out or [])


def tokens(o):
    for name in ("generated_tokens", "output_ids", "sequences"):
        v = getattr(o, name, None)
        if v is not None:
            return list(v)
    return []


def count(out):
    return sum(len(tokens(o)) for o in outputs(out))


def time_span(out):
    """First creation to last finish over the outputs, when they carry times."""
    try:
        created = [o.created_time for o in outputs(out)]
        ends = [o.lifespan[1] for o in outputs(out)]
    except AttributeError:
        return None
    if not created or min(ends) <= 0:
        return None
    return max(ends) - min(created)


if __name__ == "__main__":
    main()
