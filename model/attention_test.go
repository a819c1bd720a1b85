package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
	"ringlm/internal/fma"
)

// attendRef is attention.go's definition for one query at position pos,
// one operation at a time.
func attendRef(m *Model, kv *KVPool, layer int, table []int32, pos, head int, q []float32) []float32 {
	c := &m.Config
	hd := c.HeadDim
	g := head / (c.Heads / c.KVHeads)
	p0 := c.windowStart(pos)
	key, val := make([]float32, hd), make([]float32, hd)
	scores := make([]float32, pos-p0+1)
	for i := range scores {
		kv.convert(key, kv.rows(layer, 0, table, p0+i, p0+i+1, g*hd, nil)[0])
		scores[i] = dotGo(key, q)
	}
	softmaxGo(scores, float32(1/math.Sqrt(float64(hd))))
	out := make([]float32, hd)
	for i, p := range scores {
		kv.convert(val, kv.rows(layer, 1, table, p0+i, p0+i+1, g*hd, nil)[0])
		for j := range out {
			out[j] = fma.F32(p, val[j], out[j])
		}
	}
	return out
}

// TestAttention holds attention, at every kernel level, to attendRef bit
// for bit: head dims of one to nine 16-blocks, F32 and F16 pools, sliding
// windows shorter and longer than a chunk, and steps of several
// sequences whose queries start mid-block.
func TestAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, hd := range []int{16, 32, 48, 64, 96, 128, 144, 40} {
		for _, kvType := range []gguf.Type{gguf.TypeF32, gguf.TypeF16} {
			for _, window := range []int{0, 3, 50} {
				m := &Model{Config: Config{Heads: 6, KVHeads: 2, HeadDim: hd, SlidingWindow: window, Layers: 1}, pool: newPool(2)}
				kv, err := NewKVPool(&m.Config, kvType, 40, DefaultBlockSize)
				if err != nil {
					t.Fatal(err)
				}
				// Two sequences: 130 positions cached then 70 queries; 5
				// cached then 1 query (a decode).
				seqs := []Seq{{Pos: 130, Tokens: make([]int32, 70), Blocks: seqBlocks(0, 13)}, {Pos: 5, Tokens: make([]int32, 1), Blocks: seqBlocks(20, 1)}}
				first := []int{0, 70}
				kvd := m.KVDim()
				for _, s := range seqs {
					for pos := range s.Pos + len(s.Tokens) {
						kv.store(0, s.Blocks, pos, randVec(rng, kvd), randVec(rng, kvd))
					}
				}
				qd := m.Heads * hd
				q := randVec(rng, 71*qd)
				want := make([]float32, 71*qd)
				for si, s := range seqs {
					for j := range s.Tokens {
						tk := first[si] + j
						for h := range m.Heads {
							copy(want[tk*qd+h*hd:], attendRef(m, kv, 0, s.Blocks, s.Pos+j, h, q[tk*qd+h*hd:tk*qd+(h+1)*hd]))
						}
					}
				}
				for _, l := range levels() {
					atLevel(l, func() {
						got := make([]float32, 71*qd)
						m.attention(kv, 0, seqs, first, q, got)
						for i := range want {
							if !sameFloat(got[i], want[i]) {
								t.Fatalf("%s hd=%d %s window %d: token %d head %d [%d] = %g (%#x), want %g (%#x)", l, hd, kvType, window,
									i/qd, i%qd/hd, i%hd, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
							}
						}
					})
				}
			}
		}
	}
}

