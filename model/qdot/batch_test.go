package qdot

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
)

// TestMulBatch holds MulBatch to Dot bit for bit (NaNs as NaN): 1 to 40
// inputs (a lone batch of at most 15, with its correction lane; several
// batches, with the preparing pass), row counts around the kernel's tile
// of 12, rows one byte off their allocation, and rows whose scales run
// through every F16 pattern (subnormal, huge, infinite, NaN).
func TestMulBatch(t *testing.T) {
	k := For(gguf.TypeQ8_0)
	t.Logf("batched kernel: %v", k.Batched())
	rng := rand.New(rand.NewPCG(51, 52))
	var s BatchScratch
	check := func(what string, w []byte, cols, n int) {
		t.Helper()
		checkProduct(t, rng, what, w, cols, n, func(out []float32, ldo int, w []byte, acts []Acts) {
			bts := make([]Batch, (n+BatchInputs-1)/BatchInputs)
			for g := range bts {
				bts[g].Set(acts[g*BatchInputs : min(n, (g+1)*BatchInputs)])
			}
			k.MulBatch(out, ldo, w, acts, bts, &s)
		})
	}
	for _, cols := range []int{32, 96, 256, 896} {
		for _, rows := range []int{1, 5, 11, 12, 13, 25, 36} {
			for _, n := range []int{1, 2, 7, 15, 16, 17, 40} {
				check("random", randBlocks(rng, gguf.TypeQ8_0, rows*cols/32), cols, n)
			}
		}
	}
	w := randBlocks(rng, gguf.TypeQ8_0, 1<<16)
	for b := range 1 << 16 {
		binary.LittleEndian.PutUint16(w[34*b:], uint16(b))
	}
	check("every scale", w, 256, 16)
	check("every scale, a lone batch", w, 256, 15)
}

// BenchmarkMulBatch times a 4864×896 Q8_0 matrix against 16 inputs
// (one core), against DotRows per input.
func BenchmarkMulBatch(b *testing.B) {
	k := For(gguf.TypeQ8_0)
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 4864, 896
	w := randBlocks(rng, gguf.TypeQ8_0, rows*cols/32)
	acts := make([]Acts, BatchInputs)
	for i := range acts {
		acts[i].Quantize(gguf.TypeQ8_0, randActs(rng, cols))
	}
	out := make([]float32, BatchInputs*rows)
	bts := make([]Batch, 1)
	var s BatchScratch
	bts[0].Set(acts)
	report := func(b *testing.B) {
		b.ReportMetric(float64(rows*cols*BatchInputs)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	}
	b.Run(fmt.Sprintf("batch/%v", k.Batched()), func(b *testing.B) {
		for b.Loop() {
			k.MulBatch(out, rows, w, acts, bts, &s)
		}
		report(b)
	})
	b.Run("dotrows", func(b *testing.B) {
		for b.Loop() {
			for t := range acts {
				k.DotRows(out[t*rows:(t+1)*rows], w, &acts[t])
			}
		}
		report(b)
	})
}
