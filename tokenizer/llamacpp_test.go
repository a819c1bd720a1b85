package tokenizer

import (
	"path/filepath"
	"slices"
	"testing"

	"ringlm/gguf"
	"ringlm/internal/vocabtest"
)

// TestLlamaCppVocabs: every vocabulary of llama.cpp's tokenizer tests
// encodes every test text to exactly the ids llama.cpp expects (no BOS,
// control tokens taken literally, user-defined tokens matched).
func TestLlamaCppVocabs(t *testing.T) {
	dir := vocabtest.Dir(t)
	for _, path := range vocabtest.Vocabs(t, dir) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tk, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			cases, err := vocabtest.Read(path)
			if err != nil {
				t.Fatal(err)
			}
			pass := 0
			for _, c := range cases {
				got := tk.EncodeWith(c.Text, EncodeOptions{})
				if !slices.Equal(got, c.IDs) {
					t.Errorf("%q (pre %q):\n got %v\nwant %v", c.Text, tk.Vocab().Pre, got, c.IDs)
					continue
				}
				pass++
			}
			t.Logf("%s (%s/%s): %d/%d", name, tk.Vocab().Model, tk.Vocab().Pre, pass, len(cases))
		})
	}
}
