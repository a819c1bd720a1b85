package conformance

import (
	"testing"

	"ringlm/gguf"
	"ringlm/kernels"
	"ringlm/kernels/cpu"
	"ringlm/model"
	"ringlm/ringbuf"
)

// CPU opens CPU devices on m, with an F16 KV cache as the CUDA device
// keeps: the float32 reference, and the first device of a Diff.
func CPU(m *model.Model) Factory {
	return Factory{Name: "cpu", New: func(t testing.TB, c Config) (Device, ringbuf.Allocator, func() error) {
		d, err := cpu.New(m, gguf.TypeF16, c.Blocks, c.BlockSize, c.Slots)
		if err != nil {
			t.Fatal(err)
		}
		d.SetLimits(kernels.Limits{Context: c.Context, MaxStepTokens: c.MaxStepTokens})
		return d, ringbuf.HeapAllocator{}, nil
	}}
}
