package model

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"ringlm/gguf"
	"ringlm/synth"
)

// windowModel is tiny phi3 with the given depth and sliding window,
// seed 11, F32 weights.
func windowModel(t *testing.T, layers, window int) *Model {
	t.Helper()
	s, err := synth.Lookup("tiny", "phi3")
	if err != nil {
		t.Fatal(err)
	}
	s.Layers, s.SlidingWindow = layers, window
	w, err := synth.Build(synth.Options{Shape: s, Type: gguf.TypeF32, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "phi3.gguf")
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
	if m.SlidingWindow != window {
		t.Fatalf("loaded window %d, wrote %d", m.SlidingWindow, window)
	}
	return m
}

// allLogits runs tokens from position pos 0 in one step and returns every
// position's logits.
func allLogits(t *testing.T, m *Model, tokens []int32) []float32 {
	t.Helper()
	kv, _ := NewKVPool(&m.Config, gguf.TypeF32, 8, DefaultBlockSize)
	out := make([]float32, len(tokens)*m.Vocab)
	if err := m.Forward(kv, []Seq{{Tokens: tokens, Blocks: seqBlocks(0, 8), Logits: out, AllLogits: true}}); err != nil {
		t.Fatal(err)
	}
	return out
}

// With one layer, the token at p under a window of w depends only on the
// tokens p-w+1..p (each key and value is a function of its own token and
// position), and RoPE makes a score depend on the distance between
// positions only. So its logits are those of the same model without a
// window run on just those w tokens from position 0: attention truncated
// by hand, computed by the window-free path. Positions before w see their
// whole prefix either way and must not change by a bit; later ones must
// change.
func TestSlidingWindowTruncatesAttention(t *testing.T) {
	const w = 5
	m := windowModel(t, 1, w)
	V := m.Vocab
	windowed := allLogits(t, m, prompt)
	m.SlidingWindow = 0
	full := allLogits(t, m, prompt)
	for p := range prompt {
		got, whole := windowed[p*V:(p+1)*V], full[p*V:(p+1)*V]
		if p < w {
			if !slices.Equal(got, whole) {
				t.Fatalf("position %d < window %d: logits changed", p, w)
			}
			continue
		}
		if e := relErr(got, whole); e < 1e-3 {
			t.Errorf("position %d: windowed logits within %.2g of the unwindowed ones; the window did nothing", p, e)
		}
		cut := allLogits(t, m, prompt[p-w+1:p+1])
		ref := cut[(w-1)*V : w*V]
		if e := relErr(got, ref); e > 1e-5 {
			t.Errorf("position %d: relative error %.3g against attention truncated to %d..%d", p, e, p-w+1, p)
		}
	}
}

// Deeper models: the window holds whether positions arrive in one step,
// in chunks, or one at a time through the KV cache (bitwise), and the
// logits past the window differ from a window-free run.
func TestSlidingWindowAcrossSteps(t *testing.T) {
	const w = 6
	m := windowModel(t, 4, w)
	V := m.Vocab
	one := allLogits(t, m, prompt)
	for _, cuts := range [][]int{{0, 3, 11, len(prompt)}, func() []int {
		c := make([]int, len(prompt)+1)
		for i := range c {
			c[i] = i
		}
		return c
	}()} {
		kv, _ := NewKVPool(&m.Config, gguf.TypeF32, 8, DefaultBlockSize)
		for i := 0; i+1 < len(cuts); i++ {
			n := cuts[i+1] - cuts[i]
			lg := make([]float32, n*V)
			if err := m.Forward(kv, []Seq{{Tokens: prompt[cuts[i]:cuts[i+1]], Pos: cuts[i], Blocks: seqBlocks(0, 8), Logits: lg, AllLogits: true}}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(lg, one[cuts[i]*V:cuts[i+1]*V]) {
				t.Fatalf("steps %v: positions %d..%d differ from the one-step run", cuts, cuts[i], cuts[i+1]-1)
			}
		}
	}
	m.SlidingWindow = 0
	full := allLogits(t, m, prompt)
	last := len(prompt) - 1
	if e := relErr(one[last*V:], full[last*V:]); e < 1e-3 {
		t.Fatalf("last position: windowed logits within %.2g of unwindowed", e)
	}
}

// windowGolden is HF transformers' logits for tiny phi3 with a sliding
// window of 8 positions, shorter than the 21-token prompt (seed 11, F32).
// tools/hf_oracle.py writes it on the GPU host:
//
//	ringlm synth --preset tiny --arch phi3 --sliding-window 8 --type f32 --seed 11 -o window-tiny-phi3-f32.gguf
//	python3 tools/hf_oracle.py window-tiny-phi3-f32.gguf --steps 32 -o testdata/golden/window-tiny-phi3-f32.json \
//	    --prompt 508,72,101,108,108,111,44,32,300,301,302,303,40,41,42,43,44,45,46,47,48
const windowGolden = "../testdata/golden/window-tiny-phi3-f32.json"

// The CPU forward with a window shorter than the prompt matches HF
// transformers' Phi-3 with the same sliding_window as the window-free
// goldens match theirs (checkGolden), and HF's logits are not those of
// the model without the window.
func TestSlidingWindowMatchesHF(t *testing.T) {
	if _, err := os.Stat(windowGolden); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is absent: generate it on the GPU host with tools/hf_oracle.py (see windowGolden)", windowGolden)
	}
	const w = 8
	g := loadGolden(t, windowGolden)
	if g.Window != w || len(g.Prompt) <= w {
		t.Fatalf("golden made with window %d over a %d-token prompt, want %d under the prompt's length", g.Window, len(g.Prompt), w)
	}
	m := windowModel(t, 4, w)
	checkGolden(t, m, g, gguf.TypeF32)
	m.SlidingWindow = 0
	seq := append(append([]int32{}, g.Prompt...), g.Greedy[:len(g.Greedy)-1]...)
	plain := allLogits(t, m, seq)
	last := (g.Rows - 1) * g.Vocab
	if e := relErr(plain[last:], g.logits[last:]); e < 1e-2 {
		t.Fatalf("HF's windowed logits are within %.2g of the window-free model's: the golden does not exercise the window", e)
	}
}
