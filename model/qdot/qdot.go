// Package qdot holds the CPU forward's integer dot products of quantized
// weight rows, as ggml computes them: the input vector is quantized once
// per matrix product to 8 bits per block (Acts, in the format ggml calls
// the weight type's vec_dot_type: Q8_0, Q8_1 or Q8_K), and each row's dot
// product is a sum over blocks of an int8·int8 integer dot product times
// the blocks' scales.
//
// The arithmetic of every kernel but Q5_0 is that of ggml's reference
// ggml_vec_dot_<type>_q8_<act>_generic (ggml-cpu/quants.c): the integer
// parts exactly, the float parts in the same order of operations (which
// product is formed first, how the blocks' contributions are summed: in
// order into one float for the 32-blocks, Q2_K and IQ4_XS; in eight
// lanes, lane l taking the elements whose index is l mod 8, for Q3_K to
// Q6_K). One difference: ggml's C may be compiled with a*b+c contracted to
// a fused multiply-add; here every product is rounded before it is added.
// Q5_0 follows ggml's AVX2 kernel instead (lanes.go: eight float lanes
// per block, fused multiply-adds into four accumulators), because the
// in-order scalar sum made it the slowest part of a Q4_K_M decode, where
// most matrices of Qwen's width fall back to Q5_0.
//
// Each kernel exists in Go and, on amd64, in AVX2 assembly; the two give
// the same bits for every input (the tests compare them on random rows of
// every type). Which one runs is decided once per process (package
// cpufeat), as for the float kernels of package model. The assembly uses
// its own layout for Q8_K activations (each 16 quants reordered so that a
// pair of bytes holds elements i and i+8, which keeps the eight lanes of
// the reference apart); the Go kernels read the quants in order.
//
// Products of many rows with many inputs (MulBatch, batch.go) give Dot's
// bits; for Q8_0 on a CPU with AVX-512 VNNI they run a kernel of 12 rows
// × 16 inputs whose vector lanes are the inputs, and for Q4_0, Q5_0,
// Q4_K, Q5_K and Q6_K kernels of the same kind on rows decoded first
// (batch_k.go). Products with one to eight inputs (MulFew, few.go: a
// decode step) run a kernel of 16 rows whose lanes are the rows for Q8_0
// weights, and kernels of rows decoded in registers once for all the
// inputs for Q5_0, Q4_K and Q6_K, also Dot's bits. With AVX-512 the
// activations are quantized sixteen at a time (acts_amd64.s).
//
// What is not here: the weight formats' own dequantization and
// quantization (package quant), and the float path for F32/F16/BF16 and for
// the float reference of quantized types (package model).
package qdot

import (
	"fmt"
	"maps"
	"slices"

	"ringlm/gguf"
)

// Kernel is the integer dot product for one weight type.
type Kernel struct {
	// Weight is the type of the rows; Act the type the input is quantized
	// to (ggml's vec_dot_type).
	Weight, Act gguf.Type
	block       int // elements per weight block
	bytes       int // bytes per weight block
	goDot       func(w []byte, a *Acts) float32
	asmDot      func(w []byte, a *Acts) float32 // nil where there is no assembly kernel
	asm         asmKernel                       // what asmDot calls
}

var kernels = map[gguf.Type]*Kernel{}

func register(weight, act gguf.Type, goDot func([]byte, *Acts) float32) {
	info, _ := weight.Info()
	k := &Kernel{Weight: weight, Act: act, block: int(info.BlockSize), bytes: int(info.BlockBytes), goDot: goDot}
	if f := asmKernels[weight]; f != nil {
		k.asm = f
		// Dot has checked the lengths: len(w) is nb whole blocks and the
		// activations hold as many.
		k.asmDot = func(w []byte, a *Acts) float32 { return f(&w[0], &a.v, len(w)/k.bytes) }
	}
	kernels[weight] = k
}

// For returns t's kernel, or nil for a type without one.
func For(t gguf.Type) *Kernel { return kernels[t] }

// Types lists the weight types with a kernel, in id order.
func Types() []gguf.Type { return slices.Sorted(maps.Keys(kernels)) }

// Impl names the implementation this process runs for k: "avx2" or "go".
func (k *Kernel) Impl() string {
	if useAVX2 && k.asmDot != nil {
		return "avx2"
	}
	return "go"
}

// Dot returns row w (one row of a.Len() elements of k.Weight) dotted with
// the activations a, which must have been quantized to k.Act. A mismatch
// is a bug of the caller, not bad input: it panics.
func (k *Kernel) Dot(w []byte, a *Acts) float32 {
	if a.typ != k.Act || len(w) != a.n/k.block*k.bytes {
		panic(fmt.Sprintf("qdot: %s row of %d bytes against %s activations of %d elements", k.Weight, len(w), a.typ, a.n))
	}
	if a.n == 0 {
		return 0
	}
	if useAVX2 && k.asmDot != nil {
		return k.asmDot(w, a)
	}
	return k.goDot(w, a)
}

// DotRows sets out[r] to Dot(row r of w, a) for the len(out) rows of w,
// each of the same bytes; the same bits as Dot, with its checks made
// once, not per row (a decode step calls a kernel some 450,000 times).
func (k *Kernel) DotRows(out []float32, w []byte, a *Acts) {
	rb := a.n / k.block * k.bytes
	if a.typ != k.Act || len(w) != len(out)*rb {
		panic(fmt.Sprintf("qdot: %d %s rows in %d bytes against %s activations of %d elements", len(out), k.Weight, len(w), a.typ, a.n))
	}
	if a.n == 0 {
		clear(out)
		return
	}
	if useAVX2 && k.asm != nil {
		nb := a.n / k.block
		for r := range out {
			out[r] = k.asm(&w[r*rb], &a.v, nb)
		}
		return
	}
	for r := range out {
		out[r] = k.goDot(w[r*rb:(r+1)*rb], a)
	}
}
