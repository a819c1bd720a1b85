package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokenize(t *testing.T) {
	vocab := filepath.Join(t.TempDir(), "qwen.gguf")
	if code, _, e := runCmd(t, "synth", "--vocab-only", "--tokenizer", "../../testdata/tokenizer/qwen3.gguf.gz", "-o", vocab); code != 0 {
		t.Fatal(e)
	}
	code, out, e := runCmd(t, "tokenize", "-m", vocab, "Hello <|im_start|> world")
	if code != 0 || !strings.Contains(out, "151644") || !strings.Contains(out, `"Hello"`) || !strings.HasSuffix(out, "4 tokens\n") {
		t.Fatalf("tokenize: %d %q %q", code, out, e)
	}
	code, out, _ = runCmd(t, "tokenize", "-m", vocab, "--literal", "<|im_start|>")
	if code != 0 || strings.Contains(out, "151644") {
		t.Fatalf("--literal matched a special token: %q", out)
	}
	var stdout, stderr strings.Builder
	in := strings.NewReader(`{"text": "Hello world"}` + "\n" + `{"text": "<|im_start|>"}` + "\n" + `{"text": ""}` + "\n")
	if err := tokenizeWith(in, []string{"-m", vocab, "--jsonl"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines, got %q", stdout.String())
	}
	var first, second, third struct{ IDs []int32 }
	for i, dst := range []*struct{ IDs []int32 }{&first, &second, &third} {
		if err := json.Unmarshal([]byte(lines[i]), dst); err != nil {
			t.Fatal(err)
		}
	}
	if len(first.IDs) != 2 || first.IDs[0] != 9707 || len(second.IDs) < 2 || third.IDs == nil || len(third.IDs) != 0 {
		t.Fatalf("jsonl ids: %v %v %v (--jsonl parses no special tokens)", first.IDs, second.IDs, third.IDs)
	}
	if err := tokenizeWith(strings.NewReader("not json\n"), []string{"-m", vocab, "--jsonl"}, &stdout, &stderr); err == nil {
		t.Fatal("malformed jsonl line accepted")
	}
}
