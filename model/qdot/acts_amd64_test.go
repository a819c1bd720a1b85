//go:build amd64 && !purego

package qdot

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ringlm/gguf"
)

// quantizeBoth quantizes x to t with the AVX-512 quantizer and in Go, and
// reports the first field that differs.
func quantizeBoth(t gguf.Type, x []float32) (diff string) {
	var fast, slow Acts
	fast.Quantize(t, x)
	useAVX512 = false
	slow.Quantize(t, x)
	useAVX512 = true
	bits := func(v []float32) []uint32 {
		out := make([]uint32, len(v))
		for i, f := range v {
			out[i] = math.Float32bits(f)
		}
		return out
	}
	switch {
	case !slices.Equal(fast.q, slow.q):
		return "q"
	case !slices.Equal(bits(fast.d), bits(slow.d)):
		return "d"
	case !slices.Equal(fast.sums, slow.sums):
		return "sums"
	case !slices.Equal(fast.pair, slow.pair):
		return "pair"
	case t == gguf.TypeQ8_K && !slices.Equal(fast.qp, slow.qp):
		return "qp"
	}
	return ""
}

// TestQuantizeAVX512: the AVX-512 quantizers give the Go quantizers' bits
// on random inputs at every scale and on the edges: zeros, subnormals,
// halves to round (away from zero for Q8_0, to even for Q8_K), the
// largest magnitude twice with both signs, huge values, infinities, NaNs.
func TestQuantizeAVX512(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512: Quantize runs in Go")
	}
	rng := rand.New(rand.NewPCG(61, 62))
	edges := []func(x []float32){
		func(x []float32) {},
		func(x []float32) { // subnormal: d underflows
			for i := range x {
				x[i] = math.Float32frombits(rng.Uint32() & 0x807fffff)
			}
		},
		func(x []float32) { // halves: the largest 127 (Q8_0: d = 1), or -127 (Q8_K: iscale = 1)
			for i := range x {
				x[i] = float32(rng.IntN(254)-127) + 0.5
			}
			x[rng.IntN(len(x))] = 127
			if len(x) == 256 {
				x[rng.IntN(len(x))] = -127
				for i := range x {
					if x[i] == 127 {
						x[i] = 126.5
					}
				}
			}
		},
		func(x []float32) { // the largest magnitude with both signs
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			i, j := rng.IntN(len(x)), rng.IntN(len(x))
			x[i], x[j] = 9, -9
		},
		func(x []float32) { // huge
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 1e37)
			}
		},
		func(x []float32) { x[rng.IntN(len(x))] = float32(math.Inf(1 - 2*rng.IntN(2))) },
		func(x []float32) { x[rng.IntN(len(x))] = float32(math.NaN()) },
	}
	for _, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ8_K} {
		bs := 32
		if typ == gguf.TypeQ8_K {
			bs = 256
		}
		for trial := range 3000 {
			nb := 1 + rng.IntN(6)
			x := randActs(rng, nb*bs)
			for b := range nb {
				if rng.IntN(3) == 0 {
					edges[rng.IntN(len(edges))](x[b*bs : (b+1)*bs])
				}
			}
			if d := quantizeBoth(typ, x); d != "" {
				t.Fatalf("%s trial %d: %s differs", typ, trial, d)
			}
		}
	}
}

// FuzzQuantize feeds any float32 bits (NaNs and infinities included) to
// both quantizers: the same bits.
func FuzzQuantize(f *testing.F) {
	f.Add(false, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(true, []byte{0xff, 0x7f, 0x80, 0x00, 0x00, 0x00, 0x80, 0x3f})
	f.Fuzz(func(t *testing.T, k bool, data []byte) {
		if !useAVX512 || len(data) == 0 {
			return
		}
		typ, bs := gguf.TypeQ8_0, 32
		if k {
			typ, bs = gguf.TypeQ8_K, 256
		}
		x := make([]float32, bs*(1+len(data)/(4*bs)))
		for i := range x {
			var v uint32
			for j := range 4 {
				v |= uint32(data[(4*i+j)%len(data)]) << (8 * j)
			}
			x[i] = math.Float32frombits(v)
		}
		if d := quantizeBoth(typ, x); d != "" {
			t.Fatalf("%s: %s differs", typ, d)
		}
	})
}

// BenchmarkQuantize times one input of a small model's widths.
func BenchmarkQuantize(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		typ gguf.Type
		n   int
	}{{gguf.TypeQ8_0, 896}, {gguf.TypeQ8_0, 4864}, {gguf.TypeQ8_K, 4864}} {
		x := randActs(rng, c.n)
		for _, asm := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/%d/avx512=%v", c.typ, c.n, asm && useAVX512), func(b *testing.B) {
				old := useAVX512
				useAVX512 = asm && useAVX512
				defer func() { useAVX512 = old }()
				var a Acts
				for b.Loop() {
					a.Quantize(c.typ, x)
				}
			})
		}
	}
}
