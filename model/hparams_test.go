package model

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/synth"
)

// loadWith writes a micro llama (with Llama 3 RoPE factors) whose
// metadata set changes, and loads it.
func loadWith(t *testing.T, set func(w *gguf.Writer)) (*Model, error) {
	t.Helper()
	s := synth.Shape{Arch: "llama", Name: "micro", Dim: 64, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 128,
		Context: 256, RopeBase: 10000, NormEps: 1e-5, Llama3: &synth.Llama3Rope{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 64}}
	return loadShape(t, s, set)
}

// loadShape writes a model of shape s whose metadata set changes, and
// loads it.
func loadShape(t *testing.T, s synth.Shape, set func(w *gguf.Writer)) (*Model, error) {
	t.Helper()
	w, err := synth.Build(synth.Options{Shape: s, Type: gguf.TypeF32, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	set(w)
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return Load(f)
}

// Hyperparameters outside their domain are refused at load with one line
// naming the key and its value; they would otherwise load and answer NaN
// logits (an empty text that "stops").
func TestLoadRefusesHparamsOutOfDomain(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	f32 := func(k string, v float32) func(*gguf.Writer) {
		return func(w *gguf.Writer) { w.Set(k, gguf.Float32(v)) }
	}
	u32 := func(k string, v uint32) func(*gguf.Writer) {
		return func(w *gguf.Writer) { w.Set(k, gguf.Uint32(v)) }
	}
	linear := func(f float32) func(*gguf.Writer) {
		return func(w *gguf.Writer) {
			w.Set("llama.rope.scaling.type", gguf.String("linear"))
			w.Set("llama.rope.scaling.factor", gguf.Float32(f))
		}
	}
	cases := []struct {
		name string
		set  func(*gguf.Writer)
		kind error  // ErrHparam, or gguf.ErrInvalid for what the metadata reader checks
		msg  string // the key = value the line names
	}{
		{"rope base NaN", f32("llama.rope.freq_base", nan), ErrHparam, "llama.rope.freq_base = NaN"},
		{"rope base +Inf", f32("llama.rope.freq_base", inf), ErrHparam, "llama.rope.freq_base = +Inf"},
		{"rope base 0", f32("llama.rope.freq_base", 0), ErrHparam, "llama.rope.freq_base = 0"},
		{"rope base negative", f32("llama.rope.freq_base", -10000), ErrHparam, "llama.rope.freq_base = -10000"},
		{"norm eps negative", f32("llama.attention.layer_norm_rms_epsilon", -1e-5), ErrHparam, "llama.attention.layer_norm_rms_epsilon = -1e-05"},
		{"norm eps 0", f32("llama.attention.layer_norm_rms_epsilon", 0), ErrHparam, "llama.attention.layer_norm_rms_epsilon = 0"},
		{"norm eps NaN", f32("llama.attention.layer_norm_rms_epsilon", nan), ErrHparam, "llama.attention.layer_norm_rms_epsilon = NaN"},
		{"norm eps -Inf", f32("llama.attention.layer_norm_rms_epsilon", -inf), ErrHparam, "llama.attention.layer_norm_rms_epsilon = -Inf"},
		{"zero heads", u32("llama.attention.head_count", 0), gguf.ErrInvalid, "llama.attention.head_count = 0"},
		{"zero kv heads", u32("llama.attention.head_count_kv", 0), gguf.ErrInvalid, "llama.attention.head_count_kv = 0"},
		{"kv heads not dividing", u32("llama.attention.head_count_kv", 3), gguf.ErrInvalid, "llama.attention.head_count_kv = 3 does not divide llama.attention.head_count = 4"},
		{"zero width", u32("llama.embedding_length", 0), gguf.ErrInvalid, "llama.embedding_length = 0"},
		{"zero layers", u32("llama.block_count", 0), gguf.ErrInvalid, "llama.block_count = 0"},
		{"zero context", u32("llama.context_length", 0), ErrHparam, "llama.context_length = 0"},
		{"zero ffn", u32("llama.feed_forward_length", 0), ErrHparam, "llama.feed_forward_length = 0"},
		{"zero head dim", func(w *gguf.Writer) {
			w.Set("llama.attention.key_length", gguf.Uint32(0))
			w.Set("llama.attention.value_length", gguf.Uint32(0))
		}, ErrHparam, "llama.attention.key_length = 0"},
		{"zero rope dims", u32("llama.rope.dimension_count", 0), ErrHparam, "llama.rope.dimension_count = 0"},
		{"odd rope dims", u32("llama.rope.dimension_count", 7), ErrHparam, "llama.rope.dimension_count = 7"},
		{"rope dims over the head", u32("llama.rope.dimension_count", 32), ErrHparam, "llama.rope.dimension_count = 32"},
		{"linear rope factor NaN", linear(nan), ErrHparam, "llama.rope.scaling.factor = NaN"},
		{"linear rope factor negative", linear(-2), ErrHparam, "llama.rope.scaling.factor = -2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := loadWith(t, c.set)
			if m != nil || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Load: %v; want one line wrapping %q naming %q", err, c.kind, c.msg)
			}
		})
	}
}

