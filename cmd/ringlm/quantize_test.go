package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"ringlm/eval"
	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/model"
	"ringlm/quant"
	"ringlm/quantize"
)

// synthF16 writes the tiny model of arch in F16 through `ringlm synth`.
func synthF16(t *testing.T, arch string) string {
	t.Helper()
	in := filepath.Join(t.TempDir(), "in-f16.gguf")
	if code, _, e := runCmd(t, "synth", "--arch", arch, "--type", "f16", "--seed", "4", "-o", in); code != 0 {
		t.Fatal(e)
	}
	return in
}

// F16 → Q8_0 and F16 → BF16 through the command: the summary on stdout, a
// line per tensor on stderr (not a terminal), and a file that loads,
// keeps every tensor and key, says its file type, and scores the
// perplexity of its input within 1%.
func TestQuantizeCommand(t *testing.T) {
	in := synthF16(t, "llama")
	src, err := gguf.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	text := strings.Repeat(pplSentence, 4)
	base := libraryPerplexity(t, in, text, eval.Options{Ctx: 64, KVType: gguf.TypeF32})
	n := len(src.Tensors)
	for _, tc := range []struct {
		typ      string
		fileType uint32
		bpw      string
	}{{"q8_0", 7, `8\.5\d`}, {"BF16", 32, `16\.0\d`}} {
		out := filepath.Join(t.TempDir(), "out.gguf")
		code, stdout, stderr := runCmd(t, "quantize", in, out, tc.typ, "--threads", "2")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.typ, code, stderr)
		}
		summary := `^wrote ` + regexp.QuoteMeta(out) + `: ` + strings.ToUpper(tc.typ) + ` \(general.file_type \d+\), ` + strconv.Itoa(n) + ` tensors in [\d.]+s\n` +
			`model size +[\d.]+ MiB \(16\.0\d bits per weight\)\n` +
			`quant size +[\d.]+ MiB \(` + tc.bpw + ` bits per weight\)\n$`
		if !regexp.MustCompile(summary).MatchString(stdout) {
			t.Errorf("%s: stdout\n%s\nwant %s", tc.typ, stdout, summary)
		}
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		line := regexp.MustCompile(`^\[ ?\d+/` + strconv.Itoa(n) + `\] \S+ +(F16|F32) → (Q8_0|BF16|F32) +[\d.]+ [KM]?i?B → [\d.]+ [KM]?i?B +[\d.]+ MB/s$`)
		if len(lines) != n {
			t.Errorf("%s: %d progress lines for %d tensors", tc.typ, len(lines), n)
		}
		for _, l := range lines {
			if !line.MatchString(l) {
				t.Errorf("%s: progress line %q", tc.typ, l)
				break
			}
		}

		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := model.Load(f); err != nil {
			t.Errorf("%s: model.Load: %v", tc.typ, err)
		}
		if ft, err := f.Uint32("general.file_type"); err != nil || ft != tc.fileType {
			t.Errorf("%s: general.file_type %d %v", tc.typ, ft, err)
		}
		for _, kv := range src.KVs {
			if got, ok := f.Get(kv.Key); kv.Key != "general.file_type" && (!ok || got.String() != kv.Value.String()) {
				t.Errorf("%s: %s = %v, want %v", tc.typ, kv.Key, got, kv.Value)
			}
		}
		for _, ti := range src.Tensors {
			to, ok := f.Tensor(ti.Name)
			if !ok || !slices.Equal(to.Dims, ti.Dims) || (len(ti.Dims) > 1) != (to.Type != gguf.TypeF32) {
				t.Errorf("%s: %s is %+v in the output", tc.typ, ti.Name, to)
			}
		}
		f.Close()
		got := libraryPerplexity(t, out, text, eval.Options{Ctx: 64, KVType: gguf.TypeF32})
		if math.Abs(got.PPL-base.PPL)/base.PPL > 0.01 {
			t.Errorf("%s: perplexity %.4f, the F16 input's %.4f", tc.typ, got.PPL, base.PPL)
		}
		t.Logf("%s: perplexity %.4f (F16 %.4f)", tc.typ, got.PPL, base.PPL)
	}
}

