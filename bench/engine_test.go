package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/model"
	"ringlm/runner"
	"ringlm/synth"
)

// engTinyModel writes the tiny synthetic llama (3.4M parameters, F16) that
// the engine and model tests use.
func engTinyModel(t *testing.T) string {
	t.Helper()
	s, err := synth.Lookup("tiny", "llama")
	if err != nil {
		t.Fatal(err)
	}
	return testmodel.Write(t, s, gguf.TypeF16, 1)
}

// TestEngineBytesPerStep: the roofline's arithmetic, exactly.
func TestEngineBytesPerStep(t *testing.T) {
	// Llama-3.2-1B: 16 layers, 8 KV heads of 64, f16 KV; batch 64 at
	// context 1024 reads 64·1024·16·2·8·64·2 bytes = 2 GiB of KV.
	if got := KVBytesPerStep(64, 1024, 16, 8, 64, 2); got != 2<<30 {
		t.Errorf("KVBytesPerStep = %d, want %d", got, int64(2<<30))
	}
	if got := KVBytesPerStep(1, 16, 4, 4, 32, 4); got != 16*4*2*4*32*4 {
		t.Errorf("KVBytesPerStep f32 = %d", got)
	}
	if got := DecodeBytesPerStep(2_471_000_000, 64, 1024, 16, 8, 64, 2); got != 2_471_000_000+2<<30 {
		t.Errorf("DecodeBytesPerStep = %d", got)
	}
	// No overflow at large sizes: 256 × 128k × 80 layers × 2 × 8 × 128 × 2.
	if got := KVBytesPerStep(256, 131072, 80, 8, 128, 2); got != 256*131072*80*2*8*128*2 {
		t.Errorf("large KVBytesPerStep = %d", got)
	}
	// One sequence at one block's worth of positions reads one block of
	// the model's KV pool.
	cfg := model.Config{Layers: 4, KVHeads: 4, HeadDim: 32}
	for _, c := range []struct {
		typ  gguf.Type
		elem int
	}{{gguf.TypeF16, 2}, {gguf.TypeF32, 4}} {
		if got, want := KVBytesPerStep(1, 16, cfg.Layers, cfg.KVHeads, cfg.HeadDim, c.elem), model.KVBytesPerBlock(&cfg, c.typ, 16); got != want {
			t.Errorf("%s: KVBytesPerStep %d, KVBytesPerBlock %d", c.typ, got, want)
		}
	}

	// Row columns: 10 MB of weights, batch 2 at context 100 of 4 layers ×
	// 2 × 4 × 32 f16 = 409,600 KV bytes; 2 ms a step against 100 GB/s.
	r := EngineRow{Phase: "decode", Batch: 2, Context: 100, MSPerStep: 2}
	r.Roofline(10_000_000, &cfg, 2, 100)
	if r.KVBytes != 409_600 || r.BytesPerStep != 10_409_600 {
		t.Fatalf("bytes %d + %d = %d", r.WeightBytes, r.KVBytes, r.BytesPerStep)
	}
	// 10,409,600 B / 2 ms = 5.2048 GB/s; floor 10,409,600 B / 100 GB/s = 0.104096 ms; 2 / 0.104096 = 19.213…
	if !rptNear(r.GBPerS, 5.2048) || r.FloorMS == nil || !rptNear(*r.FloorMS, 0.104096) || !rptNear(*r.XFloor, 2/0.104096) {
		t.Fatalf("GB/s %v floor %v x %v", r.GBPerS, r.FloorMS, r.XFloor)
	}
	r = EngineRow{Phase: "decode", Batch: 1, Context: 1, MSPerStep: 1}
	r.Roofline(1, &cfg, 2, math.NaN())
	if r.FloorMS != nil || r.XFloor != nil {
		t.Error("a floor without a bandwidth")
	}
}

