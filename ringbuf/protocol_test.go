package ringbuf

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// This file runs the whole ring protocol between a host goroutine and a
// device goroutine over small rings (both fill up), as ringbuf/PROTOCOL.md
// specifies it. The device's "model" makes the token after input tok at
// position pos a hash of (seed, pos, tok), so the host can predict every
// token.

func fakeNext(seed uint64, pos, tok, vocab uint32) uint32 {
	x := seed ^ uint64(pos)*0x9E3779B97F4A7C15 ^ uint64(tok)*0xC2B2AE3D27D4EB4F
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 32
	return uint32(x % uint64(vocab))
}

func fakeLogprob(tok uint32) float32 { return -float32(tok%7) / 8 }

// fakeTop is the i-th alternative the fake device reports after token tok.
func fakeTop(tok uint32, i, vocab uint32) TopLogprob {
	return TopLogprob{Token: (tok + i) % vocab, Logprob: fakeLogprob(tok) - float32(i)}
}

type devSlot struct {
	open, finished bool
	pos            uint32 // next position to fill
	last           uint32 // last sampled token
	hasLast        bool
	sampled        uint32
	p              SlotParams
	stop           []uint32 // copied: the payload is reclaimed once OPEN is released
	blocks         []uint32
}

type fakeDevice struct {
	a           *Arena
	slots       []devSlot
	vocab       uint32
	blockTokens uint32
	poolBlocks  uint32
	epoch       time.Time
	fullWaits   int // times the completion ring was full
}

func (d *fakeDevice) run() {
	var rec SubmitRecord
	var bo Backoff
	for {
		if _, ok := d.a.NextSubmit(&rec); !ok {
			bo.Wait()
			continue
		}
		bo.Reset()
		stop := d.exec(&rec)
		d.a.Submit.Done() // done with the record and its staging runs
		if stop {
			return
		}
	}
}

func (d *fakeDevice) emit(c Completion) {
	var bo Backoff
	for !d.a.PushCompletion(&c) {
		d.fullWaits++
		bo.Wait()
	}
}

func (d *fakeDevice) exec(r *SubmitRecord) (stop bool) {
	fail := func(slot uint32, code ErrorCode, detail uint32) {
		d.emit(Completion{Kind: KindError, Slot: slot, Step: r.ID, Code: code, Detail: detail})
	}
	// A STEP always ends with STEP_DONE, even one refused whole.
	badStep := func() bool {
		fail(NoSlot, CodeBadPayload, r.PayloadOff)
		d.emit(Completion{Kind: KindStepDone, Step: r.ID})
		return false
	}
	var payload []uint32
	if r.PayloadLen > 0 {
		if payload = d.a.Staging.Words(r.PayloadOff, r.PayloadLen); payload == nil {
			if r.Op == OpStep {
				return badStep()
			}
			fail(NoSlot, CodeBadPayload, r.PayloadOff)
			return false
		}
	}
	slot := func() *devSlot {
		if int(r.Slot) >= len(d.slots) {
			fail(r.Slot, CodeBadSlot, r.Slot)
			return nil
		}
		s := &d.slots[r.Slot]
		if s.open == (r.Op == OpOpenSlot) {
			fail(r.Slot, CodeSlotState, uint32(r.Op))
			return nil
		}
		return s
	}
	switch r.Op {
	case OpOpenSlot:
		s := slot()
		if s == nil {
			return false
		}
		p, err := ParseSlotPayload(payload)
		if err != nil {
			fail(r.Slot, CodeBadParams, uint32(err.(*PayloadError).Word))
			return false
		}
		*s = devSlot{open: true, pos: p.Params.StartPos, p: p.Params, stop: slices.Clone(p.Stop), blocks: s.blocks[:0]}
	case OpGrantBlocks:
		s := slot()
		if s == nil {
			return false
		}
		if r.GrantCount != r.PayloadLen || int(r.GrantFirst) > len(s.blocks) {
			fail(r.Slot, CodeBadPayload, r.PayloadOff)
			return false
		}
		for i, b := range payload {
			if b >= d.poolBlocks {
				fail(r.Slot, CodeNoBlock, b)
				return false
			}
			if j := int(r.GrantFirst) + i; j < len(s.blocks) {
				s.blocks[j] = b
			} else {
				s.blocks = append(s.blocks, b)
			}
		}
	case OpStep:
		start := uint64(time.Since(d.epoch))
		if uint64(r.PayloadLen) != uint64(r.Slot)*StepEntryWords {
			return badStep()
		}
		var e StepEntry
		var tokens, samples uint32
		for i := range r.Slot {
			e.Get(payload[i*StepEntryWords:])
			tokens += e.NTokens
			if e.Flags&EntrySample != 0 {
				samples++
			}
		}
		if tokens != r.StepTokens || samples != r.StepSample {
			return badStep()
		}
		executed := uint32(0)
		for i := range r.Slot {
			e.Get(payload[i*StepEntryWords:])
			if d.entry(r.ID, &e) {
				executed++
			}
		}
		d.emit(Completion{Kind: KindStepDone, Slot: executed, Step: r.ID, StartNS: start, EndNS: uint64(time.Since(d.epoch))})
	case OpCloseSlot:
		s := slot()
		if s == nil {
			return false
		}
		*s = devSlot{blocks: s.blocks[:0]}
		d.emit(Completion{Kind: KindSlotClosed, Slot: r.Slot, Step: r.ID})
	case OpStop:
		d.emit(Completion{Kind: KindStopped, Step: r.ID})
		return true
	default:
		fail(NoSlot, CodeBadOp, uint32(r.Op))
	}
	return false
}