// The same bytes whatever --threads says.
func TestQuantizeThreads(t *testing.T) {
	in := synthF16(t, "phi3")
	var first []byte
	for _, threads := range []string{"1", "2", "5"} {
		out := filepath.Join(t.TempDir(), "out.gguf")
		if code, _, e := runCmd(t, "quantize", in, out, "Q8_0", "--threads", threads); code != 0 {
			t.Fatal(e)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = b
		} else if !bytes.Equal(first, b) {
			t.Fatalf("--threads %s wrote other bytes than --threads 1", threads)
		}
	}
}

// wantOneLine checks a failed run: exit 1, nothing on stdout, one line
// naming the command and the error after the progress lines of the
// tensors done, and no output file or .tmp.
func wantOneLine(t *testing.T, out string, want string, args ...string) {
	t.Helper()
	code, stdout, stderr := runCmd(t, args...)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	if code != 1 || stdout != "" || !strings.HasSuffix(stderr, "\n") || !strings.HasPrefix(last, "ringlm quantize: ") || !strings.Contains(last, want) {
		t.Errorf("%q: exit %d, stdout %q, stderr %q; want 1 and one line with %q", args, code, stdout, stderr, want)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "[") || !strings.HasSuffix(l, "MB/s") {
			t.Errorf("%q: a line not of progress before the error: %q", args, l)
		}
	}
	for _, p := range []string{out, out + ".tmp"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%q left %s", args, p)
		}
	}
}

func TestQuantizeRefusals(t *testing.T) {
	in := synthF16(t, "llama")
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")

	wantUsageError(t, "quantize", []string{in, out, "q4_x"}, `unknown TYPE "q4_x" (accepted: Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, IQ4_NL, IQ4_XS, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, Q8_0, F16, BF16, F32)`)
	wantUsageError(t, "quantize", []string{in, "q8_0"}, "expected IN.gguf OUT.gguf TYPE, got 2 arguments")
	wantUsageError(t, "quantize", []string{in, out, "q8_0", "--threads", "-1"}, "--threads must be 0 or more")
	wantUsageError(t, "quantize", []string{in, out, "q8_0", "--output-tensor-type", "q9"}, `unknown --output-tensor-type "q9"`)

	// Already quantized: refused, naming the tensor, unless allowed.
	q8 := testmodel.Path(t, "llama", gguf.TypeQ8_0)
	wantOneLine(t, out, `requantization refused: tensor "output.weight" is already Q8_0, and converting it to BF16`, "quantize", q8, out, "bf16")
	if code, _, e := runCmd(t, "quantize", q8, out, "bf16", "--allow-requantize"); code != 0 {
		t.Errorf("--allow-requantize: %s", e)
	}
	os.Remove(out)

	// A mix whose types have no encoder yet names them.
	withFormat(t, gguf.TypeQ8_0, nil)
	wantOneLine(t, out, "unsupported type: Q8_0 needs Q8_0, which ringlm does not write yet", "quantize", in, out, "Q8_0")
	quantizeFormats = quantize.Format

	// Bad input files.
	garbage := filepath.Join(dir, "garbage.gguf")
	os.WriteFile(garbage, []byte("not a model at all, just some words"), 0o644)
	wantOneLine(t, out, "not a GGUF file", "quantize", garbage, out, "q8_0")
	b, _ := os.ReadFile(in)
	short := filepath.Join(dir, "short.gguf")
	os.WriteFile(short, b[:len(b)/2], 0o644)
	wantOneLine(t, out, "gguf: ", "quantize", short, out, "q8_0")
	wantOneLine(t, out, "no such file", "quantize", filepath.Join(dir, "missing.gguf"), out, "q8_0")

	// A NaN halfway through: an error naming the tensor, and neither
	// OUT nor OUT.tmp left.
	nan := testmodel.Poison(t, testmodel.Path(t, "llama", gguf.TypeF32), "blk.3.ffn_down.weight", float32(math.NaN()))
	wantOneLine(t, out, `tensor "blk.3.ffn_down.weight": not finite: row 0 holds NaN`, "quantize", nan, out, "q8_0")
}

