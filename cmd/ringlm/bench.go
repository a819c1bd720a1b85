package main

import (
	"fmt"
	"io"

	"ringlm/bench"
)

// benchCommands are the subcommands of `ringlm bench`; each prints its own
// messages and returns an exit status.
var benchCommands = []struct {
	name, summary string
	main          func(args []string, stdout, stderr io.Writer) int
}{
	{"serve", "load an OpenAI-compatible HTTP server (ringlm, vLLM, llama-server, Ollama) and report TTFT, TPOT, ITL, E2EL, throughput", bench.ServeMain},
	{"engine", "benchmark the engine in process, without HTTP", bench.EngineMain},
	{"report", "render result files as one HTML page (CDFs, throughput vs concurrency, TTFT vs rate)", bench.ReportMain},
}

func benchUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: ringlm bench <serve|engine|report> [flags]")
	fmt.Fprintln(w, "\nsubcommands:")
	for _, c := range benchCommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'ringlm bench <subcommand> -h' for its flags.")
}

// benchExit is a subcommand's non-zero exit status; the subcommand has
// already said why on stderr.
type benchExit struct {
	sub  string
	code int
}

// ExitCode is the subcommand's status, which the binary exits with.
func (e benchExit) ExitCode() int { return e.code }

func (e benchExit) Error() string {
	if e.code == 130 {
		return e.sub + " was interrupted"
	}
	return fmt.Sprintf("%s failed (exit status %d)", e.sub, e.code)
}

func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("a subcommand is required: serve, engine or report")
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		benchUsage(stdout)
		return nil
	}
	for _, c := range benchCommands {
		if c.name != args[0] {
			continue
		}
		switch code := c.main(args[1:], stdout, stderr); code {
		case 0:
			return nil
		case 2: // it has printed its one line
			return subUsageError{"bench " + c.name}
		default:
			return benchExit{c.name, code}
		}
	}
	return usagef("unknown subcommand %q: serve, engine or report", args[0])
}
