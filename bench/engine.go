package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/internal/cli"
	"ringlm/kernels/cuda"
	"ringlm/model"
	"ringlm/runner"
	"ringlm/sample"
	"ringlm/synth"
)

// `ringlm bench engine`: decode and prefill throughput of the engine on a
// device, without HTTP. The model is loaded by package runner, as `ringlm
// serve` and `ringlm run` load it; steps are timed on the device's own
// clock (Config.StepHook's start and end ns).

// EngineOptions say what RunEngineBench measures.
type EngineOptions struct {
	Model      string
	Device     string // auto, cpu or cuda
	Batches    []int  // sequences decoding together
	Contexts   []int  // prompt length of every sequence before the timed decode steps
	Steps      int    // decode steps timed per row
	Warmup     int    // full-batch decode steps run before the timed ones
	PrefillLen int    // prompt tokens per request of the prefill rows (0: no prefill rows)
	KVType     string // f16 or f32 (f32 on the cpu device only)
	// TokenBudget is the engine's tokens per step (0: the device's
	// default, runner.DefaultTokenBudget, or the largest batch if larger:
	// a decode step must hold the whole batch).
	TokenBudget int
	CopyMiB     int  // CPU copy-bandwidth buffer in MiB (0: 256)
	Threads     int  // GOMAXPROCS during the run (0: as it is)
	Mmap        bool // runner.Options.Mmap: the CPU device reads the weights from the file's mapping
	Log         zerolog.Logger
	Progress    io.Writer // a line per finished row (nil: none)
}

// EngineRow is one measured row.
type EngineRow struct {
	Phase string `json:"phase"` // "decode" or "prefill"
	Batch int    `json:"batch"`
	// Decode: every sequence's prompt length; a timed step reads about
	// this many KV positions per sequence (a few more: the tokens
	// generated before and during the window).
	Context int `json:"context,omitempty"`
	// Prefill: every request's prompt length.
	PromptLen int `json:"prompt_len,omitempty"`
	// Steps: decode steps timed; prefill: steps that did the prompts.
	Steps     int     `json:"steps"`
	MSPerStep float64 `json:"ms_per_step,omitempty"` // decode
	MS        float64 `json:"ms,omitempty"`          // prefill: first step's start to last step's end
	TokPerS   float64 `json:"tok_per_s"`
	// Decode roofline: bytes a step moves at least (every weight once,
	// the batch's KV cache once), their rate, and against the bandwidth
	// measured in the same run the floor (bytes / bandwidth) and the step
	// time as a multiple of it. Null when no bandwidth was measured.
	WeightBytes  int64    `json:"weight_bytes,omitempty"`
	KVBytes      int64    `json:"kv_bytes,omitempty"`
	BytesPerStep int64    `json:"bytes_per_step,omitempty"`
	GBPerS       float64  `json:"gb_per_s,omitempty"`
	FloorMS      *float64 `json:"floor_ms,omitempty"`
	XFloor       *float64 `json:"x_floor,omitempty"`
	Note         string   `json:"note,omitempty"`
}

// EngineReport is what RunEngineBench measured, and what --json writes.
type EngineReport struct {
	Date        string `json:"date"`
	Model       string `json:"model"`
	ModelName   string `json:"model_name"`
	Device      string `json:"device"`
	Arch        string `json:"arch"`
	Layers      int    `json:"layers"`
	KVHeads     int    `json:"kv_heads"`
	HeadDim     int    `json:"head_dim"`
	KVType      string `json:"kv_type"`
	KVElemBytes int    `json:"kv_elem_bytes"`
	WeightBytes int64  `json:"weight_bytes"`
	TokenBudget int    `json:"token_budget"`
	// Bandwidth is the copy bandwidth in GB/s (bytes read + bytes
	// written per second), nil when not measured; BandwidthMethod says
	// how it was measured or why not.
	Bandwidth       *float64    `json:"bandwidth_gbps"`
	BandwidthMethod string      `json:"bandwidth_method"`
	Rows            []EngineRow `json:"rows"`
}

// KVBytesPerStep is the KV cache a decode step reads: every sequence's
// keys and values at every cached position in every layer.
func KVBytesPerStep(batch, context, layers, kvHeads, headDim, elemBytes int) int64 {
	return int64(batch) * int64(context) * int64(layers) * 2 * int64(kvHeads) * int64(headDim) * int64(elemBytes)
}

