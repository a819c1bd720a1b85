package conformance

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ringlm/ringbuf"
)

// Scenario is one script of the suite.
type Scenario struct {
	Name string
	Run  func(t *testing.T, f Factory)
}

// Scenarios is the suite, in the order Run plays it.
var Scenarios = []Scenario{
	{"Lifecycle", Lifecycle},
	{"FinishRules", FinishRules},
	{"Errors", Errors},
	{"Capacity", Capacity},
	{"BadParamValues", BadParamValues},
	{"DeviceLimits", DeviceLimits},
	{"OpenCheckOrder", OpenCheckOrder},
	{"Determinism", Determinism},
	{"RecomputePenalties", RecomputePenalties},
	{"FullCompletionRing", FullCompletionRing},
	{"TopLogprobs", TopLogprobs},
}

// Run plays every scenario on devices from f.
func Run(t *testing.T, f Factory) {
	for _, s := range Scenarios {
		t.Run(s.Name, func(t *testing.T) { s.Run(t, f) })
	}
}

// BlockSize is the KV block size the suite asks factories for.
const BlockSize = 16

// config is a scenario's device: slots and blocks as given, the suite's
// block size, a context of 128 positions and 64 tokens a step, rings of
// 4 submit records and the smallest completion ring the protocol allows.
func config(slots, blocks, staging int) Config {
	return Config{Slots: slots, Blocks: blocks, BlockSize: BlockSize, Context: 128, MaxStepTokens: 64,
		SubmitCap: 4, ComplCap: ringbuf.MinCompletionCap(slots), Staging: staging}
}

// blocks returns n block ids from first on, for positions [0, n·bs).
func (h *Host) blocksFor(positions int, first uint32) []uint32 {
	n := (positions + h.BS - 1) / h.BS
	return seqOf(n, func(i int) uint32 { return first + uint32(i) })
}

func greedy(seed uint64) ringbuf.SlotParams {
	return ringbuf.SlotParams{Temperature: 0, TopP: 1, RepeatPenalty: 1, Seed: seed}
}

// Lifecycle runs one slot through every op: OPEN, GRANT (twice, the
// second ahead of the decode steps), a prompt in three chunks with SAMPLE
// on the last only, feedback steps, CLOSE and STOP. Its tokens are the
// ones the same sequence samples alone in one prefill.
func Lifecycle(t *testing.T, f Factory) {
	c := config(4, 16, 256)
	p := greedy(0xABCDEF0123)
	prompt := []uint32{11, 22, 33, 44, 55, 66, 77}
	const gen = 8
	want := Learn(t, f, c, Job{P: p, Prompt: prompt, N: gen})[0]

	h := NewHost(t, f, c)
	h.Open(1, p, nil, nil, nil)
	ids := []uint32{5, 3, 9, 0, 12, 7, 2, 8}
	first := len(h.blocksFor(len(prompt)+1, 0)) // the prompt and the first sample's position
	h.Grant(1, 0, ids[:first]...)
	Match(t, h.Sync(), nil)

	s1 := h.Step(Pre(1, false, prompt[:3]...))
	s2 := h.Step(Pre(1, false, prompt[3:5]...))
	s3 := h.Step(Pre(1, true, prompt[5:]...))
	Match(t, h.Sync(), []ringbuf.Completion{Done(s1, 1), Done(s2, 1), Tok(s3, 1, want[0], 7, 0), Done(s3, 1)})

	// Decode: feedback entries queued ahead, blocks granted ahead.
	h.Grant(1, uint32(first), ids[first:len(h.blocksFor(len(prompt)+gen, 0))]...)
	var wantC []ringbuf.Completion
	for i := 1; i < gen; i++ {
		id := h.Step(FB(1))
		wantC = append(wantC, Tok(id, 1, want[i], uint32(len(prompt)+i), 0), Done(id, 1))
	}
	Match(t, h.Sync(), wantC)
	cl := h.Close(1)
	Match(t, h.Stop(), []ringbuf.Completion{Closed(cl, 1)})
}

