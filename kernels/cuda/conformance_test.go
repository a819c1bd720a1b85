package cuda

import (
	"testing"

	"ringlm/gguf"
	"ringlm/kernels/conformance"
	"ringlm/model"
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
// the CUDA device over the same tiny models and compares the completion
// streams record by record: every difference is a drift of one side.
func TestConformanceDiff(t *testing.T) {
	needGPU(t)
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			m := tiny(t, arch, gguf.TypeF16)
			st := conformance.Diff(t, conformance.CPU(m), cudaFactory(m), conformance.Tolerance{Logprob: 2e-3})
			if st.GreedyTokens == 0 {
				t.Fatal("no greedy token compared")
			}
		})
	}
}