// DecodeBytesPerStep is the least a decode step moves: all weights once
// plus KVBytesPerStep.
func DecodeBytesPerStep(weightBytes int64, batch, context, layers, kvHeads, headDim, elemBytes int) int64 {
	return weightBytes + KVBytesPerStep(batch, context, layers, kvHeads, headDim, elemBytes)
}

// Roofline fills a decode row's byte and floor columns from its step time
// and the bandwidth (GB/s; ≤ 0 or NaN: unknown).
func (r *EngineRow) Roofline(weightBytes int64, c *model.Config, elemBytes int, bandwidth float64) {
	r.WeightBytes = weightBytes
	r.KVBytes = KVBytesPerStep(r.Batch, r.Context, c.Layers, c.KVHeads, c.HeadDim, elemBytes)
	r.BytesPerStep = r.WeightBytes + r.KVBytes
	if r.MSPerStep > 0 {
		r.GBPerS = float64(r.BytesPerStep) / (r.MSPerStep / 1e3) / 1e9
	}
	if bandwidth > 0 {
		floor := float64(r.BytesPerStep) / (bandwidth * 1e9) * 1e3
		x := r.MSPerStep / floor
		r.FloorMS, r.XFloor = &floor, &x
	}
}

// CPUCopyBandwidth measures memory copy bandwidth in GB/s (bytes read +
// bytes written per second, as the CUDA device's figure): copy() of a
// buffer of the given size, split over GOMAXPROCS goroutines, best of 3
// after one untimed copy that faults the pages in.
func CPUCopyBandwidth(size int) float64 {
	src, dst := make([]byte, size), make([]byte, size)
	for i := 0; i < size; i += 4096 {
		src[i] = byte(i)
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	chunk := (size + workers - 1) / workers
	once := func() time.Duration {
		t := time.Now()
		var wg sync.WaitGroup
		for lo := 0; lo < size; lo += chunk {
			hi := min(lo+chunk, size)
			wg.Add(1)
			go func() {
				defer wg.Done()
				copy(dst[lo:hi], src[lo:hi])
			}()
		}
		wg.Wait()
		return time.Since(t)
	}
	once()
	best := time.Duration(math.MaxInt64)
	for range 3 {
		best = min(best, once())
	}
	runtime.KeepAlive(dst)
	return 2 * float64(size) / best.Seconds() / 1e9
}

// cudaCopyBandwidth measures the GPU's device copy bandwidth with
// cuda.Device.CopyBandwidth, which must run before a persistent kernel
// starts (it would compete for memory): runner.Start starts the engine's
// at once, so a throwaway device over the tiny synthetic model measures
// it first. The figure is the GPU's, not the model's.
func cudaCopyBandwidth() (float64, error) {
	s, err := synth.Lookup("tiny", "llama")
	if err != nil {
		return 0, err
	}
	w, err := synth.Build(synth.Options{Shape: s, Type: gguf.TypeF16, Seed: 1})
	if err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return 0, err
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		return 0, err
	}
	m, err := model.Load(f)
	if err != nil {
		return 0, err
	}
	dev, err := cuda.Open(m, cuda.Options{Slots: 1, NumBlocks: 16, Context: 256})
	if err != nil {
		return 0, err
	}
	bw, err := dev.CopyBandwidth(1 << 30)
	return bw, errors.Join(err, dev.Close())
}

// engClock times steps on the device clock (StepHook). Decode: armed
// once every sequence of the batch has its first token, it skips warm
// full-batch steps, starts at the end of the next one and closes after
// want more (or early at a step that is not full: a sequence ended).
// Prefill: it spans the first executed step's start to the last one's
// end.
type engClock struct {
	mu   sync.Mutex
	mode int // engClockIdle, engClockDecode, engClockPrefill

	full, warm, want int
	seen, measured   int
	t0, t1           uint64
	started, closed  bool
	early            int
	done             chan struct{}

	pStart, pEnd uint64
	pSteps       int
}

const (
	engClockIdle = iota
	engClockDecode
	engClockPrefill
)

