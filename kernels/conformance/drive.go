package conformance

import (
	"slices"
	"testing"
	"time"

	"ringlm/ringbuf"
	"ringlm/sample"
)

// SeqSpec is one sequence for Drive.
type SeqSpec struct {
	Slot   uint32
	P      ringbuf.SlotParams
	Hist   []uint32
	Prompt []uint32 // the tokens fed as prefill, from P.StartPos on
	Blocks []uint32
	Chunks []int // prefill chunk sizes; the rest of the prompt goes in one
	Gen    int   // tokens to sample
	Delay  int   // steps before it opens
}

// Output is what one sequence sampled.
type Output struct {
	Tokens   []uint32
	Logprobs []float32
	Top      [][]sample.TokenLogprob // each token's alternatives (TOP_LOGPROBS), TopNone pairs left out
}

// Drive runs the sequences together, one STEP per round: each open
// sequence adds its next prefill chunk (SAMPLE on the last) or a feedback
// entry, and is closed once it has queued Gen samples. It checks the
// TOKEN positions, logprob presence, TOP_LOGPROBS placement and every
// STEP_DONE count, and returns the outputs.
func Drive(t testing.TB, h *Host, specs ...SeqSpec) []Output {
	t.Helper()
	type state struct {
		opened, closed bool
		fed, chunk     int
		queued         int
	}
	st := make([]state, len(specs))
	executed := map[uint64]uint32{}
	for round := 0; ; round++ {
		var ents []Ent
		busy := false
		for i := range specs {
			sp, s := &specs[i], &st[i]
			if s.closed {
				continue
			}
			busy = true
			if round < sp.Delay {
				continue
			}
			if !s.opened {
				h.Open(sp.Slot, sp.P, nil, nil, sp.Hist)
				h.Grant(sp.Slot, 0, sp.Blocks...)
				s.opened = true
			}
			switch {
			case s.fed < len(sp.Prompt):
				n := len(sp.Prompt) - s.fed
				if s.chunk < len(sp.Chunks) {
					n = sp.Chunks[s.chunk]
					s.chunk++
				}
				last := s.fed+n == len(sp.Prompt)
				ents = append(ents, Pre(sp.Slot, last, sp.Prompt[s.fed:s.fed+n]...))
				s.fed += n
				if last {
					s.queued++
				}
			case s.queued < sp.Gen:
				ents = append(ents, FB(sp.Slot))
				s.queued++
			default:
				h.Close(sp.Slot)
				s.closed = true
			}
		}
		if !busy {
			break
		}
		if len(ents) > 0 {
			executed[h.Step(ents...)] = uint32(len(ents))
		}
	}
	out := make([]Output, len(specs))
	bySlot := map[uint32]int{}
	for i, sp := range specs {
		bySlot[sp.Slot] = i
	}
	got := h.Sync()
	for k, c := range got {
		switch c.Kind {
		case ringbuf.KindTopLogprobs:
			// Right after its TOKEN (or the TOKEN's previous TOP records).
			if k == 0 {
				t.Fatalf("%s comes first", Show(c))
			}
			prev := got[k-1]
			if (prev.Kind != ringbuf.KindToken && prev.Kind != ringbuf.KindTopLogprobs) || prev.Slot != c.Slot || prev.Step != c.Step {
				t.Fatalf("%s does not follow its TOKEN", Show(c))
			}
			o := &out[bySlot[c.Slot]]
			top := &o.Top[len(o.Top)-1]
			for _, tl := range c.Top {
				if tl.Token == ringbuf.TopNone {
					if tl.Logprob != 0 {
						t.Fatalf("%s: an unused pair with logprob %v", Show(c), tl.Logprob)
					}
					continue
				}
				*top = append(*top, sample.TokenLogprob{Token: int32(tl.Token), Logprob: tl.Logprob})
			}
		case ringbuf.KindToken:
			i := bySlot[c.Slot]
			o, sp := &out[i], &specs[i]
			want := sp.P.StartPos + uint32(len(sp.Prompt)+len(o.Tokens))
			if c.Position != want || c.Finish != ringbuf.FinishNone || c.Token >= uint32(h.Vocab) {
				t.Fatalf("%s: want position %d, no finish, a token below %d", Show(c), want, h.Vocab)
			}
			if c.Logprob > 0 || (sp.P.Flags&ringbuf.SlotLogprobs == 0 && c.Logprob != 0) {
				t.Fatalf("%s: logprob with flags %#x", Show(c), sp.P.Flags)
			}
			o.Tokens = append(o.Tokens, c.Token)
			o.Logprobs = append(o.Logprobs, c.Logprob)
			o.Top = append(o.Top, nil)
		case ringbuf.KindStepDone:
			if c.Slot != executed[c.Step] {
				t.Fatalf("%s: want %d executed", Show(c), executed[c.Step])
			}
		case ringbuf.KindSlotClosed:
		default:
			t.Fatalf("unexpected %s", Show(c))
		}
	}
	for i, o := range out {
		if len(o.Tokens) != specs[i].Gen {
			t.Fatalf("slot %d sampled %d tokens, want %d", specs[i].Slot, len(o.Tokens), specs[i].Gen)
		}
		for j, top := range o.Top {
			if n := int(specs[i].P.NTop); len(top) > n || (n > 0 && len(top) == 0) {
				t.Fatalf("slot %d token %d: %d alternatives, n_top %d", specs[i].Slot, j, len(top), n)
			}
			for k := 1; k < len(top); k++ {
				if !(top[k].Logprob <= top[k-1].Logprob) || slices.ContainsFunc(top[:k], func(x sample.TokenLogprob) bool { return x.Token == top[k].Token }) {
					t.Fatalf("slot %d token %d: alternatives %v are not distinct tokens in descending order", specs[i].Slot, j, top)
				}
			}
		}
	}
	return out
}

