package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

func newTestSet() (*flag.FlagSet, *bool, *int) {
	fs := NewFlagSet("t", func(fs *flag.FlagSet, w io.Writer) {
		fmt.Fprintln(w, "usage: t [flags] ARGS")
		fs.PrintDefaults()
	})
	return fs, fs.Bool("json", false, "print JSON"), fs.Int("n", 1, "count")
}

func TestParseInterspersed(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		json bool
		n    int
	}{
		{[]string{"a", "--json"}, []string{"a"}, true, 1},
		{[]string{"--json", "a", "-n", "3", "b"}, []string{"a", "b"}, true, 3},
		{[]string{"a", "--", "--json", "-n", "3"}, []string{"a", "--json", "-n", "3"}, false, 1},
		{[]string{"-n", "2", "--", "x", "--json"}, []string{"x", "--json"}, false, 2},
		{[]string{"--", "-"}, []string{"-"}, false, 1},
		{nil, nil, false, 1},
	} {
		fs, js, n := newTestSet()
		pos, err := Parse(fs, c.args)
		if err != nil || !slices.Equal(pos, c.pos) || *js != c.json || *n != c.n {
			t.Errorf("%q: pos %q json %v n %d err %v; want %q %v %d", c.args, pos, *js, *n, err, c.pos, c.json, c.n)
		}
	}
}

// A bad flag is an error to report, and the flag set printed nothing:
// no error line and no usage before the caller's own line.
func TestParseErrorsPrintNothing(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"a", "-n", "x"}, {"-n"}, {"--json=maybe"}} {
		fs, _, _ := newTestSet()
		var out strings.Builder
		fs.SetOutput(&out) // what the flag package would print to
		Quiet(fs)
		_, err := Parse(fs, args)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: err %v", args, err)
			continue
		}
		if strings.Contains(err.Error(), "\n") || out.Len() != 0 {
			t.Errorf("%q: error %q, printed %q", args, err, out.String())
		}
	}
}

func TestHelp(t *testing.T) {
	for _, h := range []string{"-h", "--help", "-help"} {
		fs, _, _ := newTestSet()
		if _, err := Parse(fs, []string{"a", h}); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s: %v", h, err)
		}
		var w strings.Builder
		PrintUsage(fs, &w)
		if !strings.HasPrefix(w.String(), "usage: t [flags] ARGS\n") || !strings.Contains(w.String(), "-json") {
			t.Fatalf("%s: usage %q", h, w.String())
		}
		if fs.Output() != io.Discard {
			t.Fatal("PrintUsage left the flag set printing")
		}
	}
}