func (c *engClock) hook(_ uint64, entries int, start, end uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.mode {
	case engClockDecode:
		if c.closed {
			return
		}
		if entries < c.full {
			c.early = entries
			c.close()
			return
		}
		c.seen++
		switch {
		case c.seen <= c.warm:
		case !c.started:
			c.started, c.t0, c.t1 = true, end, end
		default:
			c.t1 = end
			c.measured++
			if c.measured >= c.want {
				c.close()
			}
		}
	case engClockPrefill:
		if entries == 0 {
			return // only skipped entries: no work
		}
		if c.pSteps == 0 || start < c.pStart {
			c.pStart = start
		}
		c.pEnd = max(c.pEnd, end)
		c.pSteps++
	}
}

func (c *engClock) close() {
	c.closed = true
	close(c.done)
}

func (c *engClock) armDecode(full, warm, want int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mode, c.full, c.warm, c.want = engClockDecode, full, warm, want
	c.seen, c.measured, c.t0, c.t1, c.started, c.closed, c.early = 0, 0, 0, 0, false, false, 0
	c.done = make(chan struct{})
	return c.done
}

func (c *engClock) armPrefill() {
	c.mu.Lock()
	c.mode, c.pStart, c.pEnd, c.pSteps = engClockPrefill, 0, 0, 0
	c.mu.Unlock()
}

func (c *engClock) idle() {
	c.mu.Lock()
	c.mode = engClockIdle
	c.mu.Unlock()
}

// engBench runs the rows on one loaded engine.
type engBench struct {
	warm   int // full-batch decode steps before a decode window
	e      *engine.Engine
	clock  *engClock
	vocab  int
	free   int // free KV blocks when idle
	rng    *rand.Rand
	budget int
}

// engStart starts w's engine for a bench (ro's sizes set by the caller),
// with the step clock on its hook, and runs one short request untimed:
// the first steps fault in scratch memory. A non-nil Runner owns w and
// must be closed, even with an error; a nil one leaves w the caller's.
func engStart(w *runner.Weights, ro runner.Options, warm, budget int) (*runner.Runner, *engBench, error) {
	clock := &engClock{}
	ro.StepHook = clock.hook
	lm, err := runner.Start(w, ro)
	if err != nil {
		return nil, nil, err
	}
	b := &engBench{warm: warm, e: lm.Engine, clock: clock, vocab: w.Model.Config.Vocab, free: lm.Engine.FreeBlocks(),
		rng: rand.New(rand.NewPCG(1, 2)), budget: budget}
	s, err := b.submit(b.prompt(8), 4)
	if err != nil {
		return lm, nil, err
	}
	engEndAll([]*engine.Stream{s})
	if err := b.waitIdle(); err != nil {
		return lm, nil, err
	}
	return lm, b, nil
}

// engDecodeTokens is how many tokens a decode row's requests may generate:
// room for the spread of their first tokens (the batch's prompts take
// about batch × context / budget steps), the steps queued ahead, the
// warm-up and the window, with a margin.
func engDecodeTokens(batch, context, budget, warm, steps int) int {
	return (batch*context+budget-1)/budget + 2 + warm + 1 + steps + 8
}

func (b *engBench) prompt(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(b.rng.IntN(b.vocab))
	}
	return p
}

// waitIdle waits until no request runs or waits and every KV block is
// back: every step of the row has completed (its hook has run).
func (b *engBench) waitIdle() error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := b.e.Stats()
		if st.Running == 0 && st.Waiting == 0 && b.e.FreeBlocks() == b.free {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the engine did not go idle: %d running, %d waiting, %d of %d blocks free", st.Running, st.Waiting, b.e.FreeBlocks(), b.free)
		}
		time.Sleep(time.Millisecond)
	}
}

func (b *engBench) submit(prompt []int32, maxTokens int) (*engine.Stream, error) {
	p := sample.Defaults()
	p.Temperature, p.MaxTokens = 0, maxTokens
	return b.e.Submit(context.Background(), engine.Request{Prompt: prompt, Params: p, IgnoreEOS: true})
}

func engEndAll(streams []*engine.Stream) {
	for _, s := range streams {
		if s != nil {
			s.Cancel()
		}
	}
	for _, s := range streams {
		if s != nil {
			<-s.Done()
		}
	}
}

