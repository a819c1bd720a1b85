package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

var inf32 = float32(math.Inf(1))

func mustNew(t testing.TB, p Params, vocab int) *Sampler {
	t.Helper()
	s, err := New(p, vocab)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// observation is one Observe call.
type observation struct {
	token     int32
	generated bool
}

// The reference sampler: the package documentation's steps written as
// plainly as possible (a full sort, math.Exp, a division, sequential sums),
// sharing no code with the Sampler but clean.

func refProcess(p Params, history []observation, logits []float32) []float32 {
	z := make([]float32, len(logits))
	for i, v := range logits {
		z[i] = clean(v)
	}
	for id, b := range p.LogitBias {
		if int(id) < len(z) {
			z[id] = clean(z[id] + b)
		}
	}
	if p.RepeatPenalty != 1 && p.RepeatLastN != 0 {
		window := history
		if p.RepeatLastN > 0 && len(window) > p.RepeatLastN {
			window = window[len(window)-p.RepeatLastN:]
		}
		seen := map[int32]bool{}
		for _, o := range window {
			seen[o.token] = true
		}
		for t := range seen {
			if int(t) >= len(z) {
				continue
			}
			if z[t] > 0 {
				z[t] = clean(z[t] / p.RepeatPenalty)
			} else {
				z[t] = clean(z[t] * p.RepeatPenalty)
			}
		}
	}
	if p.PresencePenalty != 0 || p.FrequencyPenalty != 0 {
		counts := map[int32]int{}
		for _, o := range history {
			if o.generated {
				counts[o.token]++
			}
		}
		for t, c := range counts {
			if int(t) < len(z) {
				z[t] = clean(z[t] - (float32(float32(c)*p.FrequencyPenalty) + p.PresencePenalty))
			}
		}
	}
	return z
}

// refOrder is every finite candidate, descending z, ties by lower id.
func refOrder(z []float32) []int32 {
	var ids []int32
	for i, v := range z {
		if !math.IsInf(float64(v), -1) {
			ids = append(ids, int32(i))
		}
	}
	slices.SortStableFunc(ids, func(a, b int32) int {
		switch {
		case z[a] > z[b]:
			return -1
		case z[a] < z[b]:
			return 1
		}
		return 0
	})
	return ids
}

// refKept returns the kept candidates in order and their weights.
func refKept(p Params, z []float32, order []int32) ([]int32, []float64) {
	if len(order) == 0 {
		return nil, nil
	}
	zmax := float64(z[order[0]])
	x := make([]float64, len(order))
	w := make([]float64, len(order))
	for i, t := range order {
		x[i] = (float64(z[t]) - zmax) / float64(p.Temperature)
		w[i] = math.Exp(x[i])
	}
	n := len(order)
	if p.TopK > 0 && p.TopK < n {
		n = p.TopK
	}
	kept := n
	if p.TopP < 1 {
		var sum, cum float64
		for _, v := range w[:n] {
			sum += v
		}
		for i, v := range w[:n] {
			cum += v
			if cum >= float64(p.TopP)*sum {
				kept = i + 1
				break
			}
		}
	}
	if p.MinP > 0 {
		for i := range kept {
			if x[i] < math.Log(float64(p.MinP)) {
				kept = i
				break
			}
		}
	}
	return order[:kept], w[:kept]
}

func refSample(p Params, history []observation, logits []float32, pos int) int32 {
	z := refProcess(p, history, logits)
	return refSampleZ(p, z, refOrder(z), logits, pos)
}

// refSampleZ is refSample from the processed logits and their order.
func refSampleZ(p Params, z []float32, order []int32, logits []float32, pos int) int32 {
	if len(order) == 0 {
		return rawArgmax(logits)
	}
	if p.Temperature == 0 {
		return order[0]
	}
	kept, w := refKept(p, z, order)
	var total float64
	for _, v := range w {
		total += v
	}
	target := float64(Uniform(p.Seed, uint64(pos), 0)) * total
	var cum float64
	for i, v := range w {
		cum += v
		if cum > target {
			return kept[i]
		}
	}
	return kept[len(kept)-1]
}

func refLogprobs(z []float32, order []int32) (lse float64) {
	zmax := float64(z[order[0]])
	var sum float64
	for _, t := range order {
		sum += math.Exp(float64(z[t]) - zmax)
	}
	return zmax + math.Log(sum)
}

// keptIDs exposes the kept prefix of steps 7 to 9 of the Sampler itself.
func (s *Sampler) keptIDs(logits []float32) []int32 {
	z, _ := s.prepare(logits)
	if z == nil || s.temp == 0 {
		return nil
	}
	var ids []int32
	if s.heapPath(z) || s.minPPath(z) {
		kept := 0
		if s.heapPath(z) {
			kept = s.cutTopK(z)
		} else {
			kept = s.cutMinP(z)
		}
		for _, k := range s.keys[:kept] {
			ids = append(ids, int32(uint32(k)))
		}
		return ids
	}
	cb, cj := s.cutBuckets(z, 0.5)
	for b := 0; b <= min(cb, nBuckets-1); b++ {
		keys, _ := s.segment(z, b)
		if b == cb {
			keys = keys[:cj]
		}
		for _, k := range keys {
			ids = append(ids, int32(uint32(k)))
		}
	}
	return ids
}

// randomLogits draws logits of several shapes, with ties, NaN, infinities
// and signed zeros.
func randomLogits(r *rand.Rand, n int) []float32 {
	l := make([]float32, n)
	scale := []float64{0.01, 0.5, 3, 10, 40}[r.IntN(5)]
	quant := r.IntN(3) == 0 // many ties
	for i := range l {
		v := r.NormFloat64() * scale
		if quant {
			v = math.Round(v)
		}
		l[i] = float32(v)
	}
	if r.IntN(4) == 0 {
		for range 1 + r.IntN(3) {
			switch r.IntN(5) {
			case 0:
				l[r.IntN(n)] = float32(math.NaN())
			case 1:
				l[r.IntN(n)] = -inf32
			case 2:
				l[r.IntN(n)] = inf32
			case 3:
				l[r.IntN(n)] = float32(math.Copysign(0, -1))
			case 4:
				l[r.IntN(n)] = -math.MaxFloat32
			}
		}
	}
	if r.IntN(8) == 0 { // a peak
		l[r.IntN(n)] += float32(5 + r.Float64()*20)
	}
	return l
}

func randomParams(r *rand.Rand, vocab int) Params {
	p := Defaults()
	p.Seed = r.Uint64()
	p.Temperature = []float32{0, 0.05, 0.7, 1, 1.5, 8}[r.IntN(6)]
	p.TopK = []int{0, 0, 1, 7, 40, 1500, vocab - 1, vocab + 5}[r.IntN(8)]
	p.TopP = []float32{1, 1, 0.5, 0.9, 0.95, 0.999}[r.IntN(6)]
	p.MinP = []float32{0, 0, 0.01, 0.2, 1, 1e-20}[r.IntN(6)]
	if r.IntN(3) == 0 {
		p.RepeatPenalty = []float32{0.7, 1.1, 2}[r.IntN(3)]
		p.RepeatLastN = []int{-1, 0, 3, 64}[r.IntN(4)]
	}
	if r.IntN(3) == 0 {
		p.PresencePenalty = float32(r.Float64()*4 - 2)
		p.FrequencyPenalty = float32(r.Float64()*4 - 2)
	}
	if r.IntN(3) == 0 {
		p.LogitBias = map[int32]float32{}
		for range r.IntN(5) {
			p.LogitBias[int32(r.IntN(vocab))] = float32(r.Float64()*200 - 100)
		}
	}
	if r.IntN(2) == 0 {
		p.Logprobs, p.TopLogprobs = true, r.IntN(MaxTopLogprobs+1)
	}
	return p
}

// TestMatchesReference compares tokens, kept sets and logprobs with the
// reference over random logits, parameters and histories.
func TestMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	iters := 1000
	if testing.Short() {
		iters = 200
	}
	for it := range iters {
		vocab := []int{1, 2, 5, 100, 3000}[r.IntN(5)]
		if it%200 == 0 {
			vocab = 40000
		}
		p := randomParams(r, vocab)
		s := mustNew(t, p, vocab)
		var history []observation
		for range r.IntN(100) {
			o := observation{int32(r.IntN(vocab)), r.IntN(2) == 0}
			s.Observe(o.token, o.generated)
			history = append(history, o)
		}
		for step := range 3 {
			logits := randomLogits(r, vocab)
			if vocab > 2 && r.IntN(5) == 0 { // fewer logits than the vocabulary
				logits = logits[:vocab/2+r.IntN(vocab/2)]
			}
			pos := r.IntN(1 << 20)
			what := fmt.Sprintf("iteration %d step %d, vocab %d, %+v", it, step, vocab, p)
			z := refProcess(p, history, logits)
			order := refOrder(z)
			if p.Temperature > 0 && len(order) > 0 {
				wantKept, _ := refKept(p, z, order)
				if got := s.keptIDs(logits); !slices.Equal(got, wantKept) {
					t.Fatalf("%s: kept %v, want %v", what, head(got), head(wantKept))
				}
			}
			res := s.Sample(logits, pos)
			if want := refSampleZ(p, z, order, logits, pos); res.Token != want {
				t.Fatalf("%s: token %d, want %d", what, res.Token, want)
			}
			if !slices.Equal(s.z[:len(logits)], z) {
				t.Fatalf("%s: processed logits differ", what)
			}
			if p.Logprobs && len(order) > 0 {
				lse := refLogprobs(z, order)
				if want := float64(z[res.Token]) - lse; math.Abs(float64(res.Logprob)-want) > 1e-4*max(1, math.Abs(want)) {
					t.Fatalf("%s: logprob %v, want %v", what, res.Logprob, want)
				}
				if len(res.Top) != min(p.TopLogprobs, len(order)) {
					t.Fatalf("%s: %d top logprobs, want %d", what, len(res.Top), min(p.TopLogprobs, len(order)))
				}
				for i, tl := range res.Top {
					if tl.Token != order[i] || math.Abs(float64(tl.Logprob)-(float64(z[order[i]])-lse)) > 1e-4*max(1, math.Abs(float64(tl.Logprob))) {
						t.Fatalf("%s: top[%d] = %+v, want token %d", what, i, tl, order[i])
					}
				}
			}
			o := observation{res.Token, true}
			s.Observe(o.token, o.generated)
			history = append(history, o)
		}
	}
}