// TestEngineCPU runs `bench engine` on the tiny model on the CPU device:
// a decode row per batch size and a prefill row per batch size, with
// positive numbers that agree with each other.
func TestEngineCPU(t *testing.T) {
	path := engTinyModel(t)
	jsonPath := filepath.Join(t.TempDir(), "rows.json")
	var stdout, stderr bytes.Buffer
	code := EngineMain([]string{"-m", path, "--device", "cpu", "--batch", "1,2", "--context", "16", "--steps", "4",
		"--warmup", "1", "--prefill-len", "24", "--copy-mib", "8", "--json", jsonPath}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	t.Logf("\n%s", stdout.String())

	// The table: decode rows phase batch context steps ms/step tok/s
	// MB/step GB/s copy-GB/s floor-ms x-floor; prefill rows phase batch
	// prompt steps ms tok/s.
	decode, prefill := map[int][]float64{}, map[int][]float64{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || (f[0] != "decode" && f[0] != "prefill") {
			continue
		}
		var nums []float64
		for _, s := range f[1:] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%q: %q is not a number", line, s)
			}
			if !(v > 0) {
				t.Errorf("%q: %v is not positive", line, v)
			}
			nums = append(nums, v)
		}
		if f[0] == "decode" {
			if len(nums) != 10 {
				t.Fatalf("decode row %q: %d numbers", line, len(nums))
			}
			decode[int(nums[0])] = nums
		} else {
			if len(nums) != 5 {
				t.Fatalf("prefill row %q: %d numbers", line, len(nums))
			}
			prefill[int(nums[0])] = nums
		}
	}
	for _, batch := range []int{1, 2} {
		d, ok := decode[batch]
		if !ok {
			t.Fatalf("no decode row for batch %d", batch)
		}
		if d[1] != 16 || d[2] != 4 {
			t.Errorf("decode batch %d: context %v steps %v", batch, d[1], d[2])
		}
		// tok/s = batch × 1000 / ms-per-step, within the rounding of the
		// printed figures (3 decimals of ms, 1 of tok/s).
		ms, tok := d[3], d[4]
		want := float64(batch) * 1000 / ms
		if tol := 0.05 + want*0.0006/ms; math.Abs(tok-want) > tol {
			t.Errorf("decode batch %d: %v tok/s at %v ms/step, want %v", batch, tok, ms, want)
		}
		// x-floor = ms / floor ms (rounded).
		if x := ms / d[8]; math.Abs(x-d[9]) > 0.01+x*0.01 {
			t.Errorf("decode batch %d: x-floor %v, ms/floor %v", batch, d[9], x)
		}
		p, ok := prefill[batch]
		if !ok {
			t.Fatalf("no prefill row for batch %d", batch)
		}
		if p[1] != 24 {
			t.Errorf("prefill batch %d: prompt %v", batch, p[1])
		}
		if want := float64(batch*24) * 1000 / p[3]; math.Abs(p[4]-want) > 0.05+want*0.001 {
			t.Errorf("prefill batch %d: %v tok/s for %v ms, want %v", batch, p[4], p[3], want)
		}
	}

	// The JSON rows: the same rows with unrounded figures.
	rep := readEngineReport(t, jsonPath)
	if rep.Device != "cpu" || rep.Bandwidth == nil || *rep.Bandwidth <= 0 || rep.Layers != 4 || rep.KVElemBytes != 2 || len(rep.Rows) != 4 {
		t.Fatalf("report %+v", rep)
	}
	if rep.TokenBudget != runner.DefaultTokenBudget("cpu") {
		t.Errorf("token budget %d, want the cpu device's default %d", rep.TokenBudget, runner.DefaultTokenBudget("cpu"))
	}
	for _, r := range rep.Rows {
		switch r.Phase {
		case "decode":
			if r.Steps != 4 || !rptNear(r.TokPerS, float64(r.Batch)*1000/r.MSPerStep) {
				t.Errorf("decode row %+v", r)
			}
			if r.BytesPerStep != rep.WeightBytes+KVBytesPerStep(r.Batch, 16, 4, 4, 32, 2) || r.FloorMS == nil ||
				!rptNear(*r.FloorMS, float64(r.BytesPerStep)/(*rep.Bandwidth*1e9)*1e3) || !rptNear(*r.XFloor, r.MSPerStep / *r.FloorMS) {
				t.Errorf("decode roofline %+v", r)
			}
		case "prefill":
			if r.Steps < 1 || !rptNear(r.TokPerS, float64(r.Batch*24)/(r.MS/1e3)) {
				t.Errorf("prefill row %+v", r)
			}
		default:
			t.Errorf("row phase %q", r.Phase)
		}
	}
}

