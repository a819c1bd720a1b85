package null_test

import (
	"testing"
	"time"

	"ringlm/kernels/null"
	"ringlm/ringbuf"
)

func TestToken(t *testing.T) {
	for _, vocab := range []int{1, 2, 7, 1000, 152064, 1<<31 - 1} {
		for seed := uint64(0); seed < 50; seed++ {
			for pos := 0; pos < 200; pos++ {
				tk := null.Token(seed*0x51ED27, pos, vocab)
				if tk < 0 || int(tk) >= vocab {
					t.Fatalf("Token(%d, %d, %d) = %d, outside the vocabulary", seed, pos, vocab, tk)
				}
				if again := null.Token(seed*0x51ED27, pos, vocab); again != tk {
					t.Fatalf("Token(%d, %d, %d) = %d, then %d", seed, pos, vocab, tk, again)
				}
			}
		}
	}
	// Spread over the vocabulary, and different for different seeds and
	// positions (the tests that predict tokens rely on both).
	const vocab, n = 16, 16000
	var hist [vocab]int
	for pos := range n {
		hist[null.Token(42, pos, vocab)]++
	}
	for tk, c := range hist {
		if c < n/vocab*3/4 || c > n/vocab*5/4 {
			t.Errorf("token %d drawn %d times in %d, want about %d", tk, c, n, n/vocab)
		}
	}
	same := 0
	for pos := range 1000 {
		if null.Token(1, pos, 1000) == null.Token(2, pos, 1000) {
			same++
		}
	}
	if same > 10 {
		t.Errorf("seeds 1 and 2 agree at %d of 1000 positions", same)
	}
}

// host is a minimal ring host for one device.
type host struct {
	t   *testing.T
	a   *ringbuf.Arena
	d   *null.Device
	id  uint64
	got []ringbuf.Completion
}

func (h *host) wait(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var c ringbuf.Completion
	for {
		for h.a.PopCompletion(&c) {
			h.got = append(h.got, c)
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; got %+v", what, h.got)
		}
		select {
		case <-h.d.Doorbell():
		case <-time.After(time.Millisecond):
		}
	}
}

func (h *host) push(r ringbuf.SubmitRecord, payload []uint32) uint64 {
	h.t.Helper()
	if len(payload) > 0 {
		var off uint32
		var buf []uint32
		h.wait("staging", func() bool {
			var ok bool
			off, buf, ok = h.a.AllocStaging(len(payload))
			return ok
		})
		copy(buf, payload)
		r.PayloadOff, r.PayloadLen = off, uint32(len(payload))
	}
	h.id++
	r.ID = h.id
	h.wait("submit space", func() bool { _, ok := h.a.PushSubmit(&r); return ok })
	h.d.Notify()
	return r.ID
}

func (h *host) open(slot uint32, p ringbuf.SlotParams) {
	w := make([]uint32, ringbuf.SlotPayloadWords(0, 0, 0))
	ringbuf.PutSlotPayload(w, &p, nil, nil, nil)
	h.push(ringbuf.SubmitRecord{Op: ringbuf.OpOpenSlot, Slot: slot}, w)
}

func (h *host) grant(slot uint32, ids ...uint32) {
	h.push(ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: slot, GrantCount: uint32(len(ids))}, ids)
}

// step pushes one entry per slot: the tokens of toks[i], or a feedback
// entry where toks[i] is nil; every entry samples.
func (h *host) step(slots []uint32, toks [][]uint32) uint64 {
	var w []uint32
	var r ringbuf.SubmitRecord
	for i, s := range slots {
		e := ringbuf.StepEntry{Slot: s, NTokens: 1, TokenOff: ringbuf.TokenOffFeedback, Flags: ringbuf.EntrySample}
		if toks[i] != nil {
			off, buf, ok := h.a.AllocStaging(len(toks[i]))
			if !ok {
				h.t.Fatal("no staging for the tokens")
			}
			copy(buf, toks[i])
			e.TokenOff, e.NTokens = off, uint32(len(toks[i]))
		}
		w = append(w, 0, 0, 0, 0)
		e.Put(w[len(w)-4:])
		r.StepTokens += e.NTokens
		r.StepSample++
	}
	r.Op, r.Slot = ringbuf.OpStep, uint32(len(slots))
	return h.push(r, w)
}