func head(ids []int32) string {
	if len(ids) > 12 {
		return fmt.Sprintf("%v... (%d)", ids[:12], len(ids))
	}
	return fmt.Sprint(ids)
}

func TestGreedy(t *testing.T) {
	p := Defaults()
	p.Temperature = 0
	for _, c := range []struct {
		logits []float32
		want   int32
	}{
		{[]float32{0.1, 3, -2, 2.9}, 1},
		{[]float32{5, 1, 5, 5}, 0}, // ties: lowest id
		{[]float32{-1, 2, 2}, 1},
		{[]float32{float32(math.NaN()), 1, 0}, 1},
		{[]float32{1, inf32, 3, inf32}, 1},
		{[]float32{-inf32, -inf32, -5}, 2},
		{[]float32{float32(math.Copysign(0, -1)), 0}, 0},
	} {
		s := mustNew(t, p, len(c.logits))
		for pos := range 20 { // no randomness: every position agrees
			if got := s.Sample(c.logits, pos).Token; got != c.want {
				t.Errorf("greedy(%v) at %d = %d, want %d", c.logits, pos, got, c.want)
			}
		}
	}
}

func TestDegenerateInputs(t *testing.T) {
	nan := float32(math.NaN())
	for _, temp := range []float32{0, 1} {
		p := Defaults()
		p.Temperature = temp
		p.Logprobs, p.TopLogprobs = true, 5
		for _, c := range []struct {
			name   string
			logits []float32
			vocab  int
			want   int32
		}{
			{"empty", nil, 4, 0},
			{"all -Inf", []float32{-inf32, -inf32, -inf32}, 3, 0},
			{"all NaN", []float32{nan, nan}, 2, 0},
			{"single", []float32{-3}, 1, 0},
			{"longer than vocab", []float32{1, 2, 9}, 2, 1},
			{"shorter than vocab", []float32{1, 2}, 10, 1},
		} {
			s := mustNew(t, p, c.vocab)
			res := s.Sample(c.logits, 3)
			if temp > 0 && len(c.logits) > 1 && res.Token >= 0 && int(res.Token) < min(c.vocab, len(c.logits)) {
				continue // a draw: any token in range will do
			}
			if res.Token != c.want {
				t.Errorf("T=%v %s: token %d, want %d", temp, c.name, res.Token, c.want)
			}
			if res.Logprob > 0 || math.IsNaN(float64(res.Logprob)) {
				t.Errorf("T=%v %s: logprob %v", temp, c.name, res.Logprob)
			}
		}
	}

	// Finite raw logits that penalties push to -Inf: the raw argmax.
	p := Defaults()
	p.RepeatPenalty = 2
	s := mustNew(t, p, 3)
	s.Observe(0, false)
	s.Observe(1, false)
	s.Observe(2, false)
	if got := s.Sample([]float32{-math.MaxFloat32, -3e38, -math.MaxFloat32}, 0).Token; got != 1 {
		t.Errorf("every logit penalized to -Inf: token %d, want the raw argmax 1", got)
	}

	// Several +Inf logits tie, and only they can be drawn.
	s = mustNew(t, Defaults(), 5)
	seen := map[int32]int{}
	for pos := range 400 {
		seen[s.Sample([]float32{1, inf32, 100, inf32, nan}, pos).Token]++
	}
	if len(seen) != 2 || seen[1] < 150 || seen[3] < 150 {
		t.Errorf("+Inf logits 1 and 3 drawn as %v", seen)
	}

	// Out-of-range observations are ignored.
	p = Defaults()
	p.RepeatPenalty, p.PresencePenalty = 2, 1
	s = mustNew(t, p, 3)
	s.Observe(-1, true)
	s.Observe(3, true)
	s.Observe(math.MaxInt32, false)
	s.Sample([]float32{1, 2, 3}, -5) // negative positions are positions too
}

