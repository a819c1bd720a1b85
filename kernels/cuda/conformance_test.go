package cuda

import (
	"testing"

	"ringlm/gguf"
	"ringlm/kernels/conformance"
	"ringlm/model"
	"ringlm/models"
	"ringlm/ringbuf"
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

// TestConformanceDiff plays the suite's scripts on the CPU device and on
// the CUDA device over the same models (a tiny synthetic Llama in F16, and
// the built-in model, trained, in Q8_0) and compares the completion
// streams record by record: every difference is a drift of one side.
func TestConformanceDiff(t *testing.T) {
	needGPU(t)
	builtin := func(t *testing.T) *model.Model {
		f, err := gguf.Parse(models.Default())
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(f)
		if err != nil {
			t.Fatal(err)
		}
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
			st := conformance.Diff(t, conformance.CPU(m), cudaFactory(m), conformance.Tolerance{Logprob: 2e-3})
			if st.GreedyTokens == 0 {
				t.Fatal("no greedy token compared")
			}
		})
	}
}
