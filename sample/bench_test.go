package sample

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// benchLogits are synthetic logits of a large vocabulary. gauss: N(0, 3²),
// like the synthetic models' output head. peaked: N(0, 2²) with a handful of
// tokens lifted 6 to 14 above the rest, closer to a trained model's
// confident steps.
func benchLogits(n int, peaked bool) []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	l := make([]float32, n)
	for i := range l {
		if peaked {
			l[i] = float32(r.NormFloat64() * 2)
		} else {
			l[i] = float32(r.NormFloat64() * 3)
		}
	}
	if peaked {
		for range 8 {
			l[r.IntN(n)] = float32(6 + r.Float64()*8)
		}
	}
	return l
}

// BenchmarkSample samples from a 150k vocabulary. Besides the mean wall
// time (µs/op) it reports the median call (p50-µs/op) and the process's CPU
// time per call (cpu-µs/op), both steadier than the mean on a shared
// machine, and the allocations per call.
func BenchmarkSample(b *testing.B) {
	const vocab = 150000
	cases := []struct {
		name   string
		peaked bool
		mod    func(*Params)
	}{
		{"topp0.9_t0.8/gauss", false, func(p *Params) { p.Temperature, p.TopP = 0.8, 0.9 }},
		{"topp0.9_t0.8/peaked", true, func(p *Params) { p.Temperature, p.TopP = 0.8, 0.9 }},
		{"topp0.9_t0.8_logprobs5/gauss", false, func(p *Params) { p.Temperature, p.TopP, p.Logprobs, p.TopLogprobs = 0.8, 0.9, true, 5 }},
		{"topp0.95_t1.5/gauss", false, func(p *Params) { p.Temperature, p.TopP = 1.5, 0.95 }},
		{"greedy/gauss", false, func(p *Params) { p.Temperature = 0 }},
		{"t1/gauss", false, func(p *Params) {}},
		{"topk40_topp0.95_t0.8/gauss", false, func(p *Params) { p.Temperature, p.TopK, p.TopP = 0.8, 40, 0.95 }},
		{"minp0.05_t0.8/gauss", false, func(p *Params) { p.Temperature, p.MinP = 0.8, 0.05 }},
		{"ollama_defaults/peaked", true, func(p *Params) {
			p.Temperature, p.TopK, p.TopP, p.RepeatPenalty = 0.8, 40, 0.9, 1.1
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			logits := benchLogits(vocab, c.peaked)
			p := Defaults()
			p.Seed = 7
			c.mod(&p)
			s, err := New(p, vocab)
			if err != nil {
				b.Fatal(err)
			}
			for i := range 64 {
				s.Observe(int32(i*997%vocab), false)
			}
			pos := 0
			allocs := testing.AllocsPerRun(10, func() { s.Sample(logits, pos); pos++ })
			times := make([]time.Duration, 0, 1<<16)
			b.ResetTimer()
			cpu0 := cpuTime()
			for b.Loop() {
				t := time.Now()
				s.Sample(logits, pos)
				if len(times) < cap(times) {
					times = append(times, time.Since(t))
				}
				pos++
			}
			cpu := cpuTime() - cpu0
			slices.Sort(times)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/op")
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1e3, "p50-µs/op")
			if cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e3, "cpu-µs/op")
			}
			b.ReportMetric(allocs, "allocs/sample")
		})
	}
}
