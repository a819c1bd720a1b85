"""Shared pieces of the peer benchmarks: command line, environment report,
seeds, the copy-bandwidth floor, prompts, and the JSON result file."""
import argparse
import json
import os
import platform
import random
import sys
import time

# The prompt of sequence i, as ringlm's BenchmarkDecode submits it.
PROMPT_TAIL = [1, 2, 3]


def prompts(n, vocab):
    return [[i % vocab] + PROMPT_TAIL for i in range(n)]


def parser(prog, description, default_batch="1,16,64,256", default_steps=64):
    ap = argparse.ArgumentParser(prog=prog, description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", required=True, help="model file written by `ringlm synth` (or any llama/qwen2/phi3 GGUF)")
    ap.add_argument("--batch", default=default_batch, help=f"comma-separated batch sizes (default {default_batch})")
    ap.add_argument("--steps", type=int, default=default_steps, help=f"decode steps measured per batch size (default {default_steps})")
    ap.add_argument("--json", default="", help="write the results here (rewritten after every batch size)")
    ap.add_argument("--seed", type=int, default=0, help="torch/numpy/python seed (default 0)")
    ap.add_argument("--no-copy-bw", action="store_true", help="skip the device-to-device copy bandwidth measurement")
    ap.add_argument("--deadline", type=float, default=0,
                    help="seconds from start after which no new batch size is begun when the last one's time "
                         "would not fit (0: none; run_all.sh passes what its budget has left)")
    return ap


def batches(s):
    out = [int(x) for x in s.split(",") if x.strip()]
    if not out or min(out) < 1:
        raise SystemExit(f"--batch {s!r}: positive integers, comma-separated")
    return out


def log(*a):
    print(*a, flush=True)


def seed_all(seed):
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def environment():
    """Device and library versions, printed and stored in the JSON."""
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "host": platform.node()}
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except Exception as e:  # gptfast does not need it
        env["transformers"] = f"unavailable ({type(e).__name__})"
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(device=torch.cuda.get_device_name(0), sms=p.multi_processor_count,
                   memory_gib=round(p.total_memory / 2**30, 1), capability=f"{p.major}.{p.minor}")
    else:
        env["device"] = "cpu (no CUDA device)"
    log("env: " + ", ".join(f"{k} {v}" for k, v in env.items()))
    return env


def copy_bandwidth(nbytes=1 << 30, reps=10, tries=5):
    """Device-to-device copy bandwidth in GB/s of a bf16 tensor, counting bytes
    read plus bytes written (as ringlm's rlm_copy_bandwidth), best of `tries`
    timings of `reps` copies each."""
    import torch

    a = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda")
    a.fill_(1.0)
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    best = 0.0
    for _ in range(tries):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            b.copy_(a)
        e1.record()
        e1.synchronize()
        ms = e0.elapsed_time(e1)
        best = max(best, 2.0 * nbytes * reps / (ms * 1e-3) / 1e9)
    del a, b
    torch.cuda.empty_cache()
    return best


class Result:
    """The JSON file of one peer: settings, environment, one row per batch
    size; rewritten after every row so a run cut short still leaves its rows."""

    def __init__(self, system, args, env, hp, weight_bytes):
        self.path = args.json
        self.t0 = time.perf_counter()
        self.doc = {
            "system": system,
            "argv": sys.argv,
            "gguf": os.path.abspath(args.gguf),
            "env": env,
            "model": hp,
            "weight_bytes": weight_bytes,
            "settings": {k: v for k, v in vars(args).items() if k not in ("json",)},
            "copy_gbps": None,
            "floor_ms": None,
            "rows": [],
            "complete": False,
        }

    def set(self, **kw):
        self.doc.update(kw)
        self.write()

    def floor(self, copy_gbps):
        self.doc["copy_gbps"] = copy_gbps
        self.doc["floor_ms"] = self.doc["weight_bytes"] / (copy_gbps * 1e9) * 1e3
        log(f"copy bandwidth {copy_gbps:.0f} GB/s (bf16 device-to-device, best of 5); "
            f"weights {self.doc['weight_bytes'] / 1e9:.3f} GB per step; floor {self.doc['floor_ms']:.3f} ms/step")
        self.write()

    def fits(self, batch, last_s):
        """Whether a batch size that may take about 1.5 × last_s (the previous
        one's time; the first is always tried) still fits before --deadline;
        if not, records it as skipped."""
        dl = self.doc["settings"].get("deadline") or 0
        left = dl - (time.perf_counter() - self.t0)
        if dl <= 0 or (last_s == 0 and left > 0) or left > 1.5 * last_s + 2:
            return True
        log(f"{self.doc['system']}: batch {batch} skipped: {left:.0f}s left of --deadline {dl:.0f}s, "
            f"the last batch size took {last_s:.0f}s")
        self.doc["rows"].append({"batch": batch, "error": "skipped: time budget"})
        self.write()
        return False

    def row(self, **kw):
        fl = self.doc.get("floor_ms")
        if fl and kw.get("ms_per_step"):
            kw["x_floor"] = kw["ms_per_step"] / fl
        self.doc["rows"].append(kw)
        self.write()
        parts = []
        for k, v in kw.items():
            if isinstance(v, float):
                parts.append(f"{k} {v:.4g}")
            elif isinstance(v, (int, str)):
                parts.append(f"{k} {v}")
        log(f"RESULT {self.doc['system']}: " + ", ".join(parts))

    def done(self):
        self.doc["complete"] = True
        self.doc["wall_s"] = time.perf_counter() - self.t0
        self.write()

    def write(self):
        if not self.path:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1, default=str)
        os.replace(tmp, self.path)
