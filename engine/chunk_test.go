package engine

import (
	"context"
	"testing"

	"ringlm/sample"
)

// Config.PrefillChunk bounds the prompt tokens one sequence gets in a
// step: a prompt of n tokens goes in ceil(n / chunk) chunks, alone or
// beside other sequences' prefill and decode, and a chunk larger than
// the token budget is cut to it.
func TestPrefillChunk(t *testing.T) {
	const n = 1000
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(i % 997)
	}
	for _, c := range []struct {
		chunk, budget, chunks int
	}{
		{7, 2048, (n + 6) / 7},
		{64, 2048, (n + 63) / 64},
		{512, 2048, 2},
		{2048, 2048, 1},
		{512, 100, 10}, // cut to the budget
	} {
		e := newNullEngine(t, Config{Slots: 64, PrefillChunk: c.chunk, TokenBudget: c.budget})
		if got := e.Config().PrefillChunk; got != min(c.chunk, c.budget) {
			t.Fatalf("chunk %d, budget %d: PrefillChunk %d", c.chunk, c.budget, got)
		}
		p := sample.Defaults()
		p.Seed, p.MaxTokens = 1, 4
		// The long prompt first, then others decoding beside it.
		s, err := e.Submit(context.Background(), Request{Prompt: prompt, Params: p, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		var others []*Stream
		for i := range 40 {
			q := p
			q.MaxTokens = 30
			o, err := e.Submit(context.Background(), Request{Prompt: []int32{int32(i), 1, 2}, Params: q, IgnoreEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			others = append(others, o)
		}
		if toks := collect(t, s); len(toks) != 4 {
			t.Fatalf("%d tokens", len(toks))
		}
		for _, o := range others {
			collect(t, o)
		}
		if got := len(s.Timeline().Chunks); got != c.chunks {
			t.Errorf("chunk %d, budget %d: the prompt of %d went in %d chunks, want %d", c.chunk, c.budget, n, got, c.chunks)
		}
		e.Close()
	}
}
