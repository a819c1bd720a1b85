#!/usr/bin/env python3
"""gpt-fast-style decode throughput on a ringlm synthetic GGUF.

The model (gpt_model.py: fused QKV and gate/up, RMSNorm, RoPE, GQA attention
through scaled_dot_product_attention over a static KV cache, SwiGLU) is built
in bf16 on the GPU from the GGUF's weights. The one-token greedy decode
function is compiled with torch.compile(mode="reduce-overhead",
fullgraph=True), so every step replays a CUDA graph, as gpt-fast does.

Per batch size: prompts [i, 1, 2, 3] (as ringlm's BenchmarkDecode), an eager
prefill, then the first compiled calls (compilation and CUDA graph capture:
reported as compile_s), --warmup steps, then --steps timed steps (wall clock
between two cuda synchronizes, the loop as gpt-fast runs it: step, position
+= 1, clone of the token). ms/step = time / steps; tok/s = batch / step time.
Each batch size is compiled for its static shape (gpt-fast's setting) unless
--dynamic.

With --check-hf (default on) the logits of one prefill are compared with
transformers' on the same weights first (max relative error printed and
stored; above --check-tol a warning, and the table shows it).

Prefill (--prefill-len, default 2048; 0: none): after the decode rows, one
forward of a batch-1 prompt of that many random tokens (seeded) from an
empty static cache, the output head on the last position only and the
greedy pick, as a serving engine prefills a prompt. Eager by default (gpt-fast
compiles only its decode step; --compile-prefill compiles this too), SDPA
backend as PyTorch picks it (--prefill-sdpa). --prefill-warmup untimed
forwards, then --prefill-reps forwards each timed with CUDA events; the row
(phase "prefill") gives the median ms and prompt tokens / median.

Example:
  python3 bench/peers/gptfast.py --gguf /tmp/llama-3.2-1b-bf16.gguf --batch 1,16,64,256 --steps 200 --json out.json
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402


def main():
    ap = common.parser("gptfast.py", __doc__, default_steps=200)
    ap.add_argument("--warmup", type=int, default=16, help="untimed steps after compilation (default 16)")
    ap.add_argument("--sdpa", choices=["math", "auto"], default="math",
                    help="SDPA backend during decode: math (gpt-fast's choice: inductor generates the attention) "
                         "or auto (PyTorch picks a fused kernel); default math")
    ap.add_argument("--dynamic", action="store_true",
                    help="let dynamo compile a batch-dynamic graph (fewer compilations) instead of one static graph per batch size")
    ap.add_argument("--cdt", action="store_true",
                    help="torch._inductor coordinate_descent_tuning (gpt-fast sets it; longer compiles)")
    ap.add_argument("--no-compile", action="store_true", help="run the decode step eagerly (for comparison)")
    ap.add_argument("--check-hf", dest="check_hf", action="store_true", default=True,
                    help="compare one prefill's logits with transformers' (default on)")
    ap.add_argument("--no-check-hf", dest="check_hf", action="store_false")
    ap.add_argument("--check-tol", type=float, default=0.05,
                    help="relative logit error above which --check-hf warns, bf16 (default 0.05)")
    ap.add_argument("--device", default="cuda",
                    help="cuda (default); cpu only for testing the script (float32, with --no-compile --no-check-hf)")
    ap.add_argument("--prefill-len", type=int, default=2048,
                    help="prompt tokens of the prefill row: one batch-1 forward (default 2048; 0: no prefill row)")
    ap.add_argument("--prefill-reps", type=int, default=10, help="timed prefill forwards (default 10; the median is reported)")
    ap.add_argument("--prefill-warmup", type=int, default=3, help="untimed prefill forwards first (default 3)")
    ap.add_argument("--prefill-sdpa", choices=["math", "auto"], default="auto",
                    help="SDPA backend during prefill: auto (PyTorch picks a fused kernel; default) or math")
    ap.add_argument("--compile-prefill", action="store_true",
                    help="torch.compile the prefill forward (static shape; gpt-fast leaves it eager by default)")
    args = ap.parse_args()
    if args.prefill_len < 0 or args.prefill_reps < 1 or args.prefill_warmup < 0:
        raise SystemExit("gptfast: --prefill-len and --prefill-warmup must be ≥ 0, --prefill-reps ≥ 1")
    bs = common.batches(args.batch)

    import torch

    import gguf_load
    import gpt_model

    torch.set_grad_enabled(False)
    common.seed_all(args.seed)
    env = common.environment()
    dev = args.device
    on_gpu = dev.startswith("cuda")
    if on_gpu and not torch.cuda.is_available():
        raise SystemExit("gptfast: no CUDA device")
    dt = torch.bfloat16 if on_gpu else torch.float32

    def sync():
        if on_gpu:
            torch.cuda.synchronize()

    if not args.no_compile:
        import torch._dynamo.config
        import torch._inductor.config

        torch._inductor.config.coordinate_descent_tuning = args.cdt
        if hasattr(torch._inductor.config, "fx_graph_cache"):
            torch._inductor.config.fx_graph_cache = True
        torch._dynamo.config.automatic_dynamic_shapes = args.dynamic
        for knob in ("cache_size_limit", "recompile_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, max(getattr(torch._dynamo.config, knob), 4 * len(bs) + 8))

    g = gguf_load.open_gguf(args.gguf, log=common.log)
    hp = gguf_load.hparams(g)
    res = common.Result("gptfast", args, env, hp, gguf_load.weight_bytes(g))
    if on_gpu and not args.no_copy_bw:
        res.floor(common.copy_bandwidth())

    if args.check_hf:
        try:
            check_hf(g, hp, res, args, dt, dev, torch, gguf_load, gpt_model)
        except ImportError as e:
            common.log(f"check-hf: skipped, transformers not importable ({e})")

    t0 = time.perf_counter()
    sd, inv = gguf_load.hf_state_dict(g, dt, dev, log=common.log)
    model = gpt_model.Transformer(hp, sd, inv).eval()
    del sd, g
    sync()
    common.log(f"gpt model built in {time.perf_counter() - t0:.1f}s"
               + (f", {torch.cuda.memory_allocated() / 1e9:.2f} GB allocated" if on_gpu else ""))

    step = gpt_model.decode_one
    if not args.no_compile:
        step = torch.compile(gpt_model.decode_one, mode="reduce-overhead", fullgraph=True)
    ctx = sdpa_context(torch, args.sdpa)
    mark = None
    if on_gpu and not args.no_compile:
        mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    counters = cudagraph_counters(torch)
    total_compile = 0.0
    P = len(common.PROMPT_TAIL) + 1
    last_s = 0.0
    for B in bs:
        if not res.fits(B, last_s):
            continue
        t_batch = time.perf_counter()
        max_seq = -(-(P + 3 + args.warmup + args.steps + 1) // 64) * 64
        try:
            model.setup_caches(B, max_seq)
            if not args.no_compile:
                for blk in model.layers:
                    mark_static(torch, blk.cache.k)
                    mark_static(torch, blk.cache.v)
            prompt = torch.tensor(common.prompts(B, hp["vocab"]), dtype=torch.int64, device=dev)
            pos = torch.arange(P, dtype=torch.int64, device=dev)
            with ctx():
                tok = gpt_model.prefill(model, prompt, pos)
            pos = torch.tensor([P], dtype=torch.int64, device=dev)
            first = tok[:, 0].tolist()
            gen0 = [first[0]]  # sequence 0's greedy continuation, for the cross-check with the other peers
            skips0 = counters()
            sync()
            t0 = time.perf_counter()
            with ctx():
                for _ in range(3):  # compile, then CUDA graph warm-up and capture
                    if mark:
                        mark()
                    tok = step(model, tok, pos).clone()  # gpt-fast clones too: the next replay overwrites the graph output
                    pos += 1
                    gen0.append(int(tok[0, 0]))
            sync()
            compile_s = time.perf_counter() - t0
            total_compile += compile_s
            with ctx():
                for _ in range(args.warmup):
                    if mark:
                        mark()
                    tok = step(model, tok, pos).clone()  # gpt-fast clones too: the next replay overwrites the graph output
                    pos += 1
                    if len(gen0) < 8:
                        gen0.append(int(tok[0, 0]))
                sync()
                toks = []
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    if mark:
                        mark()
                    tok = step(model, tok, pos).clone()  # gpt-fast clones too: the next replay overwrites the graph output
                    pos += 1
                    toks.append(tok)
                sync()
                dt_s = time.perf_counter() - t0
            ms = dt_s / args.steps * 1e3
            gen0 += [int(t[0, 0]) for t in toks[:max(0, 8 - len(gen0))]]
            res.row(batch=B, steps=args.steps, ms_per_step=ms, tok_s=B / (ms / 1e3), compile_s=compile_s,
                    max_seq=max_seq, cudagraph_skips=None if skips0 is None else counters() - skips0, first_tokens=first[:4],
                    seq0_tokens=gen0[:8], peak_gib=torch.cuda.max_memory_allocated() / 2**30 if on_gpu else None)
        except torch.cuda.OutOfMemoryError as e:
            common.log(f"gptfast: batch {B}: out of memory ({e}); skipped")
            res.row(batch=B, error="out of memory")
            torch.cuda.empty_cache()
        last_s = time.perf_counter() - t_batch
    res.set(compile_total_s=total_compile)
    left = args.deadline - (time.perf_counter() - res.t0)
    if args.prefill_len > 0 and args.deadline > 0 and left < 20:
        common.log(f"gptfast: prefill skipped: {left:.0f}s left of --deadline {args.deadline:.0f}s")
        res.row(phase="prefill", batch=1, prompt=args.prefill_len, error="skipped: time budget")
    elif args.prefill_len > 0:
        try:
            measure_prefill(model, hp, res, args, dev, torch, gpt_model)
        except torch.cuda.OutOfMemoryError as e:
            common.log(f"gptfast: prefill of {args.prefill_len} tokens: out of memory ({e}); skipped")
            res.row(phase="prefill", batch=1, prompt=args.prefill_len, error="out of memory")
            torch.cuda.empty_cache()
    res.done()
    common.log(f"gptfast: done; compile (first 3 calls of every batch size) {total_compile:.1f}s in all")


def measure_prefill(model, hp, res, args, dev, torch, gpt_model):
    """The prefill row: a batch-1 prompt of --prefill-len random tokens, one
    forward from position 0 (the cache rewritten each time), timed with CUDA
    events around each forward after the warm-up."""
    L = args.prefill_len
    on_gpu = dev.startswith("cuda")
    model.setup_caches(1, -(-L // 64) * 64)
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    prompt = torch.randint(hp["vocab"], (1, L), generator=gen, dtype=torch.int64).to(dev)
    pos = torch.arange(L, dtype=torch.int64, device=dev)
    fwd = gpt_model.prefill_last
    compile_s = 0.0
    if args.compile_prefill and not args.no_compile:
        fwd = torch.compile(gpt_model.prefill_last, fullgraph=True, dynamic=False)
    ctx = sdpa_context(torch, args.prefill_sdpa)
    t0 = time.perf_counter()
    with ctx():
        first = fwd(model, prompt, pos)
        if on_gpu:
            torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        for _ in range(args.prefill_warmup):
            fwd(model, prompt, pos)
        times = []
        for _ in range(args.prefill_reps):
            if on_gpu:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fwd(model, prompt, pos)
                e1.record()
                e1.synchronize()
                times.append(e0.elapsed_time(e1))
            else:  # the script's own test on the CPU: wall clock
                t1 = time.perf_counter()
                fwd(model, prompt, pos)
                times.append((time.perf_counter() - t1) * 1e3)
    times.sort()
    ms = times[len(times) // 2]
    res.row(phase="prefill", batch=1, prompt=L, reps=len(times), ms=ms, ms_min=times[0], ms_max=times[-1],
            tok_s=L / (ms / 1e3), first_call_s=compile_s, compiled=bool(args.compile_prefill and not args.no_compile),
            sdpa=args.prefill_sdpa, timing="cuda events" if on_gpu else "wall clock", next_token=int(first[0, 0]),
            peak_gib=torch.cuda.max_memory_allocated() / 2**30 if on_gpu else None)


def sdpa_context(torch, which):
    import contextlib

    if which == "auto":
        return contextlib.nullcontext
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return lambda: sdpa_kernel([SDPBackend.MATH])
    except ImportError:
        return lambda: torch.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False, enable_math=True)


def mark_static(torch, t):
    f = getattr(getattr(torch, "_dynamo", None), "mark_static_address", None)
    if f is not None:
        try:
            f(t)
        except Exception:
            pass


def cudagraph_counters(torch):
    """How many times inductor declined CUDA graphs so far (0 is the goal)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return lambda: None
    return lambda: int(sum(counters["inductor"].get(k, 0) for k in ("cudagraph_skips",)))