func TestTemperatureTiny(t *testing.T) {
	// A tiny temperature is greedy in effect, and must not divide by zero.
	p := Defaults()
	p.Temperature = math.SmallestNonzeroFloat32
	for _, topP := range []float32{1, 0.9} {
		p.TopP = topP
		s := mustNew(t, p, 6)
		for pos := range 50 {
			if got := s.Sample([]float32{1, 2, 3, 3, 2.9999998, -1}, pos).Token; got != 2 && got != 3 {
				t.Fatalf("top_p %v: token %d, want 2 or 3", topP, got)
			}
		}
	}
}

func TestTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct{ vocab, k int }{{50, 1}, {50, 5}, {3000, 40}, {5000, 1500}} {
		logits := make([]float32, c.vocab)
		for i := range logits {
			logits[i] = float32(r.NormFloat64())
		}
		top := refOrder(logits)[:c.k]
		allowed := map[int32]bool{}
		for _, id := range top {
			allowed[id] = true
		}
		p := Defaults()
		p.Temperature, p.TopK = 3, c.k // hot, so the tail would often win
		s := mustNew(t, p, c.vocab)
		seen := map[int32]bool{}
		for pos := range 2000 {
			tok := s.Sample(logits, pos).Token
			if !allowed[tok] {
				t.Fatalf("vocab %d top_k %d: token %d is not among the top k", c.vocab, c.k, tok)
			}
			seen[tok] = true
		}
		if c.k <= 40 && len(seen) != c.k {
			t.Errorf("vocab %d top_k %d: drew %d distinct tokens, want all %d", c.vocab, c.k, len(seen), c.k)
		}
	}

	// Ties at the boundary go to the lower ids.
	p := Defaults()
	p.TopK = 2
	s := mustNew(t, p, 6)
	for pos := range 200 {
		if tok := s.Sample([]float32{0, 1, 1, 1, 1, 0}, pos).Token; tok != 1 && tok != 2 {
			t.Fatalf("tied top_k 2: token %d, want 1 or 2", tok)
		}
	}
}

