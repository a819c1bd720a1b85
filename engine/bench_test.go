package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"ringlm/gguf"
	"ringlm/kernels/cpu"
	"ringlm/model"
	"ringlm/ringbuf"
	"ringlm/sample"
	"ringlm/synth"
)

// stepClock measures steps on the device's own clock (StepHook), so the
// figure does not depend on when a test goroutine gets to look.
type stepClock struct {
	mu           sync.Mutex
	steps        int
	from         int // steps before the measured window
	t0, t1       uint64
	entries0     int
	fullEntries  int // entries of a full-batch step
	measuredFull int
	base         int // the step at t0
}

func (c *stepClock) hook(_ uint64, entries int, _, end uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps++
	switch {
	case c.steps < c.from:
	case c.t0 == 0:
		c.t0, c.base = end, c.steps
	case entries >= c.fullEntries:
		// The window ends at the last full-batch step: the tail where
		// requests finish one by one is not steady state.
		c.t1, c.measuredFull = end, c.steps-c.base
	}
}

// benchDecode keeps batch requests decoding for b.N steps after a warm-up
// and reports the device-clock time per full-batch step.
func benchDecode(b *testing.B, newEngine func(hook func(uint64, int, uint64, uint64)) *Engine, batch, vocab int, readers bool) {
	clock := &stepClock{from: 16, fullEntries: batch}
	e := newEngine(clock.hook)
	defer e.Close()
	p := sample.Defaults()
	p.Temperature = 0
	p.MaxTokens = b.N + clock.from + 8 + 256
	var done sync.WaitGroup
	streams := make([]*Stream, batch)
	for i := range streams {
		prompt := []int32{int32(i % vocab), 1, 2, 3}
		s, err := e.Submit(context.Background(), Request{Prompt: prompt, Params: p, IgnoreEOS: true})
		if err != nil {
			b.Fatal(err)
		}
		streams[i] = s
	}
	if readers {
		for _, s := range streams {
			done.Add(1)
			go func() { // a reader per request, as a server has
				defer done.Done()
				buf := make([]Token, 0, 64)
				for {
					var fin bool
					buf, fin, _ = s.Recv(context.Background(), buf[:0])
					if fin {
						return
					}
				}
			}()
		}
	} else {
		// One goroutine drains every stream without blocking every 200 µs:
		// what the engine costs without a wake-up per token.
		done.Add(1)
		go func() {
			defer done.Done()
			expired, cancel := context.WithCancel(context.Background())
			cancel()
			buf := make([]Token, 0, 256)
			for {
				open := 0
				for _, s := range streams {
					var fin bool
					buf, fin, _ = s.Recv(expired, buf[:0])
					if !fin {
						open++
					}
				}
				if open == 0 {
					return
				}
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}
	// Allocations are counted from a point well past admission and the
	// first growth of every buffer: steady state.
	steadyFrom := clock.from + 256
	for {
		clock.mu.Lock()
		n := clock.steps
		clock.mu.Unlock()
		if n >= steadyFrom {
			break
		}
		time.Sleep(50 * time.Microsecond)
	}
	// Collect the set-up garbage now rather than during the rest of the run.
	runtime.GC()
	clock.mu.Lock()
	steps0 := clock.steps
	clock.mu.Unlock()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	for _, s := range streams {
		<-s.Done()
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	done.Wait()
	clock.mu.Lock()
	steps, ns := clock.measuredFull, float64(clock.t1-clock.t0)
	total := clock.steps
	clock.mu.Unlock()
	if steps == 0 {
		b.Fatal("no full-batch step measured")
	}
	b.ReportMetric(ns/1e3/float64(steps), "µs/step")
	b.ReportMetric(float64(batch)*float64(steps)/(ns/1e9), "tok/s")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(total-steps0), "allocs/step")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkNullStep measures the scheduler and both rings alone: the null
// device completes every step at once.
func BenchmarkNullStep(b *testing.B) {
	for _, readers := range []bool{false, true} {
		for _, batch := range []int{1, 64, 256} {
			name := fmt.Sprintf("batch%d/drainer", batch)
			if readers {
				name = fmt.Sprintf("batch%d/readers", batch)
			}
			b.Run(name, func(b *testing.B) {
				benchDecode(b, func(hook func(uint64, int, uint64, uint64)) *Engine {
					return newNullEngine(b, Config{Slots: batch, NumBlocks: batch * (b.N/16 + 24), Vocab: 32000,
						Context: b.N + 512, TokenBudget: 2 * batch, StepHook: hook})
				}, batch, 32000, readers)
			})
		}
	}
}

// BenchmarkCPUDecode measures CPU-device decode throughput on the tiny
// preset (3.4M parameters, F16) through the whole engine.
func BenchmarkCPUDecode(b *testing.B) {
	s, _ := synth.Lookup("tiny", "llama")
	w, err := synth.Build(synth.Options{Shape: s, Type: gguf.TypeF16, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	path := b.TempDir() + "/tiny.gguf"
	if err := w.WriteFile(path); err != nil {
		b.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(f)
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			blocks := batch * ((b.N+320)/16 + 2)
			benchDecode(b, func(hook func(uint64, int, uint64, uint64)) *Engine {
				dev, err := cpu.New(m, gguf.TypeF16, blocks, 16, batch)
				if err != nil {
					b.Fatal(err)
				}
				e, err := New(Config{Slots: batch, NumBlocks: blocks, Vocab: m.Vocab, Context: m.Context,
					Allocator: ringbuf.HeapAllocator{}, StepHook: hook}, dev)
				if err != nil {
					b.Fatal(err)
				}
				return e
			}, batch, m.Vocab, true)
		})
	}
}