// FinishRules: max_tokens finishes on exactly the max_tokens-th token;
// an EOS id (unless SlotIgnoreEOS) or a stop token finishes with
// FinishStop (which wins when both apply); entries queued after the finish
// come back SKIPPED; CLOSE and a new OPEN clear the finished state.
func FinishRules(t *testing.T, f Factory) {
	const P, N = 3, 8 // prompt length, steps
	c := config(5, 40, 512)
	// A prompt whose continuation has a token at an index K and another at
	// an index M > K+1 that do not appear earlier.
	var jobs []Job
	vocab := uint32(0)
	{
		h := NewHost(t, f, c)
		vocab = uint32(h.Vocab)
		h.Finish()
	}
	r := rand.New(rand.NewPCG(1, 2))
	for j := range 48 {
		jobs = append(jobs, Job{P: greedy(uint64(1 + j)), Prompt: []uint32{r.Uint32N(vocab), r.Uint32N(vocab), r.Uint32N(vocab)}, N: N})
	}
	var seq []uint32
	var job Job
	K, M := -1, -1
	fresh := func(s []uint32, i int) bool { return !slices.Contains(s[:i], s[i]) }
	for i, s := range Learn(t, f, c, jobs...) {
		for k := 1; k < N-2 && K < 0; k++ {
			for m := k + 2; m < N-1; m++ {
				if fresh(s, k) && fresh(s, m) {
					K, M, seq, job = k, m, s, jobs[i]
					break
				}
			}
		}
		if K >= 0 {
			break
		}
	}
	if K < 0 {
		t.Fatal("no prompt of 48 has a greedy continuation with two new tokens: the model is degenerate")
	}
	eos, stopTok := seq[K], seq[M]

	pMax := job.P
	pMax.MaxTokens = uint32(K + 1)
	pEOS := job.P
	pEOS.NEOS, pEOS.EOS[0], pEOS.EOS[1] = 2, vocab+7, eos // an EOS id beyond the vocabulary never matches
	pIgn := pEOS
	pIgn.Flags = ringbuf.SlotIgnoreEOS
	pBoth := pEOS
	pBoth.MaxTokens = uint32(K + 1)
	pOne := job.P
	pOne.MaxTokens = 1

	h := NewHost(t, f, c)
	h.Open(0, pMax, nil, nil, nil)
	h.Open(1, pEOS, nil, nil, nil)
	h.Open(2, pIgn, []uint32{stopTok}, nil, nil)
	h.Open(3, pBoth, nil, nil, nil)
	h.Open(4, pOne, nil, nil, nil)
	per := len(h.blocksFor(P+N, 0))
	for s := range uint32(5) {
		h.Grant(s, 0, h.blocksFor(P+N, s*uint32(per))...)
	}
	Match(t, h.Sync(), nil)

	finishAt := []int{K, K, M, K, 0}
	reason := []ringbuf.FinishReason{ringbuf.FinishLength, ringbuf.FinishStop, ringbuf.FinishStop, ringbuf.FinishStop, ringbuf.FinishLength}
	var want []ringbuf.Completion
	for i := range N {
		var ents []Ent
		for s := range uint32(5) {
			if i == 0 {
				ents = append(ents, Pre(s, true, job.Prompt...))
			} else {
				ents = append(ents, FB(s))
			}
		}
		id := h.Step(ents...)
		executed := uint32(0)
		for s := range uint32(5) {
			switch {
			case i < finishAt[s]:
				want = append(want, Tok(id, s, seq[i], uint32(P+i), 0))
				executed++
			case i == finishAt[s]:
				want = append(want, Tok(id, s, seq[i], uint32(P+i), reason[s]))
				executed++
			default:
				want = append(want, Skipped(id, s))
			}
		}
		want = append(want, Done(id, executed))
	}
	Match(t, h.Sync(), want)

	// A finished slot stays open: GRANT still works, CLOSE answers
	// SLOT_CLOSED, and a new OPEN starts afresh.
	h.Grant(0, uint32(per), uint32(5*per))
	c0 := h.Close(0)
	Match(t, h.Sync(), []ringbuf.Completion{Closed(c0, 0)})
	h.Open(0, job.P, nil, nil, nil)
	h.Grant(0, 0, 0)
	id := h.Step(Pre(0, true, job.Prompt...))
	Match(t, h.Sync(), []ringbuf.Completion{Tok(id, 0, seq[0], P, 0), Done(id, 1)})
	h.Stop()
}

// witness is a slot that keeps generating while other slots fail: after
// every error the device must still serve it correctly.
type witness struct {
	slot uint32
	seq  []uint32 // its continuation, learned alone
	pos  int      // position of the next sampled token
	base int      // position of seq[0]
}

