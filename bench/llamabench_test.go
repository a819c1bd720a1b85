package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/synth"
)

// llamaCells splits a markdown table row into its trimmed cells.
func llamaCells(line string) []string {
	f := strings.Split(strings.Trim(line, "|"), "|")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// TestLlamaBenchTable runs the llama-bench tests on the tiny model on the
// CPU device and reads the table as a llama-bench reader would: its
// columns, one row per test in order, the model's label, size and
// parameters from the file, and t/s figures that agree with the min,
// median and max beside them.
func TestLlamaBenchTable(t *testing.T) {
	path := engTinyModel(t)
	var stdout, stderr bytes.Buffer
	code := EngineMain([]string{"-m", path, "--device", "cpu", "-p", "16,8", "-n", "4", "-r", "3", "--warmup", "1", "-t", "1"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	t.Logf("\n%s", stdout.String())
	if got := runtime.GOMAXPROCS(0); got != startProcs {
		t.Errorf("GOMAXPROCS %d after the run, %d before: -t was not undone", got, startProcs)
	}
	// A progress line per repetition.
	if n := strings.Count(stderr.String(), "\n"); n != 9 || !strings.Contains(stderr.String(), "tg4 3/3: ") {
		t.Errorf("progress: %q", stderr.String())
	}

	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	params, size := tensorTotals(f)
	f.Close()
	label := "llama " + SizeLabel(params) + " F16"

	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) < 5 {
		t.Fatalf("%d lines", len(lines))
	}
	if got := llamaCells(lines[0]); !slices.Equal(got, []string{"model", "size", "params", "backend", "threads", "test", "t/s", "min", "median", "max"}) {
		t.Fatalf("header %q", got)
	}
	// llama-bench's separator: right-aligned columns end in a colon.
	if got := llamaCells(lines[1]); len(got) != 10 || !strings.HasSuffix(got[1], ":") || strings.HasSuffix(got[0], ":") || strings.HasSuffix(got[3], ":") {
		t.Errorf("separator %q", lines[1])
	}
	for i, test := range []string{"pp16", "pp8", "tg4"} {
		c := llamaCells(lines[2+i])
		if len(c) != 10 {
			t.Fatalf("row %q: %d cells", lines[2+i], len(c))
		}
		if c[0] != label || c[1] != fmt.Sprintf("%.2f MiB", float64(size)/(1<<20)) || c[2] != fmt.Sprintf("%.2f M", float64(params)/1e6) ||
			c[3] != "CPU" || c[4] != "1" || c[5] != test {
			t.Errorf("row %q: want %s, %d bytes, %d parameters, CPU, 1 thread, %s", lines[2+i], label, size, params, test)
		}
		var mean, sd float64
		if _, err := fmt.Sscanf(c[6], "%f ± %f", &mean, &sd); err != nil {
			t.Fatalf("t/s %q: %v", c[6], err)
		}
		var mmm [3]float64
		for j := range mmm {
			if mmm[j], err = strconv.ParseFloat(c[7+j], 64); err != nil {
				t.Fatal(err)
			}
		}
		// Printed to two decimals: allow the rounding.
		if !(mmm[0] > 0 && mmm[0] <= mmm[1] && mmm[1] <= mmm[2] && mean >= mmm[0]-0.01 && mean <= mmm[2]+0.01 && sd >= 0) {
			t.Errorf("%s: t/s %v ± %v, min/median/max %v", test, mean, sd, mmm)
		}
	}
	if !strings.Contains(lines[len(lines)-1], "3 repetitions") {
		t.Errorf("last line %q", lines[len(lines)-1])
	}
}

// TestLlamaBenchJSON: -o json prints llama-bench's objects, one per test,
// with -r samples each and statistics computed from them.
func TestLlamaBenchJSON(t *testing.T) {
	path := engTinyModel(t)
	var stdout, stderr bytes.Buffer
	code := EngineMain([]string{"-m", path, "--device", "cpu", "--tests", "tg3,pp12", "-r", "4", "--warmup", "0", "-o", "json", "--quiet"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("--quiet wrote %q", stderr.String())
	}
	var results []LlamaBenchResult
	if err := json.Unmarshal(stdout.Bytes(), &results); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if len(results) != 2 || results[0].Test() != (LlamaTest{Gen: 3}) || results[1].Test() != (LlamaTest{Prompt: 12}) {
		t.Fatalf("results %+v", results)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))+1e-9 }
	for _, r := range results {
		if len(r.SamplesNS) != 4 || len(r.SamplesTS) != 4 {
			t.Fatalf("%s: %d and %d samples, want -r 4", r.Test(), len(r.SamplesNS), len(r.SamplesTS))
		}
		if r.Backends != "CPU" || r.Device != "cpu" || r.NThreads != runtime.GOMAXPROCS(0) || r.TypeK != "f16" || r.ModelSize == 0 ||
			!strings.HasPrefix(r.ModelType, "llama ") || r.TestTime == "" {
			t.Errorf("%s: %+v", r.Test(), r)
		}
		var sum float64
		for i, ns := range r.SamplesNS {
			// tok/s from the unrounded time: within a rounded nanosecond.
			if want := float64(r.Test().tokens()) * 1e9 / float64(ns); ns <= 0 || math.Abs(r.SamplesTS[i]-want) > want*1e-6 {
				t.Errorf("%s sample %d: %d ns, %v tok/s", r.Test(), i, ns, r.SamplesTS[i])
			}
			sum += r.SamplesTS[i]
		}
		mean := sum / 4
		var ss float64
		for _, v := range r.SamplesTS {
			ss += (v - mean) * (v - mean)
		}
		sorted := slices.Sorted(slices.Values(r.SamplesTS))
		if !near(r.AvgTS, mean) || !near(r.StddevTS, math.Sqrt(ss/3)) || r.MinTS != sorted[0] || r.MaxTS != sorted[3] ||
			!near(r.MedianTS, (sorted[1]+sorted[2])/2) {
			t.Errorf("%s: statistics %+v of %v", r.Test(), r, r.SamplesTS)
		}
	}
}

func TestLlamaBenchUsage(t *testing.T) {
	path := engTinyModel(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "0"}, "-p 0: a test needs at least one token"},
		{[]string{"-n", "128,0"}, "-n 0"},
		{[]string{"-p", "x"}, `-p "x": not a token count`},
		{[]string{"-r", "0"}, "-r 0: at least one repetition"},
		{[]string{"--tests", "pp512,tg"}, `--tests: "tg" is not a test`},
		{[]string{"--tests", "tg128", "-p", "512"}, "--tests names every test"},
		{[]string{"-o", "csv"}, `-o "csv": md or json`},
		{[]string{"--llama-bench", "--batch", "4"}, "--batch is for the decode and prefill rows"},
		{[]string{"-t", "-1"}, "-t -1"},
		{[]string{"-t", strconv.Itoa(startProcs + 1)}, fmt.Sprintf("started with GOMAXPROCS %d", startProcs)},
		{[]string{"-p", "200000"}, "pp200000: its request holds 200001 positions, more than 131072"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"-m", path, "--device", "cpu", "--quiet"}, c.args...)
		code := EngineMain(args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) || strings.Count(stderr.String(), "\n") != 1 ||
			!strings.HasPrefix(stderr.String(), "ringlm bench engine: ") || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one line with %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// A test longer than the model's context grows the engine's, as
