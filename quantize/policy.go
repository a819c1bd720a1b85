package quantize

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"ringlm/gguf"
)

// Model is what the rules read from a model's metadata.
type Model struct {
	Arch    string // general.architecture
	Layers  int    // block_count
	Heads   int    // attention.head_count
	KVHeads int    // attention.head_count_kv
}

// gqa is llama.cpp's n_gqa(): query heads per KV head.
func (m Model) gqa() int {
	if m.KVHeads <= 0 {
		return 0
	}
	return m.Heads / m.KVHeads
}

// is70B is llama.cpp's LLM_TYPE_70B for the architectures here: its
// attn_v gets Q5_K where the mix says Q3_K or Q4_K (8 query heads share
// each KV head, so attn_v is small and bits on it are cheap).
func (m Model) is70B() bool {
	switch m.Arch {
	case "llama":
		return m.Layers == 80 && m.Heads != m.KVHeads
	case "qwen2":
		return m.Layers == 80
	}
	return false
}

// Tensor is a tensor as the rules see it: its name, its type in the input
// and its ggml-order shape (Dims[0] is the row length).
type Tensor struct {
	Name string
	Type gguf.Type
	Dims []uint64
}

// Rules are llama-quantize's flags that change the choice: nil keeps the
// mix's choice.
type Rules struct {
	OutputType    *gguf.Type // --output-tensor-type: output.weight (and a tied token_embd)
	EmbeddingType *gguf.Type // --token-embedding-type: token_embd.weight
}

// Choice is a tensor's type in the output.
type Choice struct {
	Tensor
	To gguf.Type
	// Fallback is set when the type the rules wanted (Wanted) does not
	// divide the row length into whole blocks and To is llama.cpp's
	// stand-in for it.
	Fallback bool
	Wanted   gguf.Type
}

// Converts reports whether the tensor's bytes change.
func (c Choice) Converts() bool { return c.To != c.Type }

// category is llama.cpp's tensor_category: which rule a tensor falls
// under, from its name alone.
type category int

const (
	catOther category = iota
	catTokenEmbd
	catOutput
	catAttnQ
	catAttnK
	catAttnV
	catAttnQKV
	catAttnKVB
	catAttnOutput
	catFFNUp
	catFFNGate
	catFFNDown
)

// categoryOf matches in llama.cpp's order, which matters: "ffn_up" is
// tested before "ffn_gate" and "ffn_down", and attn_qkv before attn_v.
func categoryOf(name string) category {
	has := func(s string) bool { return strings.Contains(name, s) }
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight" || name == "per_layer_token_embd.weight":
		return catTokenEmbd
	case has("attn_qkv.weight"):
		return catAttnQKV
	case has("attn_kv_b.weight"):
		return catAttnKVB
	case has("attn_v.weight"):
		return catAttnV
	case has("attn_k.weight"):
		return catAttnK
	case has("attn_q.weight"):
		return catAttnQ
	case has("attn_output.weight"):
		return catAttnOutput
	case has("ffn_up"):
		return catFFNUp
	case has("ffn_gate"):
		return catFFNGate
	case has("ffn_down"):
		return catFFNDown
	}
	return catOther
}

// attnVLike are the tensors llama.cpp gives attn_v's extra bits. A fused
// attn_qkv (phi3) counts as one: llama.cpp's separate attn_qkv rule
// (Q5_K in Q4_K_M) sits behind this one since its tensor categories came
// in and no longer applies.
func (c category) attnVLike() bool { return c == catAttnV || c == catAttnQKV || c == catAttnKVB }

// keepSubstrings are the 2-D weights llama.cpp never quantizes.
var keepSubstrings = []string{
	"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
	"ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
	"time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
	"time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
	"time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
	"time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
	"attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos",
	".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
}

// quantizable is llama.cpp's tensor_allows_quantization: weights of two
// or more dimensions, except norms and the small tensors it lists. The
// rest (1-D norms and biases, rope_freqs) are copied as they are.
func quantizable(t Tensor) bool {
	if nDims(t.Dims) < 2 || !strings.HasSuffix(t.Name, "weight") {
		return false
	}
	if t.Name == "position_embd.weight" || t.Name == "token_types.weight" {
		return false
	}
	for _, s := range keepSubstrings {
		if strings.Contains(t.Name, s) {
			return false
		}
	}
	return true
}

