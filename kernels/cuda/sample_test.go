//go:build cgo

package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ringlm/ringbuf"
	"ringlm/sample"
)

// sampleCase is one row for the kernel's sampler: an OPEN_SLOT payload and
// the logits of the token it samples (at its start position).
type sampleCase struct {
	words  []uint32
	logits []float32
}

// randomLogits draws a row of one of several shapes: smooth, wide, with
// ties, with banned (-Inf) tokens, rarely with NaN or +Inf, rarely all -Inf.
func randomLogits(r *rand.Rand, vocab int) []float32 {
	z := make([]float32, vocab)
	scale := []float64{0.05, 1, 4, 20}[r.IntN(4)]
	ties := r.IntN(4) == 0
	for i := range z {
		v := r.NormFloat64() * scale
		if ties {
			v = math.Round(v*2) / 2
		}
		z[i] = float32(v)
	}
	switch k := r.IntN(40); {
	case k < 6: // banned tokens
		for range 1 + r.IntN(vocab) {
			z[r.IntN(vocab)] = float32(math.Inf(-1))
		}
	case k == 6:
		z[r.IntN(vocab)] = float32(math.NaN())
	case k == 7:
		z[r.IntN(vocab)] = float32(math.Inf(1))
	case k == 8 && r.IntN(4) == 0:
		for i := range z {
			z[i] = float32(math.Inf(-1))
		}
	}
	return z
}

// randomOpen draws sampling parameters over the whole range the protocol
// carries, a few of them out of range.
func randomOpen(r *rand.Rand, vocab int) ringbuf.SlotOpen {
	p := sample.Defaults()
	if r.IntN(4) > 0 {
		p.Temperature = float32(0.05 + 1.95*r.Float64())
	} else {
		p.Temperature = 0
	}
	if r.IntN(2) == 0 {
		p.TopK = 1 + r.IntN(min(100, vocab+5))
	}
	if r.IntN(2) == 0 {
		p.TopP = float32(0.05 + 0.95*r.Float64())
	}
	if r.IntN(5) < 2 {
		p.MinP = float32(0.5 * r.Float64())
	}
	if r.IntN(5) < 2 {
		p.RepeatPenalty = float32(0.5 + 1.5*r.Float64())
		p.RepeatLastN = []int{-1, 0, 1, 8, 64}[r.IntN(5)]
	}
	if r.IntN(5) < 2 {
		p.PresencePenalty = float32(4*r.Float64() - 2)
	}
	if r.IntN(5) < 2 {
		p.FrequencyPenalty = float32(4*r.Float64() - 2)
	}
	if r.IntN(10) < 3 {
		p.LogitBias = map[int32]float32{}
		for range 1 + r.IntN(6) {
			b := float32(200*r.Float64() - 100)
			if r.IntN(4) == 0 {
				b = []float32{-100, 100}[r.IntN(2)]
			}
			p.LogitBias[int32(r.IntN(vocab))] = b
		}
	}
	for range r.IntN(4) {
		p.StopTokens = append(p.StopTokens, int32(r.IntN(vocab)))
	}
	p.Seed = r.Uint64()
	p.MaxTokens = []int{0, 1, 5}[r.IntN(3)]
	if r.IntN(5) < 3 {
		p.Logprobs = true
		p.TopLogprobs = r.IntN(sample.MaxTopLogprobs + 1)
	}
	o := ringbuf.SlotOpen{Params: p, IgnoreEOS: r.IntN(5) == 0, StartPos: r.IntN(20000)}
	for range r.IntN(3) {
		o.EOS = append(o.EOS, int32(r.IntN(vocab)))
	}
	for range r.IntN(min(o.StartPos, 64) + 1) {
		tk := int32(r.IntN(min(vocab, 1+r.IntN(vocab))))
		if r.IntN(50) == 0 {
			tk = int32(vocab + r.IntN(10)) // no token: the penalties skip it
		}
		o.Hist = append(o.Hist, tk)
	}
	if r.IntN(2) == 0 {
		o.PromptLen = o.StartPos - len(o.Hist) + r.IntN(len(o.Hist)+2)
	}
	// A few out of range: each refused with its word on both sides.
	switch r.IntN(60) {
	case 0:
		o.Params.Temperature = -1
	case 1:
		o.Params.TopP = 0
	case 2:
		o.Params.PresencePenalty = 3
	case 3:
		o.Params.FrequencyPenalty = -2.5
	case 4:
		o.Params.MinP = 1.5
	case 5:
		o.Params.RepeatPenalty = 0
	case 6:
		o.Params.LogitBias = map[int32]float32{int32(vocab): 1}
	case 7:
		o.Params.LogitBias = map[int32]float32{0: 200}
	case 8:
		o.Params.Temperature = float32(math.NaN())
	}
	return o
}

