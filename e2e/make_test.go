// Package e2e holds the end-to-end tests (node --test e2e/, driven by
// run.sh against a real `ringlm serve`); this Go file tests how `make
// test` runs them: after every Go test, and only where node, npm and curl
// are installed.
package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// makeIn runs make in the repository root with PATH set to path only, so
// that node, npm and curl are there or not as the test decides.
func makeIn(t *testing.T, path string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	mk, lerr := exec.LookPath("make")
	if lerr != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.Command(mk, append([]string{"--no-print-directory"}, args...)...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PATH="+path, "MAKEFLAGS=", "MFLAGS=")
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// fakeTools is a PATH directory holding do-nothing node, npm and curl
// scripts for the names given.
func fakeTools(t *testing.T, names ...string) string {
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Without node, npm or curl, make test runs every Go test, then says in
// one line which tools are missing, and succeeds.
func TestMakeTestSkipsE2EWithoutTools(t *testing.T) {
	for _, c := range []struct {
		have []string
		want string
	}{
		{nil, "node npm curl"},
		{[]string{"node", "npm"}, "curl"},
		{[]string{"curl"}, "node npm"},
	} {
		out, errOut, err := makeIn(t, fakeTools(t, c.have...), "e2e-if-tools")
		want := "e2e: skipped (node/npm/curl not found: " + c.want + "); the Go tests ran\n"
		if err != nil || out != want || errOut != "" {
			t.Errorf("with %v: %v, stdout %q, stderr %q; want success and %q", c.have, err, out, errOut, want)
		}
	}

	// The whole of make test (-n: what it would run): the Go tests, then
	// the skip line.
	out, errOut, err := makeIn(t, fakeTools(t), "-n", "test")
	goTest := strings.Index(out, "go test -race -count=1 ./...")
	skip := strings.Index(out, "e2e: skipped (node/npm/curl not found: node npm curl); the Go tests ran")
	if err != nil || goTest < 0 || skip < goTest || strings.Contains(out, "e2e/run.sh") || strings.Contains(out, "npm ci") {
		t.Errorf("make -n test without node: %v, stderr %q\n%s", err, errOut, out)
	}
}

// With the tools there, make test runs the end-to-end tests, and their
// failure is make test's failure.
func TestMakeTestRunsE2EWithTools(t *testing.T) {
	tools := fakeTools(t, "node", "npm", "curl")
	out, errOut, err := makeIn(t, tools, "-n", "test")
	goTest, e2e := strings.Index(out, "go test -race -count=1 ./..."), strings.Index(out, "./e2e/run.sh")
	if err != nil || goTest < 0 || e2e < goTest || strings.Contains(out, "not found: ") {
		t.Errorf("make -n test with node, npm and curl: %v, stderr %q\n%s", err, errOut, out)
	}
	// A failing step of e2e (here its build, GO=false) fails the target
	// make test ends with.
	if _, errOut, err := makeIn(t, tools, "e2e-if-tools", "GO=false"); err == nil {
		t.Errorf("a failing e2e passed; stderr %q", errOut)
	}
}

// make e2e asked for by name fails without its tools, naming them.
func TestMakeE2EWithoutToolsFails(t *testing.T) {
	_, errOut, err := makeIn(t, fakeTools(t, "node"), "e2e")
	if err == nil || !strings.Contains(errOut, "make e2e: node/npm/curl not found: npm curl") {
		t.Errorf("make e2e without npm and curl: %v, stderr %q", err, errOut)
	}
}
