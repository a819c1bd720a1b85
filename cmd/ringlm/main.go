// Command ringlm is the one binary of the ringlm inference engine. Its
// subcommands are the commands table in main.go, one file each: synth,
// show, tokenize, run, serve, ps, pull, list, rm, bench (serve, engine,
// report), perplexity, quantize and version; run, serve, bench engine and
// perplexity load their model through package runner, and run, serve, show
// and tokenize use the built-in model when no -m or file is given. run,
// serve and show also take a model by name (models.go): an existing file
// first, then hf.co/... (pull/hf, the Hugging Face cache), then an Ollama
// name (pull/ollama, the Ollama-layout store); run and serve pull a name
// on first use unless --offline, and an Ollama model's template and params
// become its chat template and sampling defaults. pull downloads a name,
// list and rm read and prune both caches. run with no -p and a
// terminal on stdin opens a chat (repl.go). serve registers itself in a
// runtime directory while it runs, and ps asks every registered server
// for its loaded models (ps.go). Flags may follow positional
// arguments. Errors print as one line, `ringlm <cmd>: <error>`, with exit
// status 1; a usage error (a bad flag or value) is that line and a
// pointer to `ringlm <cmd> -h`, with status 2, and -h prints the usage
// on stdout (package internal/cli). Nothing a user or a file supplies can
// cause a panic.
//
// Signals: ^C or SIGTERM stops run's generation, which then prints its
// stats and exits 128 + the signal (130 for ^C); in run's chat, ^C stops
// the answer only. serve drains on the first and exits at once on the
// second.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"ringlm/internal/cli"
)

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"synth":      {"write a synthetic GGUF model (real architecture shapes, seeded random weights)", runSynth},
	"run":        {"generate text from a prompt (CPU or CUDA GPU), streaming it as it is sampled", runRun},
	"tokenize":   {"print the token ids and pieces of a text (or --jsonl for scripts)", runTokenize},
	"show":       {"print a GGUF file's (or a pulled model's) metadata, tensors and parameter count", runShow},
	"pull":       {"download a model by name from the Hugging Face Hub (hf.co/...) or an Ollama registry (llama3.2)", runPull},
	"list":       {"list the pulled models: the Hugging Face cache's GGUF files and the Ollama-layout store's models", runList},
	"rm":         {"delete pulled models (blobs another model uses stay)", runRm},
	"serve":      {"serve the OpenAI-compatible and native HTTP API, one model or several by name (see serve -h)", runServe},
	"ps":         {"list the models loaded by the running serve processes on this machine", runPs},
	"bench":      {"benchmark a server (bench serve), the engine (bench engine) or render results (bench report)", runBench},
	"perplexity": {"perplexity of a model on a text file, computed as llama.cpp's llama-perplexity", runPerplexity},
	"quantize":   {"convert a GGUF model's weights to Q4_K_M, Q8_0, ... as llama.cpp's llama-quantize does", runQuantize},
	"version":    {"print the version, the commit it was built from, the Go version, and whether the CUDA device loads", runVersion},
}

func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ringlm <command> [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'ringlm <command> -h' for a command's flags.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status. Errors are
// printed as one line: no stack traces for bad input. A usage error (a
// bad flag or value, a missing argument) is followed by a pointer to the
// command's -h, with status 2, and no usage dump.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		usage(stdout)
		return 0
	case "--version", "-version":
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ringlm: unknown command %q (%s)\nRun 'ringlm -h' for usage.\n", args[0], strings.Join(commandNames(), ", "))
		return 2
	}
	if err := c.run(args[1:], stdout, stderr); err != nil {
		var he helpRequest
		if errors.As(err, &he) {
			cli.PrintUsage(he.fs, stdout)
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "ringlm %s: %s\nRun 'ringlm %s -h' for usage.\n", args[0], oneLine(ue.msg), args[0])
			return 2
		}
		var se subUsageError
		if errors.As(err, &se) {
			fmt.Fprintf(stderr, "Run 'ringlm %s -h' for usage.\n", se.cmd)
			return 2
		}
		fmt.Fprintf(stderr, "ringlm %s: %s\n", args[0], oneLine(err.Error()))
		var ec interface{ ExitCode() int }
		if errors.As(err, &ec) {
			return ec.ExitCode() // a subcommand's own status (bench serve: 130 when interrupted)
		}
		return 1
	}
	return 0
}

// usageError is bad usage of a command (a bad flag or value, a missing
// argument): exit status 2 and a pointer to its -h.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// subUsageError is bad usage that a subcommand has already reported in
// its own line (bench serve, engine, report): only the pointer to its -h
// is left to print.
type subUsageError struct{ cmd string }

func (s subUsageError) Error() string { return "usage: ringlm " + s.cmd }

// helpRequest is -h or --help: fs's usage goes to stdout, status 0.
type helpRequest struct{ fs *flag.FlagSet }

func (helpRequest) Error() string { return flag.ErrHelp.Error() }

func (helpRequest) Is(target error) bool { return target == flag.ErrHelp }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// parseFlags parses flags that may come before or after positional
// arguments (ringlm show FILE --json) and returns the positionals. Its
// errors are a helpRequest or a usageError, which run reports.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := cli.Parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, helpRequest{fs}
	case err != nil:
		return nil, usageError{err.Error()}
	}
	return pos, nil
}

// newFlagSet returns a command's flag set; it prints nothing itself
// (parseFlags and run do), and its usage is the synopsis and the flags.
func newFlagSet(name, synopsis string) *flag.FlagSet {
	return cli.NewFlagSet(name, func(fs *flag.FlagSet, w io.Writer) {
		fmt.Fprintf(w, "usage: ringlm %s\n", synopsis)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprint(w, "\nflags:\n")
			fs.PrintDefaults()
		}
	})
}
