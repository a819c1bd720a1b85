package main

import (
	"encoding/json"
	"errors"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
)

// benchSubcommands are the commands under `ringlm bench`, each with its
// own flags.
func benchSubcommands() []string {
	var out []string
	for _, c := range benchCommands {
		out = append(out, "bench "+c.name)
	}
	return out
}

// allCommands is every command line that parses flags: the commands
// table and bench's subcommands, so that a new command is covered.
func allCommands() []string {
	var out []string
	for n := range commands {
		if n != "bench" { // bench itself only dispatches
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return append(out, benchSubcommands()...)
}

// wantUsageError checks the whole of a usage error's output: one line
// naming the command and the error, the pointer to -h, nothing on stdout.
func wantUsageError(t *testing.T, cmd string, args []string, want string) {
	t.Helper()
	code, out, errOut := runCmd(t, append(strings.Fields(cmd), args...)...)
	wantErr := "ringlm " + cmd + ": "
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if code != 2 || out != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], wantErr) || !strings.Contains(lines[0], want) ||
		lines[1] != "Run 'ringlm "+cmd+" -h' for usage." {
		t.Errorf("ringlm %s %q: exit %d, stdout %q, stderr %q; want 2, nothing, and %q%s… then the pointer to -h",
			cmd, args, code, out, errOut, wantErr, want)
	}
}

// Every command answers an unknown flag, and a bad value, with exactly
// one line and a pointer to its -h (the flag package alone prints the
// error, the whole usage, and the error again).
func TestFlagErrorsAreOneLine(t *testing.T) {
	for _, cmd := range allCommands() {
		wantUsageError(t, cmd, []string{"--bogus"}, "flag provided but not defined: -bogus")
		if cmd != "bench serve" { // takes no positional arguments, so stops there
			wantUsageError(t, cmd, []string{"some-arg", "--bogus=1"}, "flag provided but not defined: -bogus")
		}
	}
	for cmd, args := range map[string][]string{
		"run":          {"-n", "many"},
		"show":         {"--json=maybe"},
		"tokenize":     {"--jsonl=maybe"},
		"serve":        {"--port", "http"},
		"ps":           {"--json=maybe"},
		"pull":         {"--insecure=maybe"},
		"list":         {"--json=maybe"},
		"synth":        {"--seed", "x"},
		"perplexity":   {"--ctx", "1k"},
		"quantize":     {"--threads", "many"},
		"bench serve":  {"--concurrency", "x"},
		"bench engine": {"--steps", "x"},
		"bench report": {"--log-x=maybe"},
	} {
		wantUsageError(t, cmd, args, "invalid")
	}
	// Usage errors found after parsing read the same.
	wantUsageError(t, "show", []string{"a.gguf", "b.gguf"}, "expected one GGUF file, got 2 arguments")
	wantUsageError(t, "perplexity", []string{"--text", "x"}, "-m FILE is required")
	wantUsageError(t, "bench", []string{"nope"}, `unknown subcommand "nope"`)
	wantUsageError(t, "bench", nil, "a subcommand is required")

	code, out, errOut := runCmd(t, "nope")
	if code != 2 || out != "" || errOut != "ringlm: unknown command \"nope\" (bench, list, perplexity, ps, pull, quantize, rm, run, serve, show, synth, tokenize, version)\nRun 'ringlm -h' for usage.\n" {
		t.Errorf("unknown command: exit %d, %q %q", code, out, errOut)
	}
}

// -h and --help print the usage on stdout and exit 0, for every command.
func TestHelpOnStdout(t *testing.T) {
	for _, cmd := range allCommands() {
		if cmd == "bench serve" {
			continue // prints its usage on stderr (bench/serve.go, its own flag handling)
		}
		for _, h := range []string{"-h", "--help"} {
			code, out, errOut := runCmd(t, append(strings.Fields(cmd), h)...)
			if code != 0 || !strings.HasPrefix(out, "usage: ringlm "+cmd) || errOut != "" {
				t.Errorf("ringlm %s %s: exit %d, stdout %.60q, stderr %q; want 0 and the usage on stdout", cmd, h, code, out, errOut)
			}
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"bench", "-h"}} {
		if code, out, errOut := runCmd(t, args...); code != 0 || !strings.HasPrefix(out, "usage: ringlm") || errOut != "" {
			t.Errorf("ringlm %q: exit %d, %.60q %q", args, code, out, errOut)
		}
	}
}

