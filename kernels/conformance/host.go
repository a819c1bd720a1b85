// Package conformance is the ring protocol's test suite, for every device:
// a test host that drives an engine.Device through a real ringbuf.Arena
// (start, notify, doorbell, wait), scripted scenarios that check the
// protocol of ringbuf/PROTOCOL.md on any device (Run), and a differential
// run that plays the same scripts on two devices and compares their
// completion streams record by record (Diff): the CPU device against the
// CUDA kernel on the GPU host. Through an engine it also holds a device
// to the float32 reference the way vLLM judges its kernels
// (CheckLogprobsClose over Greedy continuations with their top
// alternatives; Diff's Tolerance.TopK applies the same rule record by
// record) and to batch invariance across prompt chunkings
// (CheckChunking). It imports testing and is for tests only.
//
// A scenario learns what it needs of a model from the device itself (the
// greedy continuation of a prompt, say) and then checks the rules the
// protocol puts on top of it: positions, finish reasons, errors and their
// details, skipped entries, batch invariance. So the same script holds
// for the null device, the CPU reference and the GPU.
package conformance

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"ringlm/engine"
	"ringlm/ringbuf"
)

// WaitLimit bounds every wait of the host: a device must answer every
// record, errors included, so a wait this long is a hang.
const WaitLimit = 30 * time.Second

// Device is what the suite drives: an engine.Device that also says its
// vocabulary and KV block size.
type Device interface {
	engine.Device
	Vocab() int
	BlockSize() int
}

// Config sizes a device and its arena for one scenario. A factory must
// honour every field: the protocol's capacity rules (positions below
// Context, at most MaxStepTokens tokens a STEP, block tables of
// ceil(Context/BlockSize) entries) are part of what is compared.
type Config struct {
	Slots, Blocks, BlockSize int
	Context, MaxStepTokens   int
	SubmitCap, ComplCap      int
	Staging                  int // staging words
}

// Factory opens a fresh device for a scenario. The allocator is the one
// the arena must come from; close releases the device after it stopped
// (nil when there is nothing to release).
type Factory struct {
	Name string
	New  func(t testing.TB, c Config) (dev Device, alloc ringbuf.Allocator, close func() error)

	// NoLogits: the device picks tokens without logits (the null device),
	// so scenarios skip the checks that need a distribution (biases,
	// penalties).
	NoLogits bool

	hosts *[]*Host // Diff: every host opened, in order
}

// Host is the host side of the protocol, driven by a test.
type Host struct {
	T        testing.TB
	A        *ringbuf.Arena
	Dev      Device
	Vocab    int
	BS       int
	Cfg      Config
	id       uint64               // ID of the last record: one counter, so step ids increase
	got      []ringbuf.Completion // read and not yet taken
	Slow     time.Duration        // pause before reading each completion
	MaxFill  int                  // most completions seen waiting at once
	stopped  bool
	lastEnd  uint64 // EndNS of the last STEP_DONE
	closeFn  func() error
	released bool
	// Log is every completion read, in order, with its STEP_DONE times
	// zeroed and whether its slot samples greedily (Diff compares logs).
	Log    []Logged
	greedy map[uint32]bool // open slots' temperature == 0

	// What Diff needs to judge a divergence (probe.go): each slot's
	// current session, the session entry behind each (step, slot), and
	// the steps the device refused whole.
	sess    map[uint32]*session
	entryAt map[stepSlot]entryRef
	refused map[uint64]bool
}

// Logged is one completion as the host read it.
type Logged struct {
	ringbuf.Completion
	Greedy bool // a TOKEN or TOP_LOGPROBS of a slot opened with temperature 0
	// at is the session entry that sampled a TOKEN (sess nil when the
	// STEP was pushed raw, not through Step).
	at entryRef
}

