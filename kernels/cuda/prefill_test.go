//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/sample"
)

// BenchmarkPrefill: a prompt of 128, 512 or 2048 tokens prefilled in one
// step (token budget and prefill chunk 2048) on the Llama-3.2-1B-shaped
// BF16 model (benchShape: or RINGLM_BENCH_PRESET's), one request at a
// time, on the device clock: the steps from
// the request's first to its first token (the prompt's forward passes and
// the step that samples its first token). Each iteration's prompt is new,
// so the prefix cache never shortens it.
func BenchmarkPrefill(b *testing.B) {
	needGPU(b)
	m := loadSynth(b, benchShape(b), gguf.TypeBF16, 1)
	const budget = 2048
	dev, err := Open(m, Options{Slots: 8, Context: 4096, MaxStepTokens: budget, KVMaxBytes: 8 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	var mu sync.Mutex
	var devNS uint64
	var steps int
	hook := func(_ uint64, _ int, start, end uint64) {
		mu.Lock()
		devNS += end - start
		steps++
		mu.Unlock()
	}
	e, err := engine.New(engine.Config{Slots: 8, TokenBudget: budget, PrefillChunk: budget, NumBlocks: dev.NumBlocks(),
		BlockSize: dev.BlockSize(), Vocab: m.Vocab, Context: 4096, Allocator: dev.Allocator(), StepHook: hook}, dev)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	r := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{128, 512, 2048} {
		b.Run(fmt.Sprintf("prompt%d", n), func(b *testing.B) {
			p := sample.Defaults()
			p.Temperature, p.MaxTokens = 0, 1
			run := func() {
				prompt := make([]int32, n)
				for i := range prompt {
					prompt[i] = int32(r.IntN(m.Vocab))
				}
				st, err := e.Submit(context.Background(), engine.Request{Prompt: prompt, Params: p, IgnoreEOS: true})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := drain(st); err != nil {
					b.Fatal(err)
				}
			}
			run() // warm-up
			mu.Lock()
			devNS, steps = 0, 0
			mu.Unlock()
			b.ResetTimer()
			for range b.N {
				run()
			}
			b.StopTimer()
			mu.Lock()
			ms := float64(devNS) / 1e6 / float64(b.N)
			st := float64(steps) / float64(b.N)
			mu.Unlock()
			b.ReportMetric(ms, "device-ms/prompt")
			b.ReportMetric(float64(n)/(ms/1e3), "prefill-tok/s")
			b.ReportMetric(st, "steps/prompt")
		})
	}
}
