package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/kernels/cpu"
	"ringlm/model"
	"ringlm/ringbuf"
	"ringlm/sample"
	"ringlm/synth"
)

// microModel is a synthetic llama small enough to run hundreds of
// requests under the race detector: dim 64, 2 layers, GQA, the built-in
// 512-token vocabulary.
func microModel(t testing.TB) *model.Model {
	t.Helper()
	s := synth.Shape{Arch: "llama", Name: "micro", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		FFN: 128, Context: 1024, RopeBase: 10000, NormEps: 1e-5}
	return testmodel.Open(t, testmodel.Write(t, s, gguf.TypeF32, 3))
}

func newCPUEngine(t testing.TB, m *model.Model, cfg Config) *Engine {
	t.Helper()
	cfg.Vocab, cfg.Context = m.Vocab, m.Context
	if cfg.NumBlocks == 0 {
		cfg.NumBlocks = 512
	}
	if cfg.Slots == 0 {
		cfg.Slots = 32
	}
	cfg.Allocator = ringbuf.HeapAllocator{}
	dev, err := cpu.New(m, gguf.TypeF32, cfg.NumBlocks, 16, cfg.Slots)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, dev)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the model's cleanup, so it runs first: the device
	// never outlives the mapped weights, even when a test fails early.
	t.Cleanup(func() { e.Close() })
	return e
}

type job struct {
	prompt []int32
	params sample.Params
}

func randomJobs(n, vocab int, seed uint64) []job {
	r := rand.New(rand.NewPCG(seed, 1))
	jobs := make([]job, n)
	for i := range jobs {
		prompt := make([]int32, 1+r.IntN(80))
		for j := range prompt {
			prompt[j] = int32(r.IntN(vocab))
		}
		p := sample.Defaults()
		p.Seed = r.Uint64()
		p.MaxTokens = 1 + r.IntN(40)
		switch i % 4 {
		case 0:
			p.Temperature = 0
		case 1:
			p.Temperature, p.TopK = 0.9, 20
		case 2:
			p.Temperature, p.TopP, p.MinP = 1.2, 0.9, 0.02
		case 3:
			p.Temperature, p.RepeatPenalty, p.PresencePenalty = 0.7, 1.1, 0.3
		}
		jobs[i] = job{prompt, p}
	}
	return jobs
}

// runJob runs one request to its end. It may run on a test's helper
// goroutines, so it reports with t.Error and returns nil on failure.
func runJob(t testing.TB, e *Engine, j job) []int32 {
	t.Helper()
	s, err := e.Submit(context.Background(), Request{Prompt: j.prompt, Params: j.params, IgnoreEOS: true})
	if err != nil {
		t.Error(err)
		return nil
	}
	toks, err := collectErr(s)
	if err != nil {
		t.Error(err)
		return nil
	}
	var ids []int32
	for _, tk := range toks {
		ids = append(ids, tk.ID)
	}
	if f, err := s.Finish(); err != nil || f != FinishLength {
		t.Errorf("finish %v %v", f, err)
	}
	return ids
}

// 500 concurrent requests with random prompts, lengths and sampling
// settings each produce exactly the tokens they produce alone, whatever
// their batch mates, arrival order and prefill chunk boundaries.
func TestBatchInvariance(t *testing.T) {
	m := microModel(t)
	n := 500
	if testing.Short() {
		n = 100
	}
	jobs := randomJobs(n, m.Vocab, 9)

	// Alone: one request at a time, prompt in one chunk.
	alone := newCPUEngine(t, m, Config{Slots: 1, PrefillChunk: 512, TokenBudget: 512})
	want := make([][]int32, n)
	for i, j := range jobs {
		want[i] = runJob(t, alone, j)
	}
	alone.Close()

	// Together: small chunks, small token budget, shuffled arrival.
	goroutines := runtime.NumGoroutine()
	e := newCPUEngine(t, m, Config{Slots: 32, PrefillChunk: 7, TokenBudget: 64, PipelineDepth: 3})
	order := rand.New(rand.NewPCG(4, 4)).Perm(n)
	got := make([][]int32, n)
	var wg sync.WaitGroup
	for _, i := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = runJob(t, e, jobs[i])
		}()
	}
	wg.Wait()
	for i := range jobs {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("request %d (prompt %d, %+v): batched %v, alone %v", i, len(jobs[i].prompt), jobs[i].params.Temperature, got[i], want[i])
		}
	}
	// Streams end at the finishing token; blocks return when the device
	// acknowledges the close, a moment later.
	waitFor(t, func() bool { return e.Stats().Blocks.Used == 0 })
	e.Close()
	checkGoroutines(t, goroutines)
}

func checkGoroutines(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
	}
}

var _ = fmt.Sprint
