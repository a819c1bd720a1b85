#!/usr/bin/env python3
"""Checks of the peer benchmarks' CPU-side parts, runnable without a GPU.

1. GGUF reader (gguf_load, i.e. tools/hf_oracle.py's parser) against
   `ringlm show --json` on tiny synthetic models of every architecture and
   type: names, ggml shapes, types, offsets, sizes, data offset.
2. Values: synth draws the same float32 values whatever the type, so every
   F16/BF16/Q8_0 tensor must equal the F32 file's value rounded as that type
   (exact for F16 and BF16, within half a quantization step for Q8_0), read
   both by the oracle's numpy dequantization and by gguf_load.to_torch.
3. weight_bytes against the file's tensor bytes (and the llama-3.2-1b figure
   with --big).
4. With torch: the gpt-fast model (gpt_model.py, float32 on the CPU) against
   the HF transformers golden logits in testdata/golden (tools/hf_oracle.py's
   output for these tiny models, seed 11): every row of a full prefill within
   ringlm's own tolerances (1e-4 F32, 2e-3 otherwise), then the 32 greedy
   tokens decoded one at a time through the static KV cache.
5. table.py on bench/logs/cuda-bench-h100.log and made-up peer JSON.

  python3 bench/peers/selftest.py [--ringlm BIN] [--big]

Without --ringlm it builds cmd/ringlm with `go build`. Prints one line per
check and 'N passed, N failed' at the end; exits 1 on a failure.
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

try:
    import numpy as np

    import gguf_load
except ImportError as e:  # reported after --help had its chance
    np = gguf_load = None
    IMPORT_ERROR = e

TYPES = ["f32", "f16", "bf16", "q8_0"]
ARCHS = ["llama", "qwen2", "phi3"]
passed, failed = 0, 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok    {what}")
    else:
        failed += 1
        print(f"FAIL  {what}")


def bf16_round(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    return u.astype(np.uint32).view(np.float32)


def q8_0_round(x):
    """x quantized to Q8_0 and back as gguf.QuantizeQ8_0 does: d = amax / 127
    (float32), q = round-half-even(x / d), stored scale float16."""
    blocks = x.astype(np.float32).reshape(-1, 32)
    d = (np.abs(blocks).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), np.float32(0)).astype(np.float32)
    q = np.rint((blocks * inv).astype(np.float32))
    return (q * d.astype(np.float16).astype(np.float32)).astype(np.float32).reshape(x.shape)


def reader_checks(ringlm, path):
    g = gguf_load.GGUF(path)
    show = json.loads(subprocess.run([ringlm, "show", "--json", path], check=True, capture_output=True).stdout)
    name = os.path.basename(path)
    ok = show["data_offset"] == g.data and show["alignment"] == g.kv.get("general.alignment", 32)
    mism = []
    for t in show["tensors"]:
        dims, typ, off = g.tensors.get(t["name"], (None, None, None))
        if dims is None or list(dims) != t["shape"] or off != t["offset"] \
                or gguf_load.TYPE_NAMES.get(typ) != t["type"] or gguf_load.tensor_nbytes(g, t["name"]) != t["bytes"]:
            mism.append(t["name"])
    check(ok and not mism and len(show["tensors"]) == len(g.tensors),
          f"{name}: {len(g.tensors)} tensors, shapes/types/offsets/bytes as `ringlm show` ({mism[:3]})")
    tied = "output.weight" not in g.tensors
    want = sum(t["bytes"] for t in show["tensors"]
               if t["name"] != "rope_freqs.weight" and (tied or t["name"] != "token_embd.weight"))
    check(gguf_load.weight_bytes(g) == want, f"{name}: weight_bytes {gguf_load.weight_bytes(g)}")
    return g


def value_checks(ref, g, typ, name, torch):
    worst, n = 0.0, 0
    for t in g.tensors:
        r = ref.tensor(t)
        x = g.tensor(t)
        dims, gt, _ = g.tensors[t]
        if gt == gguf_load.GGML_F16:
            ok = np.array_equal(x, r.astype(np.float16).astype(np.float32))
        elif gt == gguf_load.GGML_BF16:
            ok = np.array_equal(x, bf16_round(r))
        elif gt == gguf_load.GGML_Q8_0:
            ok = np.array_equal(x, q8_0_round(r))
            blocks = r.reshape(-1, 32)
            step = np.abs(blocks).max(axis=1, keepdims=True) / 127.0
            err = np.abs(x.reshape(-1, 32) - blocks)
            worst = max(worst, float((err / np.maximum(step, 1e-30)).max()))
        else:
            ok = np.array_equal(x, r)
        if torch is not None:
            tt = gguf_load.to_torch(g, t, torch.float32, "cpu").numpy()
            ok = ok and tt.shape == x.shape and np.array_equal(tt, x)
        if not ok:
            check(False, f"{name}: {t} values")
            return
        n += 1
    extra = f" (Q8_0: worst error {worst:.3f} of amax/127)" if typ == "q8_0" else ""
    check(True, f"{name}: {n} tensors equal the F32 file's values as {typ}{extra}"
          + (" (numpy and torch readers)" if torch is not None else ""))


def forward_checks(files, torch):
    import gpt_model

    torch.set_grad_enabled(False)
    x = torch.randn(64, 24)
    ref = gguf_load.unpermute(x.numpy(), 4)
    check(np.array_equal(gguf_load.unpermute_torch(x, 4).numpy(), ref), "unpermute_torch == hf_oracle.unpermute")
    for path in sorted(os.listdir(os.path.join(ROOT, "testdata", "golden"))):
        gold = json.load(open(os.path.join(ROOT, "testdata", "golden", path)))
        typ = path.rsplit("-", 1)[1].split(".")[0]
        f = files.get((gold["arch"], typ))
        if f is None:
            continue
        g = gguf_load.GGUF(f)
        hp = gguf_load.hparams(g)
        logits = np.frombuffer(base64.b64decode(gold["logits_f32_b64"]), dtype="<f4").reshape(gold["rows"], gold["vocab"])
        seq = gold["prompt"] + gold["greedy"][:-1]
        tol = 1e-4 if typ == "f32" else 2e-3

        def model():
            sd, inv = gguf_load.hf_state_dict(g, torch.float32, "cpu", log=lambda *a: None)
            m = gpt_model.Transformer(hp, sd, inv).eval()
            m.setup_caches(2, 128)
            return m

        m = model()
        # Two identical sequences: the batch dimension goes through the same path.
        ids = torch.tensor([seq, seq], dtype=torch.int64)
        out = m(ids, torch.arange(len(seq))).numpy()
        err = max(float(np.abs(out[b, r] - logits[r]).max() / np.abs(logits[r]).max())
                  for b in range(2) for r in range(len(seq)))
        check(err <= tol, f"{path}: gpt_model prefill of {len(seq)} positions, max relative error {err:.3g} (tol {tol:g})")
        m = model()
        P = len(gold["prompt"])
        tok = gpt_model.prefill(m, torch.tensor([gold["prompt"]] * 2), torch.arange(P))
        got = [int(tok[0, 0])]
        pos = torch.tensor([P])
        for _ in range(len(gold["greedy"]) - 1):
            tok = gpt_model.decode_one(m, tok, pos)
            pos += 1
            got.append(int(tok[0, 0]))
        same = got == gold["greedy"] and bool((tok[0] == tok[1]).all())
        n = next((i for i, (a, b) in enumerate(zip(got, gold["greedy"])) if a != b), len(got))
        want = gold["greedy"]
        how = "identical to HF" if same else f"differ at {n}: {got[:n + 2]} vs {want[:n + 2]}"
        check(same, f"{path}: {len(got)} greedy tokens decoded one at a time through the static cache {how}")


def table_checks(tmp):
    import table

    d = os.path.join(tmp, "table")
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(ROOT, "bench", "logs", "cuda-bench-h100.log"), os.path.join(d, "go-bench.txt"))
    with open(os.path.join(d, "go-bench.txt"), "a") as f:
        f.write("BenchmarkDecode/prefill2048-16         \t     200\t        16.00 ms/prefill\t         8.000 prompts"
                "\t    128000 tok/s\t         0 ns/op\n")
    base = {"env": {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "transformers": "5.17.0", "cuda": "13.0"},
            "model": {"arch": "llama", "name": "Llama-3.2-1B (synthetic)", "dim": 2048, "layers": 16, "vocab": 128256,
                      "weight_types": ["BF16", "F32"]},
            "weight_bytes": 2471763968, "copy_gbps": 2990.0, "complete": True}
    json.dump(dict(base, system="gptfast", compile_total_s=80.0, check_hf={"max_rel_err": 0.01, "same_argmax": True},
                   rows=[{"batch": 1, "steps": 200, "ms_per_step": 1.57, "tok_s": 637, "compile_s": 30.0},
                         {"batch": 64, "steps": 200, "ms_per_step": 2.08, "tok_s": 30800, "compile_s": 20.0},
                         {"phase": "prefill", "batch": 1, "prompt": 2048, "reps": 10, "ms": 8.0, "tok_s": 256000.0,
                          "compiled": False, "sdpa": "auto", "timing": "cuda events"}]),
              open(os.path.join(d, "gptfast.json"), "w"))
    json.dump(dict(base, system="hf_cb", rows=[{"batch": 256, "requests": 256, "steps": 64, "tokens": 16384,
                                                "tok_s": 1900.0, "tok_s_span": 2000.0}]),
              open(os.path.join(d, "hf_cb.json"), "w"))
    text = table.build(d)
    print(text)
    check("| ringlm (persistent CUDA kernel) | 256 | 125.3 | 2043 | 152.8 |" in text,
          "table: ringlm rows parsed from BenchmarkDecode lines (x-floor from its floor)")
    check("| gpt-fast-style torch.compile | 64 | 2.08 | 30,800 | 2.537 | 14.83× |" in text,
          "table: peer rows with x-floor on ringlm's floor and the ratio to ringlm")
    check("no hf_eager.json (not run" in text and "0.820 ms/step" in text, "table: missing peer and floor line")
    check("| ringlm prefill, 2048-token prompt | 1 | 16 | 128,000 | — | 1.00× | one step, device clock, median of 8 prompts |" in text
          and "| gpt-fast-style torch prefill, 2048-token prompt | 1 | 8 | 256,000 | — | 2.00× | eager, sdpa auto" in text
          and "| gpt-fast-style torch.compile | 1 | 1.57 |" in text,
          "table: prefill rows, ringlm's from BenchmarkDecode/prefill2048, gptfast's with the ratio; decode rows unchanged")
    os.remove(os.path.join(d, "go-bench.txt"))
    text = table.build(d)
    check("from gptfast (torch bf16" in text and "| gpt-fast-style torch.compile | 1 | 1.57 | 637 | 1.899 |" in text,
          "table: floor from the peers' own copy bandwidth when ringlm did not run")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ringlm", default="", help="ringlm binary (default: go build ./cmd/ringlm)")
    ap.add_argument("--dir", default="", help="work folder (default: a temporary one, removed)")
    ap.add_argument("--big", action="store_true", help="also write llama-3.2-1b in bf16 (2.5 GB) and check its reader figures")
    ap.add_argument("--no-torch", action="store_true", help="skip the checks that need torch")
    args = ap.parse_args()
    if np is None:
        raise SystemExit(f"selftest: needs numpy ({IMPORT_ERROR})")
    tmp = args.dir or tempfile.mkdtemp(prefix="ringlm-peers-selftest-")
    os.makedirs(tmp, exist_ok=True)
    try:
        ringlm = args.ringlm
        if not ringlm:
            ringlm = os.path.join(tmp, "ringlm")
            subprocess.run(["go", "build", "-o", ringlm, "./cmd/ringlm"], cwd=ROOT, check=True)
        torch = None
        if not args.no_torch:
            try:
                import torch  # noqa: F811
                print(f"torch {torch.__version__}")
            except ImportError:
                print("torch not importable: skipping the torch checks")
        files = {}
        for arch in ARCHS:
            for typ in TYPES:
                p = os.path.join(tmp, f"tiny-{arch}-{typ}.gguf")
                subprocess.run([ringlm, "synth", "--preset", "tiny", "--arch", arch, "--type", typ, "--seed", "11",
                                "-o", p], check=True, capture_output=True)
                files[(arch, typ)] = p
        for arch in ARCHS:
            ref = reader_checks(ringlm, files[(arch, "f32")])
            for typ in TYPES[1:]:
                g = reader_checks(ringlm, files[(arch, typ)])
                value_checks(ref, g, typ, os.path.basename(files[(arch, typ)]), torch)
        if args.big:
            p = os.path.join(tmp, "llama-3.2-1b-bf16.gguf")
            subprocess.run([ringlm, "synth", "--preset", "llama-3.2-1b", "--type", "bf16", "--seed", "1", "-o", p],
                           check=True)
            g = reader_checks(ringlm, p)
            hp = gguf_load.hparams(g)
            # embedding (tied: the output head) + 16 layers of matrices + norms, as model.WeightBytes
            want = 128256 * 2048 * 2 + 16 * (2 * 2048 * 2048 + 2 * 512 * 2048 + 3 * 8192 * 2048) * 2 + (33 * 2048) * 4
            check(gguf_load.weight_bytes(g) == want and hp["tied"] and hp["kv_heads"] == 8 and hp["head_dim"] == 64,
                  f"llama-3.2-1b bf16: weight_bytes {gguf_load.weight_bytes(g)} (want {want}), {hp}")
            if torch is not None:
                w = gguf_load.to_torch(g, "blk.3.ffn_down.weight", torch.bfloat16, "cpu")
                ref = g.tensor("blk.3.ffn_down.weight")
                check(tuple(w.shape) == (2048, 8192) and np.array_equal(w.float().numpy(), ref),
                      "llama-3.2-1b bf16: to_torch(bf16) reinterprets the file's bytes")
            del g
            os.remove(p)
        if torch is not None:
            forward_checks(files, torch)
        table_checks(tmp)
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
