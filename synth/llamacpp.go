package synth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"ringlm/gguf"
)

// llama.cpp's rules for loading a GGUF file of the architectures synth
// writes, read from its sources (github.com/ggml-org/llama.cpp):
//
//   - src/llama-arch.cpp: the key names (LLM_KV_NAMES) and tensor names
//     (LLM_TENSOR_NAMES);
//   - src/llama-model-loader.cpp: get_key checks a key's GGUF type
//     (GGUFMeta validate_type: "key has wrong type"), for optional keys
//     too when they are present; every tensor in the file must be used
//     ("wrong number of tensors");
//   - src/llama-model.cpp, llama_model::load_hparams: context_length,
//     embedding_length, block_count required; feed_forward_length and
//     attention.head_count (u32 or a per-layer array; required before
//     2025); head_count_kv, key/value_length, rope.* optional; "invalid
//     n_rot" unless rope.dimension_count is the head size for llama;
//     per architecture attention.layer_norm_rms_epsilon (llama, qwen2,
//     phi3); phi3's attention.sliding_window, which from PR 8931 (August
//     2024) to PR 13676 (May 2025) had to be present ("invalid value for
//     sliding_window") unless the shape was a known Phi-3's;
//     load_tensors: each architecture's tensors and shapes (qwen2's Q/K/V
//     biases are required; its graph asserts n_rot equals the head size);
//   - src/llama-vocab.cpp, llama_vocab::impl::load: tokenizer.ggml.model
//     required, tokens required and unique (an assert), merges required
//     for gpt2, scores (f32) and token_type (i32) read unchecked for
//     every token, special token ids u32 (out of range: ignored with a
//     warning), add_*_token bool.
//
// The value of tokenizer.ggml.pre is not checked here: package tokenizer
// owns the pre-tokenizer names.

// kvRule is one metadata key llama.cpp reads.
type kvRule struct {
	key      string         // "%s" stands for the architecture
	typ      gguf.ValueType // for an array, its element type
	array    bool
	perLayer bool // a u32, or an array of one u32 or i32 per layer (get_key_or_arr)
	required bool
}

var llamaCppKeys = []kvRule{
	{key: "general.architecture", typ: gguf.TypeString, required: true},
	{key: "general.name", typ: gguf.TypeString},
	{key: "general.alignment", typ: gguf.TypeUint32},
	{key: "general.file_type", typ: gguf.TypeUint32},
	{key: "general.quantization_version", typ: gguf.TypeUint32},
	{key: "%s.context_length", typ: gguf.TypeUint32, required: true},
	{key: "%s.embedding_length", typ: gguf.TypeUint32, required: true},
	{key: "%s.block_count", typ: gguf.TypeUint32, required: true},
	{key: "%s.feed_forward_length", typ: gguf.TypeUint32, perLayer: true, required: true},
	{key: "%s.attention.head_count", typ: gguf.TypeUint32, perLayer: true, required: true},
	{key: "%s.attention.head_count_kv", typ: gguf.TypeUint32, perLayer: true},
	{key: "%s.attention.key_length", typ: gguf.TypeUint32},
	{key: "%s.attention.value_length", typ: gguf.TypeUint32},
	{key: "%s.attention.layer_norm_rms_epsilon", typ: gguf.TypeFloat32, required: true},
	{key: "%s.attention.sliding_window", typ: gguf.TypeUint32},
	{key: "%s.vocab_size", typ: gguf.TypeUint32},
	{key: "%s.rope.dimension_count", typ: gguf.TypeUint32},
	{key: "%s.rope.freq_base", typ: gguf.TypeFloat32},
	{key: "%s.rope.scaling.type", typ: gguf.TypeString},
	{key: "%s.rope.scaling.factor", typ: gguf.TypeFloat32},
	{key: "%s.rope.scaling.original_context_length", typ: gguf.TypeUint32},
	{key: "tokenizer.ggml.model", typ: gguf.TypeString, required: true},
	{key: "tokenizer.ggml.pre", typ: gguf.TypeString},
	{key: "tokenizer.ggml.tokens", typ: gguf.TypeString, array: true, required: true},
	{key: "tokenizer.ggml.scores", typ: gguf.TypeFloat32, array: true},
	{key: "tokenizer.ggml.token_type", typ: gguf.TypeInt32, array: true},
	{key: "tokenizer.ggml.merges", typ: gguf.TypeString, array: true},
	{key: "tokenizer.ggml.add_bos_token", typ: gguf.TypeBool},
	{key: "tokenizer.ggml.add_eos_token", typ: gguf.TypeBool},
	{key: "tokenizer.ggml.add_space_prefix", typ: gguf.TypeBool},
	{key: "tokenizer.chat_template", typ: gguf.TypeString},
}

// llamaCppTokenIDs are the special token keys llama.cpp reads as u32.
var llamaCppTokenIDs = []string{"bos", "eos", "eot", "eom", "unknown", "seperator", "padding", "mask"}

