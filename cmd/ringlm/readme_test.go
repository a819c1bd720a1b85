package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"ringlm/synth"
)

// The README's figures, each checked against the file it points to or
// the code that produces it, so that the first page a user reads cannot
// drift from what the commands print.

const repoRoot = "../.."

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// figure is the first number captured by pattern in text, and the
// number of decimals it is written with.
func figure(t *testing.T, text, pattern string) (float64, int) {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no match for %q", pattern)
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	if err != nil {
		t.Fatalf("%q: %v", m[1], err)
	}
	dec := 0
	if i := strings.IndexByte(m[1], '.'); i >= 0 {
		dec = len(m[1]) - i - 1
	}
	return v, dec
}

// wantRounded checks that cited, written with dec decimals, is source
// rounded to those decimals; a negative dec rounds to tens (-1),
// thousands (-3) and so on, for "about 33,000".
func wantRounded(t *testing.T, what string, cited float64, dec int, source float64) {
	t.Helper()
	p := math.Pow(10, float64(dec))
	if math.Round(source*p) != math.Round(cited*p) {
		t.Errorf("%s: the README says %.*f, the source says %g", what, max(dec, 0), cited, source)
	}
}

// readmePerplexity is the README's perplexity claim, its command, and the
// RESULTS row that records the command's output.
func readmePerplexity(t *testing.T) (cited float64, dec int, cmd string, recorded float64) {
	readme, results := readRepoFile(t, "README.md"), readRepoFile(t, "bench/RESULTS.md")
	cited, dec = figure(t, readme, `perplexity on\s+testdata/gocoder/heldout\.txt[^.]*?,\s+is (\d+\.\d+)`)
	cmd = regexp.MustCompile(`(?m)^bin/ringlm perplexity [^\n#]*`).FindString(readme)
	cmd = strings.TrimSpace(cmd)
	if cmd == "" {
		t.Fatal("no perplexity command in the README")
	}
	var row string
	for _, line := range strings.Split(results, "\n") {
		if strings.HasPrefix(line, "|") && strings.Contains(line, "`"+cmd+"`") {
			row = line
			break
		}
	}
	if row == "" {
		t.Fatalf("bench/RESULTS.md has no row with the README's command `%s`", cmd)
	}
	recorded, _ = figure(t, row, `PPL (\d+\.\d+)`)
	wantRounded(t, "held-out perplexity (bench/RESULTS.md)", cited, dec, recorded)
	return cited, dec, cmd, recorded
}

