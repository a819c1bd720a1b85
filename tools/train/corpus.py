#!/usr/bin/env python3
"""Build the training corpus of ringlm's default model from the Go source tree.

The corpus is the Go standard library's source under GOROOT/src (BSD
licence, present wherever Go is installed): every .go file outside
testdata/ and vendor/ directories, one JSON object per file
({"path": ..., "text": ...}) in path order. The packages in HELD_OUT are
never trained on: they go to heldout.jsonl, everything else to
train.jsonl. Both are gzipped.

    python3 tools/train/corpus.py --goroot "$(go env GOROOT)" --out .carry/corpus

Runs on the machine that has Go (the GPU host has none); the output is
carried to the GPU host for train.py.
"""
import argparse
import gzip
import json
import os
import sys

# Packages (directories under src/) kept out of training, fixed here so
# every run and every perplexity figure uses the same split.
HELD_OUT = {
    "encoding/csv",
    "text/tabwriter",
    "container/ring",
    "container/list",
    "image/png",
    "compress/bzip2",
    "net/mail",
    "hash/crc32",
}


def files(src):
    for root, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in ("testdata", "vendor"))
        for n in sorted(names):
            if n.endswith(".go"):
                yield os.path.join(root, n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--goroot", required=True)
    ap.add_argument("--out", required=True, help="output directory (train.jsonl.gz, heldout.jsonl.gz, LICENSE)")
    args = ap.parse_args()
    src = os.path.join(args.goroot, "src")
    if not os.path.isdir(src):
        sys.exit(f"corpus: no {src}")
    os.makedirs(args.out, exist_ok=True)
    counts = {"train": [0, 0], "heldout": [0, 0]}
    outs = {k: gzip.open(os.path.join(args.out, k + ".jsonl.gz"), "wt", encoding="utf-8") for k in counts}
    for path in files(src):
        rel = os.path.relpath(path, src)
        pkg = os.path.dirname(rel).replace(os.sep, "/")
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue  # a handful of files test invalid UTF-8 on purpose
        split = "heldout" if pkg in HELD_OUT else "train"
        outs[split].write(json.dumps({"path": rel, "text": text}) + "\n")
        counts[split][0] += 1
        counts[split][1] += len(raw)
    for f in outs.values():
        f.close()
    lic = os.path.join(args.goroot, "LICENSE")
    if os.path.exists(lic):
        with open(lic, "rb") as a, open(os.path.join(args.out, "LICENSE"), "wb") as b:
            b.write(a.read())
    for k, (n, b) in counts.items():
        print(f"{k}: {n} files, {b / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
