package qdot

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
)

// fewTestTypes are the types of the few-input kernels: Q8_0 and Q5_0
// against Q8_0 inputs, Q4_K and Q6_K against Q8_K.
var fewTestTypes = []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ5_0, gguf.TypeQ4_K, gguf.TypeQ6_K}

// fewScales are the offsets of the F16 scales in a block of each type.
var fewScales = map[gguf.Type][]int{gguf.TypeQ8_0: {0}, gguf.TypeQ5_0: {0}, gguf.TypeQ4_K: {0, 2}, gguf.TypeQ6_K: {208}}

// checkProduct holds mul, a product of k's rows w (of cols elements) with
// n random inputs (non-finite values among them if bad), to Dot bit for
// bit (NaNs as NaN), with the rows one byte off their allocation and an
// output stride with gaps, which must stay untouched.
func checkProduct(t *testing.T, rng *rand.Rand, k *Kernel, what string, w []byte, cols, n int, bad bool, mul func(out []float32, ldo int, w []byte, acts []Acts)) {
	t.Helper()
	rb := cols / k.block * k.bytes
	rows := len(w) / rb
	acts := make([]Acts, n)
	for i := range acts {
		x := randActs(rng, cols)
		if bad {
			spoil(rng, x)
		}
		acts[i].Quantize(k.Act, x)
	}
	buf := make([]byte, len(w)+1)[1:]
	copy(buf, w)
	ldo := rows + 3
	out := make([]float32, n*ldo)
	for i := range out {
		out[i] = 42
	}
	mul(out, ldo, buf, acts)
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
			if !sameFloat(got, want) {
				t.Fatalf("%s %s cols=%d rows=%d n=%d: row %d input %d = %g (%#x), Dot %g (%#x)", k.Weight, what, cols, rows, n, r, tk, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
}

// spoil puts an infinity or a NaN into a few of x's blocks.
func spoil(rng *rand.Rand, x []float32) {
	for b := 0; b < len(x); b += 32 {
		switch rng.IntN(8) {
		case 0:
			x[b+rng.IntN(32)] = float32(math.Inf(1 - 2*rng.IntN(2)))
		case 1:
			x[b+rng.IntN(32)] = float32(math.NaN())
		}
	}
}

// checkFew is checkProduct for MulFew.
func checkFew(t *testing.T, rng *rand.Rand, k *Kernel, what string, w []byte, cols, n int, bad bool) {
	t.Helper()
	checkProduct(t, rng, k, what, w, cols, n, bad, func(out []float32, ldo int, w []byte, acts []Acts) {
		var f Few
		f.Set(acts)
		k.MulFew(out, ldo, w, acts, &f)
	})
}

// TestMulFew, for each type of fewTestTypes: 1 to FewInputs inputs
// (every padding of the kernels' 1, 2, 4 and 8), row counts around the
// tiles (16 rows for Q8_0; 4 and 2 for Q5_0; the K-quants' chunks of 16
// rows for 8 inputs) and their multiples, rows in strided and adjacent
// tiles, widths with every count of blocks mod 4 (Q5_0) and 1 to 3 and 19
// super-blocks, inputs with infinities and NaNs, and rows whose scales
// run through every F16 pattern (subnormal, huge, infinite, NaN) and
// whose quants take every byte.
func TestMulFew(t *testing.T) {
	t.Logf("few-input kernels: %v", useVNNI)
	rng := rand.New(rand.NewPCG(61, 62))
	for _, typ := range fewTestTypes {
		k := For(typ)
		if useVNNI && !k.HasFew() {
			t.Errorf("%s: no few-input kernel", typ)
		}
		widths := []int{32, 64, 96, 128, 256, 896}
		if k.block == 256 {
			widths = []int{256, 512, 768, 4864}
		}
		for _, adjacent := range []bool{false, true} {
			fewAdjacent = adjacent
			for _, cols := range widths {
				for _, rows := range []int{1, 2, 3, 7, 8, 9, 15, 16, 17, 33, 48, 70} {
					if cols > 1024 && rows > 17 {
						continue
					}
					for n := 1; n <= FewInputs; n++ {
						bad := n%3 == 0
						what := fmt.Sprintf("random, adjacent %v, non-finite inputs %v", adjacent, bad)
						checkFew(t, rng, k, what, randBlocks(rng, typ, rows*cols/k.block), cols, n, bad)
					}
				}
			}
		}
		fewAdjacent = false
		w := randBlocks(rng, typ, 1<<16)
		for b := range 1 << 16 {
			for i, o := range fewScales[typ] {
				binary.LittleEndian.PutUint16(w[k.bytes*b+o:], uint16(b)+uint16(i)*0x1234)
			}
			w[k.bytes*b+4+b%(k.bytes-6)] = byte(b >> 5)
		}
		cols := 256
		if k.block == 256 {
			cols = 512
		}
		for _, n := range []int{1, 2, 3, 4, 8} {
			checkFew(t, rng, k, "every scale", w, cols, n, false)
		}
	}
}

// FuzzMulFew feeds arbitrary bytes to MulFew, for each type of
// fewTestTypes, as rows and as activations (any float32 bits): Dot's bits
// for every row and input, for 1 to 8 inputs, 1 to 8 blocks (1 to 3
// super-blocks), 1 to 40 rows.
func FuzzMulFew(f *testing.F) {
	f.Add(byte(0), byte(0), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(byte(30), byte(7), []byte{0xff, 0x7f, 0x80, 0x00, 0x7c, 0x00, 0xfc, 0x01})
	f.Add(byte(1), byte(3), make([]byte, 300))
	f.Add(byte(17), byte(60), []byte{0x00, 0x7c, 0xff, 0xff, 0x10, 0x80, 0x01, 0xfe, 0x3c})
	f.Fuzz(func(t *testing.T, which, shape byte, data []byte) {
		if len(data) == 0 {
			return
		}
		k := For(fewTestTypes[int(which)%len(fewTestTypes)])
		rows := 1 + int(which)/len(fewTestTypes)%40
		n := 1 + int(shape)%FewInputs
		nb := 1 + int(shape)/FewInputs%8
		if k.block == 256 {
			nb = 1 + nb%3
		}
		rb := nb * k.bytes
		w := make([]byte, rows*rb)
		for i := range w {
			w[i] = data[i%len(data)]
		}
		acts := make([]Acts, n)
		for tk := range acts {
			x := make([]float32, nb*k.block)
			for i := range x {
				var b [4]byte
				for j := range b {
					b[j] = data[(4*i+j+7*tk+5)%len(data)]
				}
				x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
			}
			acts[tk].Quantize(k.Act, x)
		}
		var fw Few
		fw.Set(acts)
		out := make([]float32, n*rows)
		k.MulFew(out, rows, w, acts, &fw)
		for tk := range n {
			for r := range rows {
				want := k.goDot(w[r*rb:(r+1)*rb], &acts[tk])
				if got := out[tk*rows+r]; !sameFloat(got, want) {
					t.Fatalf("%s: row %d input %d of %d: %g (%#x), Go %g (%#x)", k.Weight, r, tk, n, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		}
	})
}

// BenchmarkMulFew times a matrix of each type of fewTestTypes against 1
// to 8 inputs, one core: 4864×896 (Qwen2.5-0.5B's ffn_up), 896×4864 for
// the K-quants (its ffn_down), the rows cycling through about 64 MiB
// (from memory, as in a decode step) or a matrix of about 256 KiB
// staying in L2 (the kernels' own speed): MulFew, the same with adjacent
// rows in a tile, MulBatch (for Q8_0 its lone batch; the others' kernels
// from 5 or 6 inputs, DotRows below), and DotRows per input.
func BenchmarkMulFew(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, typ := range fewTestTypes {
		k := For(typ)
		rows, cols := 4864, 896
		if k.block == 256 {
			rows, cols = 896, 4864
		}
		mb := rows * cols / k.block * k.bytes
		for _, src := range []struct {
			name       string
			rows, mats int
		}{{"mem", rows, (64 << 20) / mb}, {"l2", rows * (256 << 10) / mb, 1}} {
			rows := src.rows
			mb := rows * cols / k.block * k.bytes
			w := randBlocks(rng, typ, src.mats*rows*cols/k.block)
			for _, n := range []int{1, 2, 4, 8} {
				acts := make([]Acts, n)
				for i := range acts {
					acts[i].Quantize(k.Act, randActs(rng, cols))
				}
				out := make([]float32, n*rows)
				var f Few
				f.Set(acts)
				var bt [1]Batch
				bt[0].Set(acts)
				var s BatchScratch
				for _, c := range []struct {
					name string
					fn   func(w []byte)
				}{
					{"few", func(w []byte) { k.MulFew(out, rows, w, acts, &f) }},
					{"few-adjacent", func(w []byte) { fewAdjacent = true; k.MulFew(out, rows, w, acts, &f); fewAdjacent = false }},
					{"lane", func(w []byte) { k.MulBatch(out, rows, w, acts, bt[:], &s) }},
					{"dotrows", func(w []byte) {
						for t := range acts {
							k.DotRows(out[t*rows:(t+1)*rows], w, &acts[t])
						}
					}},
				} {
					b.Run(fmt.Sprintf("%s/%s/n=%d/%s", typ, src.name, n, c.name), func(b *testing.B) {
						i := 0
						for b.Loop() {
							c.fn(w[i*mb : (i+1)*mb])
							i = (i + 1) % src.mats
						}
						b.SetBytes(int64(mb))
						b.ReportMetric(float64(rows*cols*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
					})
				}
			}
		}
	}
}
