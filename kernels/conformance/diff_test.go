package conformance

import (
	"strings"
	"testing"

	"ringlm/ringbuf"
)

// logBuilder writes one host's completion log by hand, with the sessions
// a Host would keep, for the differ's tests.
type logBuilder struct {
	log  []Logged
	sess map[uint32]*session
	step uint64
}

func newLog() *logBuilder { return &logBuilder{sess: map[uint32]*session{}} }

// open starts a session of slot; nTop alternatives per token, prompt
// fixes its inputs.
func (b *logBuilder) open(slot uint32, nTop uint32, seed uint64) {
	p := ringbuf.SlotParams{TopP: 1, RepeatPenalty: 1, Seed: seed, NTop: nTop}
	if nTop > 0 {
		p.Flags = ringbuf.SlotLogprobs
	}
	w := make([]uint32, ringbuf.SlotPayloadWords(0, 0, 0))
	ringbuf.PutSlotPayload(w, &p, nil, nil, nil)
	b.sess[slot] = newSession(w, &sessionOpen{p: p})
}

// tok is one step of a slot: a prefill of prompt (nil: feedback) sampling
// token at pos with alternatives alts, then STEP_DONE.
func (b *logBuilder) tok(slot uint32, prompt []uint32, token, pos uint32, fin ringbuf.FinishReason, alts ...uint32) *logBuilder {
	b.step++
	e := FB(slot)
	if prompt != nil {
		e = Pre(slot, true, prompt...)
	}
	at := b.sess[slot].add(b.step, e)
	b.log = append(b.log, Logged{Completion: ringbuf.Completion{Kind: ringbuf.KindToken, Step: b.step, Slot: slot, Token: token,
		Position: pos, Finish: fin, Logprob: -0.25}, Greedy: true, at: at})
	for i := 0; i < len(alts); i += 2 {
		c := ringbuf.Completion{Kind: ringbuf.KindTopLogprobs, Step: b.step, Slot: slot}
		c.Top[0] = ringbuf.TopLogprob{Token: alts[i], Logprob: -0.25 - float32(i)}
		c.Top[1] = ringbuf.TopLogprob{Token: ringbuf.TopNone}
		if i+1 < len(alts) {
			c.Top[1] = ringbuf.TopLogprob{Token: alts[i+1], Logprob: -0.25 - float32(i+1)}
		}
		b.log = append(b.log, Logged{Completion: c, Greedy: true})
	}
	b.log = append(b.log, Logged{Completion: ringbuf.Completion{Kind: ringbuf.KindStepDone, Step: b.step, Slot: 1}})
	return b
}

// fakeReplay answers a replay's alternatives from a table of tokens.
func fakeReplay(calls *int, top map[uint32][]uint32) func(side int, u unit) ([]ringbuf.TopLogprob, error) {
	return func(side int, u unit) ([]ringbuf.TopLogprob, error) {
		*calls++
		var out []ringbuf.TopLogprob
		for i, t := range top[u.Token] {
			out = append(out, ringbuf.TopLogprob{Token: t, Logprob: -float32(i)})
		}
		return out, nil
	}
}

func diffOf(a, b *logBuilder, tol Tolerance, replay func(side int, u unit) ([]ringbuf.TopLogprob, error)) (DiffStats, error) {
	var st DiffStats
	d := &differ{tol: tol, st: &st, diverged: map[*session]bool{}, replay: replay}
	return st, d.logs(a.log, b.log)
}