func TestReadmeFigures(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	readmePerplexity(t)

	// The training run's figures: tools/train/gocoder/train.json.
	var train struct {
		HeldoutPPL  float64 `json:"heldout_ppl"`
		TrainS      float64 `json:"train_s"`
		TokenizerS  float64 `json:"tokenizer_s"`
		Vocab       int     `json:"vocab"`
		Params      int64   `json:"params"`
		HeldoutToks int     `json:"heldout_tokens"`
	}
	if err := json.Unmarshal([]byte(readRepoFile(t, "tools/train/gocoder/train.json")), &train); err != nil {
		t.Fatal(err)
	}
	v, dec := figure(t, readme, `the training run measured\s+(\d+\.\d+)`)
	wantRounded(t, "the training run's held-out perplexity (train.json)", v, dec, train.HeldoutPPL)
	v, _ = figure(t, readme, `about (\d+)\s+minutes on one H100`)
	wantRounded(t, "training minutes (train.json: tokenizer + training)", v, 0, (train.TrainS+train.TokenizerS)/60)
	v, _ = figure(t, readme, `a (\d+(?:,\d+)?)-token byte-level BPE vocabulary`)
	wantRounded(t, "vocabulary (train.json)", v, 0, float64(train.Vocab))

	// The embedded file: its size and parameter count.
	st, err := os.Stat(filepath.Join(repoRoot, "models", "gocoder-q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	v, dec = figure(t, readme, `\(Q8_0, (\d+\.\d+) MiB\)`)
	wantRounded(t, "the built-in model's size", v, dec, float64(st.Size())/(1<<20))
	code, out, _ := runCmd(t, "show", "--json")
	var s struct{ Params int64 }
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
		t.Fatalf("show --json: %d %v", code, err)
	}
	v, _ = figure(t, readme, `a (\d+)M-parameter\s+Llama`)
	wantRounded(t, "the built-in model's parameters (millions)", v, 0, float64(s.Params)/1e6)
	if s.Params != train.Params {
		t.Errorf("the embedded file has %d parameters, the training run %d", s.Params, train.Params)
	}

	// The GPU figures: bench/RESULTS.md, the run where issues 15 and 17 end.
	results := readRepoFile(t, "bench/RESULTS.md")
	v, dec = figure(t, readme, `decodes a 1B BF16 model at (\d+\.\d+) ms per token\s+alone`)
	src, _ := figure(t, results, `batch 1 \*\*(\d+\.\d+) ms a step\*\*`)
	wantRounded(t, "1B decode ms/token (bench/RESULTS.md)", v, dec, src)
	v, _ = figure(t, readme, `at about (\d+,\d+) tokens/s at batch 256`)
	src, _ = figure(t, results, `batch 256 \*\*(\d+,\d+) tok/s\*\*`)
	wantRounded(t, "1B decode tok/s at batch 256 (bench/RESULTS.md)", v, -3, src)
	v, _ = figure(t, readme, `gives about (\d+,\d+) output\s+tokens/s to 256 concurrent clients`)
	src, _ = figure(t, results, `concurrency 256 \*\*(\d+,\d+) out tok/s\*\*`)
	wantRounded(t, "ringlm serve out tok/s at concurrency 256 (bench/RESULTS.md)", v, -2, src)

	// The synth examples' parameter counts and size.
	tiny, err := synth.Lookup("tiny", "qwen2")
	if err != nil {
		t.Fatal(err)
	}
	v, _ = figure(t, readme, `-o tiny-qwen2\.gguf\s+# ~(\d+)M params`)
	wantRounded(t, "tiny qwen2 parameters (millions)", v, 0, float64(tiny.Params(512))/1e6)
	l1b, err := synth.Lookup("llama-3.2-1b", "")
	if err != nil {
		t.Fatal(err)
	}
	n := float64(l1b.Params(l1b.Vocab))
	v, dec = figure(t, readme, `-o l1b\.gguf\s+# (\d+\.\d+)B params`)
	wantRounded(t, "llama-3.2-1b parameters (billions)", v, dec, n/1e9)
	v, dec = figure(t, readme, `-o l1b\.gguf\s+# [^,]+, (\d+\.\d+) GiB`)
	wantRounded(t, "llama-3.2-1b BF16 size (2 bytes a parameter)", v, dec, 2*n/(1<<30))
}

// The README's perplexity command, run as a user runs it (a binary built
// without the race detector, which would make it take minutes), prints
// the figure bench/RESULTS.md records and the README cites.
func TestReadmePerplexityCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ringlm and scores 22 chunks (about 10 s)")
	}
	cited, dec, cmd, recorded := readmePerplexity(t)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build ringlm with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "ringlm")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/ringlm")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	args := strings.Fields(cmd)[1:] // the README runs bin/ringlm after make build
	run := exec.Command(bin, args...)
	run.Dir = repoRoot
	out, err := run.Output()
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	m := regexp.MustCompile(`Final estimate: PPL = (\d+\.\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s printed no final estimate:\n%s", cmd, out)
	}
	got, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("%s: PPL %s (bench/RESULTS.md: %.4f, README: %.*f)", cmd, m[1], recorded, dec, cited)
	// Exact on amd64; other architectures may fuse multiply-adds and move
	// the last digit.
	if math.Abs(got-recorded) > 2e-4*recorded {
		t.Errorf("%s prints PPL %s; bench/RESULTS.md records %.4f", cmd, m[1], recorded)
	}
	wantRounded(t, fmt.Sprintf("the perplexity %s prints", cmd), cited, dec, got)
}
