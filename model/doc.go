// Package model owns the architecture registry (llama, which also covers
// Mistral files; qwen2; phi3), the model configuration read from GGUF
// metadata, the tensor-name map, the RoPE style of each architecture, the
// paged KV pool of the CPU, and the CPU reference forward pass that every
// device is checked against, with AVX-512 and AVX2 kernels and a pure-Go
// fallback that give the same bits.
//
// Load maps tensors by their llama.cpp names and checks every tensor's
// presence, type and shape. Matrices stay in the mapped GGUF file
// (WeightTypes: F32, F16, BF16, Q8_0 and every type package quant reads).
// Products with F32/F16/BF16 matrices convert rows on the fly and dot
// them with the float32 input. Quantized matrices with a kernel in
// package qdot take ggml's integer path by default: the input is quantized
// to 8 bits per block once per product, and each row's dot product is
// integer arithmetic times the blocks' scales (Q8_0 with AVX-512 VNNI:
// qdot's kernel of 16 rows against up to 8 inputs for a decode step, its
// batch kernel of 12 rows × 16 inputs for more);
// SetActivations (FloatActivations) puts them on the float path, the
// reference the oracle and the GPU are held to. Embedding rows are read
// by Row, which falls back to quant.Dequantize for types without a
// conversion here.
//
// Forward(kv, seqs) runs one step for a batch of sequences, each with its
// tokens, start position and block table: all tokens of the step form one
// matrix, multiplied by each weight matrix in tiles of a few rows × a few
// tokens whose weights stay in cache while the tokens pass over them
// (tiles.go; weights are read from memory once per panel of tokens), and
// attention (attention.go) runs per head over chunks of a sequence's
// queries against its own paged KV, scores and weighted sums in tiles,
// softmax vectorized. Parallel work goes to a pool of helpers that stay
// between the few hundred regions of a step (pool.go); the products of
// one input (a layer's Q, K, V; its gate, up) share a region. Every per-token
// computation uses a fixed summation order, the same in every
// implementation (Go, AVX2, AVX-512), so a sequence's logits are bitwise
// identical alone, in any batch, in any prefill chunking and on any
// machine. RoPE follows llama.cpp: adjacent
// pairs for llama (whose Q/K rows the converter permuted), halves (NEOX)
// for qwen2 and phi3, frequencies divided by rope_freqs where present. The
// KV pool (KVPool) is F32 or F16, laid out per layer as [block][position
// in block][kv head][head dim] and addressed through block tables. A
// sliding window (Config.SlidingWindow, from <arch>.attention.sliding_window;
// Phi-3-mini-4k's 2047 when an old file lacks the key, as llama.cpp does)
// limits a token at p to positions p-window+1..p: HF transformers'
// sliding_window and llama.cpp's n_swa count the same positions.
//
// Correctness is checked against HuggingFace transformers:
// tools/hf_oracle.py (run on the GPU machine) builds the same model from
// the GGUF and writes golden logits for a prompt and its 32-token greedy
// continuation (testdata/golden/); the Go forward matches within 1e-4
// relative error (F32) or 2e-3 (F16, BF16, Q8_0 with float activations)
// with identical greedy tokens, and Q8_0 with 8-bit activations within
// 5e-2 (oracle_test.go); a Phi-3 with a window shorter than the prompt
// has a golden of its own (window_test.go).
package model