// NewHost opens a device from f, allocates the arena from the device's
// allocator and starts the device. Cleanup stops it (if the test did not)
// and releases everything.
func NewHost(t testing.TB, f Factory, c Config) *Host {
	t.Helper()
	dev, alloc, closeFn := f.New(t, c)
	l, err := ringbuf.NewLayout(c.SubmitCap, c.ComplCap, c.Staging)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ringbuf.NewArena(alloc, l)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(a); err != nil {
		a.Close()
		if closeFn != nil {
			closeFn()
		}
		t.Fatalf("%s: Start: %v", f.Name, err)
	}
	h := &Host{T: t, A: a, Dev: dev, Vocab: dev.Vocab(), BS: dev.BlockSize(), Cfg: c, closeFn: closeFn, greedy: map[uint32]bool{},
		sess: map[uint32]*session{}, entryAt: map[stepSlot]entryRef{}, refused: map[uint64]bool{}}
	t.Cleanup(h.shutdown)
	if f.hosts != nil {
		*f.hosts = append(*f.hosts, h)
	}
	return h
}

// shutdown stops a device a failed test left running, then releases the
// device and the arena. It must not call Fatal.
func (h *Host) shutdown() {
	if h.released {
		return
	}
	h.released = true
	defer func() {
		if h.closeFn != nil {
			if err := h.closeFn(); err != nil {
				h.T.Errorf("closing the device: %v", err)
			}
		}
		if err := h.A.Close(); err != nil {
			h.T.Error(err)
		}
	}()
	if !h.stopped {
		deadline := time.Now().Add(WaitLimit)
		r := ringbuf.SubmitRecord{Op: ringbuf.OpStop, ID: h.id + 1}
		for pushed := false; !h.stopped && time.Now().Before(deadline); {
			if !pushed {
				_, pushed = h.A.PushSubmit(&r)
				h.Dev.Notify()
			}
			var c ringbuf.Completion
			for h.A.PopCompletion(&c) {
				h.stopped = h.stopped || c.Kind == ringbuf.KindStopped
			}
			time.Sleep(100 * time.Microsecond)
		}
		if !h.stopped {
			h.T.Error("cleanup: the device did not answer STOP")
			return
		}
	}
	done := make(chan error, 1)
	go func() { done <- h.Dev.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			h.T.Errorf("Wait: %v", err)
		}
	case <-time.After(WaitLimit):
		h.T.Error("cleanup: Wait did not return after STOPPED")
	}
}

func (h *Host) record(c ringbuf.Completion) {
	if h.stopped {
		h.T.Errorf("completion after STOPPED: %s", Show(c))
	}
	switch c.Kind {
	case ringbuf.KindStepDone:
		if c.StartNS > c.EndNS {
			h.T.Errorf("%s: starts after it ends", Show(c))
		}
		if c.StartNS < h.lastEnd {
			h.T.Errorf("%s: starts at %d, before the previous step ended (%d)", Show(c), c.StartNS, h.lastEnd)
		}
		h.lastEnd = c.EndNS
	case ringbuf.KindStopped:
		h.stopped = true
	}
	h.got = append(h.got, c)
	l := Logged{Completion: c}
	l.StartNS, l.EndNS = 0, 0
	if c.Kind == ringbuf.KindToken || c.Kind == ringbuf.KindTopLogprobs {
		l.Greedy = h.greedy[c.Slot]
	}
	switch {
	case c.Kind == ringbuf.KindToken:
		l.at = h.entryAt[stepSlot{c.Step, c.Slot}]
	case c.Kind == ringbuf.KindError && c.Slot == ringbuf.NoSlot:
		h.refused[c.Step] = true // a STEP refused whole ran none of its entries
	}
	h.Log = append(h.Log, l)
}

// Drain reads every completion published so far, slowly if h.Slow is set.
func (h *Host) Drain() {
	r := h.A.Completion
	h.MaxFill = max(h.MaxFill, int(r.Produced()-r.Consumed()))
	var c ringbuf.Completion
	for r.Produced() > r.Consumed() {
		if h.Slow > 0 {
			time.Sleep(h.Slow)
		}
		if !h.A.PopCompletion(&c) {
			h.T.Fatal("PopCompletion: nothing although Produced > Consumed")
		}
		h.record(c)
		h.MaxFill = max(h.MaxFill, int(r.Produced()-r.Consumed()))
	}
}

