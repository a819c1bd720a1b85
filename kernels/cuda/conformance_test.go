package cuda

import (
	"testing"

	"ringlm/eval"
	"ringlm/gguf"
	"ringlm/kernels/conformance"
	"ringlm/model"
	"ringlm/models"
	"ringlm/ringbuf"
	"ringlm/tokenizer"
)

// cudaFactory opens CUDA devices on m for the protocol suite, sized as
// the scenario asks (the KV pool exactly c.Blocks blocks).
func cudaFactory(m *model.Model) conformance.Factory {
	return conformance.Factory{Name: "cuda", New: func(t testing.TB, c conformance.Config) (conformance.Device, ringbuf.Allocator, func() error) {
		dev, err := Open(m, Options{Slots: c.Slots, BlockSize: c.BlockSize, Context: c.Context, MaxStepTokens: c.MaxStepTokens,
			NumBlocks: c.Blocks})
		if err != nil {
			t.Fatal(err)
		}
		return dev, dev.Allocator(), dev.Close
	}}
}

// TestConformance runs the protocol suite on the CUDA device (tiny
// Llama, F16).
func TestConformance(t *testing.T) {
	needGPU(t)
	conformance.Run(t, cudaFactory(tiny(t, "llama", gguf.TypeF16)))
}

// builtinModel loads the built-in model (package models: gocoder, Q8_0,
// trained by the project) with its tokenizer.
func builtinModel(t *testing.T) (*model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	f, err := gguf.Parse(models.Default())
	if err != nil {
		t.Fatal(err)
	}
	m, tok, err := eval.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	m.SetActivations(model.FloatActivations) // as loadSynth
	return m, tok
}

// diffTolerance is what TestConformanceDiff allows between the GPU's
// numerics (BF16 matrix inputs, F16 KV) and the float32 reference: greedy
// tokens by vLLM's rule (a divergence where each token is in the other's
// top 5), logprobs of the tokens compared within 0.1 (logits within 2e-2
// of the largest logit, TestLogitsMatchCPU, move a logprob by up to
// about twice that on these models' logit ranges; the diff logs the
// largest difference it saw).
var diffTolerance = conformance.Tolerance{Logprob: 0.1, TopK: 5}

// TestConformanceDiff plays the suite's scripts on the CPU device and on
// the CUDA device over the same models (a tiny synthetic Llama in F16, and
// the built-in model, trained, in Q8_0) and compares the completion
// streams record by record under diffTolerance: every other difference is
// a drift of one side.
func TestConformanceDiff(t *testing.T) {
	needGPU(t)
	builtin := func(t *testing.T) *model.Model {
		m, _ := builtinModel(t)
		return m
	}
	for _, c := range []struct {
		name string
		load func(t *testing.T) *model.Model
	}{
		{"tiny-llama-f16", func(t *testing.T) *model.Model { return tiny(t, "llama", gguf.TypeF16) }},
		{"builtin-q8_0", builtin},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := c.load(t)
			st := conformance.Diff(t, conformance.CPU(m), cudaFactory(m), diffTolerance)
			if st.GreedyTokens == 0 {
				t.Fatal("no greedy token compared")
			}
			// A divergence behind an entry the scenario refused cannot be
			// replayed alone; most must be judged.
			if st.Unjudged > st.Divergences/4 {
				t.Fatalf("%d divergences unjudged, %d judged: too few judged", st.Unjudged, st.Divergences)
			}
		})
	}
}
