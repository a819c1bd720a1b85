package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/synth"
)

// TestMain lets a test re-run this binary as `ringlm` in a child process
// (RINGLM_TEST_MAIN=1), to check behaviour across processes.
func TestMain(m *testing.M) {
	if os.Getenv("RINGLM_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	// The same device, and outputs, with or without a GPU (device_test.go
	// covers the others); RINGLM_DEVICE=cuda runs these tests on the GPU.
	if os.Getenv("RINGLM_DEVICE") == "" {
		os.Setenv("RINGLM_DEVICE", "cpu")
	}
	// The servers the tests start register here, not where the user's
	// `ringlm ps` would list them.
	rt, err := os.MkdirTemp("", "ringlm-cmd-runtime")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("RINGLM_RUNTIME_DIR", rt)
	code := m.Run()
	testmodel.Cleanup()
	os.RemoveAll(rt)
	os.Exit(code)
}

var (
	modelOnce sync.Once
	modelPath string
	modelErr  string
)

// testModel is a tiny llama with the real Mistral vocabulary.
func testModel(t *testing.T) string {
	t.Helper()
	modelOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ringlm-cmd-test")
		if err != nil {
			modelErr = err.Error()
			return
		}
		modelPath = filepath.Join(dir, "tiny.gguf")
		var o, e strings.Builder
		if code := run([]string{"synth", "--arch", "llama", "--tokenizer", "../../testdata/tokenizer/mistral.gguf.gz", "-o", modelPath}, &o, &e); code != 0 {
			modelErr = e.String()
		}
	})
	if modelErr != "" {
		t.Fatal(modelErr)
	}
	return modelPath
}

func child(t *testing.T, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RINGLM_TEST_MAIN=1")
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("ringlm %v: %v\n%s", args, err, e.String())
	}
	return o.String(), e.String()
}

// The same seed gives the same text in separate processes; another seed
// gives other text; greedy ignores the seed.
func TestRunDeterministicAcrossProcesses(t *testing.T) {
	m := testModel(t)
	args := func(seed string, extra ...string) []string {
		return append([]string{"run", "-m", m, "-p", "Once upon a time", "-n", "24", "--seed", seed}, extra...)
	}
	a, stats := child(t, args("7")...)
	b, _ := child(t, args("7")...)
	c, _ := child(t, args("8")...)
	if a != b || strings.TrimSpace(a) == "" {
		t.Fatalf("same seed, different text:\n%q\n%q", a, b)
	}
	if a == c {
		t.Fatalf("seeds 7 and 8 gave the same text %q", a)
	}
	if !strings.Contains(stats, "prompt eval") || !strings.Contains(stats, "tokens per second") {
		t.Fatalf("no speed report: %q", stats)
	}
	g1, _ := child(t, args("1", "--temp", "0")...)
	g2, _ := child(t, args("2", "--temp", "0")...)
	if g1 != g2 {
		t.Fatal("greedy output depends on the seed")
	}
}

// With no -m, run uses the built-in model (package models): a Go-code
// completer, deterministic under greedy decoding.
func TestRunBuiltinModel(t *testing.T) {
	args := []string{"run", "-p", "package main\n\nimport \"fmt\"\n\nfunc main() {\n", "-n", "24", "--temp", "0"}
	a, stats := child(t, args...)
	b, _ := child(t, args...)
	if a != b || strings.TrimSpace(a) == "" {
		t.Fatalf("greedy output differs or is empty:\n%q\n%q", a, b)
	}
	if !strings.Contains(a, "fmt.") {
		t.Errorf("no Go-looking continuation: %q", a)
	}
	if !strings.Contains(stats, "tokens per second") {
		t.Fatalf("no speed report: %q", stats)
	}
}

