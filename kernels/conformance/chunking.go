package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ringlm/engine"
	"ringlm/sample"
)

// Batch invariance across prompt chunkings, through the engine: a
// token's result may not depend on how its prompt was cut into prefill
// chunks, on how many tokens share its step or on its row. CheckChunking
// holds a device to it bitwise.

// ChunkSizes are the prefill chunkings CheckChunking compares, in prompt
// tokens per step for one sequence; 0 is the whole prompt in one step.
var ChunkSizes = []int{0, 7, 64, 512}

// The engines CheckChunking asks for: ChunkingSlots sequences at once, a
// budget of ChunkingBudget tokens a step (two whole prompts of
// ChunkingPrompt tokens fit in one step).
const (
	ChunkingSlots  = 256
	ChunkingBudget = 2048
	ChunkingPrompt = 600
	// ChunkingBlocks is the KV blocks of 16 positions the requests need
	// at once, generously.
	ChunkingBlocks = 4096
)

// ChunkingOpener opens an engine with cfg's Slots, TokenBudget and
// PrefillChunk (the device's fields filled in by the opener) and returns
// a function that closes it.
type ChunkingOpener func(t *testing.T, cfg engine.Config) (*engine.Engine, func())

// CheckChunking runs a greedy request and a seeded sampled one (each with
// logprobs and 5 alternatives), both over the same prompt of
// ChunkingPrompt tokens, on engines that prefill in each of ChunkSizes,
// alone and beside 254 other requests (each target so beside 255), and
// fails unless every run gives bitwise the same tokens, logprobs and
// alternatives; the other requests (prompts of 1 to 64 tokens, greedy
// and sampled) must also agree across the chunkings. It checks that each
// target's prompt went in the planned number of chunks. The model needs
// a context of at least ChunkingPrompt+16 tokens.
func CheckChunking(t *testing.T, vocab, context int, open ChunkingOpener) {
	t.Helper()
	const gen = 16
	if context < ChunkingPrompt+gen {
		t.Fatalf("CheckChunking: a context of %d tokens; it needs %d", context, ChunkingPrompt+gen)
	}
	r := rand.New(rand.NewPCG(15, 7))
	prompt := make([]int32, ChunkingPrompt)
	for i := range prompt {
		prompt[i] = int32(r.IntN(vocab))
	}
	withTop := func(p sample.Params, k int) sample.Params {
		p.Logprobs, p.TopLogprobs = true, k
		return p
	}
	pg := sample.Defaults()
	pg.Temperature, pg.MaxTokens = 0, gen
	ps := sample.Defaults()
	ps.Temperature, ps.TopP, ps.Seed, ps.MaxTokens = 0.8, 0.9, 4242, gen
	targets := []engine.Request{
		{ID: "greedy", Prompt: prompt, Params: withTop(pg, 5), IgnoreEOS: true},
		{ID: "sampled", Prompt: prompt, Params: withTop(ps, 5), IgnoreEOS: true},
	}
	batch := slices.Clone(targets)
	for i := range ChunkingSlots - len(targets) {
		p := sample.Defaults()
		p.Seed, p.MaxTokens = uint64(i), 8+r.IntN(17)
		switch i % 3 {
		case 0:
			p.Temperature = 0
		case 1:
			p.Temperature, p.TopK = 0.9, 40
		}
		if i%4 == 0 {
			p = withTop(p, 2)
		}
		q := make([]int32, 1+r.IntN(64))
		for j := range q {
			q[j] = int32(r.IntN(vocab))
		}
		batch = append(batch, engine.Request{ID: fmt.Sprint("other-", i), Prompt: q, Params: p, IgnoreEOS: true})
	}

	var ref, refBatch []Seq // whole prompts, alone and batched
	for _, chunk := range ChunkSizes {
		name := "whole"
		per := ChunkingBudget
		if chunk > 0 {
			name, per = fmt.Sprint(chunk, " per step"), chunk
		}
		wantChunks := (ChunkingPrompt + per - 1) / per
		e, closeEngine := open(t, engine.Config{Slots: ChunkingSlots, TokenBudget: ChunkingBudget, PrefillChunk: per})
		if c := e.Config(); c.Slots < ChunkingSlots || c.TokenBudget < ChunkingBudget || c.PrefillChunk != per {
			t.Fatalf("%s: the opener gave slots %d, budget %d, prefill chunk %d", name, c.Slots, c.TokenBudget, c.PrefillChunk)
		}
		run := func(what string, reqs []engine.Request) []Seq {
			t.Helper()
			out, streams, err := generate(e, reqs)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, what, err)
			}
			for _, s := range streams {
				if s.ID != targets[0].ID && s.ID != targets[1].ID {
					continue
				}
				if n := len(s.Timeline().Chunks); n != wantChunks {
					t.Errorf("%s, %s: %s's prompt went in %d chunks, want %d", name, what, s.ID, n, wantChunks)
				}
			}
			return out
		}
		alone := []Seq{run("alone", targets[:1])[0], run("alone", targets[1:])[0]}
		together := run("beside 255 others", batch)
		closeEngine()
		if ref == nil {
			ref, refBatch = alone, together
			for i, s := range alone {
				if len(s) != gen {
					t.Fatalf("%s: %d tokens", targets[i].ID, len(s))
				}
			}
			continue
		}
		for i := range targets {
			sameSeq(t, fmt.Sprintf("%s, alone, prefilled %s", targets[i].ID, name), alone[i], ref[i])
			sameSeq(t, fmt.Sprintf("%s, beside 255 others, prefilled %s", targets[i].ID, name), together[i], ref[i])
		}
		for i := len(targets); i < len(batch); i++ {
			sameSeq(t, fmt.Sprintf("%s (prompt %d), prefilled %s", batch[i].ID, len(batch[i].Prompt), name), together[i], refBatch[i])
		}
	}
	for i := range targets {
		sameSeq(t, targets[i].ID+", whole, beside 255 others", refBatch[i], ref[i])
	}
	t.Logf("greedy %v; sampled %v: bitwise the same prefilled whole and in chunks of %v, alone and beside 255 others",
		ref[0].Tokens(), ref[1].Tokens(), ChunkSizes[1:])
}

// sameSeq fails t unless got and want are bitwise the same: tokens,
// logprobs, alternatives.
func sameSeq(t *testing.T, what string, got, want Seq) {
	t.Helper()
	same := func(a, b sample.TokenLogprob) bool {
		return a.Token == b.Token && math.Float32bits(a.Logprob) == math.Float32bits(b.Logprob)
	}
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) {
			t.Errorf("%s: %d tokens, want %d", what, len(got), len(want))
			return
		}
		g, w := got[i], want[i]
		if !same(sample.TokenLogprob{Token: g.Token, Logprob: g.Logprob}, sample.TokenLogprob{Token: w.Token, Logprob: w.Logprob}) ||
			!slices.EqualFunc(g.Top, w.Top, same) {
			t.Errorf("%s: token %d is %d (%v, top %v), want %d (%v, top %v)", what, i, g.Token, g.Logprob, g.Top, w.Token, w.Logprob, w.Top)
			return
		}
	}
}
