package cpu_test

import (
	"bytes"
	"testing"

	"ringlm/gguf"
	"ringlm/kernels/conformance"
	"ringlm/model"
	"ringlm/synth"
)

// TestConformance runs the protocol suite on the CPU device over a tiny
// synthetic Llama.
func TestConformance(t *testing.T) {
	s, err := synth.Lookup("tiny", "llama")
	if err != nil {
		t.Fatal(err)
	}
	w, err := synth.Build(synth.Options{Shape: s, Type: gguf.TypeF16, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	conformance.Run(t, conformance.CPU(m))
}
