package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ringlm/internal/vocabtest"
	"ringlm/tokenizer"
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
	if len(first.IDs) != 2 || first.IDs[0] != 9707 || !slices.Equal(second.IDs, []int32{151644}) || third.IDs == nil || len(third.IDs) != 0 {
		t.Fatalf("jsonl ids: %v %v %v (--jsonl matches special tokens as the plain mode)", first.IDs, second.IDs, third.IDs)
	}
	// --literal in --jsonl: control tokens literal, user-defined (<think>)
	// still matched, as in the plain mode.
	stdout.Reset()
	in = strings.NewReader(`{"text": "<|im_start|><think>"}` + "\n")
	if err := tokenizeWith(in, []string{"-m", vocab, "--jsonl", "--literal"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	var lit struct{ IDs []int32 }
	if err := json.Unmarshal([]byte(stdout.String()), &lit); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(lit.IDs, 151644) || !slices.Contains(lit.IDs, 151667) {
		t.Fatalf("--jsonl --literal: %v", lit.IDs)
	}
	code, out, _ = runCmd(t, "tokenize", "-m", vocab, "--literal", "<|im_start|><think>")
	for _, id := range lit.IDs {
		if code != 0 || !strings.Contains(out, fmt.Sprintf("%8d", id)) {
			t.Fatalf("plain --literal %q lacks %d of --jsonl's %v", out, id, lit.IDs)
		}
	}
	if err := tokenizeWith(strings.NewReader("not json\n"), []string{"-m", vocab, "--jsonl"}, &stdout, &stderr); err == nil {
		t.Fatal("malformed jsonl line accepted")
	}
}

// TestTokenizeLlamaCppVocabs runs llama.cpp's tokenizer tests through
// --jsonl --literal (its test tokenizes with control tokens unparsed): all
// cases of every vocabulary in one process, ids identical.
func TestTokenizeLlamaCppVocabs(t *testing.T) {
	dir := vocabtest.Dir(t)
	for _, path := range vocabtest.Vocabs(t, dir) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cases, err := vocabtest.Read(path)
			if err != nil {
				t.Fatal(err)
			}
			var in strings.Builder
			for _, c := range cases {
				b, _ := json.Marshal(map[string]string{"text": c.Text})
				in.Write(b)
				in.WriteByte('\n')
			}
			var stdout, stderr strings.Builder
			if err := tokenizeWith(strings.NewReader(in.String()), []string{"-m", path, "--jsonl", "--literal"}, &stdout, &stderr); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
			if len(lines) != len(cases) {
				t.Fatalf("%d lines for %d cases", len(lines), len(cases))
			}
			pass := 0
			for i, c := range cases {
				var got struct{ IDs []int32 }
				if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.IDs, c.IDs) {
					t.Errorf("%q:\n got %v\nwant %v", c.Text, got.IDs, c.IDs)
					continue
				}
				pass++
			}
			t.Logf("%d/%d", pass, len(cases))
		})
	}
}

// TestWrittenPreNames: the vocabularies ringlm writes name their
// pre-tokenizer as llama.cpp does (its loader refuses "gpt2"): the
// built-in one, and imports of each fixture.
func TestWrittenPreNames(t *testing.T) {
	dir := t.TempDir()
	for src, want := range map[string]string{
		"":                                       "gpt-2",
		"../../testdata/tokenizer/qwen3.gguf.gz": "qwen2",
		"../../testdata/tokenizer/llama3.gguf.gz": "llama-bpe",
		"../../testdata/tokenizer/gptoss.gguf.gz": "gpt-4o",
	} {
		out := filepath.Join(dir, want+".gguf")
		args := []string{"synth", "--vocab-only", "-o", out}
		if src != "" {
			args = append(args, "--tokenizer", src)
		}
		if code, _, e := runCmd(t, args...); code != 0 {
			t.Fatal(e)
		}
		tok, f, err := loadTokenizer(out)
		if err != nil {
			t.Fatal(err)
		}
		pre := tok.Vocab().Pre
		f.Close()
		if pre != want || tokenizer.CanonicalPre(pre) != pre {
			t.Errorf("%q: wrote pre %q, want %q", src, pre, want)
		}
	}
}