// SameOutput fails unless two outputs are bitwise the same.
func SameOutput(t testing.TB, what string, got, want Output) {
	t.Helper()
	if !slices.Equal(got.Tokens, want.Tokens) || !slices.Equal(got.Logprobs, want.Logprobs) ||
		!slices.EqualFunc(got.Top, want.Top, slices.Equal) {
		t.Fatalf("%s:\n got %v %v %v\nwant %v %v %v", what, got.Tokens, got.Logprobs, got.Top, want.Tokens, want.Logprobs, want.Top)
	}
}

// Determinism: with temperature sampling, a seed gives the same tokens,
// logprobs and alternatives whether its slot runs alone or batched with
// others, in any slot, over any blocks, whatever the prefill chunking;
// and another seed gives other tokens.
func Determinism(t *testing.T, f Factory) {
	c := config(4, 64, 512)
	h := NewHost(t, f, c)
	vocab := uint32(h.Vocab)
	run := func(specs ...SeqSpec) []Output { return Drive(t, h, specs...) }
	blocks := func(first uint32) []uint32 { return h.blocksFor(32, first) }
	pA := ringbuf.SlotParams{Temperature: 0.9, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1, Seed: 101, Flags: ringbuf.SlotLogprobs, NTop: 3}
	a := SeqSpec{Slot: 0, P: pA, Prompt: seqOf(9, func(i int) uint32 { return uint32(3*i+1) % vocab }), Blocks: blocks(0), Gen: 16}
	pB := ringbuf.SlotParams{Temperature: 1.2, TopP: 1, TopK: 8, RepeatPenalty: 1.1, RepeatLastN: -1, Presence: 0.5, Seed: 202}
	b := SeqSpec{Slot: 3, P: pB, Prompt: seqOf(7, func(i int) uint32 { return uint32(i*i) % vocab }), Blocks: blocks(10), Gen: 14}
	pC := ringbuf.SlotParams{Temperature: 0, TopP: 1, RepeatPenalty: 1.5, RepeatLastN: 4, Seed: 303, Flags: ringbuf.SlotLogprobs, NTop: 20}
	cc := SeqSpec{Slot: 1, P: pC, Prompt: []uint32{5, 6, 7}, Blocks: blocks(20), Gen: 12}

	alone := run(a)[0]
	if n := len(slices.Compact(slices.Sorted(slices.Values(alone.Tokens)))); n < 4 {
		t.Fatalf("only %d distinct tokens in %v: the sampling test is too weak", n, alone.Tokens)
	}
	bAlone := run(b)[0]
	cAlone := run(cc)[0]

	// a in another slot over other blocks, in uneven chunks, opening late,
	// with b and c (chunked differently) in the same steps.
	a2 := a
	a2.Slot, a2.Blocks, a2.Chunks, a2.Delay = 2, []uint32{40, 34, 27, 8, 50, 33, 45, 60, 12}[:len(a.Blocks)], []int{2, 3, 1, 3}, 3
	b2 := b
	b2.Slot, b2.Chunks = 0, []int{4, 3}
	c2 := cc
	c2.Chunks, c2.Delay = []int{1, 1, 1}, 1
	mixed := run(b2, c2, a2)
	SameOutput(t, "a batched with b and c", mixed[2], alone)
	SameOutput(t, "b batched with a and c", mixed[0], bAlone)
	SameOutput(t, "c batched with a and b", mixed[1], cAlone)

	a3 := a
	a3.Chunks = []int{1, 1, 1, 1, 1, 1, 1, 1, 1}
	SameOutput(t, "a in one-token chunks", run(a3)[0], alone)

	// The seed matters.
	a4 := a
	a4.P.Seed++
	if got := run(a4)[0]; slices.Equal(got.Tokens, alone.Tokens) {
		t.Fatalf("seeds %d and %d sampled the same tokens %v", a.P.Seed, a4.P.Seed, got.Tokens)
	}
	h.Stop()
}

