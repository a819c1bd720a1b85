package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"ringlm/gguf"
	"ringlm/models"
)

// builtinFloat is the built-in model (Q8_0) on the float path, as the
// conformance diff plays it on the CPU device against the GPU.
func builtinFloat(t *testing.T) *Model {
	t.Helper()
	f, err := gguf.Parse(models.Default())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	m.SetActivations(FloatActivations)
	return m
}

// witnessRun is one sequence's share of a run of steps: its logits at
// each step and the keys and values it wrote.
type witnessRun struct {
	logits [][]float32
	kv     [][]uint16 // per layer, K then V, its positions' rows
}

// TestBuiltinBatchInvariance: on the built-in model's Q8_0 matrices with
// float activations, a sequence (a prompt, then decode steps) gets the
// same logits and writes the same KV, bit for bit, alone on one worker
// and among 1 to 39 rows of other sequences (prefill chunks and decode
// rows at other positions, before it, after it or around it), on pools
// of 2, 3, 7 and 16 workers. The conformance suite's Errors scenario
// checks a witness slot's tokens this way on the CPU device.
func TestBuiltinBatchInvariance(t *testing.T) {
	m := builtinFloat(t)
	defer func(p *pool) { m.pool = p }(m.pool)
	prompt := []int32{1, 2, 508, 72, 101, 108, 108, 111, 44, 32, 300, 301, 302, 303, 40, 41, 42}
	decode := []int32{1066, 8, 45, 336, 7}
	const bs, targetBlocks = DefaultBlockSize, 2

	// run plays the sequence's steps on pool p; others(step) are the
	// other entries of each step and where the sequence goes among them.
	run := func(p *pool, others func(step int) ([]Seq, int)) witnessRun {
		m.pool = p
		kv, err := NewKVPool(&m.Config, gguf.TypeF16, 24, bs)
		if err != nil {
			t.Fatal(err)
		}
		var r witnessRun
		pos := 0
		for step := range 1 + len(decode) {
			toks := prompt
			if step > 0 {
				toks = decode[step-1 : step]
			}
			lg := make([]float32, m.Vocab)
			batch, at := others(step)
			batch = slices.Insert(slices.Clone(batch), at, Seq{Tokens: toks, Pos: pos, Blocks: seqBlocks(0, targetBlocks), Logits: lg})
			if err := m.Forward(kv, batch); err != nil {
				t.Fatal(err)
			}
			r.logits = append(r.logits, lg)
			pos += len(toks)
		}
		n := pos * kv.KVDim // blocks 0.. hold positions 0..pos-1 in order
		for _, rows := range kv.f16 {
			r.kv = append(r.kv, slices.Clone(rows[:n]))
		}
		return r
	}
	alone := run(newPool(1), func(int) ([]Seq, int) { return nil, 0 })

	rng := rand.New(rand.NewPCG(7, 19))
	// The other sequences share blocks 8.. (their keys and values are
	// theirs to clobber); each has up to 6 blocks of positions.
	other := func(rows int) Seq {
		n := 1 + rng.IntN(min(rows, 12))
		toks := make([]int32, n)
		for i := range toks {
			toks[i] = int32(rng.IntN(m.Vocab))
		}
		var lg []float32
		if rng.IntN(2) == 0 {
			lg = make([]float32, m.Vocab)
		}
		return Seq{Tokens: toks, Pos: rng.IntN(6*bs - n + 1), Blocks: seqBlocks(8, 6), Logits: lg}
	}
	for _, workers := range []int{2, 3, 7, 16} {
		for _, rows := range []int{1, 4, 5, 13, 39} {
			t.Run(fmt.Sprintf("workers%d/rows%d", workers, rows), func(t *testing.T) {
				got := run(newPool(workers), func(int) ([]Seq, int) {
					var batch []Seq
					for left := rows; left > 0; {
						s := other(left)
						left -= len(s.Tokens)
						batch = append(batch, s)
					}
					return batch, rng.IntN(len(batch) + 1)
				})
				for step := range alone.logits {
					sameBits(t, fmt.Sprintf("logits at step %d", step), got.logits[step], alone.logits[step])
				}
				for i := range alone.kv {
					if j := slices.Compare(got.kv[i], alone.kv[i]); j != 0 {
						e := 0
						for got.kv[i][e] == alone.kv[i][e] {
							e++
						}
						t.Fatalf("layer %d %s: element %d of the sequence's rows = %#x, alone %#x",
							i/2, []string{"keys", "values"}[i%2], e, got.kv[i][e], alone.kv[i][e])
					}
				}
			})
		}
	}
}