// WaitUntil drains completions until cond holds (the host always drains
// while it waits, as the protocol requires; it does not drain when cond
// already holds, so a host can queue far ahead of a device that waits for
// room in the completion ring).
func (h *Host) WaitUntil(what string, cond func() bool) {
	h.T.Helper()
	deadline := time.Now().Add(WaitLimit)
	for {
		if cond() {
			return
		}
		h.Drain()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			h.T.Fatalf("timed out waiting for %s; completions not taken:\n%s", what, ShowAll(h.got))
		}
		select {
		case <-h.Dev.Doorbell():
		case <-time.After(time.Millisecond):
		}
	}
}

// Push publishes r with the next ID and returns it.
func (h *Host) Push(r ringbuf.SubmitRecord) uint64 {
	h.T.Helper()
	h.id++
	r.ID = h.id
	h.WaitUntil("submit space", func() bool { _, ok := h.A.PushSubmit(&r); return ok })
	h.Dev.Notify()
	return r.ID
}

// Alloc allocates a staging run, draining while the area is full.
func (h *Host) Alloc(n int) (uint32, []uint32) {
	h.T.Helper()
	if n > h.A.Staging.Cap() {
		h.T.Fatalf("a run of %d words in a staging area of %d", n, h.A.Staging.Cap())
	}
	var off uint32
	var buf []uint32
	h.WaitUntil("staging space", func() bool {
		var ok bool
		off, buf, ok = h.A.AllocStaging(n)
		return ok
	})
	return off, buf
}

// Open opens slot with p, stop tokens, logit biases and history.
func (h *Host) Open(slot uint32, p ringbuf.SlotParams, stop []uint32, bias []ringbuf.TokenBias, hist []uint32) uint64 {
	h.T.Helper()
	n := ringbuf.SlotPayloadWords(len(stop), len(bias), len(hist))
	off, buf := h.Alloc(n)
	ringbuf.PutSlotPayload(buf, &p, stop, bias, hist)
	h.greedy[slot] = p.Temperature == 0
	h.sess[slot] = newSession(buf[:n], &sessionOpen{p: p, stop: slices.Clone(stop), bias: slices.Clone(bias), hist: slices.Clone(hist)})
	return h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpOpenSlot, Slot: slot, PayloadOff: off, PayloadLen: uint32(n)})
}

// OpenWords opens slot with a raw payload.
func (h *Host) OpenWords(slot uint32, w []uint32) uint64 {
	h.T.Helper()
	r := ringbuf.SubmitRecord{Op: ringbuf.OpOpenSlot, Slot: slot, PayloadLen: uint32(len(w))}
	if len(w) > 0 {
		off, buf := h.Alloc(len(w))
		copy(buf, w)
		r.PayloadOff = off
	}
	if len(w) > ringbuf.SPOffTemperature {
		h.greedy[slot] = math.Float32frombits(w[ringbuf.SPOffTemperature]) == 0
	}
	h.sess[slot] = newSession(w, nil) // raw words: not replayable
	return h.Push(r)
}

// Grant sets the slot's block table from index first on.
func (h *Host) Grant(slot, first uint32, ids ...uint32) uint64 {
	h.T.Helper()
	off, buf := h.Alloc(len(ids))
	copy(buf, ids)
	return h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: slot, PayloadOff: off,
		PayloadLen: uint32(len(ids)), GrantFirst: first, GrantCount: uint32(len(ids))})
}

// Close closes slot.
func (h *Host) Close(slot uint32) uint64 {
	h.T.Helper()
	return h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpCloseSlot, Slot: slot})
}

// Ent is a STEP entry to build: Toks nil feeds back the last sampled token.
type Ent struct {
	Slot   uint32
	Toks   []uint32
	Sample bool
	// Overrides for malformed entries.
	N      uint32 // n_tokens, if SetN (else len(Toks), or 1 for feedback)
	SetN   bool
	Off    uint32 // token_off, if SetOff
	SetOff bool
}

// Pre is a prefill entry of toks; sample asks for a token after the last.
func Pre(slot uint32, sample bool, toks ...uint32) Ent {
	return Ent{Slot: slot, Toks: toks, Sample: sample}
}

