package bench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"ringlm/gguf"
	"ringlm/model"
	"ringlm/quantize"
	"ringlm/runner"
)

// `ringlm bench engine --llama-bench`: llama.cpp's llama-bench tests (pp N,
// tg N) on ringlm's engine, printed in llama-bench's table so that the
// two read side by side. The times come from the same device clock as
// the engine bench's rows.

// LlamaTest is one llama-bench test: Prompt tokens prefilled in one
// request (pp), or Gen tokens generated one at a time (tg); one of the
// two is 0.
type LlamaTest struct {
	Prompt int
	Gen    int
}

// String is the test's name in llama-bench's table: pp512, tg128.
func (t LlamaTest) String() string {
	if t.Prompt > 0 {
		return fmt.Sprintf("pp%d", t.Prompt)
	}
	return fmt.Sprintf("tg%d", t.Gen)
}

// tokens is what a repetition's tok/s counts.
func (t LlamaTest) tokens() int { return t.Prompt + t.Gen }

// llamaTGPrompt is the prompt a tg test's request starts from: llama-bench
// generates from a lone BOS.
const llamaTGPrompt = 1

// startProcs is GOMAXPROCS as the process started: the CPU device sizes
// its worker pool from it when package model is initialized (before this
// one), so a run may use fewer threads than that but not more.
var startProcs = runtime.GOMAXPROCS(0)

// checkThreads refuses a thread count the process cannot give (0: as it
// is).
func checkThreads(n int) error {
	switch {
	case n < 0:
		return fmt.Errorf("-t %d: a thread count is at least 1 (0: GOMAXPROCS, %d)", n, runtime.GOMAXPROCS(0))
	case n > startProcs:
		return fmt.Errorf("-t %d: this process started with GOMAXPROCS %d, and the CPU device's workers were sized then (start it with GOMAXPROCS=%d)",
			n, startProcs, n)
	}
	return nil
}

// withThreads sets GOMAXPROCS to n (0: leaves it) until the returned
// function restores it.
func withThreads(n int) func() {
	if n <= 0 {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(n)
	return func() { runtime.GOMAXPROCS(prev) }
}

// LlamaBenchOptions say what RunLlamaBench measures.
type LlamaBenchOptions struct {
	Model       string
	Device      string // auto, cpu or cuda
	KVType      string // f16 or f32 (f32 on the cpu device only)
	Mmap        bool   // runner.Options.Mmap: the CPU device reads the weights from the file's mapping
	TokenBudget int    // 0: the device's default (runner.DefaultTokenBudget)
	Tests       []LlamaTest
	Reps        int // repetitions of each test (llama-bench's -r)
	Threads     int // GOMAXPROCS during the run (0: as it is)
	Warmup      int // tg: decode steps run before the timed ones
	Log         zerolog.Logger
	Progress    io.Writer // a line per repetition (nil: none)
}

// LlamaBenchResult is one test's repetitions under llama-bench's JSON
// names (-o json), with ringlm's additions: the device, the step sizes,
// and min, median and max of the repetitions' tok/s.
type LlamaBenchResult struct {
	ModelFilename string    `json:"model_filename"`
	ModelType     string    `json:"model_type"`
	ModelSize     uint64    `json:"model_size"`
	ModelNParams  uint64    `json:"model_n_params"`
	Backends      string    `json:"backends"`
	Device        string    `json:"device"`
	NThreads      int       `json:"n_threads"`
	TypeK         string    `json:"type_k"`
	TypeV         string    `json:"type_v"`
	TokenBudget   int       `json:"token_budget"`
	PrefillChunk  int       `json:"prefill_chunk"`
	NPrompt       int       `json:"n_prompt"`
	NGen          int       `json:"n_gen"`
	TestTime      string    `json:"test_time"`
	AvgNS         int64     `json:"avg_ns"`
	StddevNS      int64     `json:"stddev_ns"`
	AvgTS         float64   `json:"avg_ts"`
	StddevTS      float64   `json:"stddev_ts"`
	MinTS         float64   `json:"min_ts"`
	MedianTS      float64   `json:"median_ts"`
	MaxTS         float64   `json:"max_ts"`
	SamplesNS     []int64   `json:"samples_ns"`
	SamplesTS     []float64 `json:"samples_ts"`
}

// Test is the result's test.
func (r *LlamaBenchResult) Test() LlamaTest { return LlamaTest{Prompt: r.NPrompt, Gen: r.NGen} }

// summarize fills the statistics from the samples: the mean and the
// sample standard deviation (n − 1) as llama-bench computes them, of the
// times and of the per-repetition tok/s.
func (r *LlamaBenchResult) summarize() {
	ns := make([]float64, len(r.SamplesNS))
	for i, v := range r.SamplesNS {
		ns[i] = float64(v)
	}
	mean, sd := meanSD(ns)
	r.AvgNS, r.StddevNS = int64(math.Round(mean)), int64(math.Round(sd))
	r.AvgTS, r.StddevTS = meanSD(r.SamplesTS)
	sorted := slices.Sorted(slices.Values(r.SamplesTS))
	n := len(sorted)
	r.MinTS, r.MaxTS = sorted[0], sorted[n-1]
	r.MedianTS = (sorted[(n-1)/2] + sorted[n/2]) / 2
}

func meanSD(v []float64) (mean, sd float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, 0
	}
	for _, x := range v {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(v)-1))
}