func TestRunErrors(t *testing.T) {
	m := testModel(t)
	odd := modelWithTemplate(t, "{% for %}") // neither parses nor shows a known format
	cases := map[string][]string{
		"unrecognised chat template": {"run", "-m", odd, "-p", "hi", "--chat"},
		"bad chat template file":     {"run", "-m", m, "-p", "hi", "--chat", "--chat-template-file", filepath.Join(t.TempDir(), "none.jinja")},
		"bad template":               {"run", "-m", m, "-p", "hi", "--chat", "--template", "alpaca"},
		"bad chat template":          {"run", "-m", m, "-p", "hi", "--chat", "--chat-template", "alpaca"},
		"bad temperature":            {"run", "-m", m, "-p", "hi", "--temp", "-1"},
		"missing model":              {"run", "-m", filepath.Join(t.TempDir(), "none.gguf"), "-p", "hi"},
		"bad kv type":                {"run", "-m", m, "-p", "hi", "--kv-type", "q4_0"},
		"prompt over the context":    {"run", "-p", strings.Repeat("fmt.Println(x)\n", 400)},
	}
	for name, args := range cases {
		code, _, e := runCmd(t, args...)
		// One line; a usage error (status 2) adds the pointer to -h.
		if lines := strings.Count(e, "\n"); code == 0 || lines != 1 && !(code == 2 && lines == 2) {
			t.Errorf("%s: code %d, stderr %q", name, code, e)
		}
		// Errors about templates name the flag that picks one.
		if strings.Contains(name, "template") && !strings.Contains(e, "--chat-template") {
			t.Errorf("%s: the error does not name --chat-template: %q", name, e)
		}
	}
	// An unknown architecture names the supported ones.
	w := gguf.NewWriter()
	w.Set("general.architecture", gguf.String("mamba"))
	for _, k := range []string{"context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count"} {
		w.Set("mamba."+k, gguf.Uint32(64))
	}
	p := filepath.Join(t.TempDir(), "mamba.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	code, _, e := runCmd(t, "run", "-m", p, "-p", "hi")
	if code == 0 || !strings.Contains(e, "unsupported architecture \"mamba\"") || !strings.Contains(e, "llama, phi3, qwen2") {
		t.Errorf("unknown arch: %d %q", code, e)
	}
}

func TestRunChat(t *testing.T) {
	m := testModel(t)
	code, out, e := runCmd(t, "run", "-m", m, "-p", "hi", "--chat", "--chat-template", "mistral", "-n", "4", "--temp", "0")
	if code != 0 || out == "" || strings.Contains(e, "ChatML") {
		t.Fatalf("chat run: %d %q %q", code, out, e)
	}
	// No template in the file (the test model, the built-in one): ChatML,
	// said once.
	for _, args := range [][]string{{"-m", m}, {}} {
		args = append(args, "-p", "hi", "--chat", "-n", "4", "--temp", "0")
		code, out, e = runCmd(t, append([]string{"run"}, args...)...)
		if code != 0 || out == "" || strings.Count(e, "no chat template; using ChatML (--chat-template picks another)") != 1 {
			t.Errorf("run %v: %d %q %q", args, code, out, e)
		}
	}
}

// modelWithTemplate is the tiny llama with synth's vocabulary and the
// given chat template.
func modelWithTemplate(t *testing.T, jinja string) string {
	t.Helper()
	shape, err := synth.Lookup("tiny", "llama")
	if err != nil {
		t.Fatal(err)
	}
	w, err := synth.Build(synth.Options{Shape: shape, Type: gguf.TypeF16, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	w.Set("tokenizer.chat_template", gguf.String(jinja))
	p := filepath.Join(t.TempDir(), "templated.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// -n beyond the context generates up to its end and says so in one line.
func TestRunToContextEnd(t *testing.T) {
	code, out, e := runCmd(t, "run", "-p", "func main() {", "-n", "100000", "--temp", "0", "--ignore-eos")
	if code != 0 || strings.TrimSpace(out) == "" {
		t.Fatalf("run -n 100000: %d %q %q", code, out, e)
	}
	if n := strings.Count(e, "(output stopped at the model's context length of 512 tokens: "); n != 1 {
		t.Errorf("want one line saying the output stopped at the context length, got %d:\n%s", n, e)
	}
	if !strings.Contains(e, "finish reason = length") {
		t.Errorf("finish reason: %s", e)
	}
	// Within the context: no such line.
	if code, _, e := runCmd(t, "run", "-p", "func main() {", "-n", "8", "--temp", "0"); code != 0 || strings.Contains(e, "output stopped") {
		t.Errorf("-n 8: %d %q", code, e)
	}
}