// RecomputePenalties: a sequence reopened after preemption, with the
// tokens it generated fed again as prefill (PromptLen = the original
// prompt length) or partly reused from its KV blocks and sent as history,
// samples the same next tokens as the original slot did, with presence,
// frequency and repetition penalties on.
func RecomputePenalties(t *testing.T, f Factory) {
	const P = 6
	c := config(4, 32, 512)
	h := NewHost(t, f, c)
	pp := ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1.3, RepeatLastN: 8, Presence: 1.5, Frequency: 0.8,
		Seed: 4242, Flags: ringbuf.SlotLogprobs}
	prompt := []uint32{1, 2, 3, 1, 2, 3}
	blocks := func(ids ...uint32) []uint32 { return ids[:len(h.blocksFor(P+16, 0))] }
	orig := Drive(t, h, SeqSpec{Slot: 0, P: pp, Prompt: prompt, Blocks: blocks(0, 1, 2, 3, 4, 5), Gen: 16})[0]
	seq := append(slices.Clone(prompt), orig.Tokens...)
	want := Output{Tokens: orig.Tokens[7:], Logprobs: orig.Logprobs[7:], Top: orig.Top[7:]}

	// From scratch: prompt and 7 generated tokens fed as prefill.
	pa := pp
	pa.PromptLen = P
	ga := Drive(t, h, SeqSpec{Slot: 1, P: pa, Prompt: seq[:P+7], Blocks: blocks(8, 9, 10, 11, 12, 13), Chunks: []int{5, 8}, Gen: 9})[0]
	SameOutput(t, "recompute from scratch", ga, want)

	// Prefix reuse: positions 0..8 (the prompt and 3 generated tokens)
	// stay in the original's first blocks and travel as history; the next
	// 4 generated tokens are fed (rewriting the positions after 8 of the
	// last reused block with the same values, as the sequence is the same).
	pb := pp
	pb.PromptLen, pb.StartPos = P, P+3
	ob := blocks(0, 1, 2, 3, 4, 5)
	reuse := len(h.blocksFor(P+3, 0))
	bb := append(slices.Clone(ob[:reuse]), []uint32{16, 17, 18, 19, 20, 21}[:len(ob)-reuse]...)
	gb := Drive(t, h, SeqSpec{Slot: 2, P: pb, Hist: seq[:P+3], Prompt: seq[P+3 : P+7], Blocks: bb, Gen: 9})[0]
	SameOutput(t, "recompute over a reused prefix", gb, want)

	// The test has teeth: counting the generated tokens as prompt (no
	// PromptLen), or leaving out the history, changes the tokens (on a
	// device with logits: the null device picks tokens without them).
	if f.NoLogits {
		h.Stop()
		return
	}
	pc := pp
	gc := Drive(t, h, SeqSpec{Slot: 3, P: pc, Prompt: seq[:P+7], Blocks: blocks(24, 25, 26, 27, 28, 29), Gen: 9})[0]
	if slices.Equal(gc.Tokens, want.Tokens) {
		t.Fatalf("PromptLen 0 gave the same tokens %v: the penalties do not matter", gc.Tokens)
	}
	gd := Drive(t, h, SeqSpec{Slot: 2, P: pb, Prompt: seq[P+3 : P+7], Blocks: bb, Gen: 9})[0]
	if slices.Equal(gd.Tokens, want.Tokens) {
		t.Fatalf("no history gave the same tokens %v: the history does not matter", gd.Tokens)
	}
	h.Stop()
}