// decode measures one decode row: batch requests with prompts of context
// tokens are prefilled (not timed), then steps full-batch steps are timed.
func (b *engBench) decode(batch, ctx, steps int) (row EngineRow, err error) {
	row = EngineRow{Phase: "decode", Batch: batch, Context: ctx}
	maxTokens := engDecodeTokens(batch, ctx, b.budget, b.warm, steps)
	streams := make([]*engine.Stream, batch)
	defer func() {
		engEndAll(streams)
		b.clock.idle()
		if ierr := b.waitIdle(); err == nil {
			err = ierr
		}
	}()
	for i := range streams {
		if streams[i], err = b.submit(b.prompt(ctx), maxTokens); err != nil {
			return row, err
		}
	}
	// Every sequence has sampled its first token: its prompt is done,
	// and from now on every step holds the whole batch.
	for _, s := range streams {
		toks, done, err := s.Recv(context.Background(), nil)
		if err != nil {
			return row, err
		}
		if len(toks) == 0 && done {
			_, ferr := s.Finish()
			return row, fmt.Errorf("a request ended before its first token: %v", ferr)
		}
	}
	window := b.clock.armDecode(batch, b.warm, steps)
	allEnded := make(chan struct{})
	go func() {
		for _, s := range streams {
			<-s.Done()
		}
		close(allEnded)
	}()
	select {
	case <-window:
	case <-allEnded: // the requests ran out of tokens first
	}
	b.clock.mu.Lock()
	if !b.clock.closed {
		b.clock.close()
	}
	n, ns, early := b.clock.measured, float64(b.clock.t1-b.clock.t0), b.clock.early
	b.clock.mu.Unlock()
	if n == 0 {
		return row, fmt.Errorf("no full-batch step was timed (a step of %d entries of %d came first)", early, batch)
	}
	if n < steps {
		row.Note = fmt.Sprintf("only %d of %d steps timed", n, steps)
	}
	row.Steps = n
	row.MSPerStep = ns / 1e6 / float64(n)
	row.TokPerS = float64(batch) * 1e3 / row.MSPerStep
	return row, nil
}

// prefill measures one prefill row: batch requests of promptLen prompt
// tokens and one generated token each, from the first step's start to
// the last step's end.
func (b *engBench) prefill(batch, promptLen int) (row EngineRow, err error) {
	row = EngineRow{Phase: "prefill", Batch: batch, PromptLen: promptLen}
	prompts := make([][]int32, batch)
	for i := range prompts {
		prompts[i] = b.prompt(promptLen)
	}
	streams := make([]*engine.Stream, batch)
	defer func() {
		engEndAll(streams)
		b.clock.idle()
		if ierr := b.waitIdle(); err == nil {
			err = ierr
		}
	}()
	b.clock.armPrefill()
	for i := range streams {
		if streams[i], err = b.submit(prompts[i], 1); err != nil {
			return row, err
		}
	}
	for _, s := range streams {
		<-s.Done()
		if _, ferr := s.Finish(); ferr != nil {
			return row, ferr
		}
	}
	if err := b.waitIdle(); err != nil {
		return row, err
	}
	b.clock.mu.Lock()
	steps, ns := b.clock.pSteps, float64(b.clock.pEnd-b.clock.pStart)
	b.clock.mu.Unlock()
	if steps == 0 || ns <= 0 {
		return row, errors.New("no prefill step was timed")
	}
	row.Steps = steps
	row.MS = ns / 1e6
	row.TokPerS = float64(batch*promptLen) / (ns / 1e9)
	return row, nil
}

// engRunnerOptions are the runner options every engine bench starts
// from, once the model, device and KV type (default f16) are known good.
func engRunnerOptions(modelPath, device, kvType string, mmap bool, log zerolog.Logger) (runner.Options, error) {
	if modelPath == "" {
		return runner.Options{}, errors.New("no model file")
	}
	if kvType == "" {
		kvType = "f16"
	}
	ro := runner.Options{Device: device, KVType: kvType, Mmap: mmap, Log: log}
	return ro, ro.Check()
}