// TestSwiglu holds swiglu, at every kernel level, to swigluGo's bits on
// every length to 40 and a long one, with gates from -200 to 200 and
// NaNs and infinities among them; and swigluGo near silu in float64
// (results below 1e-36, from gates under about -88.4, may go to 0).
func TestSwiglu(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, l := range levels() {
		atLevel(l, func() {
			for n := range 41 {
				for _, n := range []int{n, 1000 + n} {
					g, u := randVec(rng, n), randVec(rng, n)
					for i := range g {
						g[i] *= float32([]int{1, 3, 30, 200}[i%4])
					}
					if n > 5 {
						g[1], g[3], g[5] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
					}
					want, got := make([]float32, n), make([]float32, n)
					swigluGo(want, g, u)
					swiglu(got, g, u)
					for i := range got {
						if !sameFloat(got[i], want[i]) {
							t.Fatalf("%s n=%d: [%d] silu(%g)·%g = %g (%#x), want %g (%#x)", l, n, i, g[i], u[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		})
	}
	for i := range 100000 {
		x := float32(rng.NormFloat64() * 20)
		if i%2 == 0 {
			x = float32(rng.Float64()*180 - 90)
		}
		var got [1]float32
		swigluGo(got[:], []float32{x}, []float32{1})
		want := float64(x) / (1 + math.Exp(-float64(x)))
		if d := math.Abs(float64(got[0]) - want); d > 4e-7*math.Abs(want) && d > 1e-36 {
			t.Fatalf("swigluGo(%g) = %g, silu %g", x, got[0], want)
		}
	}
}

func BenchmarkAttention(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, hd := range []int{32, 64} {
		for _, n := range []int{1, 512} {
			m := &Model{Config: Config{Heads: 14, KVHeads: 2, HeadDim: hd, Layers: 1}, pool: defaultPool}
			kv, _ := NewKVPool(&m.Config, gguf.TypeF16, 32, DefaultBlockSize)
			seqs := []Seq{{Pos: 512 - n, Tokens: make([]int32, n), Blocks: seqBlocks(0, 32)}}
			for pos := range 512 {
				kv.store(0, seqs[0].Blocks, pos, randVec(rng, m.KVDim()), randVec(rng, m.KVDim()))
			}
			q := randVec(rng, n*m.Heads*hd)
			out := make([]float32, len(q))
			for _, l := range levels()[1:] {
				b.Run(fmt.Sprintf("hd=%d/queries=%d/%s", hd, n, l), func(b *testing.B) {
					atLevel(l, func() {
						for b.Loop() {
							m.attention(kv, 0, seqs, []int{0}, q, out)
						}
					})
				})
			}
		}
	}
}

// TestExp32 holds exp32 within 1 ulp of e^x over softmax's arguments
// where the result is normal, to 0 below.
func TestExp32(t *testing.T) {
	ulp := func(a, b float32) int64 {
		d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
		return max(d, -d)
	}
	rng := rand.New(rand.NewPCG(41, 42))
	for i := range 1 << 20 {
		x := -float32(rng.Float64() * 100)
		if i < 1000 {
			x = -float32(i) * 0x1p-20
		}
		got, want := exp32(x), float32(math.Exp(float64(x)))
		switch {
		case want >= 0x1p-126:
			if ulp(got, want) > 1 {
				t.Fatalf("exp32(%g) = %g, e^x %g: %d ulp", x, got, want, ulp(got, want))
			}
		case math.Abs(float64(got-want)) > 0x1p-126:
			t.Fatalf("exp32(%g) = %g, e^x %g", x, got, want)
		}
	}
	if got := exp32(float32(math.NaN())); got == got {
		t.Fatalf("exp32(NaN) = %g", got)
	}
	if got := exp32(float32(math.Inf(-1))); got != 0 {
		t.Fatalf("exp32(-Inf) = %g", got)
	}
	if got := exp32(0); got != 1 {
		t.Fatalf("exp32(0) = %g", got)
	}
}

// TestSoftmax holds softmax, at every kernel level, to softmaxGo's bits,
// on every length to 100 and some long ones, with NaNs and infinities in
// some rows.
func TestSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, l := range levels() {
		atLevel(l, func() {
			for _, n := range append([]int{1000, 4099}, func() []int {
				var ns []int
				for n := 1; n <= 100; n++ {
					ns = append(ns, n)
				}
				return ns
			}()...) {
				for round := range 4 {
					x := randVec(rng, n)
					for i := range x {
						x[i] *= 30
					}
					if round == 3 {
						x[rng.IntN(n)] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[n%3]
					}
					want := append([]float32(nil), x...)
					softmaxGo(want, 0.125)
					softmax(x, 0.125)
					for i := range x {
						if !sameFloat(x[i], want[i]) {
							t.Fatalf("%s n=%d round %d: [%d] = %g (%#x), want %g (%#x)", l, n, round, i, x[i], math.Float32bits(x[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		})
	}
}
