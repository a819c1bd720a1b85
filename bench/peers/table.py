#!/usr/bin/env python3
"""One markdown table from a `make bench-gpu` run: ringlm's BenchmarkDecode
output (go-bench.txt) and the peers' JSON files (gptfast.json,
hf_eager.json, hf_cb.json) in one folder.

Rows: system × batch. Columns: ms/step, tok/s, x-floor, tok/s relative to
ringlm at the same batch, notes. Then the prefill rows: ringlm's
BenchmarkDecode/prefillN (one N-token prompt in one step, device clock) and
gptfast's prefill row (one forward over the same length, CUDA events): ms
per prompt in the ms/step column, prompt tokens per second, the ratio to
ringlm's. The floor is the weight bytes one step
reads divided by the device's copy bandwidth: ringlm's (from its benchmark
line) when present, else the best of the peers' own measurements (a bf16
device-to-device copy, best of 5, same convention: bytes read + written).

Needs only the Python standard library.

  python3 bench/peers/table.py --dir bench-gpu-out [--out bench-gpu-out/table.md]
"""
import argparse
import json
import os
import re
import sys

PEERS = [("gptfast", "gpt-fast-style torch.compile"), ("hf_eager", "HF eager generate"),
         ("hf_cb", "HF continuous batching")]

BENCH_LINE = re.compile(r"^BenchmarkDecode/batch(\d+)(?:-\d+)?\s+(\d+)\s+(.*)$")
PREFILL_LINE = re.compile(r"^BenchmarkDecode/prefill(\d+)(?:-\d+)?\s+(\d+)\s+(.*)$")
METRIC = re.compile(r"([-+]?[\d.]+(?:[eE][-+]?\d+)?)\s+(\S+)")


def parse_go(path):
    """ringlm's BenchmarkDecode lines → {batch: {unit: value}}, plus log facts
    (facts["prefill"]: {prompt length: {unit: value}})."""
    rows, facts = {}, {}
    if not os.path.exists(path):
        return rows, facts
    with open(path, errors="replace") as f:
        for line in f:
            for regex, into in ((BENCH_LINE, rows), (PREFILL_LINE, facts.setdefault("prefill", {}))):
                m = regex.match(line.strip())
                if m:
                    metrics = {unit: float(v) for v, unit in METRIC.findall(m.group(3))}
                    metrics["iterations"] = int(m.group(2))
                    into[int(m.group(1))] = metrics
                    break
            if m:
                continue
            m = re.search(r"([\d.]+) GB of weights per step", line)
            if m:
                facts["weight_gb"] = float(m.group(1))
            m = re.search(r"^\s*(?:\S+\.go:\d+: )?(.+?): copy bandwidth ([\d.]+) GB/s, floor ([\d.]+) ms/step", line)
            if m:
                facts.update(device=m.group(1).strip(), copy_gbps=float(m.group(2)), floor_ms=float(m.group(3)))
            if line.startswith("FAIL") or "--- FAIL" in line:
                facts["failed"] = True
    return rows, facts


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        print(f"table: {path}: {e}", file=sys.stderr)
        return None