// tok is the witness's next TOKEN, answered in step id.
func (w *witness) tok(t testing.TB, id uint64) ringbuf.Completion {
	if w.pos-w.base >= len(w.seq) {
		t.Fatalf("the witness ran past the %d tokens learned", len(w.seq))
	}
	c := Tok(id, w.slot, w.seq[w.pos-w.base], uint32(w.pos), 0)
	w.pos++
	return c
}

// check runs one more witness step and expects want before its answers:
// after whatever went wrong, the device still serves the witness.
func (w *witness) check(t testing.TB, h *Host, name string, want ...ringbuf.Completion) {
	t.Helper()
	id := h.Step(FB(w.slot))
	want = append(want, w.tok(t, id), Done(id, 1))
	t.Log(name)
	Match(t, h.Sync(), want)
}

// Errors provokes every error code a host can cause and checks that each
// comes back as a completion (never a hang) with its detail, that a failed
// entry fails its slot, and that the device keeps serving the witness slot
// correctly throughout.
func Errors(t *testing.T, f Factory) {
	const slots, pool = 4, 32
	c := config(slots, pool, 512)
	wp := greedy(77)
	p9, p10 := greedy(9), greedy(10)
	learned := Learn(t, f, c, Job{P: wp, Prompt: []uint32{1, 2}, N: 40}, Job{P: p9, Prompt: []uint32{3}, N: 1},
		Job{P: p10, Prompt: []uint32{1}, N: 1})

	h := NewHost(t, f, c)
	vocab := uint32(h.Vocab)
	bs := uint32(h.BS)
	top := uint32(h.A.Staging.Cap()) // staging words
	w := &witness{slot: 0, seq: learned[0], pos: 2, base: 2}
	h.Open(0, wp, nil, nil, nil)
	h.Grant(0, 0, h.blocksFor(48, 0)...)
	id := h.Step(Pre(0, true, 1, 2))
	Match(t, h.Sync(), []ringbuf.Completion{w.tok(t, id), Done(id, 1)})
	check := func(name string, want ...ringbuf.Completion) { t.Helper(); w.check(t, h, name, want...) }

	// BAD_OP.
	a := h.Push(ringbuf.SubmitRecord{Op: 9})
	b := h.Push(ringbuf.SubmitRecord{Op: 0})
	check("bad op", Err(a, ringbuf.NoSlot, ringbuf.CodeBadOp, 9), Err(b, ringbuf.NoSlot, ringbuf.CodeBadOp, 0))

	// BAD_SLOT, for every op that names a slot and for a step entry.
	a = h.Open(slots, greedy(1), nil, nil, nil)
	b = h.Grant(0xFFFFFFFE, 0, 1)
	cl := h.Close(slots + 3)
	d := h.Step(FB(0), Pre(slots, true, 1))
	check("bad slot",
		Err(a, slots, ringbuf.CodeBadSlot, slots),
		Err(b, 0xFFFFFFFE, ringbuf.CodeBadSlot, 0xFFFFFFFE),
		Err(cl, slots+3, ringbuf.CodeBadSlot, slots+3),
		w.tok(t, d), Err(d, slots, ringbuf.CodeBadSlot, slots), Done(d, 1))

	// SLOT_STATE: OPEN of an open slot (one error, although its payload is
	// outside staging too); GRANT, STEP entry, CLOSE of a closed slot.
	a = h.Open(0, greedy(1), nil, nil, nil)
	b = h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpOpenSlot, Slot: 0, PayloadOff: top - 4, PayloadLen: 32})
	cl = h.Grant(2, 0, 1)
	d = h.Step(Pre(2, true, 5), FB(0))
	e := h.Close(3)
	check("slot state",
		Err(a, 0, ringbuf.CodeSlotState, uint32(ringbuf.OpOpenSlot)),
		Err(b, 0, ringbuf.CodeSlotState, uint32(ringbuf.OpOpenSlot)),
		Err(cl, 2, ringbuf.CodeSlotState, uint32(ringbuf.OpGrantBlocks)),
		Err(d, 2, ringbuf.CodeSlotState, uint32(ringbuf.OpStep)), w.tok(t, d), Done(d, 1),
		Err(e, 3, ringbuf.CodeSlotState, uint32(ringbuf.OpCloseSlot)))

	// BAD_PAYLOAD on OPEN and GRANT (outside staging; a count that is not
	// the payload length): the slot stays as it was.
	a = h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpOpenSlot, Slot: 1, PayloadOff: top - 8, PayloadLen: 32})
	h.Open(1, greedy(5), nil, nil, nil) // now it opens
	b = h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: 1, PayloadOff: top, PayloadLen: 1, GrantCount: 1})
	off, buf := h.Alloc(1)
	buf[0] = 16
	cl = h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: 1, PayloadOff: off, PayloadLen: 1, GrantCount: 2})
	check("bad payload: open, grant",
		Err(a, 1, ringbuf.CodeBadPayload, top-8),
		Err(b, 1, ringbuf.CodeBadPayload, top),
		Err(cl, 1, ringbuf.CodeBadPayload, off))

	// A STEP refused whole: payload outside staging, a length that is not
	// n entries, totals that disagree with the entries. Nothing in it runs,
	// the witness entry included.
	refused := []ringbuf.SubmitRecord{{Op: ringbuf.OpStep, Slot: 1, PayloadOff: top - 2, PayloadLen: 4, StepTokens: 1, StepSample: 1}}
	r := h.StepRecord([]Ent{FB(0)})
	r.Slot = 2
	refused = append(refused, r)
	r = h.StepRecord([]Ent{FB(0)})
	r.StepTokens = 2
	refused = append(refused, r)
	r = h.StepRecord([]Ent{FB(0)})
	r.StepSample = 0
	refused = append(refused, r)
	r = h.StepRecord([]Ent{FB(0)})
	r.Slot, r.PayloadLen = 0, 0 // no entries, but StepTokens 1
	refused = append(refused, r)
	var want []ringbuf.Completion
	for _, r := range refused {
		id := h.Push(r)
		want = append(want, Err(id, ringbuf.NoSlot, ringbuf.CodeBadPayload, r.PayloadOff), Done(id, 0))
	}
	check("refused steps", want...)

	// Entry token runs: outside staging, n_tokens 0. A failed entry fails
	// its slot: later entries are SKIPPED until CLOSE.
	h.Grant(1, 0, 16, 17)
	a = h.Step(Ent{Slot: 1, Toks: []uint32{1}, N: 3, SetN: true, Off: top - 2, SetOff: true, Sample: true}, FB(0))
	b = h.Step(Pre(1, true, 1))
	cl = h.Close(1)
	check("entry outside staging",
		Err(a, 1, ringbuf.CodeBadPayload, top-2), w.tok(t, a), Done(a, 1),
		Skipped(b, 1), Done(b, 0), Closed(cl, 1))
	h.Open(1, greedy(5), nil, nil, nil)
	h.Grant(1, 0, 16, 17)
	a = h.Step(Ent{Slot: 1, Toks: []uint32{1}, N: 0, SetN: true, Off: 17, SetOff: true}, FB(0))
	b = h.Step(Pre(1, true, 1))
	cl = h.Close(1)
	check("entry with no tokens",
		Err(a, 1, ringbuf.CodeBadPayload, 17), w.tok(t, a), Done(a, 1),
		Skipped(b, 1), Done(b, 0), Closed(cl, 1))

	// GRANT: a first index beyond the table; a block id beyond the pool
	// (nothing of that grant applies).
	h.Open(1, greedy(5), nil, nil, nil)
	h.Grant(1, 0, 16)
	off, buf = h.Alloc(1)
	buf[0] = 17
	a = h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: 1, PayloadOff: off, PayloadLen: 1, GrantFirst: 2, GrantCount: 1})
	b = h.Grant(1, 1, 17, pool)
	cl = h.Grant(1, 1, pool+100)
	check("grant errors",
		Err(a, 1, ringbuf.CodeBadPayload, off),
		Err(b, 1, ringbuf.CodeNoBlock, pool),
		Err(cl, 1, ringbuf.CodeNoBlock, pool+100))
	// NO_BLOCK on an entry: the table is still [16], and bs+1 tokens need
	// 2 blocks (NO_BLOCK comes before BAD_TOKEN in the protocol's order).
	long := seqOf(int(bs)+1, func(i int) uint32 { return uint32(i + 1) })
	long[2] = vocab
	a = h.Step(Pre(1, false, long...), FB(0))
	b = h.Step(Pre(1, false, 1))
	cl = h.Close(1)
	check("entry beyond the blocks",
		Err(a, 1, ringbuf.CodeNoBlock, bs), w.tok(t, a), Done(a, 1),
		Skipped(b, 1), Done(b, 0), Closed(cl, 1))
	// A grant whose first index is inside the table replaces blocks (a
	// copy-on-write of a shared prefix block).
	h.Open(1, greedy(5), nil, nil, nil)
	h.Grant(1, 0, 16, 17)
	h.Grant(1, 0, 18) // the table is [18, 17]
	a = h.Step(Pre(1, false, 1, 2, 3, 4, 5), FB(0))
	check("grant replacing a block", w.tok(t, a), Done(a, 2))

	// BAD_TOKEN: the entry fails, its slot too.
	h.Open(2, greedy(6), nil, nil, nil)
	h.Grant(2, 0, 20, 21)
	a = h.Step(Pre(2, true, 5, vocab, 6), FB(0))
	b = h.Step(FB(2))
	cl = h.Close(2)
	check("bad token",
		Err(a, 2, ringbuf.CodeBadToken, vocab), w.tok(t, a), Done(a, 1),
		Skipped(b, 2), Done(b, 0), Closed(cl, 2))

	// BAD_PARAMS with the word index; the slot stays closed, so the next
	// OPEN succeeds.
	good := make([]uint32, ringbuf.SlotParamsWords)
	ringbuf.PutSlotPayload(good, &p9, nil, nil, nil)
	bad := func(word int, v uint32) []uint32 {
		w := slices.Clone(good)
		w[word] = v
		return w
	}
	ids := []uint64{
		h.OpenWords(2, bad(27, 1)),                     // reserved
		h.OpenWords(2, bad(31, 1)),                     // reserved
		h.OpenWords(2, bad(ringbuf.SPOffNTop, 1)),      // n_top without the logprobs flag
		h.OpenWords(2, bad(ringbuf.SPOffNEOS, 9)),      // too many EOS ids
		h.OpenWords(2, bad(ringbuf.SPOffFlags, 4)),     // unknown flag
		h.OpenWords(2, bad(ringbuf.SPOffNStop, 1)),     // counts need 33 words
		h.OpenWords(2, append(slices.Clone(good), 7)),  // 33 words, counts say 32
		h.OpenWords(2, good[:10]),                      // short
		h.OpenWords(2, nil),                            // no payload
		h.OpenWords(2, bad(ringbuf.SPOffNHist, 1<<31)), // counts need 2^31+32 words
	}
	words := []uint32{27, 31, ringbuf.SPOffNTop, ringbuf.SPOffNEOS, ringbuf.SPOffFlags, ringbuf.SPOffNStop, ringbuf.SPOffNStop, 10, 0, ringbuf.SPOffNStop}
	want = nil
	for i, id := range ids {
		want = append(want, Err(id, 2, ringbuf.CodeBadParams, words[i]))
	}
	check("bad params", want...)
	h.OpenWords(2, good)
	h.Grant(2, 0, 20)
	a = h.Step(Pre(2, true, 3), FB(0))
	check("open after bad params", Tok(a, 2, learned[1][0], 1, 0), w.tok(t, a), Done(a, 2))

	// NO_FEEDBACK: before the slot sampled anything; n_tokens != 1.
	h.Open(3, p10, nil, nil, nil)
	h.Grant(3, 0, 22)
	a = h.Step(FB(3), FB(0))
	b = h.Step(Pre(3, true, 1))
	cl = h.Close(3)
	h.Open(3, p10, nil, nil, nil)
	h.Grant(3, 0, 22)
	d = h.Step(Pre(3, true, 1))
	e = h.Step(Ent{Slot: 3, N: 2, SetN: true, Sample: true}, FB(0))
	g := h.Step(FB(3))
	k := h.Close(3)
	check("no feedback",
		Err(a, 3, ringbuf.CodeNoFeedback, 1), w.tok(t, a), Done(a, 1),
		Skipped(b, 3), Done(b, 0), Closed(cl, 3),
		Tok(d, 3, learned[2][0], 1, 0), Done(d, 1),
		Err(e, 3, ringbuf.CodeNoFeedback, 2), w.tok(t, e), Done(e, 1),
		Skipped(g, 3), Done(g, 0), Closed(k, 3))
	h.Stop()
}