// goSample is what a Go device answers for a case: kernels.Executor's
// OPEN_SLOT (ringbuf's decoding, sample's validation) and its sampling and
// finish rule.
func goSample(t *testing.T, c sampleCase, vocab int) (SampleOut, *sample.Sampler) {
	pl, err := ringbuf.ParseSlotPayload(c.words)
	if err != nil {
		var pe *ringbuf.PayloadError
		if !errors.As(err, &pe) {
			t.Fatalf("ParseSlotPayload: %v", err)
		}
		return SampleOut{BadWord: int32(pe.Word)}, nil
	}
	var o ringbuf.SlotOpen
	pl.Open(&o)
	if len(o.Hist) > o.StartPos {
		return SampleOut{BadWord: ringbuf.SPOffStartPos}, nil
	}
	sp := o.Params
	sp.StopTokens = nil
	sm, err := sample.New(sp, vocab)
	if err != nil {
		w, _ := pl.ParamWord(err, vocab)
		return SampleOut{BadWord: int32(w)}, nil
	}
	for i, tk := range o.Hist {
		pos := o.StartPos - len(o.Hist) + i
		sm.Observe(tk, o.PromptLen > 0 && pos >= o.PromptLen)
	}
	res := sm.Sample(slices.Clone(c.logits), o.StartPos)
	out := SampleOut{BadWord: -1, Token: res.Token, Logprob: res.Logprob, Top: slices.Clone(res.Top)}
	switch {
	case slices.Contains(o.Params.StopTokens, res.Token) || (!o.IgnoreEOS && slices.Contains(o.EOS, res.Token)):
		out.Finish = ringbuf.FinishStop
	case o.Params.MaxTokens == 1:
		out.Finish = ringbuf.FinishLength
	}
	return out, sm
}

