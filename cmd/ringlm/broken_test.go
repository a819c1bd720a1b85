package main

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/synth"
)

// A broken model does not run to an empty text that "stops" with exit 0:
// hyperparameters out of their domain are refused at load, and NaN
// weights end the generation with an error; either way one line on
// stderr names what is wrong, and the exit status is 1.
func TestRunBrokenModels(t *testing.T) {
	tiny := testmodel.Path(t, "llama", gguf.TypeF16) // with Llama 3 RoPE factors (rope_freqs)
	withMeta := func(key string, v gguf.Value) string {
		s, err := synth.Lookup("tiny", "llama")
		if err != nil {
			t.Fatal(err)
		}
		w, err := synth.Build(synth.Options{Shape: s, Type: gguf.TypeF16, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		w.Set(key, v)
		p := filepath.Join(t.TempDir(), "broken.gguf")
		if err := w.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nan := float32(math.NaN())
	for _, c := range []struct {
		name, model, want string
	}{
		{"NaN RoPE base", withMeta("llama.rope.freq_base", gguf.Float32(nan)), "llama.rope.freq_base = NaN"},
		{"negative norm epsilon", withMeta("llama.attention.layer_norm_rms_epsilon", gguf.Float32(-1e-5)),
			"llama.attention.layer_norm_rms_epsilon = -1e-05"},
		{"zero KV heads", withMeta("llama.attention.head_count_kv", gguf.Uint32(0)), "llama.attention.head_count_kv = 0"},
		{"NaN RoPE factors", testmodel.Poison(t, tiny, "rope_freqs.weight", nan), "rope_freqs.weight[0] = NaN"},
		{"NaN weights", testmodel.Poison(t, tiny, "output_norm.weight", nan), "non-finite logits (NaN/Inf) at position"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, "run", "-m", c.model, "-p", "hello", "-n", "8", "--seed", "1")
			if code != 1 || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 || strings.TrimSpace(out) != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and one line naming %q", code, out, errOut, c.want)
			}
		})
	}
}