def check_hf(g, hp, res, args, dt, dev, torch, gguf_load, gpt_model):
    """One prefill of a 2-sequence batch through transformers and through the
    gpt model on the same weights: the largest relative logit error."""
    t0 = time.perf_counter()
    hf, _ = gguf_load.build_hf(g, dt, dev, attn="sdpa", log=common.log)
    ids = torch.tensor(common.prompts(2, hp["vocab"]), dtype=torch.int64, device=dev)
    ref = hf(input_ids=ids, use_cache=False).logits.float()
    del hf
    torch.cuda.empty_cache()
    sd, inv = gguf_load.hf_state_dict(g, dt, dev, log=common.log)
    m = gpt_model.Transformer(hp, sd, inv).eval()
    m.setup_caches(2, 64)
    got = m(ids, torch.arange(ids.shape[1], device=dev)).float()
    err = ((got - ref).abs().amax(-1) / ref.abs().amax(-1)).max().item()
    same = bool((got[:, -1].argmax(-1) == ref[:, -1].argmax(-1)).all())
    del m, sd
    torch.cuda.empty_cache()
    common.log(f"check-hf: gpt model vs transformers, bf16 prefill logits: max relative error {err:.3g}, "
               f"same next token {same} ({time.perf_counter() - t0:.1f}s)")
    res.set(check_hf={"max_rel_err": err, "same_argmax": same})
    if err > args.check_tol:
        common.log(f"check-hf: WARNING: logits differ from transformers by {err:.3g} > {args.check_tol}: "
                   "the gpt model may not compute the same function (timings kept, but check before comparing)")


if __name__ == "__main__":
    main()
