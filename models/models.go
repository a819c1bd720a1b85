// Package models holds ringlm's built-in default model, gocoder: a
// 5.0M-parameter Llama (dim 256, 6 layers, 8 query and 2 KV heads of 32,
// ffn 640, context 512, vocabulary 4096 byte-level BPE tokens) that ringlm
// trained on the Go standard library's source (BSD licence; the packages
// listed in tools/train/corpus.py were held out). It completes Go code.
//
// The Q8_0 file is embedded in the binary, so `ringlm run` and `ringlm
// serve` work with no model file. Training: tools/train (corpus.py on a
// machine with Go, train.py on the GPU host, the GGUF written by `ringlm
// synth --preset gocoder --weights`); the record of the run that made it
// is tools/train/gocoder/train.json. testdata/gocoder holds its F16 twin
// and a held-out text. The tests check that the Q8_0 file's perplexity is
// within 1% of the F16 file's and that the F16 file reproduces the
// training run's greedy tokens; on the GPU, kernels/cuda holds 64 greedy
// tokens to the CPU device's by vLLM's closeness rule
// (TestBuiltinModelGreedy) and the held-out perplexity to within 0.5% of
// the CPU's (TestBuiltinPerplexity). Default
// returns the image in a 64-byte aligned buffer, which runner parses from
// memory (gguf.Parse) when no model file is given.
package models

import (
	_ "embed"
	"unsafe"
)

// DefaultName is the built-in model's name (also its id in the HTTP API).
const DefaultName = "gocoder"

// DefaultFile is the embedded file's name.
const DefaultFile = "gocoder-q8_0.gguf"

//go:embed gocoder-q8_0.gguf
var gocoder string

// Default returns the built-in model's GGUF image in a fresh buffer whose
// start is 64-byte aligned (tensor views are typed slices of it; embedded
// data carries no alignment promise).
func Default() []byte {
	words := make([]uint64, (len(gocoder)+63)/8+8)
	p := uintptr(unsafe.Pointer(&words[0]))
	skip := int((64 - p%64) % 64)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)[skip : skip+len(gocoder)]
	copy(b, gocoder)
	return b
}