func TestEngineUsage(t *testing.T) {
	path := engTinyModel(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--device", "cpu"}, 2, "-m MODEL.gguf is required"},
		{[]string{"-m", path, "--batch", "1,x"}, 2, `"x" is not a positive integer`},
		{[]string{"-m", path, "--device", "tpu"}, 2, "--device must be"},
		{[]string{"-m", path, "--steps", "0"}, 2, "--steps"},
		{[]string{"-m", path, "extra"}, 2, "unexpected argument"},
		{[]string{"-m", path, "-r", "0"}, 2, "-r must be"},
		{[]string{"-m", filepath.Join(t.TempDir(), "none.gguf"), "--device", "cpu"}, 1, "none.gguf"},
		{[]string{"-m", path, "--steps", "x"}, 2, `invalid value "x" for flag -steps`},
		{[]string{"--bogus"}, 2, "flag provided but not defined: -bogus"},
	} {
		var stdout, stderr bytes.Buffer
		code := EngineMain(c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, stderr.String(), c.code, c.want)
		}
		// A usage error is one line, with no usage dump (cmd/ringlm
		// adds the pointer to -h).
		if c.code == 2 && (strings.Count(stderr.String(), "\n") != 1 || !strings.HasPrefix(stderr.String(), "ringlm bench engine: ")) {
			t.Errorf("%q: stderr %q, want one line", c.args, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := EngineMain([]string{"-h"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "usage: ringlm bench engine") ||
		!strings.Contains(stdout.String(), "-prefill-len") || stderr.Len() != 0 {
		t.Errorf("-h: exit %d, stdout %q, stderr %q; want the usage on stdout", code, stdout.String(), stderr.String())
	}
}

// TestEngineLlamaBench: the batch-1 rows as llama-bench's table, with
// repetitions, on a context grown past the model's (2048) to hold the
// prompt and its sampled token, as llama-bench sizes n_ctx to the test.
func TestEngineLlamaBench(t *testing.T) {
	path := engTinyModel(t)
	jsonPath := filepath.Join(t.TempDir(), "rows.json")
	var stdout, stderr bytes.Buffer
	code := EngineMain([]string{"-m", path, "--device", "cpu", "--batch", "1", "--context", "1,40", "--steps", "8", "--warmup", "1",
		"--prefill-len", "2048", "-r", "3", "--copy-mib", "8", "--json", jsonPath}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	t.Logf("\n%s", stdout.String())
	out := stdout.String()
	if !strings.Contains(out, "context 2049 for these rows (the model's is 2048)") {
		t.Errorf("no note of the grown context")
	}
	rep := readEngineReport(t, jsonPath)
	var tests []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "|")
		if len(f) != 9 || strings.TrimSpace(f[1]) == "model" || strings.HasPrefix(strings.TrimSpace(f[1]), "---") {
			continue
		}
		if got, want := strings.TrimSpace(f[1]), fmt.Sprintf("llama %.2f M F16", float64(rep.Params)/1e6); got != want || rep.Params == 0 {
			t.Errorf("model label %q, want %q", got, want)
		}
		if got := strings.TrimSpace(f[4]); got != "CPU" {
			t.Errorf("backend %q", got)
		}
		if got := strings.TrimSpace(f[5]); got != strconv.Itoa(runtime.GOMAXPROCS(0)) {
			t.Errorf("threads %q", got)
		}
		tests = append(tests, strings.TrimSpace(f[6]))
		var mean, sd float64
		if _, err := fmt.Sscanf(strings.TrimSpace(f[7]), "%f ± %f", &mean, &sd); err != nil || !(mean > 0) || sd < 0 {
			t.Errorf("t/s %q", f[7])
		}
	}
	if want := []string{"tg8", "tg8 @ d40", "pp2048"}; !slices.Equal(tests, want) {
		t.Errorf("tests %q, want %q", tests, want)
	}
	if rep.Context != 2049 || rep.ModelContext != 2048 || rep.Threads != runtime.GOMAXPROCS(0) {
		t.Errorf("report context %d of %d, threads %d", rep.Context, rep.ModelContext, rep.Threads)
	}
	for _, r := range rep.Rows {
		if len(r.Samples) != 3 {
			t.Fatalf("row %+v: %d samples, want 3", r, len(r.Samples))
		}
		var mean float64
		for _, v := range r.Samples {
			mean += v / 3
		}
		// The row's tok/s is that of the mean time, at most the mean of
		// the rates (Jensen), and within the samples.
		if r.TokPerS > mean*(1+1e-9) || r.TokPerS < slices.Min(r.Samples)*(1-1e-9) || !(r.TokPerSSD >= 0) {
			t.Errorf("row %+v: mean of samples %v", r, mean)
		}
	}
}

// TestEngineLlamaBenchPreset: --llama-bench fills the flags not given
// with llama-bench's defaults; the prompt runs in one step of 512.
func TestEngineLlamaBenchPreset(t *testing.T) {
	path := engTinyModel(t)
	jsonPath := filepath.Join(t.TempDir(), "rows.json")
	var stdout, stderr bytes.Buffer
	if code := EngineMain([]string{"-m", path, "--device", "cpu", "--llama-bench", "--steps", "4", "-r", "2", "--copy-mib", "8",
		"--json", jsonPath, "--quiet"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rep := readEngineReport(t, jsonPath)
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want tg and pp", len(rep.Rows))
	}
	d, p := rep.Rows[0], rep.Rows[1]
	if d.Phase != "decode" || d.Batch != 1 || d.Context != 1 || d.Steps != 4 || len(d.Samples) != 2 ||
		p.Phase != "prefill" || p.Batch != 1 || p.PromptLen != 512 || p.Steps != 1 || len(p.Samples) != 2 {
		t.Errorf("rows %+v", rep.Rows)
	}
	if !strings.Contains(stdout.String(), "| tg4 |") || !strings.Contains(stdout.String(), "| pp512 |") {
		t.Errorf("table:\n%s", stdout.String())
	}
}

// readEngineReport reads the report --json wrote.
func readEngineReport(t *testing.T, path string) EngineReport {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep EngineReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestCPUCopyBandwidth(t *testing.T) {
	if bw := CPUCopyBandwidth(4 << 20); !(bw > 0) || math.IsInf(bw, 0) {
		t.Fatalf("bandwidth %v", bw)
	}
}