// On a terminal the bar is redrawn in place and blanked at the end; a
// tensor that fell back gets a line of its own above it.
func TestQuantizeProgressBar(t *testing.T) {
	var b bytes.Buffer
	q := &quantizeProgress{w: &b, tty: true}
	q.start = q.start.Add(-1e9)
	c := quantize.Choice{Tensor: quantize.Tensor{Name: "blk.0.ffn_down.weight", Type: gguf.TypeF16, Dims: []uint64{640, 256}},
		To: gguf.TypeQ8_0, Wanted: gguf.TypeQ6_K, Fallback: true}
	q.update(quantize.Progress{Index: 1, Count: 2, Choice: c, TensorDone: 100, TensorBytes: 200, Done: 100, Total: 400})
	q.update(quantize.Progress{Index: 1, Count: 2, Choice: c, TensorDone: 200, TensorBytes: 200, Done: 200, Total: 400})
	c.Fallback, c.Name = false, "output.weight"
	q.update(quantize.Progress{Index: 2, Count: 2, Choice: c, TensorDone: 200, TensorBytes: 200, Done: 400, Total: 400})
	q.finish()
	s := b.String()
	for _, want := range []string{
		"[1/2] blk.0.ffn_down.weight", "[######------------------]  25%",
		"\rblk.0.ffn_down.weight: F16 → Q8_0 (Q6_K does not fit rows of 640: fallback)\n",
		"[2/2] output.weight", "[########################] 100%",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("bar output lacks %q:\n%q", want, s)
		}
	}
	if !strings.HasSuffix(s, "\r") || strings.Contains(s[strings.LastIndex(s, "100%"):], "\n") {
		t.Errorf("the bar is not blanked at the end: %q", s[max(0, len(s)-80):])
	}
}

// withFormat makes ringlm quantize see f as typ's codec (nil: none) for
// the rest of the test.
func withFormat(t *testing.T, typ gguf.Type, f *quant.Format) {
	quantizeFormats = func(x gguf.Type) (*quant.Format, bool) {
		if x == typ {
			return f, f != nil
		}
		return quantize.Format(x)
	}
	t.Cleanup(func() { quantizeFormats = quantize.Format })
}

// fakeQ6_K stands in for a Q6_K codec in tests that need one registered
// whatever quant holds: its blocks have Q6_K's size and hold zeros.
var fakeQ6_K = &quant.Format{Type: gguf.TypeQ6_K,
	Dequantize: func(dst []float32, _ []byte) { clear(dst) },
	Quantize:   func(dst []byte, _ []float32) { clear(dst) }}

// gocoder's shape in Q6_K: the six ffn_down tensors (rows of 640) fall
// back to Q8_0, each said on its progress line, and counted in the
// summary.
func TestQuantizeFallbacks(t *testing.T) {
	in := filepath.Join(t.TempDir(), "gocoder-f16.gguf")
	if code, _, e := runCmd(t, "synth", "--preset", "gocoder", "--type", "f16", "-o", in); code != 0 {
		t.Fatal(e)
	}
	withFormat(t, gguf.TypeQ6_K, fakeQ6_K)
	out := filepath.Join(t.TempDir(), "out.gguf")
	code, stdout, stderr := runCmd(t, "quantize", in, out, "Q6_K")
	if code != 0 {
		t.Fatal(stderr)
	}
	if !strings.Contains(stdout, "Q6_K (general.file_type 18)") || !strings.Contains(stdout, "\n6 of 56 tensors fell back to another type") {
		t.Errorf("stdout:\n%s", stdout)
	}
	fell := regexp.MustCompile(`(?m)^\[ ?\d+/56\] blk\.\d\.ffn_down\.weight +F16 → Q8_0 .* MB/s \(Q6_K does not fit rows of 640: fallback\)$`)
	if n := len(fell.FindAllString(stderr, -1)); n != 6 {
		t.Errorf("%d fallback lines, want 6:\n%s", n, stderr)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, ti := range f.Tensors {
		want := gguf.TypeQ6_K
		switch {
		case len(ti.Dims) == 1:
			want = gguf.TypeF32
		case strings.HasSuffix(ti.Name, "ffn_down.weight"):
			want = gguf.TypeQ8_0
		}
		if ti.Type != want {
			t.Errorf("%s: %s, want %s", ti.Name, ti.Type, want)
		}
	}
}