// entry runs one step entry and reports whether it executed. An entry that
// fails finishes its slot (later entries are SKIPPED).
func (d *fakeDevice) entry(step uint64, e *StepEntry) bool {
	fail := func(code ErrorCode, detail uint32) bool {
		d.emit(Completion{Kind: KindError, Slot: e.Slot, Step: step, Code: code, Detail: detail})
		if int(e.Slot) < len(d.slots) && d.slots[e.Slot].open {
			d.slots[e.Slot].finished = true
		}
		return false
	}
	if int(e.Slot) >= len(d.slots) {
		return fail(CodeBadSlot, e.Slot)
	}
	s := &d.slots[e.Slot]
	switch {
	case !s.open:
		return fail(CodeSlotState, uint32(OpStep))
	case s.finished:
		d.emit(Completion{Kind: KindSkipped, Slot: e.Slot, Step: step})
		return false
	}
	var toks []uint32
	if e.TokenOff == TokenOffFeedback {
		if e.NTokens != 1 || !s.hasLast {
			return fail(CodeNoFeedback, e.NTokens)
		}
		toks = []uint32{s.last}
	} else if toks = d.a.Staging.Words(e.TokenOff, e.NTokens); toks == nil || e.NTokens == 0 {
		return fail(CodeBadPayload, e.TokenOff)
	}
	if end := s.pos + e.NTokens - 1; end/d.blockTokens >= uint32(len(s.blocks)) {
		return fail(CodeNoBlock, end)
	}
	for _, t := range toks {
		if t >= d.vocab {
			return fail(CodeBadToken, t)
		}
	}
	s.pos += e.NTokens // the forward pass would fill positions pos..pos+n-1
	if e.Flags&EntrySample == 0 {
		return true
	}
	t := fakeNext(s.p.Seed, s.pos-1, toks[len(toks)-1], d.vocab)
	s.last, s.hasLast = t, true
	s.sampled++
	c := Completion{Kind: KindToken, Slot: e.Slot, Step: step, Token: t, Position: s.pos}
	if s.p.Flags&SlotLogprobs != 0 {
		c.Logprob = fakeLogprob(t)
	}
	switch {
	case slices.Contains(s.stop, t) || (s.p.Flags&SlotIgnoreEOS == 0 && slices.Contains(s.p.EOS[:s.p.NEOS], t)):
		c.Finish = FinishStop
	case s.p.MaxTokens > 0 && s.sampled >= s.p.MaxTokens:
		c.Finish = FinishLength
	}
	s.finished = c.Finish != FinishNone
	d.emit(c)
	// The alternatives follow their TOKEN at once, two per record.
	for i := uint32(0); i < s.p.NTop; i += TopPerRecord {
		tc := Completion{Kind: KindTopLogprobs, Slot: e.Slot, Step: step}
		for j := range uint32(TopPerRecord) {
			tc.Top[j] = TopLogprob{Token: TopNone}
			if i+j < s.p.NTop {
				tc.Top[j] = fakeTop(t, i+j, d.vocab)
			}
		}
		d.emit(tc)
	}
	return true
}