func TestTopPMass(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for it := range 120 {
		vocab := []int{10, 500, 8000}[it%3]
		logits := randomLogits(r, vocab)
		p := Defaults()
		p.Temperature = []float32{0.5, 1, 2}[it%3]
		p.TopP = []float32{0.1, 0.5, 0.9, 0.99}[it%4]
		if it%5 == 0 {
			p.TopK = 30
		}
		s := mustNew(t, p, vocab)
		kept := s.keptIDs(logits)
		// The softmax of the top-k set, from scratch.
		z := refProcess(p, nil, logits)
		order := refOrder(z)
		if p.TopK > 0 && p.TopK < len(order) {
			order = order[:p.TopK]
		}
		probs := map[int32]float64{}
		var sum float64
		for _, id := range order {
			w := math.Exp((float64(z[id]) - float64(z[order[0]])) / float64(p.Temperature))
			probs[id] = w
			sum += w
		}
		var mass float64
		for i, id := range kept {
			if id != order[i] {
				t.Fatalf("kept set is not a prefix of the order")
			}
			mass += probs[id] / sum
		}
		last := probs[kept[len(kept)-1]] / sum
		if mass < float64(p.TopP)-1e-9 || mass-last >= float64(p.TopP)+1e-9 {
			t.Errorf("top_p %v: kept %d tokens of mass %.6f (%.6f without the last)", p.TopP, len(kept), mass, mass-last)
		}
	}
}

