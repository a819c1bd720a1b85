package quantize

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"ringlm/gguf"
)

// shape is a dense model's tensor list as llama.cpp's converter names
// and shapes it: matrices in F16, 1-D tensors in F32.
type shape struct {
	Model
	dim, ffn, headDim, vocab int
	tied, bias, ropeFreqs    bool
}

func (s shape) tensors() []Tensor {
	d, q, kv, ff := uint64(s.dim), uint64(s.Heads*s.headDim), uint64(s.KVHeads*s.headDim), uint64(s.ffn)
	m := func(name string, dims ...uint64) Tensor { return Tensor{Name: name, Type: gguf.TypeF16, Dims: dims} }
	v := func(name string, n uint64) Tensor { return Tensor{Name: name, Type: gguf.TypeF32, Dims: []uint64{n}} }
	var ts []Tensor
	if s.ropeFreqs {
		ts = append(ts, v("rope_freqs.weight", uint64(s.headDim/2)))
	}
	ts = append(ts, m("token_embd.weight", d, uint64(s.vocab)))
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts, v(p+"attn_norm.weight", d))
		if s.Arch == "phi3" {
			ts = append(ts, m(p+"attn_qkv.weight", d, q+2*kv))
		} else {
			ts = append(ts, m(p+"attn_q.weight", d, q), m(p+"attn_k.weight", d, kv), m(p+"attn_v.weight", d, kv))
		}
		if s.bias {
			ts = append(ts, v(p+"attn_q.bias", q), v(p+"attn_k.bias", kv), v(p+"attn_v.bias", kv))
		}
		ts = append(ts, m(p+"attn_output.weight", q, d), v(p+"ffn_norm.weight", d))
		if s.Arch == "phi3" {
			ts = append(ts, m(p+"ffn_up.weight", d, 2*ff))
		} else {
			ts = append(ts, m(p+"ffn_gate.weight", d, ff), m(p+"ffn_up.weight", d, ff))
		}
		ts = append(ts, m(p+"ffn_down.weight", ff, d))
	}
	ts = append(ts, v("output_norm.weight", d))
	if !s.tied {
		ts = append(ts, m("output.weight", d, uint64(s.vocab)))
	}
	return ts
}

var (
	// Llama 3.1-like, 16 layers, GQA 4, its own output head.
	llama16 = shape{Model: Model{Arch: "llama", Layers: 16, Heads: 32, KVHeads: 8}, dim: 2048, ffn: 8192, headDim: 64, vocab: 128256, ropeFreqs: true}
	// Qwen2.5-0.5B: 24 layers, tied embeddings, and a width of 896, which
	// is not a whole number of 256-blocks.
	qwen24 = shape{Model: Model{Arch: "qwen2", Layers: 24, Heads: 14, KVHeads: 2}, dim: 896, ffn: 4864, headDim: 64, vocab: 151936, tied: true, bias: true}
	// Phi-3-mini: 32 layers, fused attn_qkv and gate+up, no GQA.
	phi32 = shape{Model: Model{Arch: "phi3", Layers: 32, Heads: 32, KVHeads: 32}, dim: 3072, ffn: 8192, headDim: 96, vocab: 32064}
	// The built-in gocoder: tied, and an FFN of 640 (ffn_down's rows are
	// not whole 256-blocks).
	gocoder = shape{Model: Model{Arch: "llama", Layers: 6, Heads: 8, KVHeads: 2}, dim: 256, ffn: 640, headDim: 32, vocab: 4096, tied: true}
)

// kind is a tensor's name without its block prefix and ".weight":
// "attn_v", "token_embd".
func kind(name string) (string, int) {
	layer := -1
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		i := strings.IndexByte(rest, '.')
		fmt.Sscan(rest[:i], &layer)
		name = rest[i+1:]
	}
	return strings.TrimSuffix(name, ".weight"), layer
}

