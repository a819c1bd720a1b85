package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func splitAll(p preTokenizer, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := p.scan(s, i)
		if j <= i || j > len(s) {
			return append(out, "<<scanner did not advance>>")
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// TestPreTokenizersMatchRegex compares the scanners with the regexes run by
// a backtracking engine (Python's regex module, see pretokenize_gen.py) on
// strings mixing every character class the patterns distinguish.
func TestPreTokenizersMatchRegex(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtureDir, "pretokenize.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases  []string              `json:"cases"`
		Splits map[string][][]string `json:"splits"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Splits) != 4 {
		t.Fatalf("reference has %d patterns", len(ref.Splits))
	}
	for pre, splits := range ref.Splits {
		p, ok := preTokenizers[pre]
		if !ok {
			t.Fatalf("no scanner for %q", pre)
		}
		bad := 0
		for i, c := range ref.Cases {
			if got := splitAll(p, c); !slices.Equal(got, splits[i]) {
				if bad++; bad <= 5 {
					t.Errorf("%s %q:\n got %q\nwant %q", pre, c, got, splits[i])
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d cases differ", pre, bad, len(ref.Cases))
		}
	}
}

func TestPreTokenizerExamples(t *testing.T) {
	cases := []struct {
		pre, in string
		want    []string
	}{
		{"llama-bpe", "Hello world", []string{"Hello", " world"}},
		{"llama-bpe", "I'M here", []string{"I", "'M", " here"}},
		{"gpt2", "I'M here", []string{"I", "'", "M", " here"}},
		{"llama-bpe", "1234567", []string{"123", "456", "7"}},
		{"qwen2", "123", []string{"1", "2", "3"}},
		{"llama-bpe", "x   y", []string{"x", "  ", " y"}},
		{"llama-bpe", "x  \n\n  y", []string{"x", "  \n\n", " ", " y"}},
		{"llama-bpe", "end  ", []string{"end", "  "}},
		{"gpt-4o", "HeLLo world", []string{"He", "LLo", " world"}},
		{"gpt-4o", "don't", []string{"don't"}},
		{"gpt-4o", "a/b//\n", []string{"a", "/b", "//\n"}},
		{"gpt-4o", "HELLO's", []string{"HELLO's"}},
	}
	for _, c := range cases {
		if got := splitAll(preTokenizers[c.pre], c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: got %q, want %q", c.pre, c.in, got, c.want)
		}
	}
}
