package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"ringlm/gguf"
	"ringlm/quant"
	"ringlm/quantize"
	"ringlm/synth"
)

func runSynth(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("synth", "synth --preset P [--arch A] -o FILE [--type TYPE|MIX] [--seed N] [--sliding-window N] [--tokenizer tokenizer.json] [--weights model.safetensors] [--vocab-only]")
	preset := fs.String("preset", "tiny", "shape preset: "+strings.Join(synth.PresetNames(), ", "))
	arch := fs.String("arch", "", "architecture: llama (also mistral), qwen2, phi3; tiny defaults to llama, other presets fix their own")
	out := fs.String("o", "", "output GGUF file (required)")
	typName := fs.String("type", "f16", "weight type of every matrix ("+typeNames()+"), or a llama-quantize mix that chooses each tensor's type as ringlm quantize does ("+
		mixNames()+"); norms and biases stay F32")
	seed := fs.Uint64("seed", 1, "random seed of the weights")
	tokPath := fs.String("tokenizer", "", "vocabulary to use: a HuggingFace tokenizer.json (tokenizer_config.json beside it is read too) or a GGUF file's vocabulary; either may be gzipped")
	weights := fs.String("weights", "", "trained weights to write instead of random ones: a .safetensors file with llama.cpp tensor names (tools/train/train.py writes one for --preset gocoder)")
	vocabOnly := fs.Bool("vocab-only", false, "write only metadata and vocabulary, no tensors (like llama.cpp's ggml-vocab files)")
	window := fs.Int("sliding-window", -1, "attention window in positions, each token's own included (<arch>.attention.sliding_window; 0: none); default: the preset's (2047 for phi3)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *out == "" {
		return usagef("-o FILE is required")
	}
	shape, err := synth.Lookup(*preset, *arch)
	if err != nil {
		return err
	}
	if *window < -1 {
		return usagef("--sliding-window %d: want 0 (none) or a number of positions", *window)
	}
	if *window >= 0 {
		shape.SlidingWindow = *window
	}
	o := synth.Options{Shape: shape, Seed: *seed, VocabOnly: *vocabOnly}
	// A ggml type name is a type (Q4_K: every matrix Q4_K); other names
	// are mixes (Q4_K_M), as llama-quantize would read them.
	if typ, ok := gguf.ParseType(*typName); ok {
		o.Type = typ
	} else if mix, ok := quantize.ParseMix(*typName); ok {
		o.Mix = mix.Name
	} else {
		return usagef("unknown --type %q (types: %s; mixes: %s)", *typName, typeNames(), mixNames())
	}
	if *tokPath != "" {
		if o.Tokenizer, err = importTokenizer(*tokPath); err != nil {
			return err
		}
	}
	if *weights != "" {
		if o.Weights, err = synth.ReadSafetensors(*weights); err != nil {
			return err
		}
	}
	w, err := synth.Build(o)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := w.WriteFile(*out); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	vocab := 0
	for _, kv := range w.KVs() {
		if kv.Key == "tokenizer.ggml.tokens" {
			vocab = kv.Value.Len()
		}
	}
	types := o.Mix
	if types == "" {
		types = o.Type.String()
	}
	what := fmt.Sprintf("%s, %s weights", shape.Describe(vocab), types)
	if *vocabOnly {
		what = fmt.Sprintf("vocabulary only, %d tokens", vocab)
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %s in %.1fs\n", *out, what, humanBytes(uint64(st.Size())), time.Since(start).Seconds())
	return nil
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// typeNames lists the types synth writes.
func typeNames() string { return quant.Names(synth.Types()) }

// mixNames lists the mixes --type reads as mixes: those whose name is not
// also a type's (Q4_0 is every matrix in Q4_0 here).
func mixNames() string {
	var out []string
	for _, m := range quantize.Mixes() {
		if _, ok := gguf.ParseType(m); !ok {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
}
