#!/usr/bin/env python3
"""HuggingFace transformers oracle for ringlm's CPU reference forward.

Reads a GGUF model written by `ringlm synth` (its own small GGUF reader,
numpy dequantization of F32/F16/BF16/Q8_0), builds the same model in
transformers (LlamaForCausalLM, Qwen2ForCausalLM or Phi3ForCausalLM, with
phi3.attention.sliding_window as Phi3Config.sliding_window), undoes
llama.cpp's Q/K row permutation for `llama`, applies rope_freqs (Llama 3.1+
RoPE scaling) by dividing the rotary inverse frequencies, and writes golden
float32 logits for a fixed prompt plus its greedy continuation.

Runs in float32 on the CPU with eager attention, so the golden values do not
depend on TF32 or kernel choices. Usage:

  python3 tools/hf_oracle.py MODEL.gguf --prompt 1,2,3 --steps 32 -o golden.json

A window shorter than the sequence is recorded with how much it moved the
logits ("window_effect": the same pass without the window, max|a-b| over
max|b| of the last row), so a golden that did not exercise it shows.
"""
import argparse
import base64
import json
import struct
import sys

import numpy as np

GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
TYPE_SIZE = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q8_0: (32, 34), GGML_BF16: (1, 2)}


class GGUF:
    def __init__(self, path):
        self.buf = open(path, "rb").read()
        self.off = 0
        assert self.buf[:4] == b"GGUF", "not a GGUF file"
        self.off = 4
        version = self.u32()
        assert version in (2, 3), f"GGUF version {version}"
        n_tensors, n_kv = self.u64(), self.u64()
        self.kv = {}
        for _ in range(n_kv):
            key = self.str()
            self.kv[key] = self.value(self.u32())
        self.tensors = {}
        for _ in range(n_tensors):
            name = self.str()
            nd = self.u32()
            dims = [self.u64() for _ in range(nd)]
            typ = self.u32()
            off = self.u64()
            self.tensors[name] = (dims, typ, off)
        align = self.kv.get("general.alignment", 32)
        self.data = (self.off + align - 1) // align * align

    def u32(self):
        v = struct.unpack_from("<I", self.buf, self.off)[0]
        self.off += 4
        return v

    def u64(self):
        v = struct.unpack_from("<Q", self.buf, self.off)[0]
        self.off += 8
        return v

    def str(self):
        n = self.u64()
        s = self.buf[self.off:self.off + n].decode("utf-8")
        self.off += n
        return s

    SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(self, t):
        if t in self.SCALAR:
            fmt = self.SCALAR[t]
            v = struct.unpack_from(fmt, self.buf, self.off)[0]
            self.off += struct.calcsize(fmt)
            return v
        if t == 8:
            return self.str()
        if t == 9:
            et, n = self.u32(), self.u64()
            return [self.value(et) for _ in range(n)]
        raise ValueError(f"value type {t}")

    def tensor(self, name):
        """The tensor as float32, numpy shape = reversed ggml dims (rows, cols)."""
        dims, typ, off = self.tensors[name]
        n = int(np.prod(dims))
        block, size = TYPE_SIZE[typ]
        nbytes = n // block * size
        raw = np.frombuffer(self.buf, dtype=np.uint8, count=nbytes, offset=self.data + off)
        if typ == GGML_F32:
            x = raw.view(np.float32).copy()
        elif typ == GGML_F16:
            x = raw.view(np.float16).astype(np.float32)
        elif typ == GGML_BF16:
            x = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif typ == GGML_Q8_0:
            blocks = raw.reshape(-1, 34)
            d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
            q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
            x = (q * d).reshape(-1)
        else:
            raise ValueError(f"{name}: ggml type {typ} not supported by the oracle")
        return x.reshape(list(reversed(dims)))