// badOption is a value RunLlamaBench refuses once it knows the model (a
// test longer than its context): a usage error, not a failed run.
type badOption struct{ msg string }

func (e badOption) Error() string { return e.msg }

func badOptionf(format string, a ...any) error { return badOption{fmt.Sprintf(format, a...)} }

// llamaTestFits refuses a test whose request the engine cannot hold in
// the model's context: a pp prompt and the one token sampled after it
// (the engine keeps room for it, where llama.cpp fills the context), a tg
// prompt and every token its window generates.
// llamaTestLen is the positions a test's request holds: the prompt and
// the token sampled after it, or the tg prompt, its warm-up steps, the
// timed steps and a margin.
func llamaTestLen(t LlamaTest, budget, warm int) int {
	if t.Prompt > 0 {
		return t.Prompt + 1
	}
	return llamaTGPrompt + engDecodeTokens(1, llamaTGPrompt, budget, warm, t.Gen)
}

// llamaMaxContext bounds the context a test may grow the engine's to.
const llamaMaxContext = 1 << 17

func llamaTestFits(t LlamaTest, budget, warm int) error {
	if n := llamaTestLen(t, budget, warm); n > llamaMaxContext {
		return badOptionf("%s: its request holds %d positions, more than %d", t, n, llamaMaxContext)
	}
	return nil
}

// RunLlamaBench loads the model on the device and runs each test Reps
// times at batch 1, after one untimed run of each pp test (as llama-bench
// warms up). A pp repetition is one request of Prompt random tokens and
// one generated token, timed from its first step's start to its last
// step's end; a tg repetition is one request of a one-token prompt whose
// decode steps are timed, after Warmup of them, for Gen steps.
func RunLlamaBench(o LlamaBenchOptions) ([]LlamaBenchResult, error) {
	ro, err := engRunnerOptions(o.Model, o.Device, o.KVType, o.Mmap, o.Log)
	if err != nil {
		return nil, err
	}
	o.KVType = ro.KVType
	if len(o.Tests) == 0 {
		return nil, badOptionf("no test to run")
	}
	for _, t := range o.Tests {
		if (t.Prompt > 0) == (t.Gen > 0) || t.Prompt < 0 || t.Gen < 0 {
			return nil, badOptionf("test %+v: a pp test has a prompt length ≥ 1, a tg test a generation length ≥ 1", t)
		}
	}
	if o.Reps < 1 {
		return nil, badOptionf("-r %d: at least one repetition", o.Reps)
	}
	if o.Warmup < 0 {
		return nil, badOptionf("--warmup %d: must be ≥ 0", o.Warmup)
	}
	if err := checkThreads(o.Threads); err != nil {
		return nil, badOption{err.Error()}
	}
	kind, err := runner.PickDevice(o.Device, o.KVType, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	// A pp test's prompt goes in one step, as llama-bench's default
	// n_ubatch of 512 takes pp512 in one batch.
	longestPP := 0
	for _, t := range o.Tests {
		longestPP = max(longestPP, t.Prompt)
	}
	budget := o.TokenBudget
	if budget <= 0 {
		budget = max(runner.DefaultTokenBudget(kind), longestPP)
	}

	w, err := runner.Open(o.Model)
	if err != nil {
		return nil, err
	}
	var lm *runner.Runner
	defer func() {
		if lm == nil {
			w.Close()
		} else {
			lm.Close()
		}
	}()
	cfg := w.Model.Config
	const bs = model.DefaultBlockSize
	blocks, longest := 16, 0
	for _, t := range o.Tests {
		if err := llamaTestFits(t, budget, o.Warmup); err != nil {
			return nil, err
		}
		positions := llamaTestLen(t, budget, o.Warmup)
		longest = max(longest, positions)
		blocks = max(blocks, (positions+bs-1)/bs+1)
	}
	// The engine's context grows to the longest test, as llama-bench sizes
	// n_ctx to each test: RoPE takes any position, and the tests measure
	// speed (gocoder's 512-token context and its pp512).
	if longest > cfg.Context {
		w.Model.Context = longest
	}
	base := LlamaBenchResult{ModelFilename: o.Model, ModelType: ModelType(w.File), TypeK: strings.ToLower(o.KVType),
		TypeV: strings.ToLower(o.KVType), TokenBudget: budget}
	base.ModelNParams, base.ModelSize = tensorTotals(w.File)

	defer withThreads(o.Threads)()
	ro.Slots, ro.TokenBudget, ro.KVBlocks = 1, budget, blocks
	ro.PrefillChunk = min(max(longestPP, runner.DefaultPrefillChunk(kind, budget)), budget)
	lm, b, err := engStart(w, ro, o.Warmup, budget)
	if err != nil {
		return nil, err
	}
	base.Device, base.NThreads = lm.Engine.DeviceName(), runtime.GOMAXPROCS(0)
	base.Backends = strings.ToUpper(lm.Device)
	base.PrefillChunk = ro.PrefillChunk
	if lm.Device == "cuda" {
		base.TypeK, base.TypeV = "f16", "f16" // the CUDA device keeps an f16 KV cache
	}

	var out []LlamaBenchResult
	for _, t := range o.Tests {
		r := base
		r.NPrompt, r.NGen = t.Prompt, t.Gen
		r.TestTime = time.Now().UTC().Format(time.RFC3339)
		if t.Prompt > 0 {
			if _, err := b.prefill(1, t.Prompt); err != nil {
				return nil, fmt.Errorf("%s, warm-up run: %w", t, err)
			}
		}
		for i := range o.Reps {
			ns, err := b.llamaRep(t)
			if err != nil {
				return nil, fmt.Errorf("%s, repetition %d: %w", t, i+1, err)
			}
			ts := float64(t.tokens()) / (ns / 1e9)
			r.SamplesNS = append(r.SamplesNS, int64(math.Round(ns)))
			r.SamplesTS = append(r.SamplesTS, ts)
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "%s %d/%d: %.2f tok/s\n", t, i+1, o.Reps, ts)
			}
		}
		r.summarize()
		out = append(out, r)
	}
	return out, nil
}