// `show` with no file shows the built-in model, as `run` and `serve`
// run it.
func TestShowBuiltin(t *testing.T) {
	code, out, errOut := runCmd(t, "show")
	if code != 0 || !strings.HasPrefix(out, "file                 gocoder-q8_0.gguf (5.2 MiB, built into ringlm,") ||
		!strings.Contains(out, "architecture         llama") || !strings.Contains(out, "5.0M (4984064)") {
		t.Fatalf("show: exit %d, stderr %q\n%s", code, errOut, out)
	}
	code, out, _ = runCmd(t, "show", "--json")
	var s struct {
		File    string
		BuiltIn bool `json:"builtin"`
		Params  uint64
		Hparams struct {
			Architecture  string `json:"architecture"`
			ContextLength int    `json:"context_length"`
			VocabSize     int    `json:"vocab_size"`
		}
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
		t.Fatalf("show --json: exit %d, %v", code, err)
	}
	if s.File != "gocoder-q8_0.gguf" || !s.BuiltIn || s.Params != 4984064 || s.Hparams.Architecture != "llama" ||
		s.Hparams.ContextLength != 512 || s.Hparams.VocabSize != 4096 {
		t.Fatalf("show --json of the built-in model: %+v", s)
	}
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Every key of show --json is snake_case, as llama.cpp's and Ollama's
// JSON are, except the metadata's, which are the file's own GGUF keys.
func TestShowJSONKeysSnakeCase(t *testing.T) {
	code, out, _ := runCmd(t, "show", "--json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	var bad []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if path == ".metadata" {
					walk(path+"[key]", e) // a GGUF key name: data, not a field
					continue
				}
				if !snakeCase.MatchString(k) {
					bad = append(bad, path+"."+k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		}
	}
	walk("", doc)
	for _, k := range []string{"hparams", "tensors", "metadata", "data_offset", "tensor_bytes"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("no %q key", k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("keys not in snake_case: %v", bad)
	}
}

// `tokenize` with no -m uses the built-in model's vocabulary.
func TestTokenizeBuiltin(t *testing.T) {
	code, out, errOut := runCmd(t, "tokenize", "func main() {")
	if code != 0 || !strings.Contains(out, `" main"`) || !strings.HasSuffix(out, "4 tokens\n") {
		t.Fatalf("tokenize: exit %d, %q %q", code, out, errOut)
	}
	var stdout, stderr strings.Builder
	if err := tokenizeWith(strings.NewReader(`{"text": "package main"}`+"\n"), []string{"--jsonl"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != `{"ids":[933,2240]}`+"\n" {
		t.Fatalf("--jsonl: %q", stdout.String())
	}
}

func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "ringlm", Version: "v0.0.0-20261124054200-5e8232e1c7d8+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "5e8232e1c7d8aa"},
			{Key: "vcs.time", Value: "2026-11-24T05:42:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	var w strings.Builder
	writeVersion(&w, bi, nil, "/opt/ringlm/libringlm_cuda.so", 1)
	want := "ringlm v0.0.0-20261124054200-5e8232e1c7d8+dirty\n" +
		"commit: 5e8232e1c7d8aa (2026-11-24T05:42:00Z, with uncommitted changes)\n" +
		"go: go1.26.8 "
	if got := w.String(); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "\ncuda: available (/opt/ringlm/libringlm_cuda.so, 1 device)\n") {
		t.Errorf("got\n%s\nwant it to start\n%s", got, want)
	}
	w.Reset()
	writeVersion(&w, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, errors.New("cuda: libringlm_cuda.so not found (tried a, b);\n`make cuda` builds it"), "", 0)
	if got := w.String(); !strings.HasPrefix(got, "ringlm (devel)\ncommit: unknown (") ||
		!strings.HasSuffix(got, "\ncuda: not available: libringlm_cuda.so not found (tried a, b); `make cuda` builds it\n") {
		t.Errorf("without vcs or cuda:\n%s", got)
	}

	// The command itself, on this machine: four lines, whatever the GPU.
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCmd(t, args...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if code != 0 || errOut != "" || len(lines) != 4 || !strings.HasPrefix(lines[0], "ringlm ") || !strings.HasPrefix(lines[1], "commit: ") ||
			!strings.HasPrefix(lines[2], "go: go1.") || !strings.HasPrefix(lines[3], "cuda: ") {
			t.Errorf("ringlm %v: exit %d, stderr %q\n%s", args, code, errOut, out)
		}
	}
}