def unpermute(w, heads):
    """Inverse of convert_hf_to_gguf.py's permute: interleaved pairs back to halves."""
    rows, cols = w.shape
    hd = rows // heads
    return w.reshape(heads, hd // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def build(g):
    import torch
    import transformers

    arch = g.kv["general.architecture"]
    a = lambda k, d=None: g.kv.get(f"{arch}.{k}", d)
    dim, layers = a("embedding_length"), a("block_count")
    heads, kv_heads = a("attention.head_count"), a("attention.head_count_kv", a("attention.head_count"))
    head_dim = a("attention.key_length", dim // heads)
    vocab = g.tensors["token_embd.weight"][0][1]
    tied = "output.weight" not in g.tensors
    common = dict(vocab_size=vocab, hidden_size=dim, intermediate_size=a("feed_forward_length"),
                  num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                  max_position_embeddings=a("context_length"), rms_norm_eps=a("attention.layer_norm_rms_epsilon"),
                  tie_word_embeddings=tied, bos_token_id=0, eos_token_id=1, pad_token_id=None)
    if arch == "llama":
        cfg = transformers.LlamaConfig(head_dim=head_dim, attention_bias=False, mlp_bias=False, **common)
        cls = transformers.LlamaForCausalLM
    elif arch == "qwen2":
        cfg = transformers.Qwen2Config(use_sliding_window=False, **common)
        cls = transformers.Qwen2ForCausalLM
    elif arch == "phi3":
        # HF's sliding window keeps key positions k > q - sliding_window
        # (masking_utils.sliding_window_overlay): the same count as
        # llama.cpp's n_swa and ringlm's window.
        cfg = transformers.Phi3Config(sliding_window=a("attention.sliding_window"),
                                      original_max_position_embeddings=a("context_length"), **common)
        cls = transformers.Phi3ForCausalLM
    else:
        raise SystemExit(f"oracle: unsupported architecture {arch}")
    if arch != "phi3" and a("attention.sliding_window"):
        raise SystemExit(f"oracle: a sliding window on {arch} is not modelled here")
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = cls(cfg).to(torch.float32).eval()

    sd = {"model.embed_tokens.weight": g.tensor("token_embd.weight"),
          "model.norm.weight": g.tensor("output_norm.weight")}
    if not tied:
        sd["lm_head.weight"] = g.tensor("output.weight")
    for i in range(layers):
        p, h = f"blk.{i}.", f"model.layers.{i}."
        sd[h + "input_layernorm.weight"] = g.tensor(p + "attn_norm.weight")
        sd[h + "post_attention_layernorm.weight"] = g.tensor(p + "ffn_norm.weight")
        sd[h + "self_attn.o_proj.weight"] = g.tensor(p + "attn_output.weight")
        sd[h + "mlp.down_proj.weight"] = g.tensor(p + "ffn_down.weight")
        if arch == "phi3":
            sd[h + "self_attn.qkv_proj.weight"] = g.tensor(p + "attn_qkv.weight")
            sd[h + "mlp.gate_up_proj.weight"] = g.tensor(p + "ffn_up.weight")
            continue
        q, k = g.tensor(p + "attn_q.weight"), g.tensor(p + "attn_k.weight")
        if arch == "llama":
            q, k = unpermute(q, heads), unpermute(k, kv_heads)
        sd[h + "self_attn.q_proj.weight"] = q
        sd[h + "self_attn.k_proj.weight"] = k
        sd[h + "self_attn.v_proj.weight"] = g.tensor(p + "attn_v.weight")
        for b in ("q", "k", "v"):
            if p + f"attn_{b}.bias" in g.tensors:
                sd[h + f"self_attn.{b}_proj.bias"] = g.tensor(p + f"attn_{b}.bias")
        sd[h + "mlp.gate_proj.weight"] = g.tensor(p + "ffn_gate.weight")
        sd[h + "mlp.up_proj.weight"] = g.tensor(p + "ffn_up.weight")
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not (tied and m == "lm_head.weight") and "rotary_emb" not in m]
    if missing or unexpected:
        raise SystemExit(f"oracle: state dict mismatch: missing {missing}, unexpected {unexpected}")
    if tied:
        model.tie_weights()

    # RoPE exactly as llama.cpp defines it: inv_freq = 1/base^(2i/d), divided
    # by rope_freqs where the file has it. Overwrite every rotary module's.
    rope_dim = a("rope.dimension_count", head_dim)
    base = float(a("rope.freq_base", 10000.0))
    inv = 1.0 / (base ** (torch.arange(0, rope_dim, 2, dtype=torch.int64).to(torch.float32) / rope_dim))
    if "rope_freqs.weight" in g.tensors:
        inv = inv / torch.from_numpy(g.tensor("rope_freqs.weight"))
    set_rope(model, inv, "oracle")
    return model, arch


def set_rope(model, inv, who):
    """Gives every rotary embedding module of model the frequencies inv
    (llama.cpp's, rope_freqs applied) with no attention scaling."""
    import torch

    n_rot = 0
    for mod in model.modules():
        if hasattr(mod, "inv_freq") and isinstance(mod.inv_freq, torch.Tensor):
            mod.inv_freq = inv.clone()
            if hasattr(mod, "original_inv_freq"):
                mod.original_inv_freq = inv.clone()
            if hasattr(mod, "attention_scaling"):
                mod.attention_scaling = 1.0
            n_rot += 1
    if n_rot == 0:
        raise SystemExit(f"{who}: no rotary embedding module found")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", required=True, help="comma-separated token ids")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()

    import torch
    import transformers

    torch.set_grad_enabled(False)
    torch.set_num_threads(8)
    g = GGUF(args.model)
    model, arch = build(g)
    prompt = [int(t) for t in args.prompt.split(",")]
    ids = list(prompt)
    for _ in range(args.steps):
        out = model(torch.tensor([ids]), use_cache=False).logits[0, -1]
        ids.append(int(torch.argmax(out)))
    # One pass over prompt + continuation (minus the last token) gives the
    # logits that predicted every continuation token and every prompt token.
    logits = model(torch.tensor([ids[:-1]]), use_cache=False).logits[0].to(torch.float32).numpy()
    window = g.kv.get(f"{arch}.attention.sliding_window")
    effect = None
    if window and window < len(ids) - 1:
        model.config.sliding_window = None
        plain = model(torch.tensor([ids[:-1]]), use_cache=False).logits[0, -1].to(torch.float32).numpy()
        model.config.sliding_window = window
        effect = float(np.abs(logits[-1] - plain).max() / np.abs(plain).max())
    golden = {
        "arch": arch,
        "model": args.model.rsplit("/", 1)[-1],
        "file_type": g.kv.get("general.file_type"),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "prompt": prompt,
        "greedy": ids[len(prompt):],
        "sliding_window": window,
        "window_effect": effect,
        "vocab": int(logits.shape[1]),
        "rows": int(logits.shape[0]),
        "logits_f32_b64": base64.b64encode(np.ascontiguousarray(logits, dtype="<f4").tobytes()).decode(),
    }
    with open(args.out, "w") as f:
        json.dump(golden, f)
    print(f"{args.model}: {arch}, greedy {golden['greedy'][:8]}..., logits {logits.shape}, window {window} (effect {effect})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
