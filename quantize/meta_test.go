package quantize

import (
	"testing"

	"ringlm/gguf"
)

// TestPreNameCanonical: a file that names its pre-tokenizer "gpt2" (ringlm's
// older writers) comes out of quantize as llama.cpp's "gpt-2".
func TestPreNameCanonical(t *testing.T) {
	out := outputKVs([]gguf.KV{{Key: "tokenizer.ggml.pre", Value: gguf.String("gpt2")}, {Key: "general.name", Value: gguf.String("x")}}, Mix{})
	got := map[string]string{}
	for _, kv := range out {
		if s, ok := kv.Value.Str(); ok {
			got[kv.Key] = s
		}
	}
	if got["tokenizer.ggml.pre"] != "gpt-2" || got["general.name"] != "x" {
		t.Fatalf("metadata out: %v", got)
	}
}
