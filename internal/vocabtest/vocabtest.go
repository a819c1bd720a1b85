// Package vocabtest reads llama.cpp's tokenizer test vectors: the
// vocabulary-only GGUF files of its models/ directory with their
// NAME.gguf.inp and NAME.gguf.out (the format of llama.cpp's
// tests/test-tokenizer-0). The files are not part of this repository;
// they sit in ../shared/testdata/llamacpp/vocab beside the checkout, and
// tests that need them skip when they are absent.
package vocabtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Case is one test text and the ids llama.cpp expects for it (no BOS or
// EOS added, control tokens not parsed, user-defined tokens matched).
type Case struct {
	Text string
	IDs  []int32
}

// separator ends every text of a .inp file.
const separator = "\n__ggml_vocab_test__\n"

// Dir returns ../shared/testdata/llamacpp/vocab beside the module root,
// skipping t with a message when it is absent.
func Dir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(filepath.Dir(d), "shared", "testdata", "llamacpp", "vocab")
			if _, err := os.Stat(dir); err != nil {
				t.Skipf("llama.cpp's vocabulary tests are absent (%s): skipped", dir)
			}
			return dir
		}
		if filepath.Dir(d) == d {
			t.Skipf("no go.mod above %s: llama.cpp's vocabulary tests skipped", wd)
		}
	}
}

// Vocabs lists the GGUF files of dir that have test vectors.
func Vocabs(t testing.TB, dir string) []string {
	t.Helper()
	ggufs, err := filepath.Glob(filepath.Join(dir, "ggml-vocab-*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range ggufs {
		if _, err := os.Stat(g + ".inp"); err == nil {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatalf("%s holds no ggml-vocab-*.gguf with .inp/.out", dir)
	}
	return out
}

// Read parses path.inp and path.out.
func Read(path string) ([]Case, error) {
	inp, err := os.ReadFile(path + ".inp")
	if err != nil {
		return nil, err
	}
	out, err := os.ReadFile(path + ".out")
	if err != nil {
		return nil, err
	}
	// Each text runs to the next separator; the file ends with one.
	var texts []string
	for s := string(inp); s != ""; {
		i := strings.Index(s, separator)
		if i < 0 {
			texts = append(texts, s)
			break
		}
		texts = append(texts, s[:i])
		s = s[i+len(separator):]
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		return nil, fmt.Errorf("%s: %d texts but %d lines of ids", path, len(texts), len(lines))
	}
	cases := make([]Case, len(texts))
	for i, line := range lines {
		ids := []int32{}
		for _, f := range strings.Fields(line) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("%s.out line %d: %w", path, i+1, err)
			}
			ids = append(ids, int32(id))
		}
		cases[i] = Case{Text: texts[i], IDs: ids}
	}
	return cases, nil
}
