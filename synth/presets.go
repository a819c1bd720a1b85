// Package synth writes synthetic GGUF models: the tensor names, shapes and
// metadata keys of real architectures exactly as llama.cpp's converter
// writes them, with seeded random weights scaled so that activations stay
// finite and logits are not flat. No model weights can be downloaded where
// ringlm is developed; every test model is made here.
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
	"phi-3-mini": {Arch: "phi3", Name: "Phi-3-mini (synthetic)", Vocab: 32064, Dim: 3072, Layers: 32, Heads: 32, KVHeads: 32, HeadDim: 96,
		FFN: 8192, Context: 4096, RopeBase: 10000, NormEps: 1e-5, Tokenizer: "mistral"},
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
