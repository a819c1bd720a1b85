"""GGUF loading for the peer benchmarks.

The GGUF parser is the one in tools/hf_oracle.py (one reader in the repo);
this module adds what the benchmarks need on top of it: hyperparameters,
the bytes a decode step reads (as ringlm's model.WeightBytes counts them),
tensors converted straight to torch on the GPU (BF16 is reinterpreted, F16
and F32 are cast, Q8_0 blocks are dequantized on the device), the tensors
under HuggingFace names with llama.cpp's Q/K row permutation undone for
`llama`, and a transformers model (LlamaForCausalLM, Qwen2ForCausalLM,
Phi3ForCausalLM) built from them with RoPE exactly as llama.cpp defines it
(rope_freqs divides the inverse frequencies), as tools/hf_oracle.py does.

numpy is needed to parse; torch and transformers only by the functions that
build tensors and models.
"""
import os
import sys
import time
import warnings

_TOOLS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
if _TOOLS not in sys.path:
    sys.path.insert(0, _TOOLS)

import numpy as np  # noqa: E402

_dont_write = sys.dont_write_bytecode
sys.dont_write_bytecode = True  # leave no __pycache__ in tools/
from hf_oracle import (  # noqa: E402,F401  (re-exported: one reader for the repo)
    GGML_BF16,
    GGML_F16,
    GGML_F32,
    GGML_Q8_0,
    GGUF,
    set_rope,
    TYPE_SIZE,
    unpermute,
)

sys.dont_write_bytecode = _dont_write

TYPE_NAMES = {GGML_F32: "F32", GGML_F16: "F16", GGML_Q8_0: "Q8_0", GGML_BF16: "BF16"}


def open_gguf(path, log=print):
    """Parse a GGUF file (read whole into memory, as tools/hf_oracle.py does)."""
    t0 = time.perf_counter()
    g = GGUF(path)
    log(f"gguf: {path}: {len(g.tensors)} tensors, {len(g.buf) / 1e9:.2f} GB read in {time.perf_counter() - t0:.1f}s")
    return g