// FullCompletionRing: with the smallest completion ring the protocol
// allows, a Cap-4 submit ring, a small staging area and a host that reads
// slowly, the device waits for room and no completion is lost, duplicated
// or reordered.
func FullCompletionRing(t *testing.T, f Factory) {
	const slots, steps = 6, 60
	c := config(slots, slots*8, 4096)
	c.SubmitCap = 128 // the host queues the whole script ahead, so the device fills the completion ring
	var jobs []Job
	for s := range uint32(slots) {
		jobs = append(jobs, Job{P: greedy(uint64(1000 + s)), Prompt: []uint32{s, s + 1}, N: steps})
	}
	learned := Learn(t, f, c, jobs...)
	h := NewHost(t, f, c)
	h.Slow = 20 * time.Microsecond
	var want []ringbuf.Completion
	per := len(h.blocksFor(steps+2, 0))
	for s := range uint32(slots) {
		h.Open(s, jobs[s].P, nil, nil, nil)
		h.Grant(s, 0, h.blocksFor(steps+2, s*uint32(per))...)
	}
	n := make([]int, slots) // tokens sampled per slot
	for i := range steps {
		var ents []Ent
		var active []uint32
		for s := range uint32(slots) {
			// Slot s skips the steps i with i%(s+2) == 1, so batches vary.
			if i > 0 && i%(int(s)+2) == 1 {
				continue
			}
			if i == 0 {
				ents = append(ents, Pre(s, true, s, s+1))
			} else {
				ents = append(ents, FB(s))
			}
			active = append(active, s)
		}
		id := h.Step(ents...)
		for _, s := range active {
			want = append(want, Tok(id, s, learned[s][n[s]], uint32(2+n[s]), 0))
			n[s]++
		}
		want = append(want, Done(id, uint32(len(active))))
		if i%10 == 5 {
			want = append(want, Err(h.Push(ringbuf.SubmitRecord{Op: 77}), ringbuf.NoSlot, ringbuf.CodeBadOp, 77))
		}
	}
	// Let the device run until the ring is full and it must wait for the
	// host, then read slowly.
	fill := uint64(h.A.Completion.Cap() - ringbuf.StepRecords(slots))
	for deadline := time.Now().Add(WaitLimit); h.A.Completion.Produced()-h.A.Completion.Consumed() < fill; {
		if time.Now().After(deadline) {
			t.Fatalf("the device did not fill the completion ring (%d of %d records)", h.A.Completion.Produced()-h.A.Completion.Consumed(), h.A.Completion.Cap())
		}
		time.Sleep(100 * time.Microsecond)
	}
	for s := range uint32(slots) {
		want = append(want, Closed(h.Close(s), s))
	}
	got := h.Stop()
	Match(t, got, want)
	// The host reads while the device publishes, so it may not catch the
	// ring completely full; within a step of it, the device waited.
	if h.MaxFill < h.A.Completion.Cap()-ringbuf.StepRecords(slots) {
		t.Errorf("the completion ring never filled up (at most %d of %d waiting)", h.MaxFill, h.A.Completion.Cap())
	}
}

// TopLogprobs: a slot opened with n_top gets, right after each TOKEN, up
// to n_top distinct alternatives in descending logprob order (Drive checks
// that); greedy, the first is the token itself with the TOKEN's logprob;
// and asking for alternatives changes no token.
func TopLogprobs(t *testing.T, f Factory) {
	c := config(2, 16, 256)
	h := NewHost(t, f, c)
	prompt := []uint32{3, 1, 4, 1, 5, 9}
	blocks := h.blocksFor(16, 0)
	for _, tc := range []struct {
		name string
		p    ringbuf.SlotParams
	}{
		{"sampled, odd n_top", ringbuf.SlotParams{Temperature: 0.9, TopP: 0.9, RepeatPenalty: 1.2, RepeatLastN: -1,
			Presence: 0.3, Seed: 77, Flags: ringbuf.SlotLogprobs, NTop: 5}},
		{"greedy, n_top 20", ringbuf.SlotParams{Temperature: 0, TopP: 1, RepeatPenalty: 1, Seed: 1, Flags: ringbuf.SlotLogprobs,
			NTop: ringbuf.MaxTop}},
		{"top-k path, even n_top", ringbuf.SlotParams{Temperature: 1.3, TopP: 1, TopK: 4, RepeatPenalty: 1, Seed: 9,
			Flags: ringbuf.SlotLogprobs, NTop: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Drive(t, h, SeqSpec{Slot: 1, P: tc.p, Prompt: prompt, Blocks: blocks, Gen: 10})[0]
			plain := tc.p
			plain.NTop = 0
			ref := Drive(t, h, SeqSpec{Slot: 0, P: plain, Prompt: prompt, Blocks: blocks, Gen: 10})[0]
			if !slices.Equal(out.Tokens, ref.Tokens) || !slices.Equal(out.Logprobs, ref.Logprobs) {
				t.Fatalf("n_top changed the tokens: %v %v, without %v %v", out.Tokens, out.Logprobs, ref.Tokens, ref.Logprobs)
			}
			for i, top := range out.Top {
				if len(top) != int(tc.p.NTop) && len(top) != h.Vocab {
					t.Fatalf("token %d: %d alternatives, want %d", i, len(top), tc.p.NTop)
				}
				if tc.p.Temperature == 0 && (top[0].Token != int32(out.Tokens[i]) || top[0].Logprob != out.Logprobs[i]) {
					t.Fatalf("token %d (%d, %v): greedy, but the first alternative is %v", i, out.Tokens[i], out.Logprobs[i], top[0])
				}
			}
		})
	}
	h.Stop()
}