// The host side.

type request struct {
	prompt      []uint32
	p           SlotParams
	stop        []uint32
	want        []uint32 // the tokens the device must sample
	wantFinish  FinishReason
	got         []uint32
	finishSeen  bool
	closed      bool
	fed, queued int  // prompt tokens submitted; samples submitted
	answered    int  // samples answered (TOKEN, SKIPPED or ERROR)
	probe       bool // opened to provoke an error: step never schedules it
}

type stepInfo struct {
	entries, skipped, errors int
	refused                  bool // the device refused the whole step
}

type host struct {
	t           *testing.T
	a           *Arena
	rng         *rand.Rand
	vocab       uint32
	blockTokens uint32
	slots       []*request // nil: free
	granted     [][]uint32 // blocks per slot
	freeBlocks  []uint32
	seq         uint64 // ID of the last record: one counter for steps and the rest
	nSteps      int
	steps       map[uint64]*stepInfo
	wantErr     map[uint64]ErrorCode // submit ID -> expected error
	toClose     []uint32
	closeSent   []bool // CLOSE pushed, SLOT_CLOSED not seen yet
	stopped     bool
	bo          Backoff
	stats       map[Kind]int
	fullSubmits int
	// The TOKEN whose TOP_LOGPROBS records are still due.
	topSlot, topToken uint32
	topStep           uint64
	topSeen, topWant  uint32
}

func (h *host) drain() {
	var c Completion
	for h.a.PopCompletion(&c) {
		h.stats[c.Kind]++
		h.handle(&c)
	}
}