// TestSamplerMatchesGo holds the kernel's OPEN_SLOT decoding, sampler and
// finish rule to the Go executor's on 10,240 random cases over
// vocabularies of 2 to 32,000: the same refusals with the same words; the
// same token except where sample/doc.go allows a rounding difference
// between two adjacent candidates (counted); logprobs and alternatives
// within 1e-4.
func TestSamplerMatchesGo(t *testing.T) {
	needGPU(t)
	l, err := lib()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const batches, rows, tol = 40, 256, 1e-4
	var refused, sampled, greedy, adjacent, withTop int
	for b := range batches {
		vocab := []int{2, 5, 37, 300, 1000, 4096, 32000}[b%7]
		cases := make([]sampleCase, rows)
		payloads := make([][]uint32, rows)
		logits := make([]float32, 0, rows*vocab)
		for i := range cases {
			o := randomOpen(r, vocab)
			w := make([]uint32, o.Words())
			o.Put(w)
			switch r.IntN(80) { // malformed blocks
			case 0:
				w[27+r.IntN(5)] = 1 // reserved
			case 1:
				w[ringbuf.SPOffNTop] = ringbuf.MaxTop + 1
			case 2:
				w = w[:r.IntN(ringbuf.SlotParamsWords)]
			case 3, 4: // bias tokens out of order, or one named twice
				if nb := int(w[ringbuf.SPOffNBias]); nb >= 2 {
					b := ringbuf.SlotParamsWords + int(w[ringbuf.SPOffNStop])
					if r.IntN(2) == 0 {
						w[b], w[b+2] = w[b+2], w[b]
					} else {
						w[b+2] = w[b]
					}
				}
			}
			cases[i] = sampleCase{words: w, logits: randomLogits(r, vocab)}
			payloads[i] = w
			logits = append(logits, cases[i].logits...)
		}
		got, err := l.testSample(vocab, payloads, logits)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			want, sm := goSample(t, c, vocab)
			g := got[i]
			if g.BadWord != want.BadWord {
				t.Fatalf("batch %d row %d: kernel refuses word %d, Go %d (payload %v)", b, i, g.BadWord, want.BadWord, c.words[:min(len(c.words), 32)])
			}
			if want.BadWord >= 0 {
				refused++
				continue
			}
			sampled++
			if math.Float32frombits(c.words[ringbuf.SPOffTemperature]) == 0 {
				greedy++
			}
			if g.Token != want.Token {
				if !adjacentCandidates(sm, c.logits, g.Token, want.Token) {
					t.Fatalf("batch %d row %d (vocabulary %d): kernel token %d, Go %d, not adjacent candidates; params %+v",
						b, i, vocab, g.Token, want.Token, c.words[:32])
				}
				adjacent++
				continue
			}
			if g.Finish != want.Finish {
				t.Fatalf("batch %d row %d: token %d finishes %d on the kernel, %d in Go", b, i, g.Token, g.Finish, want.Finish)
			}
			if !closeTo(g.Logprob, want.Logprob, tol) {
				t.Fatalf("batch %d row %d: token %d logprob %v on the kernel, %v in Go", b, i, g.Token, g.Logprob, want.Logprob)
			}
			if len(want.Top) > 0 {
				withTop++
			}
			if err := sameAlternatives(g.Top, want.Top, tol); err != "" {
				t.Fatalf("batch %d row %d: %s\nkernel %v\n    Go %v", b, i, err, g.Top, want.Top)
			}
		}
	}
	t.Logf("%d cases: %d refused (same word), %d sampled (%d greedy, %d with alternatives); %d adjacent-candidate rounding differences",
		batches*rows, refused, sampled, greedy, withTop, adjacent)
	if adjacent > sampled/100 {
		t.Errorf("%d rounding differences in %d samples: more than rounding explains", adjacent, sampled)
	}
}

func closeTo(a, b float32, tol float64) bool {
	if math.IsInf(float64(a), -1) && math.IsInf(float64(b), -1) {
		return true
	}
	return math.Abs(float64(a)-float64(b)) <= tol
}

// sameAlternatives compares two lists of alternatives: the same length,
// logprobs within tol, the same tokens except for neighbours whose
// logprobs tie within tol (the order key then decides by id on both sides,
// so a swap needs a rounding difference in the logprobs themselves).
func sameAlternatives(g, w []sample.TokenLogprob, tol float64) string {
	if len(g) != len(w) {
		return "different numbers of alternatives"
	}
	for k := range g {
		if !closeTo(g[k].Logprob, w[k].Logprob, tol) {
			return "alternative logprobs differ"
		}
		if g[k].Token != w[k].Token {
			tied := (k > 0 && g[k].Token == w[k-1].Token) || (k+1 < len(w) && g[k].Token == w[k+1].Token)
			if !tied {
				return "alternatives differ"
			}
		}
	}
	return ""
}

// adjacentCandidates: a and b are next to each other in the sampler's
// order of the adjusted logits (so rounding at a threshold or at the draw
// may take either), per sample/doc.go.
func adjacentCandidates(sm *sample.Sampler, logits []float32, a, b int32) bool {
	if sm == nil {
		return false
	}
	order := sm.Order(slices.Clone(logits))
	ia, ib := slices.Index(order, a), slices.Index(order, b)
	return ia >= 0 && ib >= 0 && (ia-ib == 1 || ib-ia == 1)
}