def fmt(v):
    """4 significant digits, thousands separated; — for none."""
    if v is None:
        return "—"
    if abs(v) >= 10000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def build(dirname):
    go_rows, go = parse_go(os.path.join(dirname, "go-bench.txt"))
    peers = {name: load_json(os.path.join(dirname, name + ".json")) for name, _ in PEERS}

    # The floor: ringlm's when it ran, else the peers' best copy bandwidth.
    weight_bytes = next((p["weight_bytes"] for p in peers.values() if p and p.get("weight_bytes")), None)
    floor_ms, floor_src, copy = None, "", None
    any_go = next(iter(go_rows.values()), None)
    mismatch = ""
    if any_go and "floor-ms" in any_go:
        floor_ms, copy = any_go["floor-ms"], any_go.get("copy-GB/s")
        floor_src = "ringlm BenchmarkDecode (rlm_copy_bandwidth, 1 GiB, mean of 10 copies)"
        if copy:
            go_bytes = floor_ms * 1e-3 * copy * 1e9
            if weight_bytes and abs(weight_bytes - go_bytes) > 0.01 * go_bytes:
                mismatch = (f"WARNING: the peers' model reads {weight_bytes / 1e9:.3f} GB per step, ringlm's "
                            f"{go_bytes / 1e9:.3f} GB: not the same model.")
            weight_bytes = go_bytes
    else:
        best = max((p for p in peers.values() if p and p.get("copy_gbps")), key=lambda p: p["copy_gbps"], default=None)
        if best and weight_bytes:
            copy = best["copy_gbps"]
            floor_ms = weight_bytes / (copy * 1e9) * 1e3
            floor_src = f"{best['system']} (torch bf16 device-to-device copy, 1 GiB, best of 5)"

    lines = []
    env = next((p["env"] for p in peers.values() if p and p.get("env")), {})
    dev = env.get("device") or go.get("device") or "?"
    lines.append(f"Device: {dev}; torch {env.get('torch', '?')}, transformers {env.get('transformers', '?')}, "
                 f"CUDA {env.get('cuda', '?')}.")
    model = next((p["model"] for p in peers.values() if p and p.get("model")), {})
    if model:
        lines.append(f"Model: {model.get('name') or model.get('arch')} ({model.get('arch')}, dim {model.get('dim')}, "
                     f"{model.get('layers')} layers, vocab {model.get('vocab')}, weights {'/'.join(model.get('weight_types', []))}).")
    if floor_ms:
        wb = f"{weight_bytes / 1e9:.3f} GB" if weight_bytes else "?"
        lines.append(f"Floor: {wb} of weights per step / {fmt(copy)} GB/s copy bandwidth = {floor_ms:.3f} ms/step "
                     f"(from {floor_src}).")
    if mismatch:
        lines.append(mismatch)
    peer_bw = [f"{p['system']} {p['copy_gbps']:.0f} GB/s" for p in peers.values() if p and p.get("copy_gbps")]
    if peer_bw:
        lines.append("Copy bandwidth measured by the peers (torch, best of 5): " + ", ".join(peer_bw) + ".")
    lines.append("")
    lines.append("| system | batch | ms/step | tok/s | x-floor | tok/s vs ringlm | notes |")
    lines.append("|---|---:|---:|---:|---:|---:|---|")

    ringlm_tok = {b: r.get("tok/s") for b, r in go_rows.items()}

    def vs(b, tok):
        r = ringlm_tok.get(b)
        return f"{tok / r:.2f}×" if (r and tok) else "—"

    for b in sorted(go_rows):
        r = go_rows[b]
        ms, tok = r.get("ms/step"), r.get("tok/s")
        xf = ms / floor_ms if (ms and floor_ms) else r.get("x-floor")
        lines.append(f"| ringlm (persistent CUDA kernel) | {b} | {fmt(ms)} | {fmt(tok)} | {fmt(xf)} | 1.00× | "
                     f"device clock, {r['iterations']} steps |")
    if not go_rows:
        lines.append(f"| ringlm | — | — | — | — | — | no BenchmarkDecode lines in go-bench.txt{' (FAIL)' if go.get('failed') else ''} |")
    for name, label in PEERS:
        p = peers[name]
        if p is None:
            lines.append(f"| {label} | — | — | — | — | — | no {name}.json (not run, or failed before its first result: see run.log) |")
            continue
        if p.get("error") and not p.get("rows"):
            lines.append(f"| {label} | — | — | — | — | — | {p['error']} |")
            continue
        for r in p.get("rows", []):
            b = r.get("batch")
            if r.get("phase") == "prefill":
                continue  # with the prefill rows below
            if r.get("error"):
                lines.append(f"| {label} | {b} | — | — | — | — | {r['error']} |")
                continue
            ms, tok = r.get("ms_per_step"), r.get("tok_s")
            xf = ms / floor_ms if (ms and floor_ms) else None
            notes = []
            if name == "gptfast":
                notes.append(f"wall clock, {r.get('steps')} steps, compile+capture {r.get('compile_s', 0):.1f}s")
                if r.get("cudagraph_skips"):
                    notes.append(f"CUDA graphs skipped {r['cudagraph_skips']}×")
            elif name == "hf_eager":
                notes.append(f"(t({r.get('steps')}) − t(1)) / {r.get('steps', 0) - 1}")
            elif name == "hf_cb":
                notes.append(f"{r.get('requests')} requests × {r.get('steps')} tokens, {r.get('tokens')} made, "
                             f"tok/s over the call's {'wall time' if r.get('tok_s_basis', 'wall') == 'wall' else 'requests span'}")
                if r.get("tok_s_span") and r.get("tok_s_basis", "wall") == "wall":
                    notes.append(f"{fmt(r['tok_s_span'])} tok/s over the requests' span")
                if r.get("short_requests"):
                    notes.append(f"{r['short_requests']} stopped early")
            lines.append(f"| {label} | {b} | {fmt(ms)} | {fmt(tok)} | {fmt(xf)} | {vs(b, tok)} | {'; '.join(notes)} |")
        if not p.get("complete"):
            lines.append(f"| {label} | — | — | — | — | — | run did not finish (rows above are what it wrote) |")
    lines.extend(prefill_rows(go.get("prefill", {}), peers.get("gptfast")))
    extra = []
    gf = peers.get("gptfast")
    if gf:
        if gf.get("compile_total_s") is not None:
            extra.append(f"gptfast compile + CUDA graph capture, all batch sizes: {gf['compile_total_s']:.1f}s.")
        if gf.get("check_hf"):
            c = gf["check_hf"]
            tol = gf.get("settings", {}).get("check_tol", 0.05)
            warn = f" WARNING: above {tol:g}, the models may differ." if c["max_rel_err"] > tol else ""
            extra.append(f"gptfast vs transformers prefill logits (bf16): max relative error {c['max_rel_err']:.3g}, "
                         f"same next token {c['same_argmax']}.{warn}")
    seqs = [(n, r["seq0_tokens"]) for n, p in peers.items() if p for r in p.get("rows", [])[:1] if r.get("seq0_tokens")]
    if seqs:
        same = len({tuple(t) for _, t in seqs}) == 1
        extra.append("Sequence 0's first greedy tokens (prompt [0, 1, 2, 3]): "
                     + "; ".join(f"{n} {t}" for n, t in seqs) + (" — identical." if same and len(seqs) > 1 else "."))
    if extra:
        lines.append("")
        lines.extend(extra)
    return "\n".join(lines) + "\n"