// The edges of the domains still load: a tiny epsilon, a linear RoPE
// factor of 0 (llama.cpp's "none") and a real one.
func TestLoadAcceptsHparamEdges(t *testing.T) {
	for _, c := range []struct {
		name  string
		set   func(*gguf.Writer)
		scale float32
	}{
		{"tiny eps", func(w *gguf.Writer) { w.Set("llama.attention.layer_norm_rms_epsilon", gguf.Float32(1e-30)) }, 1},
		{"linear 0", func(w *gguf.Writer) {
			w.Set("llama.rope.scaling.type", gguf.String("linear"))
			w.Set("llama.rope.scaling.factor", gguf.Float32(0))
		}, 1},
		{"linear 4", func(w *gguf.Writer) {
			w.Set("llama.rope.scaling.type", gguf.String("linear"))
			w.Set("llama.rope.scaling.factor", gguf.Float32(4))
		}, 0.25},
	} {
		m, err := loadWith(t, c.set)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if m.RopeScale != c.scale {
			t.Errorf("%s: rope scale %v, want %v", c.name, m.RopeScale, c.scale)
		}
	}
}

// The sliding window comes from <arch>.attention.sliding_window; a Phi-3
// file without the key, converted before it existed, gets llama.cpp's
// default for its shape (2047 for the 4k-context mini and medium: 32 or
// 40 layers, context 4096); a per-layer pattern other than all-sliding
// is refused.
func TestLoadSlidingWindow(t *testing.T) {
	phi3 := func(layers, ctx int) synth.Shape {
		return synth.Shape{Arch: "phi3", Name: "micro", Dim: 32, Layers: layers, Heads: 1, KVHeads: 1, HeadDim: 32, FFN: 32,
			Context: ctx, RopeBase: 10000, NormEps: 1e-5}
	}
	llama := synth.Shape{Arch: "llama", Name: "micro", Dim: 32, Layers: 1, Heads: 1, KVHeads: 1, HeadDim: 32, FFN: 32,
		Context: 256, RopeBase: 10000, NormEps: 1e-5}
	key := func(s synth.Shape) string { return s.Arch + ".attention.sliding_window" }
	drop := func(s synth.Shape) func(*gguf.Writer) { return func(w *gguf.Writer) { w.Delete(key(s)) } }
	set := func(s synth.Shape, v uint32) func(*gguf.Writer) {
		return func(w *gguf.Writer) { w.Set(key(s), gguf.Uint32(v)) }
	}
	pattern := func(s synth.Shape, p ...bool) func(*gguf.Writer) {
		return func(w *gguf.Writer) {
			w.Set(key(s), gguf.Uint32(64))
			w.Set(s.Arch+".attention.sliding_window_pattern", gguf.Bools(p))
		}
	}
	for _, c := range []struct {
		name  string
		shape synth.Shape
		set   func(*gguf.Writer)
		want  int
		err   string
	}{
		{"phi3 written by synth", phi3(2, 4096), func(*gguf.Writer) {}, 4096, ""},
		{"phi3 key 100", phi3(2, 4096), set(phi3(2, 4096), 100), 100, ""},
		{"phi3 key 0: none", phi3(32, 4096), set(phi3(32, 4096), 0), 0, ""},
		{"phi3-mini-4k without the key", phi3(32, 4096), drop(phi3(32, 4096)), 2047, ""},
		{"phi3-medium-4k without the key", phi3(40, 4096), drop(phi3(40, 4096)), 2047, ""},
		{"phi3-mini-128k without the key", phi3(32, 131072), drop(phi3(32, 131072)), 0, ""},
		{"other phi3 without the key", phi3(24, 4096), drop(phi3(24, 4096)), 0, ""},
		{"llama without the key", llama, func(*gguf.Writer) {}, 0, ""},
		{"llama key 64", llama, set(llama, 64), 64, ""},
		{"pattern all sliding", llama, pattern(llama, true), 64, ""},
		{"pattern some layers", phi3(2, 4096), pattern(phi3(2, 4096), true, false), 0, "a window on some layers only is not supported"},
		{"window not an integer", llama, func(w *gguf.Writer) { w.Set(key(llama), gguf.String("wide")) }, 0, "llama.attention.sliding_window"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := loadShape(t, c.shape, c.set)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("Load: %v; want one line saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.SlidingWindow != c.want {
				t.Fatalf("window %d, want %d", m.SlidingWindow, c.want)
			}
		})
	}
}
