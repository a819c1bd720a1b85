package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/model"
)

func runCmd(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestSynthThenShow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	code, out, errOut := runCmd(t, "synth", "--preset", "tiny", "--arch", "qwen2", "--type", "q8_0", "--seed", "3", "-o", path)
	if code != 0 || !strings.Contains(out, "wrote") {
		t.Fatalf("synth: code %d, %q %q", code, out, errOut)
	}
	code, out, _ = runCmd(t, "show", path)
	if code != 0 || !strings.Contains(out, "architecture") || !strings.Contains(out, "qwen2") || !strings.Contains(out, "blk.3.attn_q.bias") {
		t.Fatalf("show: code %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, "show", path, "--json")
	if code != 0 {
		t.Fatalf("show --json: code %d", code)
	}
	var s struct {
		Params  uint64
		Hparams struct {
			Arch string `json:"architecture"`
		}
		Tensors []struct {
			Name  string
			Type  string
			Shape []uint64
		}
		Metadata map[string]struct {
			Type string
			Len  *int
		}
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Hparams.Arch != "qwen2" || s.Params < 3e6 || len(s.Tensors) == 0 || s.Tensors[0].Type != "Q8_0" {
		t.Fatalf("unexpected JSON summary: %+v", s)
	}
	if m := s.Metadata["tokenizer.ggml.tokens"]; m.Len == nil || *m.Len != 512 {
		t.Fatalf("tokens metadata: %+v", m)
	}
}

// synth --sliding-window sets <arch>.attention.sliding_window, which
// show prints and the model loads; phi3 has one by default (2047, as
// Phi-3-mini-4k) and a negative window is a usage error.
func TestSynthSlidingWindow(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--arch", "phi3"}, "sliding window       2047 positions"},
		{[]string{"--arch", "phi3", "--sliding-window", "64"}, "sliding window       64 positions"},
		{[]string{"--arch", "llama", "--sliding-window", "100"}, "sliding window       100 positions"},
	} {
		path := filepath.Join(t.TempDir(), "m.gguf")
		args := append([]string{"synth", "--preset", "tiny", "--type", "q8_0", "-o", path}, c.args...)
		if code, out, errOut := runCmd(t, args...); code != 0 {
			t.Fatalf("%v: code %d, %q %q", c.args, code, out, errOut)
		}
		code, out, _ := runCmd(t, "show", path)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Fatalf("%v: show: code %d, want %q in\n%s", c.args, code, c.want, out)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(strings.Fields(strings.TrimPrefix(c.want, "sliding window"))[0])
		if m.SlidingWindow != n {
			t.Fatalf("%v: model window %d, want %d", c.args, m.SlidingWindow, n)
		}
	}
	wantUsageError(t, "synth", []string{"-o", "x.gguf", "--sliding-window", "-3"}, "--sliding-window -3")
}

// Every malformed file makes `show` exit non-zero with one line on stderr
// and nothing that looks like a stack trace.
func TestShowMalformed(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if code, _, e := runCmd(t, "synth", "-o", good, "--type", "f32"); code != 0 {
		t.Fatal(e)
	}
	img, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	le64 := func(v uint64) []byte {
		b := make([]byte, 8)
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		return b
	}
	withAt := func(off int, patch []byte) []byte {
		b := bytes.Clone(img)
		copy(b[off:], patch)
		return b
	}
	cases := map[string][]byte{
		"empty":          {},
		"bad magic":      withAt(0, []byte("GGML")),
		"version 7":      withAt(4, []byte{7, 0, 0, 0}),
		"big endian":     withAt(4, []byte{0, 0, 0, 3}),
		"2^62 tensors":   withAt(8, le64(1<<62)),
		"2^62 keys":      withAt(16, le64(1<<62)),
		"truncated 10":   img[:10],
		"truncated half": img[:len(img)/2],
		"last byte":      img[:len(img)-1],
		"key length":     withAt(24, le64(1<<40)),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".gguf")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCmd(t, "show", p)
			if code == 0 {
				t.Fatalf("exit 0 for a malformed file; stdout %q", out)
			}
			lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "ringlm show: gguf: ") || strings.Contains(errOut, "goroutine") || strings.Contains(errOut, "panic") {
				t.Fatalf("want one error line, got %q", errOut)
			}
		})
	}
	if code, _, e := runCmd(t, "show", filepath.Join(dir, "missing.gguf")); code == 0 || strings.Count(e, "\n") != 1 {
		t.Fatalf("missing file: %d %q", code, e)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"show", "a", "b"}, {"synth"}, {"synth", "-o", "x", "--type", "q3"}, {"synth", "-o", "x", "--preset", "gpt5"}} {
		if code, _, _ := runCmd(t, args...); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
	if code, out, _ := runCmd(t, "help"); code != 0 || !strings.Contains(out, "synth") {
		t.Errorf("help: %d %q", code, out)
	}
}