// Capacity: a device refuses what exceeds the sizes it was opened with:
// a GRANT past the block table (ceil(Context / BlockSize) entries), an
// entry whose positions reach the context (a token may still be sampled
// for position Context-1's successor; it can never be fed), a STEP of
// more tokens than MaxStepTokens (refused whole), and an OPEN that starts
// past the context or carries more history than positions before its
// start.
func Capacity(t *testing.T, f Factory) {
	c := config(2, 32, 1024)
	c.Context = 120 // not a whole number of blocks: the context, not the table, bounds positions
	wp, p1 := greedy(3), greedy(4)
	long := seqOf(c.Context-1, func(i int) uint32 { return uint32(i*7+1) % 97 })
	learned := Learn(t, f, c, Job{P: wp, Prompt: []uint32{4, 5, 6}, N: 24}, Job{P: p1, Prompt: long, N: 2})
	h := NewHost(t, f, c)
	w := &witness{slot: 0, seq: learned[0], pos: 3, base: 3}
	h.Open(0, wp, nil, nil, nil)
	h.Grant(0, 0, h.blocksFor(32, 0)...)
	id := h.Step(Pre(0, true, 4, 5, 6))
	Match(t, h.Sync(), []ringbuf.Completion{w.tok(t, id), Done(id, 1)})
	check := func(name string, want ...ringbuf.Completion) { t.Helper(); w.check(t, h, name, want...) }
	table := (c.Context + h.BS - 1) / h.BS
	slot1 := h.blocksFor(c.Context, 4) // the whole table, ids 4…

	// GRANT past the table: as many ids as fit are accepted, one more is not.
	h.Open(1, p1, nil, nil, nil)
	h.Grant(1, 0, slot1...)
	off, buf := h.Alloc(1)
	buf[0] = 1
	a := h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: 1, PayloadOff: off, PayloadLen: 1, GrantFirst: uint32(table), GrantCount: 1})
	check("grant past the table", Err(a, 1, ringbuf.CodeBadPayload, off))

	// Fill the context: positions up to Context-1 are fed, a token is
	// sampled for position Context, and feeding it is NO_BLOCK.
	P := len(long)
	half := P / 2
	a = h.Step(Pre(1, false, long[:half]...), FB(0))
	b := h.Step(Pre(1, false, long[half:P-3]...), FB(0))
	cl := h.Step(Pre(1, true, long[P-3:]...), FB(0))
	d := h.Step(FB(1), FB(0))
	check("filling the context",
		w.tok(t, a), Done(a, 2), w.tok(t, b), Done(b, 2),
		Tok(cl, 1, learned[1][0], uint32(P), 0), w.tok(t, cl), Done(cl, 2),
		Tok(d, 1, learned[1][1], uint32(P+1), 0), w.tok(t, d), Done(d, 2))
	a = h.Step(FB(1), FB(0))
	b = h.Step(FB(1))
	cl = h.Close(1)
	check("feeding past the context",
		Err(a, 1, ringbuf.CodeNoBlock, uint32(c.Context)), w.tok(t, a), Done(a, 1),
		Skipped(b, 1), Done(b, 0), Closed(cl, 1))

	// A STEP of MaxStepTokens tokens runs; one more is refused whole.
	h.Open(1, p1, nil, nil, nil)
	h.Grant(1, 0, slot1...)
	full := long[:c.MaxStepTokens-1]
	a = h.Step(Pre(1, false, full...), FB(0))
	check("a step of MaxStepTokens tokens", w.tok(t, a), Done(a, 2))
	r := h.StepRecord([]Ent{Pre(1, false, full...), Pre(0, false, 1, 2)})
	a = h.Push(r)
	cl = h.Close(1)
	check("a step over MaxStepTokens", Err(a, ringbuf.NoSlot, ringbuf.CodeBadPayload, r.PayloadOff), Done(a, 0), Closed(cl, 1))

	// OPEN at the context is fine (a full prefix reused); past it, or with
	// history reaching before position 0, it is refused.
	at := greedy(4)
	at.StartPos = uint32(c.Context)
	h.Open(1, at, nil, nil, nil)
	cl = h.Close(1)
	past := at
	past.StartPos++
	a = h.Open(1, past, nil, nil, nil)
	hist := greedy(4)
	hist.StartPos = 2
	b = h.Open(1, hist, nil, nil, []uint32{1, 2, 3})
	check("open past the context", Closed(cl, 1),
		Err(a, 1, ringbuf.CodeBadParams, ringbuf.SPOffStartPos),
		Err(b, 1, ringbuf.CodeBadParams, ringbuf.SPOffStartPos))
	h.Stop()
}