func (h *host) handle(c *Completion) {
	t := h.t
	if h.stopped {
		t.Fatalf("completion after STOPPED: %+v", c)
	}
	if h.topSeen < h.topWant && c.Kind != KindTopLogprobs {
		t.Fatalf("%v after %d of the %d alternatives of slot %d's token", c.Kind, h.topSeen, h.topWant, h.topSlot)
	}
	req := func() *request {
		if int(c.Slot) >= len(h.slots) || h.slots[c.Slot] == nil {
			t.Fatalf("%v for slot %d, which is not open", c.Kind, c.Slot)
		}
		return h.slots[c.Slot]
	}
	switch c.Kind {
	case KindToken:
		r := req()
		r.answered++
		i := len(r.got)
		if r.finishSeen || i >= len(r.want) {
			t.Fatalf("slot %d: token after the end: %+v", c.Slot, c)
		}
		wantPos := r.p.StartPos + uint32(len(r.prompt)+i)
		if c.Token != r.want[i] || c.Position != wantPos {
			t.Fatalf("slot %d token %d: got %d at %d, want %d at %d", c.Slot, i, c.Token, c.Position, r.want[i], wantPos)
		}
		wantLogprob := float32(0)
		if r.p.Flags&SlotLogprobs != 0 {
			wantLogprob = fakeLogprob(c.Token)
		}
		if c.Logprob != wantLogprob {
			t.Fatalf("slot %d: logprob %v for token %d (flags %#x)", c.Slot, c.Logprob, c.Token, r.p.Flags)
		}
		r.got = append(r.got, c.Token)
		wantFinish := FinishNone
		if len(r.got) == len(r.want) {
			wantFinish = r.wantFinish
		}
		if c.Finish != wantFinish {
			t.Fatalf("slot %d token %d: finish %d, want %d", c.Slot, i, c.Finish, wantFinish)
		}
		if c.Finish != FinishNone {
			r.finishSeen = true
			h.toClose = append(h.toClose, c.Slot)
		}
		h.topSlot, h.topToken, h.topStep, h.topSeen, h.topWant = c.Slot, c.Token, c.Step, 0, r.p.NTop
	case KindTopLogprobs:
		if h.topSeen >= h.topWant || c.Slot != h.topSlot || c.Step != h.topStep {
			t.Fatalf("unexpected TOP_LOGPROBS %+v (%d of %d seen for slot %d)", c, h.topSeen, h.topWant, h.topSlot)
		}
		for j := range uint32(TopPerRecord) {
			want := TopLogprob{Token: TopNone}
			if h.topSeen < h.topWant {
				want = fakeTop(h.topToken, h.topSeen, h.vocab)
				h.topSeen++
			}
			if c.Top[j] != want {
				t.Fatalf("slot %d: alternative %+v, want %+v", c.Slot, c.Top[j], want)
			}
		}
	case KindSkipped:
		r := req()
		if !r.finishSeen {
			t.Fatalf("slot %d: SKIPPED before it finished", c.Slot)
		}
		r.answered++
		h.steps[c.Step].skipped++
	case KindStepDone:
		s := h.steps[c.Step]
		if s == nil {
			t.Fatalf("STEP_DONE for unknown step %d", c.Step)
		}
		want := s.entries - s.skipped - s.errors
		if s.refused {
			want = 0
		}
		if int(c.Slot) != want || c.EndNS < c.StartNS {
			t.Fatalf("STEP_DONE %+v for step %+v", c, s)
		}
		delete(h.steps, c.Step)
	case KindError:
		want, ok := h.wantErr[c.Step]
		if !ok || want != c.Code {
			t.Fatalf("unexpected error %+v", c)
		}
		delete(h.wantErr, c.Step)
		if s := h.steps[c.Step]; s != nil && c.Slot == NoSlot {
			s.refused = true
		} else if s != nil {
			s.errors++
			r := req()
			r.answered++
			r.finishSeen = true // the device failed the slot
			h.toClose = append(h.toClose, c.Slot)
		}
	case KindSlotClosed:
		r := req()
		if !r.finishSeen || !slices.Equal(r.got, r.want) || r.answered != r.queued {
			t.Fatalf("slot %d closed with %d of %d tokens, %d of %d samples answered", c.Slot, len(r.got), len(r.want), r.answered, r.queued)
		}
		r.closed = true
		h.slots[c.Slot] = nil
		h.closeSent[c.Slot] = false
		h.freeBlocks = append(h.freeBlocks, h.granted[c.Slot]...)
		h.granted[c.Slot] = h.granted[c.Slot][:0]
	case KindStopped:
		h.stopped = true
	default:
		t.Fatalf("unknown completion %+v", c)
	}
}

// alloc and push wait for room by draining completions: the host never
// blocks on the submit side while the device may be blocked on the
// completion side.
func (h *host) alloc(n int) (uint32, []uint32) {
	for {
		if off, buf, ok := h.a.AllocStaging(n); ok {
			h.bo.Reset()
			return off, buf
		}
		h.drain()
		h.bo.Wait()
	}
}

func (h *host) push(r *SubmitRecord) {
	h.seq++
	r.ID = h.seq
	for {
		if _, ok := h.a.PushSubmit(r); ok {
			h.bo.Reset()
			return
		}
		h.fullSubmits++
		h.drain()
		h.bo.Wait()
	}
}