def hparams(g):
    """The model's shape from the GGUF metadata, as tools/hf_oracle.py reads it."""
    arch = g.kv["general.architecture"]

    def a(k, d=None):
        return g.kv.get(f"{arch}.{k}", d)

    dim, heads = a("embedding_length"), a("attention.head_count")
    head_dim = a("attention.key_length", dim // heads)
    return {
        "arch": arch,
        "name": g.kv.get("general.name", ""),
        "dim": dim,
        "layers": a("block_count"),
        "heads": heads,
        "kv_heads": a("attention.head_count_kv", heads),
        "head_dim": head_dim,
        "ffn": a("feed_forward_length"),
        "vocab": g.tensors["token_embd.weight"][0][1],
        "context": a("context_length"),
        "eps": a("attention.layer_norm_rms_epsilon"),
        "rope_base": float(a("rope.freq_base", 10000.0)),
        "rope_dim": a("rope.dimension_count", head_dim),
        "tied": "output.weight" not in g.tensors,
        "file_type": g.kv.get("general.file_type"),
        "bos": g.kv.get("tokenizer.ggml.bos_token_id"),
        "eos": g.kv.get("tokenizer.ggml.eos_token_id"),
        "weight_types": sorted({TYPE_NAMES.get(t[1], str(t[1])) for t in g.tensors.values()}),
    }


def tensor_nbytes(g, name):
    dims, typ, _ = g.tensors[name]
    block, size = TYPE_SIZE[typ]
    return int(np.prod(dims)) // block * size


def weight_bytes(g):
    """Bytes one decode step reads, counted as ringlm's model.WeightBytes does:
    every tensor but rope_freqs, the embedding table counted once as the output
    head when tied and not at all otherwise (a step gathers only a few rows)."""
    tied = "output.weight" not in g.tensors
    total = 0
    for name in g.tensors:
        if name == "rope_freqs.weight" or (name == "token_embd.weight" and not tied):
            continue
        total += tensor_nbytes(g, name)
    return total


def raw(g, name):
    """The tensor's bytes in the file, as a read-only numpy uint8 view."""
    _, _, off = g.tensors[name]
    return np.frombuffer(g.buf, dtype=np.uint8, count=tensor_nbytes(g, name), offset=g.data + off)


def to_torch(g, name, dtype, device):
    """The tensor as a torch tensor of `dtype` on `device`, shape = reversed ggml dims (rows, cols).

    BF16 is reinterpreted without a conversion; F16 and F32 are cast on the
    device; Q8_0 is dequantized on the device (fp16 scale × int8, as the
    oracle and ringlm's CPU path do)."""
    import torch

    dims, typ, _ = g.tensors[name]
    shape = list(reversed(dims))
    b = raw(g, name)
    if not str(device).startswith("cuda"):
        b = b.copy()  # a CPU tensor must not alias the read-only file buffer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that the numpy view is not writable; it is only read
        if typ == GGML_BF16:
            t = torch.from_numpy(b.view(np.int16)).to(device).view(torch.bfloat16)
        elif typ == GGML_F16:
            t = torch.from_numpy(b.view(np.float16)).to(device)
        elif typ == GGML_F32:
            t = torch.from_numpy(b.view(np.float32)).to(device)
        elif typ == GGML_Q8_0:
            blocks = torch.from_numpy(b.reshape(-1, 34)).to(device)
            d = blocks[:, :2].contiguous().view(torch.float16).to(torch.float32)
            q = blocks[:, 2:].contiguous().view(torch.int8).to(torch.float32)
            t = (q * d).reshape(-1)
        else:
            raise ValueError(f"{name}: ggml type {typ} not supported")
    return t.to(dtype).reshape(shape)


def unpermute_torch(w, heads):
    """tools/hf_oracle.py's unpermute on a torch tensor: llama.cpp's interleaved
    RoPE pairs back to HF's halves, per head."""
    rows, cols = w.shape
    hd = rows // heads
    return w.reshape(heads, hd // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def hf_state_dict(g, dtype, device, log=print):
    """Every weight under its HuggingFace name (Llama/Qwen2/Phi3 modules), in
    `dtype` on `device`, Q/K unpermuted for llama. Also returns the inverse
    RoPE frequencies (float32, on `device`) exactly as llama.cpp uses them."""
    import torch

    t0 = time.perf_counter()
    hp = hparams(g)
    arch, heads, kv_heads = hp["arch"], hp["heads"], hp["kv_heads"]

    def T(n):
        return to_torch(g, n, dtype, device)

    sd = {"model.embed_tokens.weight": T("token_embd.weight"), "model.norm.weight": T("output_norm.weight")}
    if not hp["tied"]:
        sd["lm_head.weight"] = T("output.weight")
    for i in range(hp["layers"]):
        p, h = f"blk.{i}.", f"model.layers.{i}."
        sd[h + "input_layernorm.weight"] = T(p + "attn_norm.weight")
        sd[h + "post_attention_layernorm.weight"] = T(p + "ffn_norm.weight")
        sd[h + "self_attn.o_proj.weight"] = T(p + "attn_output.weight")
        sd[h + "mlp.down_proj.weight"] = T(p + "ffn_down.weight")
        if arch == "phi3":
            sd[h + "self_attn.qkv_proj.weight"] = T(p + "attn_qkv.weight")
            sd[h + "mlp.gate_up_proj.weight"] = T(p + "ffn_up.weight")
            continue
        q, k = T(p + "attn_q.weight"), T(p + "attn_k.weight")
        if arch == "llama":
            q, k = unpermute_torch(q, heads), unpermute_torch(k, kv_heads)
        sd[h + "self_attn.q_proj.weight"] = q.contiguous()
        sd[h + "self_attn.k_proj.weight"] = k.contiguous()
        sd[h + "self_attn.v_proj.weight"] = T(p + "attn_v.weight")
        for b in ("q", "k", "v"):
            if p + f"attn_{b}.bias" in g.tensors:
                sd[h + f"self_attn.{b}_proj.bias"] = T(p + f"attn_{b}.bias")
        sd[h + "mlp.gate_proj.weight"] = T(p + "ffn_gate.weight")
        sd[h + "mlp.up_proj.weight"] = T(p + "ffn_up.weight")
    rd = hp["rope_dim"]
    inv = 1.0 / (hp["rope_base"] ** (torch.arange(0, rd, 2, dtype=torch.int64).to(torch.float32) / rd))
    inv = inv.to(device)
    if "rope_freqs.weight" in g.tensors:
        inv = inv / to_torch(g, "rope_freqs.weight", torch.float32, device)
    if device != "cpu" and str(device).startswith("cuda"):
        torch.cuda.synchronize()
    log(f"weights: {len(sd)} tensors as {dtype} on {device} in {time.perf_counter() - t0:.1f}s")
    return sd, inv


def build_hf(g, dtype, device, attn="sdpa", log=print):
    """A transformers model of the GGUF's architecture with its weights, in
    `dtype` on `device`, RoPE as llama.cpp (see tools/hf_oracle.py). Returns
    (model, hparams)."""
    import torch
    import transformers

    hp = hparams(g)
    arch = hp["arch"]
    bos = hp["bos"] if hp["bos"] is not None else 0
    eos = hp["eos"] if hp["eos"] is not None else 1
    common = dict(vocab_size=hp["vocab"], hidden_size=hp["dim"], intermediate_size=hp["ffn"],
                  num_hidden_layers=hp["layers"], num_attention_heads=hp["heads"],
                  num_key_value_heads=hp["kv_heads"], max_position_embeddings=hp["context"],
                  rms_norm_eps=hp["eps"], tie_word_embeddings=hp["tied"], bos_token_id=bos,
                  eos_token_id=eos, pad_token_id=None)
    if arch == "llama":
        cfg = transformers.LlamaConfig(head_dim=hp["head_dim"], attention_bias=False, mlp_bias=False, **common)
        cls = transformers.LlamaForCausalLM
    elif arch == "qwen2":
        cfg = transformers.Qwen2Config(use_sliding_window=False, **common)
        cls = transformers.Qwen2ForCausalLM
    elif arch == "phi3":
        cfg = transformers.Phi3Config(sliding_window=None, original_max_position_embeddings=hp["context"], **common)
        cls = transformers.Phi3ForCausalLM
    else:
        raise SystemExit(f"peers: unsupported architecture {arch}")
    cfg._attn_implementation = attn
    t0 = time.perf_counter()
    torch.manual_seed(0)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = cls(cfg)
    finally:
        torch.set_default_dtype(old)
    model = model.eval()
    sd, inv = hf_state_dict(g, dtype, device, log=log)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [m for m in missing if not (hp["tied"] and m == "lm_head.weight") and "rotary_emb" not in m]
    if missing or unexpected:
        raise SystemExit(f"peers: state dict mismatch: missing {missing}, unexpected {unexpected}")
    del sd
    if hp["tied"]:
        model.tie_weights()
        emb = model.get_input_embeddings().weight
        if model.lm_head.weight.data_ptr() != emb.data_ptr():
            model.lm_head.weight = emb
    set_rope(model, inv, "peers")
    bad = [n for n, p in model.named_parameters() if p.dtype != dtype or p.device.type != torch.device(device).type]
    if bad:
        raise SystemExit(f"peers: parameters not {dtype} on {device}: {bad[:4]}")
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    log(f"hf model: {cls.__name__}, attn {attn}, built in {time.perf_counter() - t0:.1f}s")
    return model, hp