func in(l int, layers ...int) bool { return slices.Contains(layers, l) }

// The layers llama.cpp's use_more_bits(i, n) picks, worked out by hand:
// i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2.
var (
	more16 = []int{0, 1, 4, 7, 10, 13, 14, 15}
	more24 = []int{0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23}
	more32 = []int{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}
	more6  = []int{2, 5}
)

const (
	f32, f16, q8_0, q6_K, q5_K, q4_K, q3_K, q2_K = gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ6_K, gguf.TypeQ5_K, gguf.TypeQ4_K, gguf.TypeQ3_K, gguf.TypeQ2_K
	q4_0, q5_0, q5_1, iq4_xs, bf16               = gguf.TypeQ4_0, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeIQ4_XS, gguf.TypeBF16
)

// policyCases are llama.cpp's choices, read off llama_tensor_get_type in
// src/llama-quant.cpp for each model and mix: want gives the type of a
// quantizable tensor by kind and layer (1-D tensors stay F32 throughout),
// fallbacks the number of tensors tensor_type_fallback moved.
var policyCases = []struct {
	model     shape
	mix       string
	rules     Rules
	pure      bool
	want      func(kind string, layer int) gguf.Type
	fallbacks int
}{
	{model: llama16, mix: "Q4_K_M", want: func(k string, l int) gguf.Type {
		switch {
		case k == "output":
			return q6_K
		case (k == "attn_v" || k == "ffn_down") && in(l, more16...):
			return q6_K
		}
		return q4_K // token_embd too: untied, it keeps the mix's type
	}},
	{model: llama16, mix: "Q5_K_M", want: func(k string, l int) gguf.Type {
		if k == "output" || (k == "attn_v" || k == "ffn_down") && in(l, more16...) {
			return q6_K
		}
		return q5_K
	}},
	{model: llama16, mix: "Q6_K", want: func(string, int) gguf.Type { return q6_K }},
	{model: llama16, mix: "Q8_0", want: func(string, int) gguf.Type { return q8_0 }},
	{model: llama16, mix: "Q4_0", want: func(k string, l int) gguf.Type {
		if k == "output" {
			return q6_K
		}
		return q4_0
	}},
	{model: llama16, mix: "Q4_K_S", want: func(k string, l int) gguf.Type {
		switch {
		case k == "output":
			return q6_K
		case k == "attn_v" && l < 4, k == "ffn_down" && l < 2:
			return q5_K
		}
		return q4_K
	}},
	{model: llama16, mix: "Q3_K_M", want: func(k string, l int) gguf.Type {
		switch {
		case k == "output":
			return q6_K
		case k == "attn_v" && l < 2, k == "ffn_down" && l < 1:
			return q5_K
		case k == "attn_v", k == "ffn_down", k == "attn_output":
			return q4_K
		}
		return q3_K
	}},
	{model: llama16, mix: "Q2_K", want: func(k string, l int) gguf.Type {
		switch k {
		case "output":
			return q6_K
		case "attn_v": // GQA 4
			return q4_K
		case "ffn_down", "attn_output":
			return q3_K
		}
		return q2_K
	}},
	{model: llama16, mix: "IQ4_XS", want: func(k string, l int) gguf.Type {
		switch {
		case k == "output":
			return q6_K
		case k == "attn_v", k == "ffn_down" && l < 2:
			return q5_K
		}
		return iq4_xs
	}},
	{model: llama16, mix: "BF16", want: func(string, int) gguf.Type { return bf16 }},
	// --pure: the mix's type everywhere, output included.
	{model: llama16, mix: "Q4_K_M", pure: true, want: func(string, int) gguf.Type { return q4_K }},
	// The overrides replace the output and embedding choices only.
	{model: llama16, mix: "Q4_K_M", rules: Rules{OutputType: ptr(q8_0), EmbeddingType: ptr(f16)}, want: func(k string, l int) gguf.Type {
		switch {
		case k == "output":
			return q8_0
		case k == "token_embd":
			return f16
		case (k == "attn_v" || k == "ffn_down") && in(l, more16...):
			return q6_K
		}
		return q4_K
	}},

	// Tied: token_embd is the output head and takes its rule. 896-wide
	// rows are not whole 256-blocks: Q4_K falls back to Q5_0, Q5_K to
	// Q5_1, Q6_K to Q8_0 (q, k, v, output, gate and up of 24 layers: 144).
	{model: qwen24, mix: "Q4_K_M", fallbacks: 144, want: func(k string, l int) gguf.Type {
		switch {
		case k == "token_embd": // 896 % 256 != 0: Q8_0 directly, no fallback counted
			return q8_0
		case k == "attn_v" && in(l, more24...):
			return q8_0 // Q6_K, fallen back
		case k == "ffn_down" && in(l, more24...):
			return q6_K // rows of 4864 = 19 blocks
		case k == "ffn_down":
			return q4_K
		}
		return q5_0
	}},
	{model: qwen24, mix: "Q5_K_M", fallbacks: 144, want: func(k string, l int) gguf.Type {
		switch {
		case k == "token_embd", k == "attn_v" && in(l, more24...):
			return q8_0
		case k == "ffn_down" && in(l, more24...):
			return q6_K
		case k == "ffn_down":
			return q5_K
		}
		return q5_1
	}},
	{model: qwen24, mix: "Q6_K", fallbacks: 144, want: func(k string, l int) gguf.Type {
		if k == "ffn_down" {
			return q6_K
		}
		return q8_0
	}},
	{model: qwen24, mix: "Q8_0", want: func(string, int) gguf.Type { return q8_0 }},
	// Q4_0's block of 32 divides 896, so the tied head is first given
	// Q6_K, which then falls back to Q8_0: one fallback.
	{model: qwen24, mix: "Q4_0", fallbacks: 1, want: func(k string, l int) gguf.Type {
		if k == "token_embd" {
			return q8_0
		}
		return q4_0
	}},
	// --output-tensor-type reaches a tied token_embd through the output
	// rule.
	{model: qwen24, mix: "Q8_0", rules: Rules{OutputType: ptr(f16)}, want: func(k string, l int) gguf.Type {
		if k == "token_embd" {
			return f16
		}
		return q8_0
	}},

	// phi3: the fused attn_qkv takes attn_v's rule, counted over 32 layers.
	{model: phi32, mix: "Q4_K_M", want: func(k string, l int) gguf.Type {
		switch {
		case k == "output":
			return q6_K
		case (k == "attn_qkv" || k == "ffn_down") && in(l, more32...):
			return q6_K
		}
		return q4_K
	}},
	{model: phi32, mix: "Q5_K_M", want: func(k string, l int) gguf.Type {
		if k == "output" || (k == "attn_qkv" || k == "ffn_down") && in(l, more32...) {
			return q6_K
		}
		return q5_K
	}},
	{model: phi32, mix: "Q6_K", want: func(string, int) gguf.Type { return q6_K }},
	{model: phi32, mix: "Q8_0", want: func(string, int) gguf.Type { return q8_0 }},
	{model: phi32, mix: "Q4_0", want: func(k string, l int) gguf.Type {
		if k == "output" {
			return q6_K
		}
		return q4_0
	}},
	{model: phi32, mix: "Q3_K_L", want: func(k string, l int) gguf.Type {
		switch k {
		case "output":
			return q6_K
		case "attn_qkv", "ffn_down", "attn_output":
			return q5_K
		}
		return q3_K
	}},

	// gocoder: the "six tensors fell back to Q8_0" in Q6_K.
	{model: gocoder, mix: "Q6_K", fallbacks: 6, want: func(k string, l int) gguf.Type {
		if k == "ffn_down" {
			return q8_0
		}
		return q6_K // the tied head too: 256 is one block
	}},
	{model: gocoder, mix: "Q4_K_M", fallbacks: 6, want: func(k string, l int) gguf.Type {
		switch {
		case k == "token_embd", k == "attn_v" && in(l, more6...):
			return q6_K
		case k == "ffn_down" && in(l, more6...):
			return q8_0
		case k == "ffn_down":
			return q5_0
		}
		return q4_K
	}},
	{model: gocoder, mix: "Q4_0", want: func(k string, l int) gguf.Type {
		if k == "token_embd" {
			return q6_K
		}
		return q4_0
	}},
}