// RunEngineBench loads the model on the device and measures every decode
// row (each context × each batch), then every prefill row.
func RunEngineBench(o EngineOptions) (*EngineReport, error) {
	ro, err := engRunnerOptions(o.Model, o.Device, o.KVType, o.Mmap, o.Log)
	if err != nil {
		return nil, err
	}
	o.KVType = ro.KVType
	if len(o.Batches) == 0 || (len(o.Contexts) == 0 && o.PrefillLen <= 0) {
		return nil, errors.New("nothing to measure: give batch sizes and context lengths or a prefill length")
	}
	for _, v := range o.Batches {
		if v < 1 {
			return nil, fmt.Errorf("batch size %d: must be ≥ 1", v)
		}
	}
	for _, v := range o.Contexts {
		if v < 1 {
			return nil, fmt.Errorf("context %d: must be ≥ 1", v)
		}
	}
	if err := checkThreads(o.Threads); err != nil {
		return nil, err
	}
	if o.Steps < 1 || o.Warmup < 0 || o.PrefillLen < 0 {
		return nil, fmt.Errorf("--steps must be ≥ 1, --warmup and --prefill-len ≥ 0 (got %d, %d, %d)", o.Steps, o.Warmup, o.PrefillLen)
	}
	maxBatch := 0
	for _, v := range o.Batches {
		maxBatch = max(maxBatch, v)
	}
	kind, err := runner.PickDevice(o.Device, o.KVType, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	budget := o.TokenBudget
	if budget <= 0 {
		budget = max(runner.DefaultTokenBudget(kind), maxBatch)
	}
	if budget < maxBatch {
		return nil, fmt.Errorf("--token-budget %d is below the largest batch %d: a decode step could not hold the batch", budget, maxBatch)
	}

	// The model's shape sizes the KV pool and its weight bytes go into
	// the roofline; the engine starts on it once the GPU's copy bandwidth
	// is measured.
	w, err := runner.Open(o.Model)
	if err != nil {
		return nil, err
	}
	// Until the engine starts, the weights are this function's to close;
	// then the runner's (lm.Close closes both).
	var lm *runner.Runner
	closed := false
	defer func() {
		switch {
		case lm == nil:
			w.Close()
		case !closed:
			lm.Close()
		}
	}()
	cfg, weights := w.Model.Config, w.Model.WeightBytes()
	name, _ := w.File.String("general.name")

	// Sequence lengths and KV blocks every row needs.
	const bs = model.DefaultBlockSize
	blocks := 0
	for _, ctx := range o.Contexts {
		for _, batch := range o.Batches {
			n := engDecodeTokens(batch, ctx, budget, o.Warmup, o.Steps)
			if ctx+n > cfg.Context {
				return nil, fmt.Errorf("--context %d: with the %d tokens a row of batch %d generates it exceeds the model's context of %d",
					ctx, n, batch, cfg.Context)
			}
			blocks = max(blocks, batch*((ctx+n+bs-1)/bs+1))
		}
	}
	if o.PrefillLen > 0 {
		if o.PrefillLen+1 > cfg.Context {
			return nil, fmt.Errorf("--prefill-len %d exceeds the model's context of %d", o.PrefillLen, cfg.Context)
		}
		for _, batch := range o.Batches {
			blocks = max(blocks, batch*((o.PrefillLen+1+bs-1)/bs+1))
		}
	}
	blocks = max(blocks, 16)

	rep := &EngineReport{Date: time.Now().Format("20060102-150405"), Model: o.Model, ModelName: name, Arch: cfg.Arch,
		Layers: cfg.Layers, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, KVType: strings.ToLower(o.KVType), WeightBytes: weights,
		TokenBudget: budget}

	// The CUDA copy bandwidth must be measured before the engine's
	// kernel starts.
	cudaBW, cudaErr := math.NaN(), error(nil)
	if kind == "cuda" {
		cudaBW, cudaErr = cudaCopyBandwidth()
	}

	defer withThreads(o.Threads)()
	ro.Slots, ro.TokenBudget, ro.KVBlocks, ro.MaxQueue = maxBatch, budget, blocks, max(4096, 2*maxBatch)
	lm, b, err := engStart(w, ro, o.Warmup, budget)
	if err != nil {
		return nil, err
	}
	rep.Device = lm.Engine.DeviceName()
	rep.KVElemBytes = 2
	if rep.KVType == "f32" {
		rep.KVElemBytes = 4
	}
	bw := math.NaN()
	if lm.Device == "cuda" {
		rep.KVElemBytes = 2 // the CUDA device keeps an f16 KV cache
		switch {
		case cudaErr != nil:
			rep.BandwidthMethod = "n/a: cuda.Device.CopyBandwidth failed: " + cudaErr.Error()
		case math.IsNaN(cudaBW):
			rep.BandwidthMethod = "n/a: not measured"
		default:
			bw = cudaBW
			rep.BandwidthMethod = "cuda.Device.CopyBandwidth: 1 GiB device-to-device copy, read + write bytes per second"
		}
	} else {
		mib := o.CopyMiB
		if mib <= 0 {
			mib = 256
		}
		bw = CPUCopyBandwidth(mib << 20)
		rep.BandwidthMethod = fmt.Sprintf("copy() of a %d MiB buffer over %d goroutines, best of 3, read + write bytes per second",
			mib, runtime.GOMAXPROCS(0))
	}
	if !math.IsNaN(bw) {
		rep.Bandwidth = &bw
	}

	progress := func(r EngineRow) {
		if o.Progress != nil {
			if r.Phase == "decode" {
				fmt.Fprintf(o.Progress, "decode batch %d context %d: %.3f ms/step, %.1f tok/s\n", r.Batch, r.Context, r.MSPerStep, r.TokPerS)
			} else {
				fmt.Fprintf(o.Progress, "prefill batch %d prompt %d: %.3f ms, %.1f tok/s\n", r.Batch, r.PromptLen, r.MS, r.TokPerS)
			}
		}
	}
	for _, ctx := range o.Contexts {
		for _, batch := range o.Batches {
			row, err := b.decode(batch, ctx, o.Steps)
			if err != nil {
				return nil, fmt.Errorf("decode batch %d context %d: %w", batch, ctx, err)
			}
			row.Roofline(weights, &cfg, rep.KVElemBytes, bw)
			rep.Rows = append(rep.Rows, row)
			progress(row)
		}
	}
	if o.PrefillLen > 0 {
		for _, batch := range o.Batches {
			row, err := b.prefill(batch, o.PrefillLen)
			if err != nil {
				return nil, fmt.Errorf("prefill batch %d: %w", batch, err)
			}
			rep.Rows = append(rep.Rows, row)
			progress(row)
		}
	}
	closed = true
	if err := lm.Close(); err != nil {
		return nil, err
	}
	return rep, nil
}

// WriteTable prints the rows as aligned tables: decode, then prefill.
func (rep *EngineReport) WriteTable(w io.Writer) error {
	bw := "n/a"
	if rep.Bandwidth != nil {
		bw = fmt.Sprintf("%.1f GB/s", *rep.Bandwidth)
	}
	fmt.Fprintf(w, "model   %s (%s, %d layers, %d KV heads × %d, %.3f GB of weights)\n", rep.Model, rep.Arch, rep.Layers,
		rep.KVHeads, rep.HeadDim, float64(rep.WeightBytes)/1e9)
	fmt.Fprintf(w, "device  %s, KV %s, token budget %d\n", rep.Device, rep.KVType, rep.TokenBudget)
	fmt.Fprintf(w, "copy bandwidth %s (%s)\n", bw, rep.BandwidthMethod)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var decode, prefill []EngineRow
	for _, r := range rep.Rows {
		if r.Phase == "decode" {
			decode = append(decode, r)
		} else {
			prefill = append(prefill, r)
		}
	}
	opt := func(p *float64, f string) string {
		if p == nil {
			return "n/a"
		}
		return fmt.Sprintf(f, *p)
	}
	if len(decode) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "phase\tbatch\tcontext\tsteps\tms/step\ttok/s\tMB/step\tGB/s\tcopy GB/s\tfloor ms\tx-floor\t")
		for _, r := range decode {
			fmt.Fprintf(tw, "decode\t%d\t%d\t%d\t%.3f\t%.1f\t%.2f\t%.1f\t%s\t%s\t%s\t%s\n", r.Batch, r.Context, r.Steps, r.MSPerStep, r.TokPerS,
				float64(r.BytesPerStep)/1e6, r.GBPerS, opt(rep.Bandwidth, "%.1f"), opt(r.FloorMS, "%.3f"), opt(r.XFloor, "%.2f"), r.Note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(prefill) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "phase\tbatch\tprompt\tsteps\tms\ttok/s\t")
		for _, r := range prefill {
			fmt.Fprintf(tw, "prefill\t%d\t%d\t%d\t%.3f\t%.1f\t%s\n", r.Batch, r.PromptLen, r.Steps, r.MS, r.TokPerS, r.Note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// engParseInts reads a comma-separated list of positive integers.
func engParseInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("--%s: %q is not a positive integer", flagName, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// EngineMain is `ringlm bench engine`; it returns the exit status (0, 1
// for an error, 2 for bad usage).
func EngineMain(args []string, stdout, stderr io.Writer) int {
	fs := cli.Quiet(flag.NewFlagSet("bench engine", flag.ContinueOnError))
	modelPath := fs.String("m", "", "GGUF model file (required)")
	defDevice := os.Getenv("RINGLM_DEVICE")
	if defDevice == "" {
		defDevice = "auto"
	}
	device := fs.String("device", defDevice, "device: auto (cuda when libringlm_cuda.so loads and sees a GPU, else cpu), cpu, cuda ($RINGLM_DEVICE)")
	batches := fs.String("batch", "1,16,64", "batch sizes, comma-separated")
	contexts := fs.String("context", "128,1024", "context lengths of the decode rows (every sequence's prompt length), comma-separated; empty: no decode rows")
	steps := fs.Int("steps", 64, "decode steps timed per row")
	warmup := fs.Int("warmup", 4, "full-batch decode steps run before the timed ones (also before a tg test's)")
	prefillLen := fs.Int("prefill-len", 512, "prompt tokens per request of the prefill rows (0: no prefill rows)")
	kvType := fs.String("kv-type", "f16", "KV cache type: f16 or f32 (f32 on the cpu device only)")
	budget := fs.Int("token-budget", 0, "tokens per engine step (0: the device's default, 2048 on cuda and 512 on cpu, or the largest batch if larger)")
	copyMiB := fs.Int("copy-mib", 256, "cpu device: the copy-bandwidth buffer in MiB")
	mmap := fs.Bool("mmap", false, "cpu device: read the weights in place from the file's mapping instead of a private copy in huge pages (llama-bench's default is its mmap)")
	threads := fs.Int("t", 0, fmt.Sprintf("threads: GOMAXPROCS during the run, at most the process's at start (0: as it is, %d)", runtime.GOMAXPROCS(0)))
	llama := fs.Bool("llama-bench", false, "run llama-bench's tests (pp512 and tg128 unless -p, -n or --tests say otherwise) at batch 1 and print its table")
	pp := fs.String("p", "512", "llama-bench: prompt lengths of the pp tests, comma-separated (implies --llama-bench)")
	tg := fs.String("n", "128", "llama-bench: generated lengths of the tg tests, comma-separated (implies --llama-bench)")
	tests := fs.String("tests", "", "llama-bench: the tests by name in order, instead of -p and -n: pp512,tg128 (implies --llama-bench)")
	reps := fs.Int("r", 5, "llama-bench: repetitions of each test (implies --llama-bench)")
	format := fs.String("o", "md", "llama-bench: output, md (llama-bench's table with min, median, max) or json (per-repetition samples) (implies --llama-bench)")
	jsonPath := fs.String("json", "", "also write the rows (llama-bench: the results) as JSON to this file")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: ringlm bench engine -m MODEL.gguf [--device auto|cpu|cuda] [--batch 1,16,64] [--context 128,1024] [--steps N] [--prefill-len 512] [--json FILE]")
		fmt.Fprintln(w, "       ringlm bench engine -m MODEL.gguf --llama-bench [-p 512] [-n 128] [-r 5] [-t N] [-o md|json]")
		fmt.Fprintln(w, "\nDecode and prefill throughput of the engine on a device, timed on the device clock, with a roofline\n(bytes a decode step moves against the copy bandwidth measured in the same run); or llama-bench's\ntests, pp (a prompt prefilled) and tg (tokens generated) at batch 1, in llama-bench's table.\n\nflags:")
		fs.PrintDefaults()
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ringlm bench engine: "+format+"\n", a...)
		return 2
	}
	pos, err := cli.Parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		cli.PrintUsage(fs, stdout)
		return 0
	}
	if err != nil {
		return usage("%v", err)
	}
	if len(pos) > 0 {
		return usage("unexpected argument %q", pos[0])
	}
	if *modelPath == "" {
		return usage("-m MODEL.gguf is required")
	}
	if err := runner.CheckDevice(*device); err != nil {
		return usage("%v", err)
	}
	if err := checkThreads(*threads); err != nil {
		return usage("%v", err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"p", "n", "tests", "r", "o"} {
		*llama = *llama || set[name]
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "ringlm bench engine: %s\n", strings.Join(strings.Fields(err.Error()), " "))
		return 1
	}
	if *llama {
		for _, name := range []string{"batch", "context", "steps", "prefill-len", "copy-mib"} {
			if set[name] {
				return usage("--%s is for the decode and prefill rows; llama-bench's tests run one sequence (-p, -n, --tests)", name)
			}
		}
		o := LlamaBenchOptions{Model: *modelPath, Device: *device, KVType: *kvType, Mmap: *mmap, TokenBudget: *budget, Reps: *reps,
			Threads: *threads, Warmup: *warmup, Log: zerolog.Nop()}
		switch {
		case set["tests"] && (set["p"] || set["n"]):
			return usage("--tests names every test: give it or -p and -n, not both")
		case set["tests"]:
			if o.Tests, err = parseLlamaTests(*tests); err != nil {
				return usage("%v", err)
			}
		default:
			pps, err := parseLlamaLengths("p", *pp)
			if err != nil {
				return usage("%v", err)
			}
			tgs, err := parseLlamaLengths("n", *tg)
			if err != nil {
				return usage("%v", err)
			}
			for _, v := range pps {
				o.Tests = append(o.Tests, LlamaTest{Prompt: v})
			}
			for _, v := range tgs {
				o.Tests = append(o.Tests, LlamaTest{Gen: v})
			}
		}
		if *reps < 1 {
			return usage("-r %d: at least one repetition", *reps)
		}
		if *warmup < 0 {
			return usage("--warmup must be ≥ 0")
		}
		if *format != "md" && *format != "json" {
			return usage("-o %q: md or json", *format)
		}
		if !*quiet {
			o.Progress = stderr
		}
		results, err := RunLlamaBench(o)
		var bad badOption
		if errors.As(err, &bad) {
			return usage("%v", bad)
		}
		if err != nil {
			return fail(err)
		}
		if *format == "json" {
			err = writeJSON(stdout, results)
		} else {
			err = WriteLlamaMarkdown(stdout, results)
		}
		if err == nil && *jsonPath != "" {
			err = writeJSONFile(*jsonPath, results)
		}
		if err != nil {
			return fail(err)
		}
		return 0
	}

	o := EngineOptions{Model: *modelPath, Device: *device, Mmap: *mmap, Steps: *steps, Warmup: *warmup, PrefillLen: *prefillLen,
		KVType: *kvType, TokenBudget: *budget, CopyMiB: *copyMiB, Threads: *threads, Log: zerolog.Nop()}
	if o.Batches, err = engParseInts("batch", *batches); err != nil {
		return usage("%v", err)
	}
	if o.Contexts, err = engParseInts("context", *contexts); err != nil {
		return usage("%v", err)
	}
	if *steps < 1 || *warmup < 0 || *prefillLen < 0 || *copyMiB < 1 {
		return usage("--steps and --copy-mib must be ≥ 1, --warmup and --prefill-len ≥ 0")
	}
	if !*quiet {
		o.Progress = stderr
	}
	rep, err := RunEngineBench(o)
	if err == nil {
		err = rep.WriteTable(stdout)
	}
	if err == nil && *jsonPath != "" {
		err = writeJSONFile(*jsonPath, rep)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// writeJSON writes v indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		_, err = w.Write(append(data, '\n'))
	}
	return err
}

func writeJSONFile(path string, v any) error {
	var b bytes.Buffer
	if err := writeJSON(&b, v); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
