package cpu_test

import (
	"testing"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/kernels/conformance"
)

// TestConformance runs the protocol suite on the CPU device over a tiny
// synthetic Llama.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.CPU(testmodel.Load(t, "llama", gguf.TypeF16)))
}