// CheckLlamaCpp reports, one line each, whatever in f would make
// llama.cpp refuse to load it or load it other than as written: a
// missing or mistyped key, an inconsistent vocabulary, a missing,
// misshapen or unexpected tensor. nil means none.
func CheckLlamaCpp(f *gguf.File) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("llama.cpp: "+format, a...)) }
	if !checkMeta(f, bad) {
		return errors.Join(errs...)
	}
	h, err := f.Hparams()
	if err != nil {
		bad("%v", err)
		return errors.Join(errs...)
	}
	nTok := checkVocab(f, bad)
	checkHparams(f, h, nTok, bad)
	checkTensors(f, h, nTok, bad)
	return errors.Join(errs...)
}

// checkMeta checks the architecture and every key's presence and type;
// false when that leaves nothing further to check.
func checkMeta(f *gguf.File, bad func(string, ...any)) bool {
	arch, _ := f.Get("general.architecture")
	a, _ := arch.Str()
	if !slices.Contains(Archs, a) {
		bad("general.architecture %q is not one of %s", a, strings.Join(Archs, ", "))
		return false
	}
	ok := true
	fail := func(format string, a ...any) { bad(format, a...); ok = false }
	for _, r := range llamaCppKeys {
		key := r.key
		if strings.Contains(key, "%s") {
			key = fmt.Sprintf(key, a)
		}
		v, present := f.Get(key)
		switch {
		case !present && r.required:
			fail("missing %s", key)
		case !present:
		case r.perLayer && v.Type == gguf.TypeArray && (v.Elem == gguf.TypeUint32 || v.Elem == gguf.TypeInt32):
		case r.array && (v.Type != gguf.TypeArray || v.Elem != r.typ):
			fail("%s is %s of %s, want an array of %s", key, v.Type, v.Elem, r.typ)
		case !r.array && v.Type != r.typ:
			fail("%s is %s, want %s", key, v.Type, r.typ)
		}
	}
	for _, id := range llamaCppTokenIDs {
		if v, present := f.Get("tokenizer.ggml." + id + "_token_id"); present && v.Type != gguf.TypeUint32 {
			fail("tokenizer.ggml.%s_token_id is %s, want u32", id, v.Type)
		}
	}
	return ok
}

func checkVocab(f *gguf.File, bad func(string, ...any)) int {
	u32 := func(k string) (uint32, bool) {
		v, ok := f.Get(k)
		if !ok {
			return 0, false
		}
		u, _ := v.Raw().(uint32)
		return u, true
	}
	model, _ := f.Get("tokenizer.ggml.model")
	m, _ := model.Str()
	tv, _ := f.Get("tokenizer.ggml.tokens")
	tokens, _ := tv.StringSlice()
	n := len(tokens)
	seen := make(map[string]int, n)
	for i, t := range tokens {
		if j, ok := seen[t]; ok {
			bad("tokenizer.ggml.tokens: %q is token %d and %d (llama.cpp asserts every token is distinct)", t, j, i)
			break
		}
		seen[t] = i
	}
	switch m {
	case "gpt2":
		mv, ok := f.Get("tokenizer.ggml.merges")
		if !ok {
			bad("tokenizer.ggml.model gpt2 without tokenizer.ggml.merges (\"cannot find tokenizer merges\")")
		}
		merges, _ := mv.StringSlice()
		for i, s := range merges {
			if strings.Index(s[min(1, len(s)):], " ") < 0 {
				bad("tokenizer.ggml.merges[%d] %q has no space after its first byte", i, s)
				break
			}
		}
	case "llama":
	default:
		bad("tokenizer.ggml.model %q: synth's architectures use llama (SentencePiece) or gpt2 (byte-level BPE)", m)
	}
	for _, k := range []string{"tokenizer.ggml.scores", "tokenizer.ggml.token_type"} {
		if v, ok := f.Get(k); ok && v.Len() != n {
			bad("%s has %d entries for %d tokens (llama.cpp reads one per token)", k, v.Len(), n)
		}
	}
	for _, id := range llamaCppTokenIDs {
		k := "tokenizer.ggml." + id + "_token_id"
		if u, ok := u32(k); ok && int64(u) >= int64(n) {
			bad("%s = %d is outside the %d tokens (llama.cpp ignores it)", k, u, n)
		}
	}
	return n
}