// llamaRep runs one repetition of t and returns its time in ns on the
// device clock.
func (b *engBench) llamaRep(t LlamaTest) (float64, error) {
	if t.Prompt > 0 {
		row, err := b.prefill(1, t.Prompt)
		return row.MS * 1e6, err
	}
	row, err := b.decode(1, llamaTGPrompt, t.Gen)
	if err != nil {
		return 0, err
	}
	if row.Steps != t.Gen {
		return 0, fmt.Errorf("%d of %d tokens timed: the request ended first", row.Steps, t.Gen)
	}
	return row.MSPerStep * 1e6 * float64(row.Steps), nil
}

// tensorTotals are the file's parameters and tensor bytes, llama-bench's
// params and size.
func tensorTotals(f *gguf.File) (params, bytes uint64) {
	for i := range f.Tensors {
		params += f.Tensors[i].Elements()
		bytes += f.Tensors[i].Size
	}
	return params, bytes
}

// ModelType is llama-bench's model column for f: the architecture, a size
// label and llama.cpp's name of the file type ("qwen2 494M Q8_0").
// llama.cpp labels the size from its own table of layer counts per
// architecture; ringlm has none and takes general.size_label, which
// llama.cpp's converter writes, else the label the converter would write
// (SizeLabel of the parameter count). Without general.file_type the type
// is guessed as llama.cpp guesses it: the commonest tensor type's file
// type, marked "(guessed)".
func ModelType(f *gguf.File) string {
	arch, err := f.Architecture()
	if err != nil {
		arch = "unknown"
	}
	size, _ := f.String("general.size_label")
	if size == "" {
		params, _ := tensorTotals(f)
		size = SizeLabel(params)
	}
	return arch + " " + size + " " + fileTypeOf(f)
}

func fileTypeOf(f *gguf.File) string {
	if _, ok := f.Get("general.file_type"); ok {
		ft, err := f.Uint32("general.file_type")
		if n, ok := quantize.FileTypeName(ft); err == nil && ok {
			return n
		}
		return "unknown"
	}
	count := map[gguf.Type]int{}
	var common gguf.Type
	for i := range f.Tensors {
		t := f.Tensors[i].Type
		count[t]++
		if count[t] > count[common] {
			common = t
		}
	}
	if m := quantize.PureMix(common); len(f.Tensors) > 0 && !m.NoFileType {
		if n, ok := quantize.FileTypeName(m.FileType); ok {
			return n + " (guessed)"
		}
	}
	return "unknown (guessed)"
}

