// Command ringlm is the one binary of the ringlm inference engine. Its
// subcommands are the commands table in main.go, one file each: synth,
// show, tokenize, run, serve, bench (serve, engine, report) and
// perplexity; run, serve, bench engine and perplexity load their model
// through package runner. run with no -p and a terminal on stdin opens a
// chat (repl.go). Flags may follow positional arguments. Errors print as
// one line, `ringlm <cmd>: <error>`, with exit status 1 (2 for usage
// errors); nothing a user or a file supplies can cause a panic.
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
)

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"synth":      {"write a synthetic GGUF model (real architecture shapes, seeded random weights)", runSynth},
	"run":        {"generate text from a prompt (CPU or CUDA GPU), streaming it as it is sampled", runRun},
	"tokenize":   {"print the token ids and pieces of a text (or --jsonl for scripts)", runTokenize},
	"show":       {"print a GGUF file's metadata, tensors and parameter count", runShow},
	"serve":      {"serve the OpenAI-compatible and native HTTP API (see serve -h)", runServe},
	"bench":      {"benchmark a server (bench serve), the engine (bench engine) or render results (bench report)", runBench},
	"perplexity": {"perplexity of a model on a text file, computed as llama.cpp's llama-perplexity", runPerplexity},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ringlm <command> [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'ringlm <command> -h' for a command's flags.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status. Errors are
// printed as one line: no stack traces for bad input.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ringlm: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err := c.run(args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "ringlm %s: %s\n", args[0], ue.msg)
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

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// parseFlags parses flags that may come before or after positional
// arguments (ringlm show FILE --json) and returns the positionals.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ringlm %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}