// TestDevice runs the null device through its real Executor: two slots,
// every token predicted by null.Token, an EOS finish, the device's block
// size enforced, CLOSE and STOP.
func TestDevice(t *testing.T) {
	const vocab, blocks, bs, slots = 300, 16, 8, 2
	d := null.New(vocab, blocks, bs, slots)
	if d.Name() != "null" || d.Vocab() != vocab || d.BlockSize() != bs {
		t.Fatalf("Name %q Vocab %d BlockSize %d", d.Name(), d.Vocab(), d.BlockSize())
	}
	l, err := ringbuf.NewLayout(4, ringbuf.MinCompletionCap(slots), 128)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ringbuf.NewArena(ringbuf.HeapAllocator{}, l)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := d.Start(a); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(a); err == nil {
		t.Fatal("a second Start succeeded")
	}
	h := &host{t: t, a: a, d: d}

	// Slot 1 stops at its 4th token, an EOS id.
	const seed0, seed1 = 11, 12
	eos := uint32(null.Token(seed1, 5+3, vocab))
	h.open(0, ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: seed0})
	h.open(1, ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: seed1, NEOS: 1, EOS: [8]uint32{eos}})
	h.grant(0, 3, 4) // 16 positions
	h.grant(1, 5, 6)
	type want struct {
		slot uint32
		pos  int
	}
	var wants []want
	var steps []uint64
	steps = append(steps, h.step([]uint32{0, 1}, [][]uint32{{1, 2, 3}, {4, 5, 6, 7, 8}}))
	wants = append(wants, want{0, 3}, want{1, 5})
	for i := 1; i <= 6; i++ {
		steps = append(steps, h.step([]uint32{0, 1}, [][]uint32{nil, nil}))
		wants = append(wants, want{0, 3 + i})
		if i <= 3 {
			wants = append(wants, want{1, 5 + i})
		}
	}
	// Slot 0 has 2 blocks of 8 positions: it fed positions 0..8, so 8
	// more tokens reach position 16, beyond them (the executor uses the
	// device's block size).
	noBlock := h.step([]uint32{0}, [][]uint32{{1, 2, 3, 4, 5, 6, 7, 8}})
	h.push(ringbuf.SubmitRecord{Op: ringbuf.OpCloseSlot, Slot: 0}, nil)
	h.push(ringbuf.SubmitRecord{Op: ringbuf.OpCloseSlot, Slot: 1}, nil)
	stop := h.push(ringbuf.SubmitRecord{Op: ringbuf.OpStop}, nil)
	h.wait("STOPPED", func() bool { return len(h.got) > 0 && h.got[len(h.got)-1].Kind == ringbuf.KindStopped })
	if err := d.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}

	var toks []ringbuf.Completion
	var kinds []ringbuf.Kind
	for _, c := range h.got {
		if c.Kind == ringbuf.KindToken {
			toks = append(toks, c)
		} else {
			kinds = append(kinds, c.Kind)
		}
	}
	if len(toks) != len(wants) {
		t.Fatalf("%d tokens, want %d: %+v", len(toks), len(wants), h.got)
	}
	for i, c := range toks {
		w := wants[i]
		seed := uint64(seed0)
		if w.slot == 1 {
			seed = seed1
		}
		fin := ringbuf.FinishNone
		if w.slot == 1 && w.pos == 8 {
			fin = ringbuf.FinishStop
		}
		if c.Slot != w.slot || c.Position != uint32(w.pos) || c.Token != uint32(null.Token(seed, w.pos, vocab)) || c.Finish != fin {
			t.Errorf("token %d: %+v, want slot %d pos %d token %d finish %d", i, c, w.slot, w.pos, null.Token(seed, w.pos, vocab), fin)
		}
	}
	// STEP_DONE per step (3 SKIPPED for slot 1 after its EOS), the
	// NO_BLOCK error, two SLOT_CLOSED, STOPPED.
	var wantKinds []ringbuf.Kind
	for i := range steps {
		if i >= 4 {
			wantKinds = append(wantKinds, ringbuf.KindSkipped)
		}
		wantKinds = append(wantKinds, ringbuf.KindStepDone)
	}
	wantKinds = append(wantKinds, ringbuf.KindError, ringbuf.KindStepDone, ringbuf.KindSlotClosed, ringbuf.KindSlotClosed, ringbuf.KindStopped)
	if len(kinds) != len(wantKinds) {
		t.Fatalf("completions %v, want %v", kinds, wantKinds)
	}
	for i := range kinds {
		if kinds[i] != wantKinds[i] {
			t.Fatalf("completions %v, want %v", kinds, wantKinds)
		}
	}
	for _, c := range h.got {
		if c.Kind == ringbuf.KindError && (c.Step != noBlock || c.Code != ringbuf.CodeNoBlock || c.Detail != 16 || c.Slot != 0) {
			t.Errorf("error %+v, want NO_BLOCK at 16 for slot 0 in step %d", c, noBlock)
		}
		if c.Kind == ringbuf.KindStopped && c.Step != stop {
			t.Errorf("STOPPED answers %d, want %d", c.Step, stop)
		}
	}
}