func (h *host) open(slot uint32, r *request) {
	h.slots[slot] = r
	n := SlotPayloadWords(len(r.stop), 1, 2)
	off, buf := h.alloc(n)
	PutSlotPayload(buf, &r.p, r.stop, []TokenBias{{Token: 3, Bias: -1}}, []uint32{7, 8})
	h.push(&SubmitRecord{Op: OpOpenSlot, Slot: slot, PayloadOff: off, PayloadLen: uint32(n)})
}

// grant makes sure slot's blocks cover positions below end.
func (h *host) grant(slot uint32, end uint32) {
	need := int((end + h.blockTokens - 1) / h.blockTokens)
	have := len(h.granted[slot])
	if need <= have {
		return
	}
	n := need - have + h.rng.IntN(2)
	off, buf := h.alloc(n)
	for i := range buf {
		b := h.freeBlocks[len(h.freeBlocks)-1]
		h.freeBlocks = h.freeBlocks[:len(h.freeBlocks)-1]
		buf[i] = b
		h.granted[slot] = append(h.granted[slot], b)
	}
	h.push(&SubmitRecord{Op: OpGrantBlocks, Slot: slot, PayloadOff: off, PayloadLen: uint32(n), GrantFirst: uint32(have), GrantCount: uint32(n)})
}

// step submits one step over the open slots: the next prefill chunk of
// slots still in their prompt, a feedback entry (queued up to 3 ahead) for
// the others.
func (h *host) step() bool {
	type ent struct {
		e    StepEntry
		toks []uint32
	}
	var ents []ent
	for s, r := range h.slots {
		if r == nil || r.finishSeen || r.probe {
			continue
		}
		slot := uint32(s)
		switch {
		case r.fed < len(r.prompt):
			pos := r.p.StartPos + uint32(r.fed)
			n := min(len(r.prompt)-r.fed, 1+h.rng.IntN(16))
			e := StepEntry{Slot: slot, NTokens: uint32(n)}
			if r.fed+n == len(r.prompt) {
				e.Flags = EntrySample
				r.queued++
			}
			h.grant(slot, pos+uint32(n))
			ents = append(ents, ent{e, r.prompt[r.fed : r.fed+n]})
			r.fed += n
		case r.queued > 0 && r.queued-r.answered < 3 && r.queued < len(r.want)+2:
			// Every sample but the last has been fed back: the fed-back
			// token takes the next position.
			pos := r.p.StartPos + uint32(r.fed+r.queued-1)
			h.grant(slot, pos+1)
			ents = append(ents, ent{StepEntry{Slot: slot, NTokens: 1, TokenOff: TokenOffFeedback, Flags: EntrySample}, nil})
			r.queued++
		}
	}
	if len(ents) == 0 {
		return false
	}
	rec := SubmitRecord{Op: OpStep, Slot: uint32(len(ents))}
	for i := range ents {
		if ents[i].toks != nil {
			off, buf := h.alloc(len(ents[i].toks))
			copy(buf, ents[i].toks)
			ents[i].e.TokenOff = off
		}
		rec.StepTokens += ents[i].e.NTokens
		if ents[i].e.Flags&EntrySample != 0 {
			rec.StepSample++
		}
	}
	off, buf := h.alloc(len(ents) * StepEntryWords)
	for i := range ents {
		ents[i].e.Put(buf[i*StepEntryWords:])
	}
	rec.PayloadOff, rec.PayloadLen = off, uint32(len(buf))
	h.push(&rec)
	h.steps[rec.ID] = &stepInfo{entries: len(ents)}
	h.nSteps++
	return true
}

