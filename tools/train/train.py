#!/usr/bin/env python3
"""Train ringlm's default model: a small Llama that completes Go code.

Runs on the GPU host (PyTorch, HF tokenizers; no network). Input: the
corpus made by corpus.py (train.jsonl.gz, heldout.jsonl.gz). Output, in
--out:
  tokenizer.json, tokenizer_config.json  byte-level BPE trained here
  model.safetensors                      float32 weights, llama.cpp tensor
                                         names, Q/K rows in HF order
  train.json                             settings, losses, held-out
                                         perplexity, device time, a sample
The GGUF files are written by ringlm's own writer on the Go side:
  ringlm synth --preset gocoder --tokenizer OUT/tokenizer.json \
      --weights OUT/model.safetensors --type f16 -o gocoder-f16.gguf

    python3 tools/train/train.py --corpus .carry/corpus --out $OUT/gocoder --minutes 8

The shape must equal synth's "gocoder" preset (synth/presets.go).
"""
import argparse
import gzip
import json
import math
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# synth's "gocoder" preset: keep the two in step.
SHAPE = dict(dim=256, layers=6, heads=8, kv_heads=2, head_dim=32, ffn=640, context=512, rope_base=10000.0, norm_eps=1e-5)
EOT = "<|endoftext|>"


def read_jsonl(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def train_tokenizer(texts, vocab, out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # GPT-2's regex
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[EOT], min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": EOT, "eos_token": EOT, "add_bos_token": False, "add_eos_token": False,
                   "model_max_length": SHAPE["context"]}, f, indent=1)
    return tok


def encode(tok, texts, eot):
    """Every file's ids followed by the end-of-text id, as one uint16 array."""
    parts = []
    for enc in tok.encode_batch(texts):
        parts.append(np.asarray(enc.ids, dtype=np.uint16))
        parts.append(np.asarray([eot], dtype=np.uint16))
    return np.concatenate(parts)


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.w


def rope_tables(hd, n, base, device):
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, device=device, dtype=torch.float64) / hd))
    ang = torch.arange(n, device=device, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().float(), ang.sin().float()


def rotate(x, cos, sin):
    # HF's rotate_half convention; the GGUF writer permutes Q/K rows for
    # llama.cpp's interleaved rotation.
    h = x.shape[-1] // 2
    r = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos + r * sin


class Block(nn.Module):
    def __init__(self, s):
        super().__init__()
        d, hd = s["dim"], s["head_dim"]
        self.s = s
        self.attn_norm = RMSNorm(d, s["norm_eps"])
        self.q = nn.Linear(d, s["heads"] * hd, bias=False)
        self.k = nn.Linear(d, s["kv_heads"] * hd, bias=False)
        self.v = nn.Linear(d, s["kv_heads"] * hd, bias=False)
        self.o = nn.Linear(s["heads"] * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d, s["norm_eps"])
        self.gate = nn.Linear(d, s["ffn"], bias=False)
        self.up = nn.Linear(d, s["ffn"], bias=False)
        self.down = nn.Linear(s["ffn"], d, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        s, hd = self.s, self.s["head_dim"]
        h = self.attn_norm(x)
        q = self.q(h).view(B, T, s["heads"], hd).transpose(1, 2)
        k = self.k(h).view(B, T, s["kv_heads"], hd).transpose(1, 2)
        v = self.v(h).view(B, T, s["kv_heads"], hd).transpose(1, 2)
        q, k = rotate(q, cos[:T], sin[:T]), rotate(k, cos[:T], sin[:T])
        rep = s["heads"] // s["kv_heads"]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)  # query head i uses kv head i // rep
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, -1))
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class GoCoder(nn.Module):
    def __init__(self, s, vocab):
        super().__init__()
        self.s = s
        self.embed = nn.Embedding(vocab, s["dim"])
        self.blocks = nn.ModuleList(Block(s) for _ in range(s["layers"]))
        self.norm = RMSNorm(s["dim"], s["norm_eps"])
        cos, sin = rope_tables(s["head_dim"], s["context"], s["rope_base"], "cpu")
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                if n.endswith("o.weight") or n.endswith("down.weight"):
                    std = 0.02 / math.sqrt(2 * s["layers"])
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        x = self.embed(idx)
        for b in self.blocks:
            x = b(x, self.cos, self.sin)
        return F.linear(self.norm(x), self.embed.weight)  # tied head


def save_safetensors(model, path):
    """float32 tensors named as llama.cpp names them (token_embd, blk.N.*)."""
    t = {"token_embd.weight": model.embed.weight, "output_norm.weight": model.norm.w}
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        t.update({p + "attn_norm.weight": b.attn_norm.w, p + "attn_q.weight": b.q.weight, p + "attn_k.weight": b.k.weight,
                  p + "attn_v.weight": b.v.weight, p + "attn_output.weight": b.o.weight, p + "ffn_norm.weight": b.ffn_norm.w,
                  p + "ffn_gate.weight": b.gate.weight, p + "ffn_up.weight": b.up.weight, p + "ffn_down.weight": b.down.weight})
    header, blobs, off = {}, [], 0
    for name in sorted(t):
        a = t[name].detach().float().cpu().contiguous().numpy()
        blobs.append(a.tobytes())
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