// nDims is ggml_n_dims: trailing dimensions of 1 do not count.
func nDims(d []uint64) int {
	for i := len(d) - 1; i >= 1; i-- {
		if d[i] > 1 {
			return i + 1
		}
	}
	return 1
}

func blockSize(t gguf.Type) uint64 {
	info, ok := t.Info()
	if !ok {
		return 1
	}
	return info.BlockSize
}

// quantized is ggml_is_quantized for the types gguf knows.
func quantized(t gguf.Type) bool { return blockSize(t) > 1 }

// useMoreBits is llama.cpp's use_more_bits: the first and last eighth of
// the layers and every third one between get more bits in the _M mixes.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// layerOf is the N of "blk.N." (sscanf's "blk.%d."), or -1.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	end := 0
	if end < len(rest) && (rest[0] == '-' || rest[0] == '+') {
		end++
	}
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(rest[:end])
	if err != nil {
		return -1
	}
	return n
}

// llamaOrder sorts tensors as llama.cpp's model loader holds them (its
// weight_name_comparer): by block number, tensors outside blocks first,
// then by name. The rules count attn_v and ffn_down tensors in this
// order, and llama-quantize writes its output in it.
func llamaOrder(ts []Tensor) []int {
	idx := make([]int, len(ts))
	layer := make([]int, len(ts))
	for i := range ts {
		idx[i], layer[i] = i, layerOf(ts[i].Name)
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if layer[a] != layer[b] {
			return layer[a] - layer[b]
		}
		return strings.Compare(ts[a].Name, ts[b].Name)
	})
	return idx
}

// chooser carries llama.cpp's quantize_state_impl through one pass.
type chooser struct {
	m        Model
	mix      Mix
	r        Rules
	tied     bool // no output.weight: token_embd is also the output head
	nAttnV   int
	iAttnV   int
	iFFNDown int
}

// Choose gives every tensor its type in mix, as llama.cpp's
// llama_tensor_get_type does, and returns the choices in llama.cpp's
// order (llamaOrder). It fails when a chosen type cannot hold a tensor's
// rows (an override of the wrong block size, a pure type with no
// fallback).
func Choose(m Model, tensors []Tensor, mix Mix, r Rules) ([]Choice, error) {
	c := &chooser{m: m, mix: mix, r: r, tied: true}
	for _, t := range tensors {
		cat := categoryOf(t.Name)
		if cat.attnVLike() {
			c.nAttnV++
		}
		if cat == catOutput {
			c.tied = false
		}
	}
	var out []Choice
	for _, i := range llamaOrder(tensors) {
		t := tensors[i]
		ch := Choice{Tensor: t, To: t.Type, Wanted: t.Type}
		if len(t.Dims) == 0 {
			return nil, fmt.Errorf("quantize: tensor %q has no dimensions", t.Name)
		}
		if quantizable(t) {
			var err error
			if ch, err = c.choose(t); err != nil {
				return nil, err
			}
		}
		if bs := blockSize(ch.To); t.Dims[0]%bs != 0 {
			return nil, fmt.Errorf("quantize: tensor %q: its rows of %d are not a whole number of %s blocks of %d", t.Name, t.Dims[0], ch.To, bs)
		}
		out = append(out, ch)
	}
	return out, nil
}

func (c *chooser) choose(t Tensor) (Choice, error) {
	ch := Choice{Tensor: t}
	cat := categoryOf(t.Name)
	// The overrides win outright, with no fallback, as in llama.cpp.
	if c.r.EmbeddingType != nil && cat == catTokenEmbd {
		ch.To, ch.Wanted = *c.r.EmbeddingType, *c.r.EmbeddingType
		return ch, nil
	}
	if c.r.OutputType != nil && cat == catOutput {
		ch.To, ch.Wanted = *c.r.OutputType, *c.r.OutputType
		return ch, nil
	}
	want := c.mix.Default
	if !quantized(want) {
		ch.To, ch.Wanted = want, want
		return ch, nil
	}
	if !c.mix.Pure {
		want = c.rule(want, t, cat)
	}
	ch.Wanted = want
	to, fell, err := fallback(t, want)
	ch.To, ch.Fallback = to, fell
	return ch, err
}