// The vLLM rule on record streams: a greedy divergence with each token
// in the other's top 5 (from the slot's own TOP_LOGPROBS records) is
// accepted and the slot's later TOKENs are compared as records only (the
// token may differ, the position and finish may not); one outside the
// top 5 fails, naming the slot, the position, the tokens and both lists;
// without TopK any divergence fails. No replay is needed.
func TestDiffTopK(t *testing.T) {
	prompt := []uint32{1, 2, 3}
	build := func(second, third uint32, fin ringbuf.FinishReason, alts []uint32) *logBuilder {
		b := newLog()
		b.open(0, 5, 1)
		b.tok(0, prompt, 7, 3, 0, 7, 8)
		b.tok(0, nil, second, 4, 0, alts...)
		b.tok(0, nil, third, 5, fin, third)
		return b
	}
	ref := build(8, 9, ringbuf.FinishLength, []uint32{8, 11, 12, 13, 14})
	calls := 0
	judge := fakeReplay(&calls, nil)

	if _, err := diffOf(ref, build(11, 10, ringbuf.FinishLength, []uint32{11, 8}), Tolerance{Logprob: 1}, judge); err == nil ||
		!strings.Contains(err.Error(), "greedy tokens 8 and 11 differ") {
		t.Fatalf("without TopK: %v", err)
	}
	st, err := diffOf(ref, build(11, 10, ringbuf.FinishLength, []uint32{11, 8}), Tolerance{Logprob: 1, TopK: 5}, judge)
	if err != nil {
		t.Fatal(err)
	}
	if st.Divergences != 1 || st.Uncompared != 1 || st.GreedyTokens != 1 || st.Probes != 0 || calls != 0 {
		t.Fatalf("%+v, %d judge calls", st, calls)
	}
	// After the divergence the finish reason is still compared.
	if _, err := diffOf(ref, build(11, 10, ringbuf.FinishStop, []uint32{11, 8}), Tolerance{Logprob: 1, TopK: 5}, judge); err == nil {
		t.Fatal("a finish reason that differs after a divergence passed")
	}
	// The device's 14 is fifth in the reference's list; the reference's
	// 8 is not in the device's.
	_, err = diffOf(ref, build(14, 10, ringbuf.FinishLength, []uint32{14, 1, 2, 3, 4, 8}), Tolerance{Logprob: 1, TopK: 5}, judge)
	if err == nil {
		t.Fatal("8 outside the device's top 5, accepted")
	}
	for _, want := range []string{"slot 0 position 4", "greedy tokens 8 and 14", "top 5", "[8:-0.25 11:-1.25 12:-2.25 13:-3.25 14:-4.25]",
		"[14:-0.25 1:-1.25 2:-2.25 3:-3.25 4:-4.25]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

// A slot without alternatives is judged by the replay (the judge); a new
// OPEN of the slot is compared again; inputs that differ count as a
// divergence's consequence only after one.
func TestDiffTopKSessions(t *testing.T) {
	tol := Tolerance{Logprob: 1, TopK: 5}
	calls := 0
	judge := fakeReplay(&calls, map[uint32][]uint32{8: {8, 11}, 11: {11, 8}, 20: {20, 1}, 21: {21, 2}})
	build := func(second uint32, secondPrompt []uint32, later uint32) *logBuilder {
		b := newLog()
		b.open(0, 0, 1)
		b.tok(0, []uint32{1, 2}, 7, 2, 0)
		b.tok(0, nil, second, 3, 0)
		b.tok(0, nil, 30, 4, 0)
		// The slot again, over a prompt built from what was learned.
		b.open(0, 0, 2)
		b.tok(0, secondPrompt, later, 3, 0)
		return b
	}
	// Same second prompt on both: the new session is compared, and its
	// 20/21 divergence judged (and rejected: not mutual).
	_, err := diffOf(build(8, []uint32{5, 5, 5}, 20), build(11, []uint32{5, 5, 5}, 21), tol, judge)
	if err == nil || !strings.Contains(err.Error(), "greedy tokens 20 and 21") || calls != 4 {
		t.Fatalf("%v (%d judge calls)", err, calls)
	}
	// The second prompt follows the learned tokens: inputs differ after
	// the divergence, so the new session is not compared.
	calls = 0
	st, err := diffOf(build(8, []uint32{7, 8}, 20), build(11, []uint32{7, 11}, 21), tol, judge)
	if err != nil || calls != 2 || st.Divergences != 1 || st.Uncompared != 2 || st.Probes != 2 {
		t.Fatalf("%v; %+v, %d judge calls", err, st, calls)
	}
	// Inputs that differ with no divergence before: the scenario, not
	// the device, is at fault.
	a, b := newLog(), newLog()
	a.open(0, 0, 1)
	b.open(0, 0, 1)
	a.tok(0, []uint32{1, 2}, 7, 2, 0)
	b.tok(0, []uint32{1, 3}, 7, 2, 0)
	if _, err := diffOf(a, b, tol, judge); err == nil || !strings.Contains(err.Error(), "not deterministic") {
		t.Fatalf("different inputs: %v", err)
	}
	// Records still line up: a STEP_DONE count that differs after a
	// divergence fails.
	x, y := build(8, []uint32{7, 8}, 20), build(11, []uint32{7, 11}, 21)
	y.log[len(y.log)-1].Slot = 2
	if _, err := diffOf(x, y, tol, judge); err == nil || !strings.Contains(err.Error(), "STEP_DONE") {
		t.Fatalf("executed counts that differ: %v", err)
	}
}
