package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"ringlm/sample"
)

// BenchmarkFirstTokenAfterIdle: the time from Submit to the first token of
// a one-token request, on an engine that has just served one ("warm") and
// on one idle for 200 ms before it ("idle": the engine loop and the
// device parked, the Go runtime's threads asleep), on the null device
// (the wake-up path alone) and the CPU device (a micro model's prefill
// too). The figures are the per-request median and mean (first-token-µs,
// mean-first-token-µs); ns/op counts the idle sleeps as well, so that the
// default -benchtime runs a few requests, not thousands of sleeps.
//
//	go test -run='^$' -bench=FirstTokenAfterIdle -benchtime 40x ./engine
func BenchmarkFirstTokenAfterIdle(b *testing.B) {
	devices := []struct {
		name string
		new  func(b *testing.B) *Engine
	}{
		{"null", func(b *testing.B) *Engine { return newNullEngine(b, Config{}) }},
		{"cpu", func(b *testing.B) *Engine { return newCPUEngine(b, microModel(b), Config{Slots: 4, NumBlocks: 64}) }},
	}
	for _, d := range devices {
		for _, idle := range []time.Duration{0, 200 * time.Millisecond} {
			name := d.name + "/warm"
			if idle > 0 {
				name = d.name + "/idle-" + idle.String()
			}
			b.Run(name, func(b *testing.B) {
				e := d.new(b)
				p := sample.Defaults()
				p.MaxTokens, p.Temperature = 1, 0
				first := func() time.Duration {
					t0 := time.Now()
					s, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2, 3, 4}, Params: p})
					if err != nil {
						b.Fatal(err)
					}
					toks, _, err := s.Recv(context.Background(), nil)
					d := time.Since(t0)
					if err != nil || len(toks) == 0 {
						b.Fatalf("first token: %d tokens, %v", len(toks), err)
					}
					if _, err := collectErr(s); err != nil {
						b.Fatal(err)
					}
					return d
				}
				first() // the first request ever pays for first-use allocations
				lat := make([]time.Duration, 0, b.N)
				for b.Loop() {
					if idle > 0 {
						time.Sleep(idle)
					}
					lat = append(lat, first())
				}
				slices.Sort(lat)
				var sum time.Duration
				for _, l := range lat {
					sum += l
				}
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "first-token-µs")
				b.ReportMetric(float64(sum.Nanoseconds())/float64(len(lat))/1e3, "mean-first-token-µs")
			})
		}
	}
}