// BadParamValues: sampling parameters out of range are refused with the
// word index of the field; the slot stays closed and opens afterwards.
func BadParamValues(t *testing.T, f Factory) {
	c := config(2, 8, 512)
	h := NewHost(t, f, c)
	vocab := uint32(h.Vocab)
	good := ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, RepeatLastN: 64, Seed: 5}
	type tc struct {
		set  func(p *ringbuf.SlotParams)
		stop []uint32
		bias []ringbuf.TokenBias
		word uint32
	}
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []tc{
		{set: func(p *ringbuf.SlotParams) { p.Temperature = -1 }, word: ringbuf.SPOffTemperature},
		{set: func(p *ringbuf.SlotParams) { p.Temperature = nan }, word: ringbuf.SPOffTemperature},
		{set: func(p *ringbuf.SlotParams) { p.Temperature = inf }, word: ringbuf.SPOffTemperature},
		{set: func(p *ringbuf.SlotParams) { p.TopP = 0 }, word: ringbuf.SPOffTopP},
		{set: func(p *ringbuf.SlotParams) { p.TopP = 1.5 }, word: ringbuf.SPOffTopP},
		{set: func(p *ringbuf.SlotParams) { p.TopP = nan }, word: ringbuf.SPOffTopP},
		{set: func(p *ringbuf.SlotParams) { p.MinP = 2 }, word: ringbuf.SPOffMinP},
		{set: func(p *ringbuf.SlotParams) { p.MinP = -0.5 }, word: ringbuf.SPOffMinP},
		{set: func(p *ringbuf.SlotParams) { p.RepeatPenalty = 0 }, word: ringbuf.SPOffRepeatPenalty},
		{set: func(p *ringbuf.SlotParams) { p.RepeatPenalty = inf }, word: ringbuf.SPOffRepeatPenalty},
		{set: func(p *ringbuf.SlotParams) { p.RepeatLastN = -2 }, word: ringbuf.SPOffRepeatLastN},
		{set: func(p *ringbuf.SlotParams) { p.Presence = 3 }, word: ringbuf.SPOffPresence},
		{set: func(p *ringbuf.SlotParams) { p.Presence = nan }, word: ringbuf.SPOffPresence},
		{set: func(p *ringbuf.SlotParams) { p.Frequency = -2.5 }, word: ringbuf.SPOffFrequency},
		{stop: []uint32{7}, bias: []ringbuf.TokenBias{{Token: 3, Bias: 1}, {Token: vocab, Bias: 1}}, word: ringbuf.SlotParamsWords + 1 + 2},
		{bias: []ringbuf.TokenBias{{Token: 0x80000000, Bias: 1}}, word: ringbuf.SlotParamsWords},
		{bias: []ringbuf.TokenBias{{Token: 2, Bias: 1}, {Token: 3, Bias: 200}}, word: ringbuf.SlotParamsWords + 3},
		{bias: []ringbuf.TokenBias{{Token: 2, Bias: nan}}, word: ringbuf.SlotParamsWords + 1},
		{set: func(p *ringbuf.SlotParams) { p.Flags, p.NTop = ringbuf.SlotLogprobs, ringbuf.MaxTop+1 }, word: ringbuf.SPOffNTop},
		{set: func(p *ringbuf.SlotParams) { p.NTop = 1 }, word: ringbuf.SPOffNTop}, // without the logprobs flag
	}
	var want []ringbuf.Completion
	for _, c := range cases {
		p := good
		if c.set != nil {
			c.set(&p)
		}
		want = append(want, Err(h.Open(1, p, c.stop, c.bias, nil), 1, ringbuf.CodeBadParams, c.word))
	}
	Match(t, h.Sync(), want)
	if f.NoLogits {
		h.Stop()
		return
	}
	h.Open(1, good, nil, []ringbuf.TokenBias{{Token: 9, Bias: 100}}, nil) // a bias of 100 makes token 9 certain
	h.Grant(1, 0, 0)
	id := h.Step(Pre(1, true, 1, 2))
	Match(t, h.Sync(), []ringbuf.Completion{Tok(id, 1, 9, 2, 0), Done(id, 1)})
	h.Stop()
}