// FB is a decode entry: the slot's last sampled token fed back.
func FB(slot uint32) Ent { return Ent{Slot: slot, Sample: true} }

// StepRecord builds a STEP: one run for the entries, one per token list,
// all committed to the record when it is pushed.
func (h *Host) StepRecord(ents []Ent) ringbuf.SubmitRecord {
	h.T.Helper()
	r := ringbuf.SubmitRecord{Op: ringbuf.OpStep, Slot: uint32(len(ents)), PayloadLen: uint32(len(ents) * ringbuf.StepEntryWords)}
	if len(ents) == 0 {
		return r
	}
	off, w := h.Alloc(len(ents) * ringbuf.StepEntryWords)
	r.PayloadOff = off
	for i, e := range ents {
		se := ringbuf.StepEntry{Slot: e.Slot, NTokens: 1, TokenOff: ringbuf.TokenOffFeedback}
		if e.Toks != nil {
			o, buf := h.Alloc(len(e.Toks))
			copy(buf, e.Toks)
			se.TokenOff, se.NTokens = o, uint32(len(e.Toks))
		}
		if e.SetN {
			se.NTokens = e.N
		}
		if e.SetOff {
			se.TokenOff = e.Off
		}
		if e.Sample {
			se.Flags = ringbuf.EntrySample
			r.StepSample++
		}
		r.StepTokens += se.NTokens
		se.Put(w[i*ringbuf.StepEntryWords:])
	}
	return r
}

// Step pushes a STEP of ents.
func (h *Host) Step(ents ...Ent) uint64 {
	h.T.Helper()
	id := h.Push(h.StepRecord(ents))
	for _, e := range ents {
		if s := h.sess[e.Slot]; s != nil {
			if _, dup := h.entryAt[stepSlot{id, e.Slot}]; !dup {
				h.entryAt[stepSlot{id, e.Slot}] = s.add(id, e)
			}
		}
	}
	return id
}

// Sync waits until the device has done everything pushed so far (an
// empty STEP is a barrier: its STEP_DONE comes after every earlier
// completion) and returns the completions read before the barrier's.
func (h *Host) Sync() []ringbuf.Completion {
	h.T.Helper()
	id := h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpStep})
	h.WaitUntil("the barrier's STEP_DONE", func() bool { return len(h.got) > 0 && h.got[len(h.got)-1].Step == id })
	last := h.got[len(h.got)-1]
	if last.Kind != ringbuf.KindStepDone || last.Slot != 0 {
		h.T.Fatalf("empty step answered %s", Show(last))
	}
	got := h.got[:len(h.got)-1]
	h.got = nil
	return got
}

// Stop sends STOP, checks STOPPED is the last record, that Wait returns
// nil and that both rings are drained, and returns the completions read
// before STOPPED.
func (h *Host) Stop() []ringbuf.Completion {
	h.T.Helper()
	id := h.Push(ringbuf.SubmitRecord{Op: ringbuf.OpStop})
	h.WaitUntil("STOPPED", func() bool { return h.stopped })
	last := h.got[len(h.got)-1]
	if last.Kind != ringbuf.KindStopped || last.Step != id {
		h.T.Fatalf("last record %s, want STOPPED#%d", Show(last), id)
	}
	done := make(chan error, 1)
	go func() { done <- h.Dev.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			h.T.Fatalf("Wait: %v", err)
		}
	case <-time.After(WaitLimit):
		h.T.Fatal("Wait did not return after STOPPED")
	}
	if p, c := h.A.Submit.Produced(), h.A.Submit.Consumed(); p != c {
		h.T.Errorf("submit ring: %d records produced, %d released after STOPPED", p, c)
	}
	if p, c := h.A.Completion.Produced(), h.A.Completion.Consumed(); p != c {
		h.T.Errorf("completion ring: %d records produced, %d read after STOPPED", p, c)
	}
	got := h.got[:len(h.got)-1]
	h.got = nil
	return got
}

// Finish stops the device (as Stop) and releases it and the arena now,
// so that the next host of the test can open a device (two persistent
// CUDA kernels cannot share a GPU).
func (h *Host) Finish() []ringbuf.Completion {
	h.T.Helper()
	got := h.Stop()
	h.shutdown()
	return got
}