func ptr[T any](v T) *T { return &v }

func TestPolicyTable(t *testing.T) {
	for _, tc := range policyCases {
		name := fmt.Sprintf("%s-%dL/%s", tc.model.Arch, tc.model.Layers, tc.mix)
		if tc.pure {
			name += "/pure"
		}
		if tc.rules != (Rules{}) {
			name += "/overrides"
		}
		t.Run(name, func(t *testing.T) {
			mix, ok := ParseMix(tc.mix)
			if !ok {
				t.Fatalf("no mix %s", tc.mix)
			}
			mix.Pure = tc.pure
			ts := tc.model.tensors()
			got, err := Choose(tc.model.Model, ts, mix, tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(ts) {
				t.Fatalf("%d choices for %d tensors", len(got), len(ts))
			}
			fallbacks := 0
			for _, c := range got {
				want := c.Type
				if len(c.Dims) > 1 {
					want = tc.want(kind(c.Name))
				}
				if c.To != want {
					t.Errorf("%s %v: %s, llama.cpp chooses %s", c.Name, c.Dims, c.To, want)
				}
				if c.Fallback {
					fallbacks++
					if c.Wanted == c.To {
						t.Errorf("%s: fallback from %s to itself", c.Name, c.Wanted)
					}
				}
			}
			if fallbacks != tc.fallbacks {
				t.Errorf("%d fallbacks, llama.cpp counts %d", fallbacks, tc.fallbacks)
			}
		})
	}
}

// llama.cpp holds (and writes) tensors by block number, then name:
// tensors outside blocks first, blk.2 before blk.10.
func TestLlamaOrder(t *testing.T) {
	names := []string{"token_embd.weight", "blk.10.attn_q.weight", "blk.2.ffn_up.weight", "output.weight", "blk.2.attn_k.weight", "output_norm.weight"}
	ts := make([]Tensor, len(names))
	for i, n := range names {
		ts[i] = Tensor{Name: n}
	}
	var got []string
	for _, i := range llamaOrder(ts) {
		got = append(got, names[i])
	}
	want := []string{"output.weight", "output_norm.weight", "token_embd.weight", "blk.2.attn_k.weight", "blk.2.ffn_up.weight", "blk.10.attn_q.weight"}
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

// A 70B (80 layers with GQA) gives attn_v Q5_K where the mix says Q4_K.
func TestPolicy70B(t *testing.T) {
	m := Model{Arch: "llama", Layers: 80, Heads: 64, KVHeads: 8}
	mix, _ := ParseMix("Q4_K_M")
	ts := []Tensor{}
	for l := range 80 {
		ts = append(ts, Tensor{Name: fmt.Sprintf("blk.%d.attn_v.weight", l), Type: f16, Dims: []uint64{8192, 1024}})
	}
	got, err := Choose(m, ts, mix, Rules{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		_, l := kind(c.Name)
		want := q5_K
		if useMoreBitsByHand80(l) {
			want = q6_K
		}
		if c.To != want {
			t.Errorf("%s: %s, want %s", c.Name, c.To, want)
		}
	}
}

// useMoreBitsByHand80 spells out use_more_bits for 80 layers: the first
// and last ten, and layers 10 + 3k + 2 between.
func useMoreBitsByHand80(l int) bool { return l < 10 || l >= 70 || (l >= 12 && (l-12)%3 == 0) }

func TestPolicyErrors(t *testing.T) {
	mix, _ := ParseMix("Q4_K_M")
	// An override takes no fallback: Q6_K cannot hold rows of 896.
	_, err := Choose(qwen24.Model, append(qwen24.tensors(), Tensor{Name: "output.weight", Type: f16, Dims: []uint64{896, 151936}}),
		mix, Rules{OutputType: ptr(q6_K)})
	if err == nil || !strings.Contains(err.Error(), `tensor "output.weight": its rows of 896 are not a whole number of Q6_K blocks of 256`) {
		t.Errorf("override of the wrong block size: %v", err)
	}
	// A pure type with no fallback.
	_, err = Choose(gocoder.Model, gocoder.tensors(), PureMix(gguf.TypeQ8_K), Rules{})
	if err == nil || !strings.Contains(err.Error(), "Q8_K has no fallback type") {
		t.Errorf("Q8_K on rows of 640: %v", err)
	}
	// Even the fallback does not fit rows of 48: F16, as llama.cpp does.
	got, err := Choose(gocoder.Model, []Tensor{{Name: "blk.0.ffn_down.weight", Type: f32, Dims: []uint64{48, 256}}}, mix, Rules{})
	if err != nil || got[0].To != f16 || !got[0].Fallback {
		t.Errorf("rows of 48: %+v %v", got, err)
	}
}

func TestParseMix(t *testing.T) {
	for name, want := range map[string]uint32{"q4_k_m": 15, "Q4_K": 15, "Q5_K": 17, "q3_k": 12, "Q6_K": 18, "Q8_0": 7, "Q4_0": 2, "bf16": 32, "F32": 0, "15": 15, "IQ4_XS": 30} {
		m, ok := ParseMix(name)
		if !ok || m.FileType != want {
			t.Errorf("ParseMix(%q) = %+v, %v; want file type %d", name, m, ok, want)
		}
	}
	for _, name := range []string{"Q4_K_X", "", "Q8_K", "IQ2_XXS", "99", "MXFP4"} {
		if m, ok := ParseMix(name); ok {
			t.Errorf("ParseMix(%q) = %+v", name, m)
		}
	}
	for typ, want := range map[gguf.Type]uint32{q4_K: 15, q3_K: 12, q5_K: 17, q6_K: 18, q4_0: 2, f16: 1, gguf.TypeMXFP4: 38} {
		if m := PureMix(typ); m.NoFileType || m.FileType != want || !m.Pure || m.Default != typ {
			t.Errorf("PureMix(%s) = %+v, want file type %d", typ, m, want)
		}
	}
	if m := PureMix(gguf.TypeQ8_K); !m.NoFileType {
		t.Errorf("PureMix(Q8_K) = %+v: llama.cpp has no file type for it", m)
	}
}

// Every file type ringlm writes has llama.cpp's name, as
// llama_model_ftype_name spells it.
func TestFileTypeName(t *testing.T) {
	for ft, want := range map[uint32]string{0: "all F32", 1: "F16", 7: "Q8_0", 10: "Q2_K - Medium", 15: "Q4_K - Medium",
		14: "Q4_K - Small", 13: "Q3_K - Large", 18: "Q6_K", 25: "IQ4_NL - 4.5 bpw", 30: "IQ4_XS - 4.25 bpw", 32: "BF16", 38: "MXFP4 MoE"} {
		if got, ok := FileTypeName(ft); !ok || got != want {
			t.Errorf("FileTypeName(%d) = %q, %v; want %q", ft, got, ok, want)
		}
	}
	for _, m := range mixes {
		if _, ok := FileTypeName(m.FileType); !ok {
			t.Errorf("mix %s: file type %d has no name", m.Name, m.FileType)
		}
	}
	if got, ok := FileTypeName(99); ok {
		t.Errorf("FileTypeName(99) = %q", got)
	}
}