// fallback is llama.cpp's tensor_type_fallback: a type whose block does
// not divide the row length gives way to a 32-element type of about as
// many bits, and F16 when even that does not fit.
func fallback(t Tensor, want gguf.Type) (gguf.Type, bool, error) {
	if t.Dims[0]%blockSize(want) == 0 {
		return want, false, nil
	}
	var to gguf.Type
	switch want {
	case gguf.TypeIQ4_XS, gguf.TypeIQ1_S, gguf.TypeIQ1_M, gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ2_S,
		gguf.TypeIQ3_XXS, gguf.TypeIQ3_S:
		to = gguf.TypeIQ4_NL
	case gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeTQ1_0, gguf.TypeTQ2_0:
		to = gguf.TypeQ4_0
	case gguf.TypeQ4_K:
		to = gguf.TypeQ5_0
	case gguf.TypeQ5_K:
		to = gguf.TypeQ5_1
	case gguf.TypeQ6_K:
		to = gguf.TypeQ8_0
	default:
		return 0, false, fmt.Errorf("quantize: tensor %q: its rows of %d are not a whole number of %s blocks of %d, and %s has no fallback type",
			t.Name, t.Dims[0], want, blockSize(want), want)
	}
	if t.Dims[0]%blockSize(to) != 0 {
		to = gguf.TypeF16
	}
	return to, true, nil
}

// rule is the body of llama.cpp's llama_tensor_get_type_impl for the
// mixes in mixes and a dense model (no experts; Falcon's branches are not
// here since ringlm does not run it).
func (c *chooser) rule(want gguf.Type, t Tensor, cat category) gguf.Type {
	ft := c.mix.FileType
	switch {
	case cat == catOutput || (c.tied && cat == catTokenEmbd):
		if c.r.OutputType != nil {
			return *c.r.OutputType
		}
		if t.Dims[0]%blockSize(want) != 0 {
			return gguf.TypeQ8_0
		}
		if want != gguf.TypeQ8_0 {
			return gguf.TypeQ6_K
		}
	case cat == catTokenEmbd:
		// An untied embedding keeps the mix's type here; llama.cpp changes
		// it only in the IQ1–IQ3 and TQ mixes.
	case cat.attnVLike():
		i, n := c.iAttnV, c.nAttnV
		c.iAttnV++
		switch {
		case ft == ftypeQ2_K:
			want = gguf.TypeQ3_K
			if c.m.gqa() >= 4 {
				want = gguf.TypeQ4_K
			}
		case ft == ftypeQ3_K_M:
			want = gguf.TypeQ4_K
			if i < 2 {
				want = gguf.TypeQ5_K
			}
		case ft == ftypeQ3_K_L:
			want = gguf.TypeQ5_K
		case (ft == ftypeIQ4_NL || ft == ftypeIQ4_XS) && c.m.gqa() >= 4:
			want = gguf.TypeQ5_K
		case (ft == ftypeQ4_K_M || ft == ftypeQ5_K_M) && useMoreBits(i, n):
			want = gguf.TypeQ6_K
		case ft == ftypeQ4_K_S && i < 4:
			want = gguf.TypeQ5_K
		}
		if c.m.is70B() && (want == gguf.TypeQ3_K || want == gguf.TypeQ4_K) {
			want = gguf.TypeQ5_K
		}
	case cat == catFFNDown:
		// A dense model's layer is the count of ffn_down tensors so far.
		i, n := c.iFFNDown, c.m.Layers
		c.iFFNDown++
		switch {
		case ft == ftypeQ2_K:
			want = gguf.TypeQ3_K
		case ft == ftypeQ3_K_M:
			want = gguf.TypeQ4_K
			if i < n/16 {
				want = gguf.TypeQ5_K
			}
		case ft == ftypeQ3_K_L:
			want = gguf.TypeQ5_K
		case ft == ftypeQ4_K_M:
			if useMoreBits(i, n) {
				want = gguf.TypeQ6_K
			}
		case i < n/8 && (ft == ftypeIQ4_NL || ft == ftypeIQ4_XS):
			want = gguf.TypeQ5_K
		case ft == ftypeQ5_K_M && useMoreBits(i, n):
			want = gguf.TypeQ6_K
		case ft == ftypeQ4_K_S && i < n/8:
			want = gguf.TypeQ5_K
		}
	case cat == catAttnOutput:
		switch ft {
		case ftypeQ2_K:
			want = gguf.TypeQ3_K
		case ftypeQ3_K_M:
			want = gguf.TypeQ4_K
		case ftypeQ3_K_L:
			want = gguf.TypeQ5_K
		}
	}
	return want
}
