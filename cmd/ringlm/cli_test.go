package main

import (
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
		"synth":        {"--seed", "x"},
		"perplexity":   {"--ctx", "1k"},
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
	if code != 2 || out != "" || errOut != "ringlm: unknown command \"nope\" (bench, perplexity, run, serve, show, synth, tokenize)\nRun 'ringlm -h' for usage.\n" {
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