func TestMinP(t *testing.T) {
	// Probabilities at T = 1: 0.5, 0.25, 0.125, 0.0625, ...
	logits := make([]float32, 12)
	for i := range logits {
		logits[i] = float32(-float64(i) * math.Ln2)
	}
	for _, c := range []struct {
		minP float32
		kept int
	}{{0.2, 3}, {0.124, 4}, {0.13, 3}, {1, 1}, {0.0001, 12}, {0.0003, 12}} {
		p := Defaults()
		p.MinP = c.minP
		s := mustNew(t, p, len(logits))
		if got := s.keptIDs(logits); len(got) != c.kept {
			t.Errorf("min_p %v kept %v, want the first %d", c.minP, got, c.kept)
		}
		for pos := range 300 {
			if tok := s.Sample(logits, pos).Token; int(tok) >= c.kept {
				t.Fatalf("min_p %v: drew token %d", c.minP, tok)
			}
		}
	}
}

func TestPenalties(t *testing.T) {
	base := []float32{2, -2, 1, 0.5, 4}
	type obs = observation
	cases := []struct {
		name    string
		mod     func(*Params)
		history []obs
		want    []float32
	}{
		{"repeat over the prompt", func(p *Params) { p.RepeatPenalty = 2 },
			[]obs{{0, false}, {1, false}, {0, false}}, []float32{1, -4, 1, 0.5, 4}},
		{"repeat window evicts", func(p *Params) { p.RepeatPenalty, p.RepeatLastN = 2, 2 },
			[]obs{{0, false}, {1, false}, {2, true}}, []float32{2, -4, 0.5, 0.5, 4}},
		{"repeat window refills", func(p *Params) { p.RepeatPenalty, p.RepeatLastN = 2, 2 },
			[]obs{{0, false}, {1, false}, {2, true}, {0, true}}, []float32{1, -2, 0.5, 0.5, 4}},
		{"repeat whole context", func(p *Params) { p.RepeatPenalty, p.RepeatLastN = 2, -1 },
			[]obs{{0, false}, {1, false}, {2, true}, {3, true}}, []float32{1, -4, 0.5, 0.25, 4}},
		{"repeat off with window 0", func(p *Params) { p.RepeatPenalty, p.RepeatLastN = 2, 0 },
			[]obs{{0, false}}, base},
		{"repeat below 1 boosts", func(p *Params) { p.RepeatPenalty = 0.5 },
			[]obs{{0, false}, {1, false}}, []float32{4, -1, 1, 0.5, 4}},
		{"presence and frequency over output only", func(p *Params) { p.PresencePenalty, p.FrequencyPenalty = 0.5, 0.25 },
			[]obs{{0, false}, {1, true}, {1, true}, {2, true}}, []float32{2, -3, 0.25, 0.5, 4}},
		{"negative presence encourages", func(p *Params) { p.PresencePenalty = -1 },
			[]obs{{3, true}, {3, true}}, []float32{2, -2, 1, 1.5, 4}},
		{"bias before penalties", func(p *Params) {
			p.RepeatPenalty, p.LogitBias = 2, map[int32]float32{0: 2, 4: -100}
		}, []obs{{0, false}}, []float32{2, -2, 1, 0.5, -96}},
		{"all together", func(p *Params) {
			p.RepeatPenalty, p.PresencePenalty, p.FrequencyPenalty = 2, 1, 1
		}, []obs{{0, false}, {0, true}, {1, true}}, []float32{-1, -6, 1, 0.5, 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Defaults()
			c.mod(&p)
			s := mustNew(t, p, len(base))
			for _, o := range c.history {
				s.Observe(o.token, o.generated)
			}
			for range 2 { // the state survives a Sample
				s.Sample(base, 0)
				if !slices.Equal(s.z[:len(base)], c.want) {
					t.Fatalf("processed %v, want %v", s.z[:len(base)], c.want)
				}
			}
			if got := refProcess(p, c.history, base); !slices.Equal(got, c.want) {
				t.Errorf("reference processed %v, want %v", got, c.want)
			}
		})
	}
}

