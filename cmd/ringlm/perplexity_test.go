package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"ringlm/eval"
	"ringlm/gguf"
)

const pplSentence = "The quick brown fox jumps over the lazy dog. Once upon a time, there was a ring buffer.\n"

func pplText(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "text.txt")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// libraryPerplexity computes what the command should print, through eval.
func libraryPerplexity(t *testing.T, path, text string, o eval.Options) *eval.Result {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, tok, err := eval.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	toks := eval.Tokenize(tok, text, &o)
	res, err := eval.Perplexity(context.Background(), m, toks, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The running values and the final line as llama-perplexity prints them,
// equal to eval.Perplexity on the same tokens (F16 KV, BOS per chunk).
func TestPerplexityCommand(t *testing.T) {
	m := testModel(t)
	text := strings.Repeat(pplSentence, 8) // ~180 tokens: 5 chunks of 32
	path := pplText(t, text)
	code, out, errOut := runCmd(t, "perplexity", "-m", m, "--text", path, "--ctx", "32")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	want := libraryPerplexity(t, m, text, eval.Options{Ctx: 32, KVType: gguf.TypeF16})
	if want.Chunks < 3 {
		t.Fatalf("only %d chunks", want.Chunks)
	}
	var line strings.Builder
	for i, r := range want.Running {
		fmt.Fprintf(&line, "[%d]%.4f,", i+1, r)
	}
	wantOut := fmt.Sprintf("%s\nFinal estimate: PPL = %.4f +/- %.5f\n", line.String(), want.PPL, want.Uncertainty)
	if out != wantOut {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, wantOut)
	}
	if !regexp.MustCompile(`^(\[\d+\]\d+\.\d{4},)+\nFinal estimate: PPL = \d+\.\d{4} \+/- \d+\.\d{5}\n$`).MatchString(out) {
		t.Fatalf("not llama.cpp's format:\n%s", out)
	}
	if !strings.Contains(errOut, fmt.Sprintf("calculating perplexity over %d chunks, n_ctx=32", want.Chunks)) {
		t.Fatalf("stderr:\n%s", errOut)
	}

	// -f (llama.cpp's name), --kv-type f32: the F32 numbers.
	code, out, errOut = runCmd(t, "perplexity", "-m", m, "-f", path, "--ctx", "32", "--kv-type", "f32", "--chunks", "2")
	want = libraryPerplexity(t, m, text, eval.Options{Ctx: 32, KVType: gguf.TypeF32, Chunks: 2})
	if code != 0 || !strings.HasSuffix(out, fmt.Sprintf("[2]%.4f,\nFinal estimate: PPL = %.4f +/- %.5f\n", want.Running[1], want.PPL, want.Uncertainty)) ||
		strings.Contains(out, "[3]") {
		t.Fatalf("code %d:\n%s%s", code, out, errOut)
	}
}

// --json is one object with the estimate, the counts and the running
// values; --chunks limits the chunks; "-" reads stdin.
func TestPerplexityJSON(t *testing.T) {
	m := testModel(t)
	text := strings.Repeat(pplSentence, 8)
	var o, e bytes.Buffer
	if err := perplexityWith(strings.NewReader(text), []string{"-m", m, "--text", "-", "--ctx", "32", "--chunks", "3", "--json"}, &o, &e); err != nil {
		t.Fatal(err)
	}
	var j struct {
		PPL          *float64
		Uncertainty  *float64
		MeanNLL      *float64 `json:"mean_nll"`
		Chunks       int
		NCtx         int `json:"n_ctx"`
		Tokens       int
		TokensScored int `json:"tokens_scored"`
		Running      []float64
		AddBOS       bool   `json:"add_bos"`
		KVType       string `json:"kv_type"`
	}
	if err := json.Unmarshal(o.Bytes(), &j); err != nil {
		t.Fatalf("%v:\n%s", err, o.String())
	}
	want := libraryPerplexity(t, m, text, eval.Options{Ctx: 32, KVType: gguf.TypeF16, Chunks: 3})
	if j.PPL == nil || j.Uncertainty == nil || j.MeanNLL == nil || *j.PPL != want.PPL || *j.Uncertainty != want.Uncertainty ||
		j.Chunks != 3 || j.NCtx != 32 || j.TokensScored != 3*15 || j.Tokens != want.Tokens || len(j.Running) != 3 ||
		j.Running[2] != *j.PPL || j.KVType != "f16" || !j.AddBOS {
		t.Fatalf("JSON %+v, library %+v", j, want)
	}
	if strings.Contains(o.String(), "Final estimate") {
		t.Fatal("--json printed the text lines too")
	}
}

// Bad inputs: one line on stderr, exit 1 (or 2 for usage), no panic.
func TestPerplexityErrors(t *testing.T) {
	m := testModel(t)
	long := pplText(t, strings.Repeat(pplSentence, 8))
	short := pplText(t, strings.Repeat(pplSentence, 2))
	empty := pplText(t, "")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--text", long}, 2, "-m FILE is required"},
		{[]string{"-m", m}, 2, "--text FILE is required"},
		{[]string{"-m", m, "--text", long, "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-m", m, "--text", long, "--ctx", "2"}, 2, "--ctx must be at least 4"},
		{[]string{"-m", m, "--text", long, "--chunks", "0"}, 2, "--chunks must be positive"},
		{[]string{"-m", m, "--text", long, "--kv-type", "q8"}, 2, "--kv-type must be f32 or f16"},
		{[]string{"-m", m, "--text", long, "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"-m", filepath.Join(t.TempDir(), "missing.gguf"), "--text", long}, 1, "no such file"},
		{[]string{"-m", long, "--text", long}, 1, "gguf"},
		{[]string{"-m", m, "--text", filepath.Join(t.TempDir(), "missing.txt")}, 1, "no such file"},
		{[]string{"-m", m, "--text", empty}, 1, "is empty"},
		{[]string{"-m", m, "--text", short, "--ctx", "32"}, 1, "you need at least 64 tokens to evaluate perplexity with a context of 32; " + short + " tokenizes to only"},
		{[]string{"-m", m, "--text", long}, 1, "you need at least 1024 tokens to evaluate perplexity with a context of 512"},
		{[]string{"-m", m, "--text", long, "--ctx", "4096"}, 1, "--ctx 4096 exceeds the model's context length of 2048"},
	} {
		code, out, errOut := runCmd(t, append([]string{"perplexity"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "goroutine") || strings.Contains(out, "Final") {
			t.Fatalf("%v: code %d (want %d)\nstderr: %s\nwant %q", c.args, code, c.code, errOut, c.want)
		}
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); c.code == 1 && !strings.HasPrefix(lines[len(lines)-1], "ringlm perplexity: ") {
			t.Fatalf("%v: last stderr line %q", c.args, lines[len(lines)-1])
		}
	}
	// Invalid UTF-8 is tokenized as the tokenizer handles it.
	bad := pplText(t, strings.Repeat("caf\xc3 \xff\xfe na\xefve text "+pplSentence, 8))
	code, out, errOut := runCmd(t, "perplexity", "-m", m, "--text", bad, "--ctx", "32", "--chunks", "2")
	if code != 0 || !strings.Contains(out, "Final estimate: PPL = ") {
		t.Fatalf("invalid UTF-8: code %d\n%s%s", code, out, errOut)
	}
	if _, err := strconv.ParseFloat(strings.Fields(out[strings.Index(out, "PPL = ")+6:])[0], 64); err != nil {
		t.Fatal(err)
	}
}
