package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGenerated: the committed kernels are what the generator writes
// (after an edit here, run go generate ./model).
func TestGenerated(t *testing.T) {
	asm, decl := Generate()
	for name, want := range map[string][]byte{"../../tiles_amd64.s": asm, "../../tiles_amd64.go": decl} {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./model", name)
		}
	}
}