func (h *host) newRequest() *request {
	r := &request{p: SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: h.rng.Uint64(),
		MaxTokens: uint32(1 + h.rng.IntN(24)), StartPos: uint32(h.rng.IntN(3) * 16), NEOS: 2, EOS: [MaxEOS]uint32{0, 1}}}
	if h.rng.IntN(4) == 0 {
		r.p.Flags |= SlotIgnoreEOS
	}
	if h.rng.IntN(2) == 0 {
		r.p.Flags |= SlotLogprobs
		r.p.NTop = uint32(h.rng.IntN(MaxTop + 1))
	}
	for range h.rng.IntN(3) {
		r.stop = append(r.stop, 2+uint32(h.rng.IntN(int(h.vocab)-2)))
	}
	for range 1 + h.rng.IntN(40) {
		r.prompt = append(r.prompt, uint32(h.rng.IntN(int(h.vocab))))
	}
	// What the device must produce.
	pos := r.p.StartPos + uint32(len(r.prompt))
	tok := r.prompt[len(r.prompt)-1]
	for {
		tok = fakeNext(r.p.Seed, pos-1, tok, h.vocab)
		r.want = append(r.want, tok)
		pos++
		if slices.Contains(r.stop, tok) || (r.p.Flags&SlotIgnoreEOS == 0 && tok <= 1) {
			r.wantFinish = FinishStop
			return r
		}
		if len(r.want) == int(r.p.MaxTokens) {
			r.wantFinish = FinishLength
			return r
		}
	}
}

// probe submits records that a device must refuse. Probe 5 needs a free
// slot.
func (h *host) probe(n int, all *[]*request) {
	switch n {
	case 1:
		h.push(&SubmitRecord{Op: 99})
		h.wantErr[h.seq] = CodeBadOp
	case 2:
		h.push(&SubmitRecord{Op: OpCloseSlot, Slot: uint32(len(h.slots)) + 1})
		h.wantErr[h.seq] = CodeBadSlot
	case 3:
		last := uint32(len(h.slots) - 1)
		want := CodeBadParams
		if h.slots[last] != nil && !h.closeSent[last] {
			want = CodeSlotState // open on the device: state is checked first
		}
		off, buf := h.alloc(SlotParamsWords)
		p := SlotParams{NEOS: MaxEOS + 1}
		PutSlotPayload(buf, &p, nil, nil, nil)
		h.push(&SubmitRecord{Op: OpOpenSlot, Slot: last, PayloadOff: off, PayloadLen: SlotParamsWords})
		h.wantErr[h.seq] = want
	case 4:
		// A step whose token count disagrees with its entries: refused
		// whole, before any entry is looked at.
		off, buf := h.alloc(StepEntryWords)
		(&StepEntry{Slot: 0, NTokens: 1, TokenOff: TokenOffFeedback, Flags: EntrySample}).Put(buf)
		h.push(&SubmitRecord{Op: OpStep, Slot: 1, PayloadOff: off, PayloadLen: StepEntryWords, StepTokens: 2, StepSample: 1})
		h.steps[h.seq] = &stepInfo{entries: 1}
		h.nSteps++
		h.wantErr[h.seq] = CodeBadPayload
	case 5:
		// A decode entry for a slot that has sampled nothing fails the
		// slot; a second one is SKIPPED.
		slot := slices.Index(h.slots, nil)
		r := &request{probe: true, p: SlotParams{TopP: 1, RepeatPenalty: 1}}
		*all = append(*all, r)
		h.open(uint32(slot), r)
		h.grant(uint32(slot), 1)
		for i := range 2 {
			off, buf := h.alloc(StepEntryWords)
			(&StepEntry{Slot: uint32(slot), NTokens: 1, TokenOff: TokenOffFeedback, Flags: EntrySample}).Put(buf)
			r.queued++
			h.push(&SubmitRecord{Op: OpStep, Slot: 1, PayloadOff: off, PayloadLen: StepEntryWords, StepTokens: 1, StepSample: 1})
			h.steps[h.seq] = &stepInfo{entries: 1}
			h.nSteps++
			if i == 0 {
				h.wantErr[h.seq] = CodeNoFeedback
			}
		}
	}
}

