package kernels_test

import (
	"math"
	"slices"
	"testing"

	"ringlm/kernels"
	"ringlm/kernels/conformance"
	"ringlm/ringbuf"
)

// nanBackend is the logits backend whose rows after a poison token are
// replaced by row(j): a model with NaN weights, or one that overflows.
type nanBackend struct {
	*logitsBackend
	poison int32
	row    func(j int) float32
}

func (b *nanBackend) Forward(batch []kernels.Entry) error {
	if err := b.logitsBackend.Forward(batch); err != nil {
		return err
	}
	for i := range batch {
		if e := &batch[i]; e.Logits != nil && slices.Contains(e.Tokens, b.poison) {
			for j := range e.Logits {
				e.Logits[j] = b.row(j)
			}
		}
	}
	return nil
}

// TestNonFiniteLogits: an entry whose logits hold no finite value fails
// with NON_FINITE (detail: the position it would have sampled) and its
// slot is finished (SKIPPED next); the other entries of the step sample
// as usual. One finite logit among NaN and ±Inf is a distribution: it is
// sampled.
func TestNonFiniteLogits(t *testing.T) {
	const vocab, bs, pool, poison = 97, 4, 16, 50
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name string
		row  func(j int) float32
		tok  int // the token sampled, or -1: NON_FINITE
	}{
		{"all NaN", func(int) float32 { return nan }, -1},
		{"all +Inf", func(int) float32 { return inf }, -1},
		{"all -Inf", func(int) float32 { return -inf }, -1},
		{"NaN and ±Inf", func(j int) float32 { return [...]float32{nan, inf, -inf}[j%3] }, -1},
		{"one finite", func(j int) float32 {
			if j == 5 {
				return -3
			}
			return [...]float32{nan, -inf}[j%2]
		}, 5},
	}
	greedy := ringbuf.SlotParams{Temperature: 0, TopP: 1, RepeatPenalty: 1}
	argmax := func(l []float32) uint32 {
		best := 0
		for j, v := range l {
			if v > l[best] {
				best = j
			}
		}
		return uint32(best)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := &nanBackend{logitsBackend: newLogits(vocab, pool, bs), poison: poison, row: c.row}
			h := host(t, be, bs, conformance.Config{Slots: 2, Blocks: pool, SubmitCap: 8, Staging: 256})
			h.Open(0, greedy, nil, nil, nil)
			h.Grant(0, 0, 0)
			h.Open(1, greedy, nil, nil, nil)
			h.Grant(1, 0, 1)
			a := h.Step(pre(0, true, 1, 2), pre(1, true, 3, poison))
			t0 := argmax(logitsOf([]int32{1, 2}, vocab, 0))
			want := []ringbuf.Completion{tok(a, 0, t0, 2, 0), errc(a, 1, ringbuf.CodeNonFinite, 2), done(a, 2)}
			if c.tok >= 0 {
				want[1] = tok(a, 1, uint32(c.tok), 2, 0)
			}
			match(t, h.Sync(), want)
			b := h.Step(fb(0), fb(1))
			t1 := argmax(logitsOf([]int32{1, 2, int32(t0)}, vocab, 0))
			want = []ringbuf.Completion{tok(b, 0, t1, 3, 0), skipped(b, 1), done(b, 1)}
			if c.tok >= 0 {
				want[1], want[2] = tok(b, 1, argmax(logitsOf([]int32{3, poison, int32(c.tok)}, vocab, 0)), 3, 0), done(b, 2)
			}
			match(t, h.Sync(), want)
			c1 := h.Close(1)
			match(t, h.Sync(), []ringbuf.Completion{closed(c1, 1)})
			h.Stop()
			be.check(t)
		})
	}
}