func TestPenaltyChangesGreedyChoice(t *testing.T) {
	p := Defaults()
	p.Temperature, p.FrequencyPenalty = 0, 0.5
	s := mustNew(t, p, 3)
	logits := []float32{1, 1.2, 0}
	var got []int32
	for pos := range 4 {
		tok := s.Sample(logits, pos).Token
		got = append(got, tok)
		s.Observe(tok, true)
	}
	// 1 (1.2 > 1), then 0 (0.7 < 1), then 1 (0.7 vs 0.5), then 0 (0.2 vs 0.5)...
	if want := []int32{1, 0, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("greedy with frequency penalty: %v, want %v", got, want)
	}
}

func TestLogitBiasBans(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	logits := make([]float32, 64)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 2)
	}
	top := refOrder(logits)[0]
	for _, temp := range []float32{0, 1, 2} {
		p := Defaults()
		p.Temperature = temp
		p.LogitBias = map[int32]float32{top: -100}
		s := mustNew(t, p, len(logits))
		for pos := range 3000 {
			if s.Sample(logits, pos).Token == top {
				t.Fatalf("T=%v: banned token %d drawn at %d", temp, top, pos)
			}
		}
	}
	// +100 forces.
	p := Defaults()
	p.LogitBias = map[int32]float32{5: 100}
	s := mustNew(t, p, len(logits))
	for pos := range 100 {
		if tok := s.Sample(logits, pos).Token; tok != 5 {
			t.Fatalf("bias +100 on 5: drew %d", tok)
		}
	}
}

// TestDeterminism: the same seed, history and position give the same token
// in a fresh Sampler, whatever else runs, and in parallel.
func TestDeterminism(t *testing.T) {
	const vocab = 2000
	r := rand.New(rand.NewPCG(4, 4))
	steps := make([][]float32, 300)
	for i := range steps {
		steps[i] = randomLogits(r, vocab)
	}
	p := Defaults()
	p.Temperature, p.TopP, p.Seed = 0.9, 0.95, 1234
	p.RepeatPenalty, p.PresencePenalty = 1.1, 0.3
	run := func(noise *Sampler) []int32 {
		s := mustNew(t, p, vocab)
		var toks []int32
		for pos, l := range steps {
			if noise != nil { // another sequence sampled in between
				noise.Sample(steps[(pos*7)%len(steps)], pos*3)
			}
			tok := s.Sample(l, pos).Token
			s.Observe(tok, true)
			toks = append(toks, tok)
		}
		return toks
	}
	want := run(nil)
	other := p
	other.Seed, other.TopK = 99, 50
	if got := run(mustNew(t, other, vocab)); !slices.Equal(got, want) {
		t.Error("another sequence sampled in between changed the tokens")
	}
	var wg sync.WaitGroup
	results := make([][]int32, 4)
	for i := range results {
		wg.Go(func() { results[i] = run(nil) })
	}
	wg.Wait()
	for i, got := range results {
		if !slices.Equal(got, want) {
			t.Errorf("parallel run %d differs", i)
		}
	}
	p.Seed = 1235
	if got := run(nil); slices.Equal(got, want) {
		t.Error("seeds 1234 and 1235 gave the same 300 tokens")
	}
}

func TestPositionsDrawDifferently(t *testing.T) {
	logits := make([]float32, 100) // uniform
	s := mustNew(t, Defaults(), len(logits))
	seen := map[int32]bool{}
	for pos := range 200 {
		seen[s.Sample(logits, pos).Token] = true
	}
	// 200 draws from 100 equally likely tokens cover about 86 of them.
	if len(seen) < 70 {
		t.Errorf("200 positions drew only %d distinct tokens of 100", len(seen))
	}
	if a, b := s.Sample(logits, 5).Token, s.Sample(logits, 5).Token; a != b {
		t.Errorf("position 5 drew %d then %d", a, b)
	}
}