@torch.no_grad()
def perplexity(model, ids, ctx, dev, max_chunks=0):
    """llama.cpp's scheme: chunks of ctx tokens, the second half scored."""
    n = len(ids) // ctx
    if max_chunks:
        n = min(n, max_chunks)
    nll, cnt = 0.0, 0
    first = ctx // 2
    for c in range(n):
        x = torch.from_numpy(ids[c * ctx:(c + 1) * ctx].astype(np.int64)).to(dev)[None]
        logits = model(x)[0].double()
        lp = torch.log_softmax(logits[first:ctx - 1], dim=-1)
        tgt = x[0, first + 1:ctx]
        nll -= lp.gather(1, tgt[:, None]).sum().item()
        cnt += ctx - 1 - first
    return math.exp(nll / cnt), n


@torch.no_grad()
def greedy(model, tok, prompt, n, dev):
    ids = tok.encode(prompt).ids
    for _ in range(n):
        x = torch.tensor([ids[-model.s["context"]:]], device=dev)
        ids.append(int(model(x)[0, -1].argmax()))
    return ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--minutes", type=float, default=8.0, help="training time budget (tokenizer and data prep not included)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    t_start = time.time()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(args.out, exist_ok=True)
    log = {"args": vars(args), "shape": SHAPE, "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
           "torch": torch.__version__}

    train_docs = read_jsonl(os.path.join(args.corpus, "train.jsonl.gz"))
    held_docs = read_jsonl(os.path.join(args.corpus, "heldout.jsonl.gz"))
    t0 = time.time()
    tok = train_tokenizer([d["text"] for d in train_docs], args.vocab, args.out)
    vocab = tok.get_vocab_size()
    eot = tok.token_to_id(EOT)
    train_ids = encode(tok, [d["text"] for d in train_docs], eot)
    held_ids = encode(tok, [d["text"] for d in held_docs], eot)
    log.update(vocab=vocab, tokenizer_s=time.time() - t0, train_tokens=int(len(train_ids)), heldout_tokens=int(len(held_ids)),
               train_bytes=sum(len(d["text"].encode()) for d in train_docs))
    print(f"tokenizer: vocab {vocab}, {len(train_ids)} train tokens, {len(held_ids)} held-out tokens, "
          f"{log['train_bytes'] / len(train_ids):.2f} bytes/token, {log['tokenizer_s']:.0f}s", flush=True)

    model = GoCoder(SHAPE, vocab).to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    log["params"] = nparams
    print(f"model: {nparams / 1e6:.2f}M parameters", flush=True)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=dev == "cuda")
    step_fn = model if args.no_compile or dev != "cuda" else torch.compile(model)
    T = SHAPE["context"]
    data = torch.from_numpy(train_ids.astype(np.int64)).to(dev)
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    budget = args.minutes * 60
    warm = 200
    losses = []
    step = 0
    t_train = time.time()
    while True:
        elapsed = time.time() - t_train
        if elapsed >= budget:
            break
        frac = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, len(data) - T - 1, (args.batch,), device=dev, generator=gen)
        idx = starts[:, None] + torch.arange(T + 1, device=dev)[None, :]
        xy = data[idx]
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=dev == "cuda"):
            logits = step_fn(xy[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, vocab), xy[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 200 == 0:
            l = loss.item()
            losses.append([step, round(time.time() - t_train, 1), l])
            print(f"step {step} t {time.time() - t_train:.0f}s lr {lr:.2e} loss {l:.3f}", flush=True)
    train_s = time.time() - t_train
    model.eval()
    ppl, chunks = perplexity(model, held_ids, T, dev)
    log.update(steps=step, train_s=train_s, tokens_seen=step * args.batch * T, losses=losses, heldout_ppl=ppl,
               heldout_chunks=chunks)
    print(f"trained {step} steps in {train_s:.0f}s ({step * args.batch * T / train_s / 1e6:.2f}M tok/s); "
          f"held-out perplexity {ppl:.3f} over {chunks} chunks of {T}", flush=True)
    prompt = "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n"
    ids = greedy(model, tok, prompt, 96, dev)
    n_prompt = len(tok.encode(prompt).ids)
    log["sample"] = {"prompt": prompt, "prompt_ids": ids[:n_prompt], "greedy_ids": ids[n_prompt:],
                     "text": tok.decode(ids[n_prompt:])}
    print("sample:\n" + prompt + log["sample"]["text"], flush=True)
    save_safetensors(model, os.path.join(args.out, "model.safetensors"))
    log["total_s"] = time.time() - t_start
    with open(os.path.join(args.out, "train.json"), "w") as f:
        json.dump(log, f, indent=1)
    print(f"wrote {args.out}; total {log['total_s']:.0f}s", flush=True)


if __name__ == "__main__":
    main()