def prefill_rows(go_prefill, gf):
    """Rows for one prompt prefilled in one pass: ringlm's (by prompt length)
    and gptfast's, tok/s relative to ringlm's at the same length."""
    out = []
    for n in sorted(go_prefill):
        r = go_prefill[n]
        out.append(f"| ringlm prefill, {n}-token prompt | 1 | {fmt(r.get('ms/prefill'))} | {fmt(r.get('tok/s'))} | — | 1.00× | "
                   f"one step, device clock, median of {fmt(r.get('prompts'))} prompts |")
    for r in (gf or {}).get("rows", []):
        if r.get("phase") != "prefill":
            continue
        n = r.get("prompt")
        label = f"gpt-fast-style torch prefill, {n}-token prompt"
        if r.get("error"):
            out.append(f"| {label} | 1 | — | — | — | — | {r['error']} |")
            continue
        ring = go_prefill.get(n, {}).get("tok/s")
        ratio = f"{r['tok_s'] / ring:.2f}×" if ring and r.get("tok_s") else "—"
        how = "torch.compile" if r.get("compiled") else "eager"
        out.append(f"| {label} | 1 | {fmt(r.get('ms'))} | {fmt(r.get('tok_s'))} | — | {ratio} | "
                   f"{how}, sdpa {r.get('sdpa')}, head on the last position, median of {r.get('reps')} forwards ({r.get('timing')}) |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.environ.get("OUT") or "bench-gpu-out",
                    help="folder with go-bench.txt and the peers' JSON (default $OUT or bench-gpu-out)")
    ap.add_argument("--out", default="", help="also write the table here")
    args = ap.parse_args()
    text = build(args.dir)
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
