package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"ringlm/kernels/cuda"
)

// runVersion is `ringlm version` (and `ringlm --version`): what a bug
// report needs, the build and whether the GPU device can be used.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version  (also: ringlm --version)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	bi, _ := debug.ReadBuildInfo()
	cudaErr := cuda.Available()
	writeVersion(stdout, bi, cudaErr, cuda.Library(), cuda.Devices())
	return nil
}

// writeVersion prints the module version, the commit the binary was built
// from (stamped by go build in a git checkout: revision, time, and
// whether the tree had uncommitted changes), the Go toolchain, and the
// CUDA device's state: the library it loaded and the GPUs it sees, or
// the one-line reason it cannot be used. bi may be nil (no build
// information).
func writeVersion(w io.Writer, bi *debug.BuildInfo, cudaErr error, cudaLib string, devices int) {
	version, goVersion := "(unknown)", runtime.Version()
	vcs := map[string]string{}
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			vcs[s.Key] = s.Value
		}
	}
	fmt.Fprintf(w, "ringlm %s\n", version)
	if rev := vcs["vcs.revision"]; rev != "" {
		var notes []string
		if t := vcs["vcs.time"]; t != "" {
			notes = append(notes, t)
		}
		if vcs["vcs.modified"] == "true" {
			notes = append(notes, "with uncommitted changes")
		}
		if len(notes) > 0 {
			rev += " (" + strings.Join(notes, ", ") + ")"
		}
		fmt.Fprintf(w, "commit: %s\n", rev)
	} else {
		fmt.Fprintln(w, "commit: unknown (not built by go build in a git checkout, or built with -buildvcs=false)")
	}
	fmt.Fprintf(w, "go: %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	if cudaErr != nil {
		fmt.Fprintf(w, "cuda: not available: %s\n", oneLine(strings.TrimPrefix(cudaErr.Error(), "cuda: ")))
		return
	}
	plural := "s"
	if devices == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "cuda: available (%s, %d device%s)\n", cudaLib, devices, plural)
}
