// Package synth writes synthetic GGUF models: the tensor names, shapes and
// metadata keys of real architectures exactly as llama.cpp's converter
// writes them, with seeded random weights scaled so that activations stay
// finite and logits are not flat. No model weights can be downloaded where
// ringlm is developed; every test model is made here.
//
// A Shape holds an architecture's hyper-parameters; Presets copy real
// models (qwen2.5-0.5b, llama-3.2-1b, llama-3.1-8b, mistral-7b,
// phi-3-mini, and gocoder, the built-in model's shape), and "tiny" (dim
// 256, 4 layers, 8 heads / 4 KV heads of 32) exists for each
// architecture. The tensor list follows llama.cpp's converter: for llama,
// token_embd, per block attn_norm, attn_q/attn_k (rows permuted from HF's
// rotary-halves order to interleaved pairs, as convert_hf_to_gguf.py does;
// UnpermuteQK inverts it), attn_v, attn_output, ffn_norm, ffn_gate,
// ffn_up, ffn_down, then output_norm, output unless tied, and rope_freqs
// for Llama 3.1+ RoPE scaling; qwen2 as llama without the permutation,
// plus attn_{q,k,v}.bias; phi3 with fused attn_qkv and a fused ffn_up
// (gate then up).
//
// Weights are normal, from a PCG stream per (seed, tensor name,
// 64Ki-element chunk), generated on all cores and written in order, so a
// file is identical for a seed whatever the core count. The standard
// deviation is 1/√fan_in for input projections, 1/√(fan_in·2·layers) for
// output projections (the residual stream grows slowly), 3/√dim for the
// embedding and output head (logits of standard deviation about 3); norm
// weights are N(1, 0.05²). Options.Type writes every matrix in one type
// (any type with an encoder: Types, quantize.Writable); Options.Mix
// chooses each tensor's type as llama-quantize's mix of that name would
// (package quantize), with its general.file_type, so tests get
// Q4_K_M-shaped files. Shape.SlidingWindow writes
// <arch>.attention.sliding_window (phi3 always has it: 2047 in its
// presets, as Phi-3-mini-4k). CheckLlamaCpp holds a file to the rules
// llama.cpp loads by (llamacpp.go: keys, their types, the vocabulary, the
// tensors and their shapes); every file synth and ringlm quantize write
// passes it. 1-D tensors stay F32. The built-in vocabulary
// is byte-level BPE (model gpt2): 256 byte tokens, merges trained on a
// small embedded corpus, and four ChatML-style control tokens. Build also
// writes trained weights (ReadSafetensors: how the built-in model was
// made, tools/train), checking every tensor's name and shape.
package synth

import (
	"fmt"
	"slices"
	"strings"
)

// Shape is an architecture's hyper-parameters.
type Shape struct {
	Arch      string // llama, qwen2, phi3
	Name      string
	Vocab     int // vocabulary size when no tokenizer is given (real models' size)
	Dim       int
	Layers    int
	Heads     int
	KVHeads   int
	HeadDim   int
	FFN       int
	Context   int
	RopeBase  float32
	NormEps   float32
	Tied      bool // output head shares token_embd
	QKVBias   bool // qwen2
	Llama3    *Llama3Rope
	Tokenizer string // the real vocabulary these shapes come with
	// SlidingWindow is the attention window in positions, written as
	// <arch>.attention.sliding_window; 0 is none. phi3 always has the
	// key (older llama.cpp refuses a phi3 file without it unless its
	// shape is a known Phi-3's), so 0 writes the context length there:
	// a window that never cuts into the context.
	SlidingWindow int
}

// Llama3Rope is Llama 3.1+'s frequency-dependent RoPE scaling.
type Llama3Rope struct {
	Factor, LowFreqFactor, HighFreqFactor float32
	OrigContext                           int
}