// TestDistribution checks temperature sampling against the softmax with a
// chi-square goodness-of-fit test at p = 0.001, over draws at successive
// positions, and the same for a truncated distribution. The seed is fixed,
// so the test is deterministic.
func TestDistribution(t *testing.T) {
	logits := []float32{2.1, 0.3, -1, 1.7, 0.9, 0, -0.4, 1.2, -2, 0.5, 1.5, -0.7}
	const n = 20000
	for _, c := range []struct {
		name string
		mod  func(*Params)
	}{
		{"T=0.7", func(p *Params) { p.Temperature = 0.7 }},
		{"T=1", func(p *Params) {}},
		{"T=1.3 top_k=8 top_p=0.9", func(p *Params) { p.Temperature, p.TopK, p.TopP = 1.3, 8, 0.9 }},
		{"T=1.3 top_p=0.8 min_p=0.1", func(p *Params) { p.Temperature, p.TopP, p.MinP = 1.3, 0.8, 0.1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Defaults()
			p.Seed = 20250101
			c.mod(&p)
			kept, w := refKept(p, logits, refOrder(logits))
			var sum float64
			for _, v := range w {
				sum += v
			}
			probs := make([]float64, len(kept))
			index := map[int32]int{}
			for i, id := range kept {
				probs[i] = w[i] / sum
				index[id] = i
			}
			s := mustNew(t, p, len(logits))
			counts := make([]int, len(kept))
			for pos := range n {
				i, ok := index[s.Sample(logits, pos).Token]
				if !ok {
					t.Fatalf("drew a token outside the kept set %v", kept)
				}
				counts[i]++
			}
			x2, crit := chiSquare(counts, probs), chiSquareCritical(len(kept)-1, 0.001)
			if x2 > crit {
				t.Errorf("chi-square %.2f > %.2f (df %d, p < 0.001): counts %v, probs %.4f", x2, crit, len(kept)-1, counts, probs)
			}
			t.Logf("%d tokens kept, chi-square %.2f, critical %.2f", len(kept), x2, crit)
		})
	}
}

func TestLogprobConvention(t *testing.T) {
	logits := []float32{1, 3, 2, 0, -1}
	var first []TokenLogprob
	for _, mod := range []func(*Params){
		func(p *Params) {},
		func(p *Params) { p.Temperature = 0 },
		func(p *Params) { p.Temperature, p.TopK, p.TopP, p.MinP = 0.3, 2, 0.5, 0.5 },
		func(p *Params) { p.Temperature = 5 },
	} {
		p := Defaults()
		p.Logprobs, p.TopLogprobs = true, 3
		mod(&p)
		s := mustNew(t, p, len(logits))
		res := s.Sample(logits, 11)
		lse := math.Log(math.Exp(1) + math.Exp(3) + math.Exp(2) + math.Exp(0) + math.Exp(-1))
		if want := float64(logits[res.Token]) - lse; math.Abs(float64(res.Logprob)-want) > 1e-6 {
			t.Errorf("%+v: logprob %v, want %v", p, res.Logprob, want)
		}
		top := slices.Clone(res.Top)
		if first == nil {
			first = top
			if top[0].Token != 1 || top[1].Token != 2 || top[2].Token != 0 {
				t.Errorf("top %v, want tokens 1, 2, 0", top)
			}
		} else if !slices.Equal(top, first) {
			t.Errorf("%+v: top %v, want %v whatever the sampling parameters", p, top, first)
		}
	}
	// Penalties and bias are part of the distribution reported.
	p := Defaults()
	p.Logprobs, p.Temperature = true, 0
	p.LogitBias = map[int32]float32{1: -100}
	res := mustNew(t, p, len(logits)).Sample(logits, 0)
	if res.Token != 2 || res.Logprob < -0.5 {
		t.Errorf("with token 1 banned: %+v", res)
	}
	// Without Logprobs there is nothing.
	res = mustNew(t, Defaults(), len(logits)).Sample(logits, 0)
	if res.Logprob != 0 || res.Top != nil {
		t.Errorf("logprobs off: %+v", res)
	}
}