// SizeLabel writes a parameter count as llama.cpp's converter labels a
// model's size (gguf-py's model_weight_count_rounded_notation): in K, M,
// B or T, with at least two significant digits (494M, 5.0M, 1.2B).
func SizeLabel(params uint64) string {
	n := float64(params)
	scaled, suffix := n*1e-3, "K"
	switch {
	case n > 1e12:
		scaled, suffix = n*1e-12, "T"
	case n > 1e9:
		scaled, suffix = n*1e-9, "B"
	case n > 1e6:
		scaled, suffix = n*1e-6, "M"
	}
	digits := len(strings.TrimLeft(strconv.FormatFloat(math.RoundToEven(scaled), 'f', 0, 64), "0"))
	return strconv.FormatFloat(scaled, 'f', max(2-digits, 0), 64) + suffix
}

// llamaColumn is a column of llama-bench's markdown table: its width,
// negative for left-aligned, as llama-bench's printer sizes it.
type llamaColumn struct {
	name  string
	width int
}

// llamaColumns are llama-bench's columns for a CPU run, then ringlm's
// min, median and max.
var llamaColumns = []llamaColumn{{"model", -30}, {"size", 10}, {"params", 10}, {"backend", -10}, {"threads", 7},
	{"test", 15}, {"t/s", 20}, {"min", 10}, {"median", 10}, {"max", 10}}

// WriteLlamaMarkdown prints the results as llama-bench's markdown table:
// t/s is the mean ± the sample standard deviation of the repetitions'
// tok/s; min, median and max are ringlm's additions, for noisy machines.
func WriteLlamaMarkdown(w io.Writer, results []LlamaBenchResult) error {
	row := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			fmt.Fprintf(&b, " %*s |", llamaColumns[i].width, c)
		}
		fmt.Fprintln(w, b.String())
	}
	cells := make([]string, len(llamaColumns))
	for i, c := range llamaColumns {
		cells[i] = c.name
	}
	row(cells)
	for i, c := range llamaColumns {
		dash := strings.Repeat("-", abs(c.width)-1)
		if c.width > 0 {
			cells[i] = dash + ":"
		} else {
			cells[i] = dash + "-"
		}
	}
	row(cells)
	for _, r := range results {
		row([]string{r.ModelType, llamaSize(r.ModelSize), llamaParams(r.ModelNParams), r.Backends, strconv.Itoa(r.NThreads),
			r.Test().String(), fmt.Sprintf("%.2f ± %.2f", r.AvgTS, r.StddevTS),
			fmt.Sprintf("%.2f", r.MinTS), fmt.Sprintf("%.2f", r.MedianTS), fmt.Sprintf("%.2f", r.MaxTS)})
	}
	if len(results) > 0 {
		r := results[0]
		_, err := fmt.Fprintf(w, "\nringlm %s, %d repetitions, KV %s, token budget %d, prefill chunk %d\n",
			r.Device, len(r.SamplesTS), r.TypeK, r.TokenBudget, r.PrefillChunk)
		return err
	}
	return nil
}

// llamaSize and llamaParams print size and params as llama-bench does.
func llamaSize(b uint64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
}

func llamaParams(n uint64) string {
	if n < 1e9 {
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f B", float64(n)/1e9)
}

// parseLlamaLengths reads -p or -n: comma-separated token counts, each
// ≥ 1.
func parseLlamaLengths(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.Atoi(f)
		switch {
		case err != nil:
			return nil, fmt.Errorf("-%s %q: not a token count", flagName, f)
		case v < 1:
			return nil, fmt.Errorf("-%s %d: a test needs at least one token (--tests names the tests to run, e.g. --tests tg128 for no pp test)", flagName, v)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseLlamaTests reads --tests: test names (pp512, tg128), comma-separated.
func parseLlamaTests(s string) ([]LlamaTest, error) {
	var out []LlamaTest
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		kind, num := f[:min(2, len(f))], f[min(2, len(f)):]
		v, err := strconv.Atoi(num)
		if (kind != "pp" && kind != "tg") || err != nil || v < 1 {
			return nil, fmt.Errorf("--tests: %q is not a test (ppN or tgN, N ≥ 1)", f)
		}
		if kind == "pp" {
			out = append(out, LlamaTest{Prompt: v})
		} else {
			out = append(out, LlamaTest{Gen: v})
		}
	}
	return out, nil
}