// Presets maps a preset name to its shape. "tiny" exists for every
// architecture (keyed "tiny/<arch>").
var presets = map[string]Shape{
	"qwen2.5-0.5b": {Arch: "qwen2", Name: "Qwen2.5-0.5B (synthetic)", Vocab: 151936, Dim: 896, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64,
		FFN: 4864, Context: 32768, RopeBase: 1e6, NormEps: 1e-6, Tied: true, QKVBias: true, Tokenizer: "qwen3"},
	"llama-3.2-1b": {Arch: "llama", Name: "Llama-3.2-1B (synthetic)", Vocab: 128256, Dim: 2048, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64,
		FFN: 8192, Context: 131072, RopeBase: 500000, NormEps: 1e-5, Tied: true,
		Llama3: &Llama3Rope{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192}, Tokenizer: "llama3"},
	"llama-3.1-8b": {Arch: "llama", Name: "Llama-3.1-8B (synthetic)", Vocab: 128256, Dim: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128,
		FFN: 14336, Context: 131072, RopeBase: 500000, NormEps: 1e-5,
		Llama3: &Llama3Rope{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192}, Tokenizer: "llama3"},
	"mistral-7b": {Arch: "llama", Name: "Mistral-7B (synthetic)", Vocab: 32000, Dim: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128,
		FFN: 14336, Context: 32768, RopeBase: 1e6, NormEps: 1e-5, Tokenizer: "mistral"},
	// gocoder is the shape of the default model that tools/train/train.py
	// trains on the Go standard library (its SHAPE must match).
	"gocoder": {Arch: "llama", Name: "gocoder (trained on Go's standard library)", Vocab: 4096, Dim: 256, Layers: 6, Heads: 8, KVHeads: 2,
		HeadDim: 32, FFN: 640, Context: 512, RopeBase: 10000, NormEps: 1e-5, Tied: true},
	// Phi-3-mini-4k: HF's config and llama.cpp both give it a window of
	// 2047 positions.
	"phi-3-mini": {Arch: "phi3", Name: "Phi-3-mini (synthetic)", Vocab: 32064, Dim: 3072, Layers: 32, Heads: 32, KVHeads: 32, HeadDim: 96,
		FFN: 8192, Context: 4096, RopeBase: 10000, NormEps: 1e-5, Tokenizer: "mistral", SlidingWindow: 2047},
}

// Archs are the architectures synth writes.
var Archs = []string{"llama", "qwen2", "phi3"}

// tiny is a few million parameters: fast enough for CPU tests under -race,
// big enough to exercise GQA, multiple layers and every tensor kind.
func tiny(arch string) Shape {
	s := Shape{Arch: arch, Name: "tiny-" + arch + " (synthetic)", Dim: 256, Layers: 4, Heads: 8, KVHeads: 4, HeadDim: 32,
		FFN: 768, Context: 2048, RopeBase: 10000, NormEps: 1e-5}
	switch arch {
	case "llama":
		s.Llama3 = &Llama3Rope{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 256}
		s.RopeBase = 500000
	case "qwen2":
		s.Tied, s.QKVBias, s.RopeBase, s.NormEps = true, true, 1e6, 1e-6
	case "phi3":
		// 2047, as Phi-3-mini-4k's: here the context less one, so only
		// a full context's last position loses sight of the first.
		// Tests of the window set a shorter one.
		s.SlidingWindow = s.Context - 1
	}
	return s
}

// PresetNames lists the presets.
func PresetNames() []string {
	names := []string{"tiny"}
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names[1:])
	return names
}

// Lookup returns the shape of preset for arch. arch may be empty for the
// named shapes (they fix their own); tiny defaults to llama. "mistral" is
// accepted as an alias of llama, as in GGUF.
func Lookup(preset, arch string) (Shape, error) {
	if arch == "mistral" {
		arch = "llama"
	}
	if arch != "" && !slices.Contains(Archs, arch) {
		return Shape{}, fmt.Errorf("synth: unknown architecture %q (supported: %s)", arch, strings.Join(Archs, ", "))
	}
	if preset == "tiny" {
		if arch == "" {
			arch = "llama"
		}
		return tiny(arch), nil
	}
	s, ok := presets[preset]
	if !ok {
		return Shape{}, fmt.Errorf("synth: unknown preset %q (presets: %s)", preset, strings.Join(PresetNames(), ", "))
	}
	if arch != "" && arch != s.Arch {
		return Shape{}, fmt.Errorf("synth: preset %s is a %s model, not %s", preset, s.Arch, arch)
	}
	return s, nil
}

// Params is the parameter count of the shape at vocabulary size vocab.
func (s Shape) Params(vocab int) int64 {
	var n int64
	for _, t := range s.tensors(vocab) {
		e := int64(1)
		for _, d := range t.dims {
			e *= int64(d)
		}
		n += e
	}
	return n
}
