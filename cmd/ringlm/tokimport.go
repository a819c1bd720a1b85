package main

import (
	"fmt"

	"ringlm/gguf"
)

// importTokenizer reads a HuggingFace tokenizer.json into GGUF tokenizer
// metadata. Completed with the tokenizer package.
func importTokenizer(path string) ([]gguf.KV, error) {
	return nil, fmt.Errorf("--tokenizer %s: importing tokenizer.json is not available yet", path)
}
