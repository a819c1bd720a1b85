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

// benchDecode keeps batch requests decoding and measures the engine per
// step: b.N steps after every request is past its prefill.
func benchDecode(b *testing.B, e *Engine, batch, vocab int, readers bool) {
	p := sample.Defaults()
	p.Temperature = 0
	warm := 8
	p.MaxTokens = b.N + warm
	var done sync.WaitGroup
	streams := make([]*Stream, batch)
	for i := range streams {
		prompt := []int32{int32(i % vocab), 1, 2, 3}
		s, err := e.Submit(context.Background(), Request{Prompt: prompt, Params: p, IgnoreEOS: true})
		if err != nil {
			b.Fatal(err)
		}
		streams[i] = s
		if !readers {
			continue // one drainer below
		}
		done.Add(1)
		go func() { // a reader, as a server would have
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
	if !readers {
		// One goroutine drains every stream without blocking every 200 µs:
		// what the engine itself costs, without a wake-up per token.
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
	// Measure from the moment every request is decoding (engine counters,
	// not the readers, which may lag) to the moment the engine ends them.
	for e.Stats().GeneratedTokens < uint64(batch*warm) {
		time.Sleep(20 * time.Microsecond)
	}
	st0 := e.Stats()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	b.ResetTimer()
	for _, s := range streams {
		<-s.Done()
	}
	el := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	done.Wait()
	st := e.Stats()
	steps := float64(st.Steps - st0.Steps)
	toks := float64(st.GeneratedTokens - st0.GeneratedTokens)
	b.ReportMetric(el.Seconds()*1e6/steps, "µs/step")
	b.ReportMetric(toks/el.Seconds(), "tok/s")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/steps, "allocs/step")
	b.ReportMetric(0, "ns/op")
	b.Logf("batch %d: %.0f steps, %.0f tokens in %v", batch, steps, toks, el)
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
				e := newNullEngine(b, Config{Slots: batch, NumBlocks: batch * (b.N/16 + 4), Vocab: 32000,
					Context: b.N + 64, TokenBudget: 2 * batch})
				benchDecode(b, e, batch, 32000, readers)
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
			blocks := batch * ((b.N+16)/16 + 2)
			dev, err := cpu.New(m, gguf.TypeF16, blocks, 16, batch)
			if err != nil {
				b.Fatal(err)
			}
			e, err := New(Config{Slots: batch, NumBlocks: blocks, Vocab: m.Vocab, Context: m.Context,
				Allocator: ringbuf.HeapAllocator{}}, dev)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			benchDecode(b, e, batch, m.Vocab, true)
		})
	}
}
