package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"ringlm/gguf"
	"ringlm/kernels/cpu"
	"ringlm/ringbuf"
	"ringlm/sample"
)

// Requests cancelled at random points (queued, prefilling, decoding) give
// back every KV block and slot; the others complete normally.
func TestRandomCancellations(t *testing.T) {
	m := microModel(t)
	goroutines := runtime.NumGoroutine()
	e := newCPUEngine(t, m, Config{Slots: 8, PrefillChunk: 16, TokenBudget: 64, NumBlocks: 256, PrefixCache: true})
	free := e.FreeBlocks()
	jobs := randomJobs(120, m.Vocab, 21)
	r := rand.New(rand.NewPCG(5, 5))
	var wg sync.WaitGroup
	for i, j := range jobs {
		delay := time.Duration(r.IntN(3000)) * time.Microsecond
		mode := r.IntN(3) // 0 ctx cancel, 1 Cancel(), 2 run to the end
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := e.Submit(ctx, Request{Prompt: j.prompt, Params: j.params, IgnoreEOS: true})
			if err != nil {
				t.Error(err)
				return
			}
			if mode < 2 {
				time.Sleep(delay)
				if mode == 0 {
					cancel()
				} else {
					s.Cancel()
				}
			}
			toks := collect(t, s)
			f, _ := s.Finish()
			if mode == 2 && (f != FinishLength || len(toks) != j.params.MaxTokens) {
				t.Errorf("request %d: %v with %d tokens", i, f, len(toks))
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool { st := e.Stats(); return st.Running == 0 && st.Blocks.Used == 0 })
	if got := e.FreeBlocks(); got != free {
		t.Fatalf("free blocks %d, started with %d", got, free)
	}
	e.Close()
	checkGoroutines(t, goroutines)
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 60s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With ten times more KV demand than memory, every request completes (by
// waiting or by preemption and recompute) with the tokens it produces alone.
func TestOversubscription(t *testing.T) {
	m := microModel(t)
	jobs := randomJobs(60, m.Vocab, 33)
	for i := range jobs {
		jobs[i].params.MaxTokens = 40 + i%20
	}
	alone := newCPUEngine(t, m, Config{Slots: 1})
	want := make([][]int32, len(jobs))
	demand := 0
	for i, j := range jobs {
		want[i] = runJob(t, alone, j)
		demand += (len(j.prompt) + j.params.MaxTokens + 15) / 16
	}
	alone.Close()

	blocks := demand / 10
	e := newCPUEngine(t, m, Config{Slots: 32, NumBlocks: blocks, PrefillChunk: 32, TokenBudget: 128})
	defer e.Close()
	got := make([][]int32, len(jobs))
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = runJob(t, e, jobs[i])
		}()
	}
	wg.Wait()
	for i := range jobs {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("request %d differs under memory pressure:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
	st := e.Stats()
	t.Logf("KV demand %d blocks, pool %d: %d preemptions, %d steps", demand, blocks, st.Preemptions, st.Steps)
	waitFor(t, func() bool { return e.Stats().Blocks.Used == 0 })
}

// Two requests sharing a 200-token prefix: the second reuses the first's
// KV blocks (counted) and both produce what they produce without the cache.
func TestPrefixCache(t *testing.T) {
	m := microModel(t)
	r := rand.New(rand.NewPCG(8, 8))
	prefix := make([]int32, 200)
	for i := range prefix {
		prefix[i] = int32(r.IntN(m.Vocab))
	}
	mk := func(tail ...int32) job {
		p := sample.Defaults()
		p.Seed, p.MaxTokens, p.Temperature = 77, 16, 0.8
		return job{append(slices.Clone(prefix), tail...), p}
	}
	a, b := mk(1, 2, 3), mk(9, 8, 7, 6, 5)
	plain := newCPUEngine(t, m, Config{})
	wantA, wantB := runJob(t, plain, a), runJob(t, plain, b)
	plainPrompt := plain.Stats().PromptTokens
	plain.Close()

	e := newCPUEngine(t, m, Config{PrefixCache: true})
	defer e.Close()
	gotA := runJob(t, e, a)
	gotB := runJob(t, e, b)
	st := e.Stats()
	if !slices.Equal(gotA, wantA) || !slices.Equal(gotB, wantB) {
		t.Fatalf("outputs differ with the prefix cache:\nA %v / %v\nB %v / %v", gotA, wantA, gotB, wantB)
	}
	if st.CachedTokens != 192 || st.PromptTokens != plainPrompt-192 {
		t.Fatalf("cached %d tokens, computed %d prompt tokens (without cache %d)", st.CachedTokens, st.PromptTokens, plainPrompt)
	}
}

// A request whose OPEN_SLOT the device refuses fails with a device error,
// and its slot and blocks come back (no CLOSE can be acknowledged for a
// slot that never opened) while other requests go on.
func TestFailedOpenFreesSlot(t *testing.T) {
	m := microModel(t)
	dev, err := cpu.New(m, gguf.TypeF32, 64, 16, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The engine believes in a larger vocabulary than the device has, so a
	// logit bias on token 900 passes the engine's checks and fails the
	// device's sampler setup.
	e, err := New(Config{Slots: 2, NumBlocks: 64, Vocab: 1000, Context: m.Context, Allocator: ringbuf.HeapAllocator{}}, dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	free := e.FreeBlocks()
	for i := 0; i < 5; i++ {
		p := sample.Defaults()
		p.MaxTokens, p.LogitBias = 4, map[int32]float32{900: 1}
		s, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2, 3}, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		collect(t, s)
		if f, err := s.Finish(); f != FinishError || !errors.Is(err, ErrDevice) {
			t.Fatalf("finish %v %v", f, err)
		}
	}
	good := sample.Defaults()
	good.MaxTokens = 4
	s, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2, 3}, Params: good, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if toks := collect(t, s); len(toks) != 4 {
		t.Fatalf("%d tokens after failed opens", len(toks))
	}
	waitFor(t, func() bool { st := e.Stats(); return st.Running == 0 && e.FreeBlocks() == free })
}