// --- expected completions ---

// Tok is an expected TOKEN (its logprob is not compared by Match).
func Tok(id uint64, slot, token, pos uint32, fin ringbuf.FinishReason) ringbuf.Completion {
	return ringbuf.Completion{Kind: ringbuf.KindToken, Step: id, Slot: slot, Token: token, Position: pos, Finish: fin}
}

// Done is an expected STEP_DONE with its executed-entry count.
func Done(id uint64, executed uint32) ringbuf.Completion {
	return ringbuf.Completion{Kind: ringbuf.KindStepDone, Step: id, Slot: executed}
}

// Err is an expected ERROR.
func Err(id uint64, slot uint32, code ringbuf.ErrorCode, detail uint32) ringbuf.Completion {
	return ringbuf.Completion{Kind: ringbuf.KindError, Step: id, Slot: slot, Code: code, Detail: detail}
}

// Skipped is an expected SKIPPED.
func Skipped(id uint64, slot uint32) ringbuf.Completion {
	return ringbuf.Completion{Kind: ringbuf.KindSkipped, Step: id, Slot: slot}
}

// Closed is an expected SLOT_CLOSED.
func Closed(id uint64, slot uint32) ringbuf.Completion {
	return ringbuf.Completion{Kind: ringbuf.KindSlotClosed, Step: id, Slot: slot}
}

// Show prints a completion for a failure message.
func Show(c ringbuf.Completion) string {
	s := fmt.Sprintf("%v#%d slot %d", c.Kind, c.Step, c.Slot)
	switch c.Kind {
	case ringbuf.KindToken:
		s += fmt.Sprintf(" token %d pos %d finish %d logprob %v", c.Token, c.Position, c.Finish, c.Logprob)
	case ringbuf.KindStepDone:
		s = fmt.Sprintf("%v#%d executed %d", c.Kind, c.Step, c.Slot)
	case ringbuf.KindError:
		s += fmt.Sprintf(" %v detail %d", c.Code, c.Detail)
	case ringbuf.KindTopLogprobs:
		s += fmt.Sprintf(" %d:%v %d:%v", c.Top[0].Token, c.Top[0].Logprob, c.Top[1].Token, c.Top[1].Logprob)
	}
	return s
}

// ShowAll prints completions one a line.
func ShowAll(cs []ringbuf.Completion) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString("\t" + Show(c) + "\n")
	}
	return b.String()
}

// Match compares completions, logprobs and STEP_DONE times aside. Records
// answering different submit records must come in submit order; the
// completions of one step may come in any order except that its STEP_DONE
// is last (the protocol orders records, and a device may check every
// entry before it runs the batch).
func Match(t testing.TB, got, want []ringbuf.Completion) {
	t.Helper()
	norm := func(cs []ringbuf.Completion) []string {
		out := make([]string, 0, len(cs))
		for _, g := range groups(cs) {
			var s []string
			for _, c := range g {
				c.StartNS, c.EndNS = 0, 0
				if c.Kind == ringbuf.KindToken {
					c.Logprob = 0
				}
				s = append(s, Show(c))
			}
			out = append(out, sortGroup(s, g)...)
		}
		return out
	}
	if g, w := norm(got), norm(want); !slices.Equal(g, w) {
		t.Fatalf("completions:\n%s\nwant:\n%s", ShowAll(got), ShowAll(want))
	}
}

// groups splits completions into runs answering the same record.
func groups(cs []ringbuf.Completion) [][]ringbuf.Completion {
	var out [][]ringbuf.Completion
	for i := 0; i < len(cs); {
		j := i
		for j < len(cs) && cs[j].Step == cs[i].Step {
			j++
		}
		out = append(out, cs[i:j])
		i = j
	}
	return out
}

// sortGroup orders one record's answers canonically: sorted, with a final
// STEP_DONE kept last.
func sortGroup(s []string, g []ringbuf.Completion) []string {
	if g[len(g)-1].Kind == ringbuf.KindStepDone {
		head := slices.Clone(s[:len(s)-1])
		slices.Sort(head)
		return append(head, s[len(s)-1])
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