func TestProtocolPingPong(t *testing.T) {
	const nSlots, nRequests, vocab, blockTokens, poolBlocks = 6, 2000, 50, 4, 256
	a := newTestArena(t, 4, 4, 512)
	dev := &fakeDevice{a: a, slots: make([]devSlot, nSlots), vocab: vocab, blockTokens: blockTokens,
		poolBlocks: poolBlocks, epoch: time.Now()}
	var wg sync.WaitGroup
	wg.Go(dev.run)

	h := &host{t: t, a: a, rng: rand.New(rand.NewPCG(3, 4)), vocab: vocab, blockTokens: blockTokens,
		slots: make([]*request, nSlots), granted: make([][]uint32, nSlots), steps: map[uint64]*stepInfo{},
		wantErr: map[uint64]ErrorCode{}, stats: map[Kind]int{}, closeSent: make([]bool, nSlots)}
	for b := range uint32(poolBlocks) {
		h.freeBlocks = append(h.freeBlocks, b)
	}
	var all []*request
	deadline := time.Now().Add(10 * time.Second)
	probes := 0
	for !h.stopped {
		if time.Now().After(deadline) {
			for i, r := range h.slots {
				if r != nil {
					t.Logf("slot %d: fed %d/%d queued %d answered %d got %d/%d finish %v probe %v", i, r.fed, len(r.prompt), r.queued, r.answered, len(r.got), len(r.want), r.finishSeen, r.probe)
				}
			}
			t.Fatalf("stuck: %d requests admitted, produced %d consumed %d, completions %d/%d", len(all),
				a.Submit.Produced(), a.Submit.Consumed(), a.Completion.Produced(), a.Completion.Consumed())
		}
		h.drain()
		for len(h.toClose) > 0 { // push may drain, and append to toClose
			s := h.toClose[0]
			h.toClose = h.toClose[1:]
			h.push(&SubmitRecord{Op: OpCloseSlot, Slot: s})
			h.closeSent[s] = true
		}
		for s := range h.slots {
			if h.slots[s] == nil && len(all) < nRequests {
				r := h.newRequest()
				all = append(all, r)
				h.open(uint32(s), r)
			}
		}
		// Records a device must refuse, once each, among the traffic.
		if len(all) > 20*(probes+1) && probes < 4 {
			probes++
			h.probe(probes, &all)
		}
		if !h.step() {
			busy := false
			for _, r := range h.slots {
				busy = busy || r != nil
			}
			if !busy && len(all) == nRequests {
				probes++
				h.probe(probes, &all)
				continue
			}
			if !busy && len(all) > nRequests {
				h.push(&SubmitRecord{Op: OpStop})
				for !h.stopped {
					h.drain()
					h.bo.Wait()
				}
				break
			}
			h.bo.Wait()
		}
	}
	wg.Wait()
	for _, r := range all {
		if !r.closed {
			t.Fatalf("request never closed: %+v", r)
		}
	}
	if len(h.wantErr) != 0 || len(h.steps) != 0 {
		t.Fatalf("unanswered: errors %v, steps %d", h.wantErr, len(h.steps))
	}
	if h.a.Submit.Produced() != h.a.Submit.Consumed() {
		t.Fatalf("submit ring: produced %d consumed %d", h.a.Submit.Produced(), h.a.Submit.Consumed())
	}
	t.Logf("%d steps, completions %v, submit ring full %d times, completion ring full %d times",
		h.nSteps, h.stats, h.fullSubmits, dev.fullWaits)
	if h.stats[KindSkipped] == 0 || h.stats[KindError] != 5 || h.fullSubmits == 0 || h.stats[KindTopLogprobs] == 0 || dev.fullWaits == 0 {
		t.Errorf("the run did not exercise skipped entries, errors and full rings: %v", h.stats)
	}
}
