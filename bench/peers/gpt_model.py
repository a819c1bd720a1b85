"""A small gpt-fast-style transformer (llama, qwen2, phi3) for the decode
benchmark: fused QKV and gate/up matrices, RMSNorm, RoPE, GQA attention
through F.scaled_dot_product_attention over a static KV cache, SwiGLU MLP.

The function is HuggingFace's (Q/K unpermuted from llama.cpp's layout, RoPE
by halves, inverse frequencies divided by rope_freqs), so its logits match
transformers' on the same weights (`gptfast.py --check-hf`, and the golden
logits of testdata/golden via `selftest.py`).

All sequences of a batch are at the same position (as in the benchmark:
equal prompts, decoded in lock step), so the cache update and the mask take
one position vector for the whole batch, as gpt-fast's do.

GQA without repeating K/V: the G = heads / kv_heads query heads that share
a KV head are laid side by side as G query rows of that KV head, so SDPA
reads each K/V row once and the mask is the same for the G rows.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _sdpa_math(q, k, v, attn_mask=None):
    """scaled_dot_product_attention for torch < 2.0 (the CPU self-test)."""
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask is not None else s
    return torch.softmax(s, dim=-1) @ v


sdpa = getattr(F, "scaled_dot_product_attention", None) or _sdpa_math


def rms_norm(x, w, eps):
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * xf.to(x.dtype)


def rope(x, cos, sin, rd):
    """HF's rotate-half RoPE on the first rd dims of x [B, T, heads, hd];
    cos/sin [T, rd] (float32)."""
    xr = x[..., :rd].float()
    x1, x2 = xr[..., : rd // 2], xr[..., rd // 2:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    out = xr * c + torch.cat((-x2, x1), dim=-1) * s
    out = out.to(x.dtype)
    if rd == x.shape[-1]:
        return out
    return torch.cat((out, x[..., rd:]), dim=-1)


class KVCache(nn.Module):
    def __init__(self, batch, kv_heads, max_seq, head_dim, dtype, device):
        super().__init__()
        shape = (batch, kv_heads, max_seq, head_dim)
        # Registered buffers: torch.compile treats them as static addresses for
        # CUDA graphs (plain tensor attributes get "skipping cudagraphs due to
        # mutated inputs").
        self.register_buffer("k", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
        self.register_buffer("v", torch.zeros(shape, dtype=dtype, device=device), persistent=False)

    def update(self, pos, k, v):
        # pos [T] int64; k, v [B, KV, T, hd]
        self.k.index_copy_(2, pos, k)
        self.v.index_copy_(2, pos, v)
        return self.k, self.v


class Block(nn.Module):
    def __init__(self, hp, wqkv, bqkv, wo, w13, w2, attn_norm, ffn_norm):
        super().__init__()
        self.H, self.KV, self.hd, self.ffn = hp["heads"], hp["kv_heads"], hp["head_dim"], hp["ffn"]
        self.rd, self.eps = hp["rope_dim"], hp["eps"]
        self.wqkv = nn.Parameter(wqkv, requires_grad=False)
        self.bqkv = None if bqkv is None else nn.Parameter(bqkv, requires_grad=False)
        self.wo = nn.Parameter(wo, requires_grad=False)
        self.w13 = nn.Parameter(w13, requires_grad=False)
        self.w2 = nn.Parameter(w2, requires_grad=False)
        self.attn_norm = nn.Parameter(attn_norm, requires_grad=False)
        self.ffn_norm = nn.Parameter(ffn_norm, requires_grad=False)
        self.cache = None

    def forward(self, x, cos, sin, mask, pos):
        B, T, _ = x.shape
        H, KV, hd = self.H, self.KV, self.hd
        G = H // KV
        h = rms_norm(x, self.attn_norm, self.eps)
        qkv = F.linear(h, self.wqkv, self.bqkv)
        q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=-1)
        q = rope(q.view(B, T, H, hd), cos, sin, self.rd)
        k = rope(k.view(B, T, KV, hd), cos, sin, self.rd)
        v = v.view(B, T, KV, hd)
        kc, vc = self.cache.update(pos, k.transpose(1, 2), v.transpose(1, 2))
        S = kc.shape[2]
        # Query head kv*G + g uses KV head kv (HF's repeat_kv order).
        q = q.view(B, T, KV, G, hd).permute(0, 2, 3, 1, 4).reshape(B, KV, G * T, hd)
        m = mask[None].expand(G, T, S).reshape(1, 1, G * T, S)
        y = sdpa(q, kc, vc, attn_mask=m)
        y = y.view(B, KV, G, T, hd).permute(0, 3, 1, 2, 4).reshape(B, T, H * hd)
        x = x + F.linear(y, self.wo)
        h = rms_norm(x, self.ffn_norm, self.eps)
        gate, up = F.linear(h, self.w13).split([self.ffn, self.ffn], dim=-1)
        return x + F.linear(F.silu(gate) * up, self.w2)


class Transformer(nn.Module):
    def __init__(self, hp, sd, inv_freq):
        """hp: gguf_load.hparams; sd: gguf_load.hf_state_dict (consumed: its
        tensors are fused and dropped); inv_freq: float32 inverse frequencies."""
        super().__init__()
        self.hp = hp
        self.eps = hp["eps"]
        self.embed = nn.Parameter(sd.pop("model.embed_tokens.weight"), requires_grad=False)
        self.norm = nn.Parameter(sd.pop("model.norm.weight"), requires_grad=False)
        out = sd.pop("lm_head.weight", None)
        self.output = self.embed if out is None else nn.Parameter(out, requires_grad=False)
        blocks = []
        for i in range(hp["layers"]):
            p = f"model.layers.{i}."

            def take(n):
                return sd.pop(p + n)

            if hp["arch"] == "phi3":
                wqkv, w13, bqkv = take("self_attn.qkv_proj.weight"), take("mlp.gate_up_proj.weight"), None
            else:
                wqkv = torch.cat([take("self_attn.q_proj.weight"), take("self_attn.k_proj.weight"),
                                  take("self_attn.v_proj.weight")])
                bias = [sd.pop(p + f"self_attn.{b}_proj.bias", None) for b in ("q", "k", "v")]
                bqkv = None if bias[0] is None else torch.cat(bias)
                w13 = torch.cat([take("mlp.gate_proj.weight"), take("mlp.up_proj.weight")])
            blocks.append(Block(hp, wqkv, bqkv, take("self_attn.o_proj.weight"), w13, take("mlp.down_proj.weight"),
                                take("input_layernorm.weight"), take("post_attention_layernorm.weight")))
        if sd:
            raise ValueError(f"gpt_model: unused weights {sorted(sd)[:4]}")
        self.layers = nn.ModuleList(blocks)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        self.max_seq = 0

    def setup_caches(self, batch, max_seq):
        """Static KV caches for `batch` sequences of up to `max_seq` positions,
        the RoPE table and the causal mask of that length."""
        dev, dt = self.embed.device, self.embed.dtype
        for b in self.layers:
            b.cache = None
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        for b in self.layers:
            b.cache = KVCache(batch, self.hp["kv_heads"], max_seq, self.hp["head_dim"], dt, dev)
        t = torch.arange(max_seq, device=dev, dtype=torch.float32)
        f = torch.outer(t, self.inv_freq.to(dev))
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.register_buffer("causal", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool, device=dev)),
                             persistent=False)
        self.max_seq = max_seq

    def hidden(self, idx, pos):
        """idx [B, T] token ids at positions pos [T] (int64) → the last layer's
        output [B, T, dim], the KV caches written."""
        x = F.embedding(idx, self.embed)
        cos, sin, mask = self.cos[pos], self.sin[pos], self.causal[pos]
        for b in self.layers:
            x = b(x, cos, sin, mask, pos)
        return x

    def forward(self, idx, pos):
        """idx [B, T] token ids at positions pos [T] (int64) → logits [B, T, vocab]."""
        return F.linear(rms_norm(self.hidden(idx, pos), self.norm, self.eps), self.output)


def decode_one(model, tok, pos):
    """One greedy decode step: tok [B, 1] at position pos [1] → next tok [B, 1]."""
    logits = model(tok, pos)
    return torch.argmax(logits[:, -1], dim=-1, keepdim=True)


def prefill(model, toks, pos):
    """The prompt toks [B, T] at positions pos [T] → next tok [B, 1] (greedy)."""
    logits = model(toks, pos)
    return torch.argmax(logits[:, -1], dim=-1, keepdim=True)


def prefill_last(model, toks, pos):
    """prefill with the output head on the last position only, as a serving
    engine samples a prompt (vLLM, ringlm): the same next tok [B, 1]."""
    x = model.hidden(toks, pos)[:, -1:]
    logits = F.linear(rms_norm(x, model.norm, model.eps), model.output)
    return torch.argmax(logits[:, -1], dim=-1, keepdim=True)
