package qdot

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
)

// batchTypes are the types with a batch kernel of their own on a CPU
// with VNNI.
var batchTypes = []gguf.Type{gguf.TypeQ4_0, gguf.TypeQ5_0, gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K}

// mulBatchCheck runs MulBatch on the rows w (cols elements each) against
// n random inputs and holds every result to Dot's bits, a NaN's payload
// too (the kernels take each float operation's operands in Dot's order;
// Q8_0's only promises a NaN where Dot gives one), with
// the rows one byte off their allocation and an output stride wider than
// the rows, whose gaps must stay untouched.
func mulBatchCheck(t *testing.T, k *Kernel, rng *rand.Rand, s *BatchScratch, what string, w []byte, cols, n int) {
	t.Helper()
	acts := make([]Acts, n)
	for i := range acts {
		acts[i].Quantize(k.Act, randActs(rng, cols))
	}
	mulBatchCheckActs(t, k, s, nil, what, w, acts)
}

// mulBatchCheckActs is mulBatchCheck with the inputs acts, laid out in bts
// (nil: new batches).
func mulBatchCheckActs(t *testing.T, k *Kernel, s *BatchScratch, bts []Batch, what string, w []byte, acts []Acts) {
	t.Helper()
	n, cols := len(acts), acts[0].Len()
	rb := cols / k.block * k.bytes
	rows := len(w) / rb
	if bts == nil {
		bts = make([]Batch, (n+BatchInputs-1)/BatchInputs)
	}
	bts = bts[:(n+BatchInputs-1)/BatchInputs]
	for g := range bts {
		bts[g].Set(acts[g*BatchInputs : min(n, (g+1)*BatchInputs)])
	}
	buf := make([]byte, len(w)+1)[1:]
	copy(buf, w)
	ldo := rows + 3
	out := make([]float32, n*ldo)
	for i := range out {
		out[i] = 42 // the gaps must stay untouched
	}
	k.MulBatch(out, ldo, buf, acts, bts, s)
	for tk := range n {
		for r := range ldo {
			got := out[tk*ldo+r]
			if r >= rows {
				if got != 42 {
					t.Fatalf("%s %s: input %d wrote column %d of %d rows", k.Weight, what, tk, r, rows)
				}
				continue
			}
			want := k.Dot(w[r*rb:(r+1)*rb], &acts[tk])
			if math.Float32bits(got) != math.Float32bits(want) && (k.Weight != gguf.TypeQ8_0 || !sameFloat(got, want)) {
				t.Fatalf("%s %s cols=%d rows=%d n=%d: row %d input %d = %g (%#x), Dot %g (%#x)", k.Weight, what, cols, rows, n, r, tk, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
}

// TestMulBatch holds MulBatch to Dot bit for bit for each type with a
// batch kernel: 1 to 40 inputs (a lone batch of at most 15; several
// batches, the last one not full), row counts around the kernels' tiles
// (3 and 12 rows), and rows whose scales run through every F16 pattern
// (subnormal, huge, infinite, NaN).
func TestMulBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	var s BatchScratch
	for _, typ := range batchTypes {
		k := For(typ)
		t.Logf("%s: batched kernel: %v", typ, k.Batched())
		colsList := []int{32, 96, 256, 896}
		if k.block == 256 {
			colsList = []int{256, 512, 768, 1280, 4864}
		}
		for _, cols := range colsList {
			for _, rows := range []int{1, 2, 5, 11, 12, 13, 25, 36} {
				for _, n := range []int{1, 2, 7, 15, 16, 17, 40} {
					mulBatchCheck(t, k, rng, &s, "random", randBlocks(rng, typ, rows*cols/k.block), cols, n)
				}
			}
		}
		// Every F16 pattern in each scale of the type's blocks: field i
		// of block b holds (2i+1)·b.
		nb, cols := 1<<16, 256
		if k.block == 256 {
			cols = 1024
		}
		w := randBlocks(rng, typ, nb)
		offs := map[gguf.Type][]int{gguf.TypeQ4_0: {0}, gguf.TypeQ5_0: {0}, gguf.TypeQ8_0: {0}, gguf.TypeQ4_K: {0, 2}, gguf.TypeQ5_K: {0, 2}, gguf.TypeQ6_K: {208}}[typ]
		for b := range nb {
			for i, o := range offs {
				binary.LittleEndian.PutUint16(w[b*k.bytes+o:], uint16((2*i+1)*b))
			}
		}
		mulBatchCheck(t, k, rng, &s, "every scale", w, cols, 16)
		mulBatchCheck(t, k, rng, &s, "every scale, a lone batch", w, cols, 15)
	}
}

// TestBatchReuse: batches and scratch that served other types and sizes
// (as the model's pools reuse them) give the same bits.
func TestBatchReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	bts := make([]Batch, 3)
	var s BatchScratch
	for i, c := range []struct {
		typ        gguf.Type
		rows, cols int
	}{{gguf.TypeQ6_K, 13, 4864}, {gguf.TypeQ5_0, 7, 896}, {gguf.TypeQ4_0, 14, 256}, {gguf.TypeQ8_0, 25, 4864}, {gguf.TypeQ4_K, 12, 256},
		{gguf.TypeQ5_0, 4, 8192}, {gguf.TypeQ5_K, 5, 768}, {gguf.TypeQ8_0, 3, 96}, {gguf.TypeQ6_K, 26, 1024}} {
		k := For(c.typ)
		acts := make([]Acts, 1+rng.IntN(40))
		for j := range acts {
			acts[j].Quantize(k.Act, randActs(rng, c.cols))
		}
		w := randBlocks(rng, c.typ, c.rows*c.cols/k.block)
		mulBatchCheckActs(t, k, &s, bts, fmt.Sprintf("reuse %d", i), w, acts)
	}
}

// BenchmarkMulBatch times each batched type on one core against 16
// inputs (one batch, as a decode step of many sequences) and 64 (four
// batches, a prefill panel), against DotRows per input: a 4864×896
// matrix (Qwen2.5-0.5B's gate and up), or 896×4864 for the 256-element
// types (its down).
func BenchmarkMulBatch(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, typ := range batchTypes {
		k := For(typ)
		rows, cols := 4864, 896
		if k.block == 256 {
			rows, cols = 896, 4864
		}
		w := randBlocks(rng, typ, rows*cols/k.block)
		for _, n := range []int{16, 64} {
			acts := make([]Acts, n)
			for i := range acts {
				acts[i].Quantize(k.Act, randActs(rng, cols))
			}
			out := make([]float32, n*rows)
			bts := make([]Batch, n/BatchInputs)
			for g := range bts {
				bts[g].Set(acts[g*BatchInputs : (g+1)*BatchInputs])
			}
			var s BatchScratch
			report := func(b *testing.B) {
				b.ReportMetric(float64(rows*cols*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			}
			b.Run(fmt.Sprintf("%s/n=%d/batch=%v", typ, n, k.Batched()), func(b *testing.B) {
				for b.Loop() {
					k.MulBatch(out, rows, w, acts, bts, &s)
				}
				report(b)
			})
			if n == 16 {
				b.Run(fmt.Sprintf("%s/n=%d/dotrows", typ, n), func(b *testing.B) {
					for b.Loop() {
						for t := range acts {
							k.DotRows(out[t*rows:(t+1)*rows], w, &acts[t])
						}
					}
					report(b)
				})
			}
		}
	}
}

// TestBatchPays: where BatchPays says no, MulBatch gives Dot's bits
// without reading its batches (here laid out from other inputs), so a
// caller may skip laying them out; where it says yes, a type has a
// kernel (Batched).
func TestBatchPays(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	const cols, rows = 512, 13
	for _, typ := range Types() {
		k := For(typ)
		w := randBlocks(rng, typ, rows*blocksFor(typ, cols))
		rb := len(w) / rows
		for n := 1; n <= BatchInputs; n++ {
			if k.BatchPays(n) {
				if !k.Batched() {
					t.Errorf("%s: BatchPays(%d) without a batch kernel", typ, n)
				}
				continue
			}
			acts, other := make([]Acts, n), make([]Acts, n)
			for i := range acts {
				acts[i].Quantize(k.Act, randActs(rng, cols))
				other[i].Quantize(k.Act, randActs(rng, cols))
			}
			var bt [1]Batch
			if k.Act == gguf.TypeQ8_0 || k.Act == gguf.TypeQ8_K {
				bt[0].Set(other)
			} else {
				bt[0] = Batch{n: n, nb: cols / 32, act: k.Act} // no layout of Q8_1
			}
			out := make([]float32, n*rows)
			var s BatchScratch
			k.MulBatch(out, rows, w, acts, bt[:], &s)
			for tk := range n {
				for r := range rows {
					if want := k.Dot(w[r*rb:(r+1)*rb], &acts[tk]); !sameFloat(out[tk*rows+r], want) {
						t.Fatalf("%s n=%d: row %d input %d = %g, Dot %g", typ, n, r, tk, out[tk*rows+r], want)
					}
				}
			}
		}
	}
}