func checkHparams(f *gguf.File, h gguf.Hparams, nTok int, bad func(string, ...any)) {
	a := h.Arch
	if h.VocabSize != uint32(nTok) {
		bad("%s.vocab_size %d, but %d tokens", a, h.VocabSize, nTok)
	}
	if h.RopeDimension != h.KeyLength && (a == "llama" || a == "qwen2") {
		bad("%s.rope.dimension_count %d is not the head size %d (\"invalid n_rot\")", a, h.RopeDimension, h.KeyLength)
	}
	switch h.RopeScalingType {
	case "", "none", "linear", "yarn", "longrope":
	default:
		bad("%s.rope.scaling.type %q is none of none, linear, yarn, longrope", a, h.RopeScalingType)
	}
	if a == "phi3" {
		_, ok := f.Get(a + ".attention.sliding_window")
		known := ((h.BlockCount == 32 || h.BlockCount == 40) && h.ContextLength == 4096) ||
			(h.BlockCount == 32 && h.HeadCountKV == 32 && h.ContextLength == 131072) ||
			(h.BlockCount == 40 && h.ContextLength == 131072)
		if !ok && !known {
			bad("phi3 without phi3.attention.sliding_window (\"invalid value for sliding_window\")")
		}
	}
}

// tensorRule is one tensor llama.cpp creates; dims in ggml order.
type tensorRule struct {
	name     string
	dims     []uint64
	required bool
}

func llamaCppTensors(h gguf.Hparams, nTok int) []tensorRule {
	d, nv, ff := uint64(h.EmbeddingLength), uint64(nTok), uint64(h.FeedForwardLength)
	hk, hv := uint64(h.KeyLength), uint64(h.ValueLength)
	q, kq, kv := hk*uint64(h.HeadCount), hk*uint64(h.HeadCountKV), hv*uint64(h.HeadCountKV)
	rot := uint64(h.RopeDimension) / 2
	ts := []tensorRule{
		{"token_embd.weight", []uint64{d, nv}, true},
		{"output_norm.weight", []uint64{d}, true},
		{"output.weight", []uint64{d, nv}, false},
	}
	switch h.Arch {
	case "llama":
		ts = append(ts, tensorRule{"rope_freqs.weight", []uint64{rot}, false})
	case "phi3":
		ts = append(ts, tensorRule{"rope_factors_long.weight", []uint64{rot}, false},
			tensorRule{"rope_factors_short.weight", []uint64{rot}, false})
	}
	if h.Arch != "llama" {
		q = d // llama.cpp shapes qwen2's and phi3's Q and output n_embd × n_embd
	}
	for l := range int(h.BlockCount) {
		p := fmt.Sprintf("blk.%d.", l)
		t := func(name string, req bool, dims ...uint64) { ts = append(ts, tensorRule{p + name, dims, req}) }
		t("attn_norm.weight", true, d)
		t("attn_output.weight", true, q, d)
		t("ffn_norm.weight", true, d)
		t("ffn_down.weight", true, ff, d)
		switch h.Arch {
		case "phi3":
			t("attn_qkv.weight", false, d, q+kq+kv)
			t("ffn_up.weight", true, d, 2*ff)
		default:
			bias := h.Arch == "qwen2"
			t("attn_q.weight", true, d, q)
			t("attn_k.weight", true, d, kq)
			t("attn_v.weight", true, d, kv)
			t("attn_q.bias", bias, q)
			t("attn_k.bias", bias, kq)
			t("attn_v.bias", bias, kv)
			t("ffn_gate.weight", true, d, ff)
			t("ffn_up.weight", true, d, ff)
		}
	}
	return ts
}

func checkTensors(f *gguf.File, h gguf.Hparams, nTok int, bad func(string, ...any)) {
	rules := llamaCppTensors(h, nTok)
	known := make(map[string]bool, len(rules))
	for _, r := range rules {
		known[r.name] = true
		t, ok := f.Tensor(r.name)
		switch {
		case !ok && r.required:
			if h.Arch == "phi3" && strings.HasSuffix(r.name, "attn_qkv.weight") {
				continue // the separate Q, K and V instead, checked below
			}
			bad("missing tensor %s", r.name)
		case ok && !slices.Equal(t.Dims, r.dims):
			bad("tensor %s has shape %v, llama.cpp creates it as %v", r.name, t.Dims, r.dims)
		}
	}
	if h.Arch == "phi3" {
		hk, hv := uint64(h.KeyLength), uint64(h.ValueLength)
		d := uint64(h.EmbeddingLength)
		for l := range int(h.BlockCount) {
			p := fmt.Sprintf("blk.%d.", l)
			if _, ok := f.Tensor(p + "attn_qkv.weight"); ok {
				continue
			}
			for _, r := range []tensorRule{{p + "attn_q.weight", []uint64{d, d}, true},
				{p + "attn_k.weight", []uint64{d, hk * uint64(h.HeadCountKV)}, true},
				{p + "attn_v.weight", []uint64{d, hv * uint64(h.HeadCountKV)}, true}} {
				known[r.name] = true
				if t, ok := f.Tensor(r.name); !ok || !slices.Equal(t.Dims, r.dims) {
					bad("blk.%d has no attn_qkv and no %s of shape %v", l, r.name, r.dims)
				}
			}
		}
	}
	for _, t := range f.Tensors {
		if !known[t.Name] {
			bad("tensor %s is not one llama.cpp's %s loader uses (\"wrong number of tensors\")", t.Name, h.Arch)
		}
	}
}