func TestSampleAllocatesNothing(t *testing.T) {
	const vocab = 20000
	logits := benchLogits(vocab, false)
	for _, c := range []struct {
		name string
		mod  func(*Params)
	}{
		{"greedy", func(p *Params) { p.Temperature = 0 }},
		{"T=1", func(p *Params) {}},
		{"top_p", func(p *Params) { p.Temperature, p.TopP = 0.8, 0.9 }},
		{"top_k", func(p *Params) { p.TopK = 40 }},
		{"top_k large", func(p *Params) { p.TopK, p.TopP = 5000, 0.95 }},
		{"min_p", func(p *Params) { p.MinP = 0.05 }},
		{"everything", func(p *Params) {
			p.Temperature, p.TopK, p.TopP, p.MinP = 0.7, 100, 0.9, 0.01
			p.RepeatPenalty, p.PresencePenalty, p.FrequencyPenalty = 1.1, 0.5, 0.5
			p.LogitBias = map[int32]float32{3: 5, 9: -100}
			p.Logprobs, p.TopLogprobs = true, 20
		}},
	} {
		p := Defaults()
		c.mod(&p)
		s := mustNew(t, p, vocab)
		for i := range 200 {
			s.Observe(int32(i*31%vocab), i%2 == 0)
		}
		pos := 0
		allocs := testing.AllocsPerRun(20, func() {
			s.Sample(logits, pos)
			pos++
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Sample", c.name, allocs)
		}
	}
}

func TestExpNeg(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 1_000_000; i++ {
		x := -708.39 * float64(i) / 1_000_000
		want := math.Exp(x)
		worst = max(worst, math.Abs(expNeg(x)-want)/want)
	}
	if worst > 2e-15 {
		t.Errorf("expNeg: worst relative error %g", worst)
	}
	if expNeg(0) != 1 || expNeg(math.Copysign(0, -1)) != 1 {
		t.Error("expNeg(0) != 1")
	}
	// The constants: the table within an ulp of math.Exp2, the split of
	// ln2/128 exact to float64 precision, and k·expL1 exact for |k| < 2^17.
	for j, bits := range exp2Tab {
		want := math.Exp2(float64(j) / 128)
		if got := math.Float64frombits(bits); math.Abs(got-want) > want*0x1p-52 {
			t.Errorf("exp2Tab[%d] = %v, want %v", j, got, want)
		}
	}
	if d := expL1 + expL2 - math.Ln2/128; math.Abs(d) > 0x1p-60 {
		t.Errorf("expL1+expL2 - ln2/128 = %g", d)
	}
	if math.Float64bits(expL1)&(1<<18-1) != 0 {
		t.Error("expL1 has more than 35 significant bits")
	}
	if math.Abs(expInvL-128/math.Ln2) > 1e-13 {
		t.Error("expInvL is not 128/ln2")
	}
	for _, x := range []float64{-708.4, -1000, math.Inf(-1), math.NaN()} {
		if expNeg(x) != 0 {
			t.Errorf("expNeg(%v) = %v, want 0", x, expNeg(x))
		}
	}
}

// TestExpInlineCopies checks that the hand-inlined copies of expNeg in scan
// and sumExp1 compute exactly what it does.
func TestExpInlineCopies(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	s := mustNew(t, Defaults(), 2)
	for range 10000 {
		x := -r.ExpFloat64() * []float64{0.1, 3, 40, 300}[r.IntN(4)]
		z := []float32{float32(x)}
		x = float64(z[0]) // what the loops see
		s.zm, s.invT = 0, 1
		if got := s.scan(z); got != expNeg(x) {
			t.Fatalf("scan: e^%v = %v, expNeg %v", x, got, expNeg(x))
		}
		if got := sumExp1(z, 0); got != expNeg(x) {
			t.Fatalf("sumExp1: e^%v = %v, expNeg %v", x, got, expNeg(x))
		}
	}
}

// Order walks the candidates by adjusted logit, then id, leaving out the
// banned ones, with the bias applied.
func TestOrder(t *testing.T) {
	p := Defaults()
	p.LogitBias = map[int32]float32{3: 2}
	s, err := New(p, 5)
	if err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(-1))
	got := s.Order([]float32{1, inf, 1, 0, 0.5})
	if want := []int32{3, 0, 2, 4}; !slices.Equal(got, want) {
		t.Fatalf("Order = %v, want %v", got, want)
	}
}

// An id outside the vocabulary penalises nothing but takes its position
// in the repetition window: with a window of 2, token 0 observed before
// an unknown id and token 1 has left it.
func TestObserveUnknownKeepsWindow(t *testing.T) {
	p := Defaults()
	p.Temperature, p.RepeatPenalty, p.RepeatLastN = 0, 100, 2
	s := mustNew(t, p, 3)
	s.Observe(0, false)
	s.Observe(7, false) // no token
	s.Observe(1, false)
	// Token 1 is penalised (2 / 100), token 0 is not: 0 wins over 2.
	if got := s.Sample([]float32{1, 2, 0.5}, 3).Token; got != 0 {
		t.Fatalf("token %d, want 0: the window still held token 0", got)
	}
}
