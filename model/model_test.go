package model

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"ringlm/gguf"
	"ringlm/synth"
)

func tinyModel(t testing.TB, arch string, typ gguf.Type) *Model {
	t.Helper()
	s, err := synth.Lookup("tiny", arch)
	if err != nil {
		t.Fatal(err)
	}
	w, err := synth.Build(synth.Options{Shape: s, Type: typ, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func seqBlocks(first, n int) []int32 {
	b := make([]int32, n)
	for i := range b {
		b[i] = int32(first + i)
	}
	return b
}

var prompt = []int32{508, 72, 101, 108, 108, 111, 44, 32, 300, 301, 302, 303, 40, 41, 42, 43, 44, 45, 46, 47, 48}

func TestLogitsFiniteAndNotFlat(t *testing.T) {
	for _, arch := range synth.Archs {
		m := tinyModel(t, arch, gguf.TypeF32)
		kv, _ := NewKVPool(&m.Config, gguf.TypeF32, 8, DefaultBlockSize)
		logits := make([]float32, len(prompt)*m.Vocab)
		if err := m.Forward(kv, []Seq{{Tokens: prompt, Blocks: seqBlocks(0, 2), Logits: logits, AllLogits: true}}); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < len(prompt); j++ {
			row := logits[j*m.Vocab : (j+1)*m.Vocab]
			var mean, sq float64
			for _, v := range row {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s: non-finite logit", arch)
				}
				mean += float64(v)
			}
			mean /= float64(len(row))
			for _, v := range row {
				sq += (float64(v) - mean) * (float64(v) - mean)
			}
			std := math.Sqrt(sq / float64(len(row)))
			if std < 0.5 || std > 20 {
				t.Fatalf("%s: position %d logits std %.3f: flat or exploding", arch, j, std)
			}
		}
	}
}

// A sequence's logits are bitwise identical whether its prompt runs in
// one step or in chunks, and whether it runs alone or beside others.
func TestBatchAndChunkInvariance(t *testing.T) {
	for _, arch := range synth.Archs {
		for i, kvType := range []gguf.Type{gguf.TypeF32, gguf.TypeF16} {
			m := tinyModel(t, arch, gguf.TypeQ8_0)
			if i == 1 { // both paths of the quantized matrices
				m.SetActivations(FloatActivations)
			}
			kv, _ := NewKVPool(&m.Config, kvType, 32, DefaultBlockSize)
			alone := make([]float32, m.Vocab)
			if err := m.Forward(kv, []Seq{{Tokens: prompt, Blocks: seqBlocks(0, 2), Logits: alone}}); err != nil {
				t.Fatal(err)
			}
			// Same prompt in chunks of 5, 9, rest, in blocks 10..11, with a
			// second sequence in the batch of each step.
			chunked := make([]float32, m.Vocab)
			other := make([]float32, m.Vocab)
			cuts := []int{0, 5, 14, len(prompt)}
			for i := 0; i+1 < len(cuts); i++ {
				var lg []float32
				if i == len(cuts)-2 {
					lg = chunked
				}
				batch := []Seq{
					{Tokens: []int32{7, 8, 9, int32(i)}, Pos: 4 * i, Blocks: seqBlocks(20, 4), Logits: other},
					{Tokens: prompt[cuts[i]:cuts[i+1]], Pos: cuts[i], Blocks: seqBlocks(10, 2), Logits: lg},
				}
				if err := m.Forward(kv, batch); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(alone, chunked) {
				t.Fatalf("%s/%s kv: chunked+batched logits differ from running alone", arch, kvType)
			}
		}
	}
}

func TestForwardRejectsBadInput(t *testing.T) {
	m := tinyModel(t, "llama", gguf.TypeF16)
	kv, _ := NewKVPool(&m.Config, gguf.TypeF32, 2, DefaultBlockSize)
	lg := make([]float32, m.Vocab)
	bad := []Seq{
		{Tokens: nil, Blocks: seqBlocks(0, 1)},
		{Tokens: []int32{int32(m.Vocab)}, Blocks: seqBlocks(0, 1)},
		{Tokens: []int32{1}, Pos: 16, Blocks: seqBlocks(0, 1)},
		{Tokens: []int32{1}, Blocks: []int32{5}},
		{Tokens: []int32{1}, Blocks: seqBlocks(0, 1), Logits: lg[:3]},
	}
	for i, s := range bad {
		if err := m.Forward(kv, []Seq{s}); err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
}

// TestForwardLevelsAgree: a whole forward pass on the float path gives
// the same logits, bit for bit, on every kernel level the machine has
// (the integer path's qdot kernels are held to each other in package
// qdot; RINGLM_CPU runs a whole process on a lower level).
func TestForwardLevelsAgree(t *testing.T) {
	for _, arch := range synth.Archs {
		m := tinyModel(t, arch, gguf.TypeF16)
		var want []float32
		for _, l := range levels() {
			atLevel(l, func() {
				kv, _ := NewKVPool(&m.Config, gguf.TypeF16, 8, DefaultBlockSize)
				logits := make([]float32, len(prompt)*m.Vocab)
				if err := m.Forward(kv, []Seq{{Tokens: prompt, Blocks: seqBlocks(0, 2), Logits: logits, AllLogits: true}}); err != nil {
					t.Fatal(err)
				}
				if want == nil {
					want = logits
					return
				}
				for i := range want {
					if !sameFloat(logits[i], want[i]) {
						t.Fatalf("%s at %s: logit %d = %g, at %s %g", arch, l, i, logits[i], levels()[0], want[i])
					}
				}
			})
		}
	}
}