// llama-bench sizes n_ctx to each test (the tiny model's context is 2048),
// and a pp test's prompt goes in one step.
func TestLlamaBenchGrowsContext(t *testing.T) {
	path := engTinyModel(t)
	var stdout, stderr bytes.Buffer
	args := []string{"-m", path, "--device", "cpu", "--quiet", "--tests", "pp2100", "-r", "1", "-o", "json"}
	if code := EngineMain(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rs []LlamaBenchResult
	if err := json.Unmarshal(stdout.Bytes(), &rs); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if len(rs) != 1 || rs[0].NPrompt != 2100 || len(rs[0].SamplesTS) != 1 || !(rs[0].AvgTS > 0) || rs[0].PrefillChunk != 2100 {
		t.Errorf("results %+v; want one pp2100 repetition in one prompt step of 2100", rs)
	}
}

// TestLlamaBenchModelType derives llama-bench's model column from a
// synthetic GGUF: the size label from general.size_label, else from the parameter count;
// the file type from general.file_type, else guessed from the tensors.
func TestLlamaBenchModelType(t *testing.T) {
	shape, err := synth.Lookup("tiny", "qwen2")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		typ  gguf.Type
		mix  string
		edit func(w *gguf.Writer)
		want string // %s: SizeLabel of the parameters
	}{
		{gguf.TypeF16, "", nil, "qwen2 %s F16"},
		{gguf.TypeQ8_0, "", nil, "qwen2 %s Q8_0"},
		{gguf.TypeF32, "", nil, "qwen2 %s all F32"},
		{0, "Q4_K_M", nil, "qwen2 %s Q4_K - Medium"},
		{gguf.TypeQ8_0, "", func(w *gguf.Writer) { w.Set("general.size_label", gguf.String("0.5B")) }, "qwen2 0.5B Q8_0"},
		// Without general.file_type llama.cpp names the commonest tensor
		// type's file type: the tiny model has more matrices (7 a layer
		// and the embeddings) than 1-D F32 tensors (5 a layer and the
		// output norm).
		{gguf.TypeQ8_0, "", func(w *gguf.Writer) { w.Delete("general.file_type") }, "qwen2 %s Q8_0 (guessed)"},
		{gguf.TypeF16, "", func(w *gguf.Writer) { w.Set("general.file_type", gguf.Uint32(99)) }, "qwen2 %s unknown"},
	} {
		w, err := synth.Build(synth.Options{Shape: shape, Type: c.typ, Mix: c.mix, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if c.edit != nil {
			c.edit(w)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		params, _ := tensorTotals(f)
		want := c.want
		if strings.Contains(want, "%s") {
			want = fmt.Sprintf(want, SizeLabel(params))
		}
		if got := ModelType(f); got != want {
			t.Errorf("%s%s: ModelType %q, want %q", c.typ, c.mix, got, want)
		}
	}
}

// SizeLabel rounds as gguf-py's model_weight_count_rounded_notation does.
func TestLlamaBenchSizeLabel(t *testing.T) {
	for n, want := range map[uint64]string{
		494_032_768:       "494M", // Qwen2.5-0.5B
		4_984_064:         "5.0M", // gocoder
		3_412_000:         "3.4M",
		1_235_814_400:     "1.2B", // Llama-3.2-1B
		7_615_616_512:     "7.6B",
		70_553_706_496:    "71B",
		1_000_000:         "1000K", // not above 1e6: still thousands
		1_000_001:         "1.0M",
		500:               "0.50K",
		2_000_000_000_000: "2.0T",
	} {
		if got := SizeLabel(n); got != want {
			t.Errorf("SizeLabel(%d) = %q, want %q", n, got, want)
		}
	}
}
