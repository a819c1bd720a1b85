// Package cli is the flag handling that every ringlm subcommand shares, so
// that they all answer the same way: a bad flag or value is one line on
// stderr naming the command and the error, followed by a pointer to -h,
// with exit status 2; -h prints the usage on stdout with status 0. The
// flag package on its own prints the error, then the whole usage, and
// leaves the caller to print the error again.
//
// It parses and prints; the caller owns the wording of its messages and
// its exit status (cmd/ringlm prints the pointer line for every command).
package cli

import (
	"errors"
	"flag"
	"io"
)

// NewFlagSet returns a flag set that prints nothing while parsing: Parse
// returns its errors for the caller to report once, and the usage is
// written only on request (PrintUsage). usage writes the synopsis and
// the flags (PrintDefaults goes to fs.Output()) to the writer it is
// given.
func NewFlagSet(name string, usage func(fs *flag.FlagSet, w io.Writer)) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() { usage(fs, fs.Output()) }
	return fs
}

// Quiet makes a flag set built elsewhere print nothing while parsing,
// as NewFlagSet's do; its Usage must write to fs.Output().
func Quiet(fs *flag.FlagSet) *flag.FlagSet {
	fs.SetOutput(io.Discard)
	return fs
}

// PrintUsage writes fs's usage (fs.Usage, with fs's output pointed at w
// for the time of the call) to w.
func PrintUsage(fs *flag.FlagSet, w io.Writer) {
	fs.SetOutput(w)
	defer fs.SetOutput(io.Discard)
	fs.Usage()
}

// Parse parses args into fs and returns the positional arguments: flags
// may come before or after them (ringlm show FILE --json), and "--" ends
// the flags. It returns flag.ErrHelp for -h and --help, and the flag
// package's error (unknown flag, bad value, missing value) otherwise;
// fs must print nothing itself (NewFlagSet, Quiet).
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp
			}
			return nil, err
		}
		rest := fs.Args()
		// fs.Parse consumes a "--" and stops after it: all that follows
		// is positional, even what looks like a flag. (A flag whose
		// value is "--" reads the same; such a value is taken as the
		// terminator's, which costs nothing when no flag follows.)
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
