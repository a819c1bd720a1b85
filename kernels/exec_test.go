package kernels_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ringlm/kernels"
	"ringlm/kernels/null"
	"ringlm/ringbuf"
	"ringlm/sample"
)

// These tests drive a kernels.Executor through a real ringbuf.Arena (Go
// heap memory, so the race detector sees both sides) with the test acting
// as the host, and check the protocol of ringbuf/LAYOUT.md as the executor
// implements it. The rings and the staging area are small, so both sides
// wait for each other.

// waitLimit bounds every wait of the host: the executor must answer every
// record, errors included, so a wait this long is a hang.
const waitLimit = 10 * time.Second

// --- backends ---

// recorder keeps a copy of every batch a backend was given and fails
// Forward when an entry's tokens start with the poison sequence.
type recorder struct {
	poison []int32 // nil: never fail
	mu     sync.Mutex
	calls  [][]kernels.Entry
	bad    []string // inconsistencies the backend saw
}

func (r *recorder) forward(batch []kernels.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cp := make([]kernels.Entry, len(batch))
	for i, e := range batch {
		cp[i] = kernels.Entry{Slot: e.Slot, Tokens: slices.Clone(e.Tokens), Pos: e.Pos, Blocks: slices.Clone(e.Blocks)}
		if e.Logits != nil {
			cp[i].Logits = []float32{} // non-nil: logits were asked for
		}
	}
	r.calls = append(r.calls, cp)
	for _, e := range batch {
		if r.poison != nil && len(e.Tokens) >= len(r.poison) && slices.Equal(e.Tokens[:len(r.poison)], r.poison) {
			return errors.New("poisoned batch")
		}
	}
	return nil
}

func (r *recorder) complain(format string, args ...any) {
	r.mu.Lock()
	r.bad = append(r.bad, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// takeCalls returns the batches recorded since the last call.
func (r *recorder) takeCalls() [][]kernels.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bad {
		t.Error("backend: " + b)
	}
}

// nullBackend is the null device (a Picker: tokens are null.Token(seed,
// pos, vocab)) with a recorder.
type nullBackend struct {
	*null.Device
	recorder
}

func newNull(vocab, numBlocks, blockSize int) *nullBackend {
	return &nullBackend{Device: null.New(vocab, numBlocks, blockSize, 0)}
}

func (b *nullBackend) Forward(batch []kernels.Entry) error {
	if err := b.forward(batch); err != nil {
		return err
	}
	return b.Device.Forward(batch)
}

// logitsBackend is a model in miniature: it keeps a paged KV pool of token
// ids, writes each entry's tokens through the entry's block table and makes
// the logits after position p a hash of the tokens at positions 0..p, read
// back through the block table. So the logits depend only on the
// sequence, whatever the batching, chunking, slot or blocks, as a real
// model's do; a token never written (a wrong block table or position)
// is reported.
type logitsBackend struct {
	recorder
	vocab, bs int
	kv        []int32
	// finite > 0: only tokens below it get a finite logit, the others
	// -Inf (fewer candidates than a slot may ask alternatives for).
	finite int
}

func newLogits(vocab, numBlocks, blockSize int) *logitsBackend {
	b := &logitsBackend{vocab: vocab, bs: blockSize, kv: make([]int32, numBlocks*blockSize)}
	for i := range b.kv {
		b.kv[i] = -1
	}
	return b
}

func (b *logitsBackend) Vocab() int     { return b.vocab }
func (b *logitsBackend) BlockSize() int { return b.bs }

func (b *logitsBackend) cell(e *kernels.Entry, p int) (int, bool) {
	if p/b.bs >= len(e.Blocks) {
		b.complain("slot %d: position %d beyond its %d blocks", e.Slot, p, len(e.Blocks))
		return 0, false
	}
	return int(e.Blocks[p/b.bs])*b.bs + p%b.bs, true
}

func (b *logitsBackend) Forward(batch []kernels.Entry) error {
	if err := b.forward(batch); err != nil {
		return err
	}
	for i := range batch {
		e := &batch[i]
		for j, t := range e.Tokens {
			c, ok := b.cell(e, e.Pos+j)
			if !ok {
				return errors.New("bad block table")
			}
			b.kv[c] = t
		}
	}
	for i := range batch {
		e := &batch[i]
		if e.Logits == nil {
			continue
		}
		if len(e.Logits) != b.vocab {
			b.complain("slot %d: %d logits, vocab %d", e.Slot, len(e.Logits), b.vocab)
			continue
		}
		h := uint64(0x243F6A8885A308D3)
		last := e.Pos + len(e.Tokens) - 1
		for p := 0; p <= last; p++ {
			c, ok := b.cell(e, p)
			if !ok {
				return errors.New("bad block table")
			}
			if b.kv[c] < 0 {
				b.complain("slot %d: position %d was never written", e.Slot, p)
			}
			h = logitsHash(h, b.kv[c], p)
		}
		fillLogits(e.Logits, h, b.finite)
	}
	return nil
}

// logitsHash and fillLogits are logitsBackend's model: the logits after
// the tokens seq[0..p] are fillLogits of the hash chained over them, so
// a test can compute them from the sequence alone (logitsOf).
func logitsHash(h uint64, tok int32, pos int) uint64 {
	return mix(h ^ uint64(uint32(tok)) ^ uint64(pos)<<32)
}

func fillLogits(logits []float32, h uint64, finite int) {
	for j := range logits {
		logits[j] = float32(mix(h^uint64(j)*0x9E3779B97F4A7C15)>>40) / (1 << 24) * 3
		if finite > 0 && j >= finite {
			logits[j] = float32(math.Inf(-1))
		}
	}
}

func logitsOf(seq []int32, vocab, finite int) []float32 {
	h := uint64(0x243F6A8885A308D3)
	for p, t := range seq {
		h = logitsHash(h, t, p)
	}
	l := make([]float32, vocab)
	fillLogits(l, h, finite)
	return l
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// --- the host ---

type config struct {
	slots, blocks                int
	submitCap, complCap, staging int
}

type harness struct {
	t       *testing.T
	a       *ringbuf.Arena
	x       *kernels.Executor
	id      uint64               // ID of the last record: one counter, so step ids increase
	got     []ringbuf.Completion // read and not yet taken
	slow    time.Duration        // pause before reading each completion
	maxFill int                  // most completions seen waiting at once
	stopped bool
	lastEnd uint64 // EndNS of the last STEP_DONE
	vocab   int
	picker  bool // the backend picks tokens without logits
}

func newHarness(t *testing.T, be kernels.Backend, c config) *harness {
	t.Helper()
	l, err := ringbuf.NewLayout(c.submitCap, c.complCap, c.staging)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ringbuf.NewArena(ringbuf.HeapAllocator{}, l)
	if err != nil {
		t.Fatal(err)
	}
	x := kernels.NewExecutor(a, be, c.slots, c.blocks)
	x.Start()
	_, picker := be.(kernels.Picker)
	h := &harness{t: t, a: a, x: x, vocab: be.Vocab(), picker: picker}
	t.Cleanup(h.shutdown)
	return h
}

// shutdown stops an executor a failed test left running. It must not
// call Fatal.
func (h *harness) shutdown() {
	if !h.stopped {
		deadline := time.Now().Add(waitLimit)
		r := ringbuf.SubmitRecord{Op: ringbuf.OpStop, ID: h.id + 1}
		for pushed := false; !h.stopped && time.Now().Before(deadline); {
			if !pushed {
				_, pushed = h.a.PushSubmit(&r)
				h.x.Notify()
			}
			var c ringbuf.Completion
			for h.a.PopCompletion(&c) {
				h.stopped = h.stopped || c.Kind == ringbuf.KindStopped
			}
			time.Sleep(100 * time.Microsecond)
		}
		if !h.stopped {
			h.t.Error("cleanup: the executor did not answer STOP")
			return
		}
	}
	done := make(chan error, 1)
	go func() { done <- h.x.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			h.t.Errorf("Wait: %v", err)
		}
	case <-time.After(waitLimit):
		h.t.Error("cleanup: Wait did not return after STOPPED")
		return
	}
	if err := h.a.Close(); err != nil {
		h.t.Error(err)
	}
}

func (h *harness) record(c ringbuf.Completion) {
	if h.stopped {
		h.t.Errorf("completion after STOPPED: %s", show(c))
	}
	switch c.Kind {
	case ringbuf.KindStepDone:
		if c.StartNS > c.EndNS {
			h.t.Errorf("%s: starts after it ends", show(c))
		}
		if c.StartNS < h.lastEnd {
			h.t.Errorf("%s: starts at %d, before the previous step ended (%d)", show(c), c.StartNS, h.lastEnd)
		}
		h.lastEnd = c.EndNS
	case ringbuf.KindStopped:
		h.stopped = true
	}
	h.got = append(h.got, c)
}

// drain reads every completion published so far, slowly if h.slow is set.
func (h *harness) drain() {
	r := h.a.Completion
	h.maxFill = max(h.maxFill, int(r.Produced()-r.Consumed()))
	var c ringbuf.Completion
	for r.Produced() > r.Consumed() {
		if h.slow > 0 {
			time.Sleep(h.slow)
		}
		if !h.a.PopCompletion(&c) {
			h.t.Fatal("PopCompletion: nothing although Produced > Consumed")
		}
		h.record(c)
		h.maxFill = max(h.maxFill, int(r.Produced()-r.Consumed()))
	}
}

// waitUntil drains completions until cond holds (the host always drains
// while it waits, as LAYOUT.md requires).
func (h *harness) waitUntil(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		h.drain()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; completions not taken:\n%s", what, showAll(h.got))
		}
		select {
		case <-h.x.Doorbell():
		case <-time.After(time.Millisecond):
		}
	}
}

// push publishes r with the next ID.
func (h *harness) push(r ringbuf.SubmitRecord) uint64 {
	h.t.Helper()
	h.id++
	r.ID = h.id
	h.waitUntil("submit space", func() bool { _, ok := h.a.PushSubmit(&r); return ok })
	h.x.Notify()
	return r.ID
}

func (h *harness) alloc(n int) (uint32, []uint32) {
	h.t.Helper()
	if n > h.a.Staging.Cap() {
		h.t.Fatalf("a run of %d words in a staging area of %d", n, h.a.Staging.Cap())
	}
	var off uint32
	var buf []uint32
	h.waitUntil("staging space", func() bool {
		var ok bool
		off, buf, ok = h.a.AllocStaging(n)
		return ok
	})
	return off, buf
}

func (h *harness) open(slot uint32, p ringbuf.SlotParams, stop []uint32, bias []ringbuf.TokenBias, hist []uint32) uint64 {
	h.t.Helper()
	n := ringbuf.SlotPayloadWords(len(stop), len(bias), len(hist))
	off, buf := h.alloc(n)
	ringbuf.PutSlotPayload(buf, &p, stop, bias, hist)
	return h.push(ringbuf.SubmitRecord{Op: ringbuf.OpOpenSlot, Slot: slot, PayloadOff: off, PayloadLen: uint32(n)})
}

// openWords opens slot with a raw payload.
func (h *harness) openWords(slot uint32, w []uint32) uint64 {
	h.t.Helper()
	r := ringbuf.SubmitRecord{Op: ringbuf.OpOpenSlot, Slot: slot, PayloadLen: uint32(len(w))}
	if len(w) > 0 {
		off, buf := h.alloc(len(w))
		copy(buf, w)
		r.PayloadOff = off
	}
	return h.push(r)
}

func (h *harness) grant(slot, first uint32, ids ...uint32) uint64 {
	h.t.Helper()
	off, buf := h.alloc(len(ids))
	copy(buf, ids)
	return h.push(ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: slot, PayloadOff: off,
		PayloadLen: uint32(len(ids)), GrantFirst: first, GrantCount: uint32(len(ids))})
}

func (h *harness) close(slot uint32) uint64 {
	h.t.Helper()
	return h.push(ringbuf.SubmitRecord{Op: ringbuf.OpCloseSlot, Slot: slot})
}

// ent is a STEP entry to build: toks nil feeds back the last sampled token.
type ent struct {
	slot   uint32
	toks   []uint32
	sample bool
	// Overrides for malformed entries.
	n      uint32 // n_tokens, if setN (else len(toks), or 1 for feedback)
	setN   bool
	off    uint32 // token_off, if setOff
	setOff bool
}

func pre(slot uint32, sample bool, toks ...uint32) ent {
	return ent{slot: slot, toks: toks, sample: sample}
}
func fb(slot uint32) ent { return ent{slot: slot, sample: true} }

// stepRecord builds a STEP: one run for the entries, one per token list,
// all committed to the record when it is pushed.
func (h *harness) stepRecord(ents []ent) ringbuf.SubmitRecord {
	h.t.Helper()
	r := ringbuf.SubmitRecord{Op: ringbuf.OpStep, Slot: uint32(len(ents)), PayloadLen: uint32(len(ents) * ringbuf.StepEntryWords)}
	if len(ents) == 0 {
		return r
	}
	off, w := h.alloc(len(ents) * ringbuf.StepEntryWords)
	r.PayloadOff = off
	for i, e := range ents {
		se := ringbuf.StepEntry{Slot: e.slot, NTokens: 1, TokenOff: ringbuf.TokenOffFeedback}
		if e.toks != nil {
			o, buf := h.alloc(len(e.toks))
			copy(buf, e.toks)
			se.TokenOff, se.NTokens = o, uint32(len(e.toks))
		}
		if e.setN {
			se.NTokens = e.n
		}
		if e.setOff {
			se.TokenOff = e.off
		}
		if e.sample {
			se.Flags = ringbuf.EntrySample
			r.StepSample++
		}
		r.StepTokens += se.NTokens
		se.Put(w[i*ringbuf.StepEntryWords:])
	}
	return r
}

func (h *harness) step(ents ...ent) uint64 {
	h.t.Helper()
	return h.push(h.stepRecord(ents))
}

// sync waits until the executor has done everything pushed so far (an
// empty STEP is a barrier: its STEP_DONE comes after every earlier
// completion) and returns the completions read before the barrier's.
func (h *harness) sync() []ringbuf.Completion {
	h.t.Helper()
	id := h.push(ringbuf.SubmitRecord{Op: ringbuf.OpStep})
	h.waitUntil("the barrier's STEP_DONE", func() bool { return len(h.got) > 0 && h.got[len(h.got)-1].Step == id })
	last := h.got[len(h.got)-1]
	if last.Kind != ringbuf.KindStepDone || last.Slot != 0 {
		h.t.Fatalf("empty step answered %s", show(last))
	}
	got := h.got[:len(h.got)-1]
	h.got = nil
	return got
}

// stop sends STOP, checks STOPPED is the last record and Wait returns nil.
func (h *harness) stop() []ringbuf.Completion {
	h.t.Helper()
	id := h.push(ringbuf.SubmitRecord{Op: ringbuf.OpStop})
	h.waitUntil("STOPPED", func() bool { return h.stopped })
	last := h.got[len(h.got)-1]
	if last.Kind != ringbuf.KindStopped || last.Step != id {
		h.t.Fatalf("last record %s, want STOPPED#%d", show(last), id)
	}
	done := make(chan error, 1)
	go func() { done <- h.x.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			h.t.Fatalf("Wait: %v", err)
		}
	case <-time.After(waitLimit):
		h.t.Fatal("Wait did not return after STOPPED")
	}
	if p, c := h.a.Submit.Produced(), h.a.Submit.Consumed(); p != c {
		h.t.Errorf("submit ring: %d records produced, %d released after STOPPED", p, c)
	}
	if p, c := h.a.Completion.Produced(), h.a.Completion.Consumed(); p != c {
		h.t.Errorf("completion ring: %d records produced, %d read after STOPPED", p, c)
	}
	got := h.got[:len(h.got)-1]
	h.got = nil
	return got
}

// --- expected completions ---

func tok(id uint64, slot, token, pos uint32, fin ringbuf.FinishReason) ringbuf.Completion {
	return ringbuf.Completion{Kind: ringbuf.KindToken, Step: id, Slot: slot, Token: token, Position: pos, Finish: fin}
}

func done(id uint64, executed uint32) ringbuf.Completion {
	return ringbuf.Completion{Kind: ringbuf.KindStepDone, Step: id, Slot: executed}
}

func errc(id uint64, slot uint32, code ringbuf.ErrorCode, detail uint32) ringbuf.Completion {
	return ringbuf.Completion{Kind: ringbuf.KindError, Step: id, Slot: slot, Code: code, Detail: detail}
}

func skipped(id uint64, slot uint32) ringbuf.Completion {
	return ringbuf.Completion{Kind: ringbuf.KindSkipped, Step: id, Slot: slot}
}

func closed(id uint64, slot uint32) ringbuf.Completion {
	return ringbuf.Completion{Kind: ringbuf.KindSlotClosed, Step: id, Slot: slot}
}

func show(c ringbuf.Completion) string {
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

func showAll(cs []ringbuf.Completion) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString("\t" + show(c) + "\n")
	}
	return b.String()
}

// match compares completions (the STEP_DONE times are checked when read
// and ignored here). Records answering different submit records must come
// in submit order; the completions of one step may come in any order
// except that its STEP_DONE is last (the protocol orders records, and an
// executor may check every entry before it runs the batch).
func match(t *testing.T, got, want []ringbuf.Completion) {
	t.Helper()
	norm := func(cs []ringbuf.Completion) []string {
		var out []string
		for i := 0; i < len(cs); {
			j := i
			for j < len(cs) && cs[j].Step == cs[i].Step {
				j++
			}
			var g []string
			for k := i; k < j; k++ {
				c := cs[k]
				c.StartNS, c.EndNS = 0, 0
				if c.Kind == ringbuf.KindStepDone && k == j-1 {
					slices.Sort(g)
					g = append(g, show(c))
				} else {
					g = append(g, show(c))
				}
			}
			if cs[j-1].Kind != ringbuf.KindStepDone {
				slices.Sort(g)
			}
			out = append(out, g...)
			i = j
		}
		return out
	}
	if g, w := norm(got), norm(want); !slices.Equal(g, w) {
		t.Fatalf("completions:\n%s\nwant:\n%s", showAll(got), showAll(want))
	}
}

// nullTok is the null device's token at pos.
func nullTok(seed uint64, pos, vocab int) uint32 { return uint32(null.Token(seed, pos, vocab)) }

func params(seed uint64) ringbuf.SlotParams {
	return ringbuf.SlotParams{Temperature: 0.8, TopP: 1, RepeatPenalty: 1, Seed: seed}
}

// --- tests ---

// TestLifecycle runs one slot through every op with the null device:
// OPEN, GRANT, a prompt in three chunks (SAMPLE on the last only),
// feedback steps, CLOSE and STOP; it checks every completion and what the
// backend was given.
func TestLifecycle(t *testing.T) {
	const vocab, bs = 1000, 4
	be := newNull(vocab, 16, bs)
	h := newHarness(t, be, config{slots: 4, blocks: 16, submitCap: 4, complCap: 4, staging: 64})
	const seed = 0xABCDEF0123
	h.open(1, params(seed), nil, nil, nil)
	h.grant(1, 0, 5, 3) // positions 0..7
	match(t, h.sync(), nil)
	if c := be.takeCalls(); len(c) != 0 {
		t.Fatalf("Forward called for OPEN/GRANT: %v", c)
	}

	prompt := []uint32{11, 22, 33, 44, 55, 66, 77}
	s1 := h.step(pre(1, false, prompt[:3]...))
	s2 := h.step(pre(1, false, prompt[3:5]...))
	s3 := h.step(pre(1, true, prompt[5:]...))
	t7 := nullTok(seed, 7, vocab)
	match(t, h.sync(), []ringbuf.Completion{done(s1, 1), done(s2, 1), tok(s3, 1, t7, 7, 0), done(s3, 1)})
	blocks := []int32{5, 3}
	want := [][]kernels.Entry{
		{{Slot: 1, Tokens: []int32{11, 22, 33}, Pos: 0, Blocks: blocks}},
		{{Slot: 1, Tokens: []int32{44, 55}, Pos: 3, Blocks: blocks}},
		{{Slot: 1, Tokens: []int32{66, 77}, Pos: 5, Blocks: blocks}},
	}
	checkCalls(t, be.takeCalls(), want)

	// Decode: feedback entries queued ahead, blocks granted ahead.
	h.grant(1, 2, 9, 0)
	var wantC []ringbuf.Completion
	last := t7
	want = nil
	for pos := 8; pos <= 14; pos++ {
		id := h.step(fb(1))
		tk := nullTok(seed, pos, vocab)
		wantC = append(wantC, tok(id, 1, tk, uint32(pos), 0), done(id, 1))
		want = append(want, []kernels.Entry{{Slot: 1, Tokens: []int32{int32(last)}, Pos: pos - 1, Blocks: []int32{5, 3, 9, 0}}})
		last = tk
	}
	match(t, h.sync(), wantC)
	checkCalls(t, be.takeCalls(), want)

	c := h.close(1)
	match(t, h.stop(), []ringbuf.Completion{closed(c, 1)})
	be.check(t)
}

// checkCalls compares the batches a backend saw. Logits: nil means none
// were asked for, non-nil that they were.
func checkCalls(t *testing.T, got, want [][]kernels.Entry) {
	t.Helper()
	f := func(bs [][]kernels.Entry) string {
		var b strings.Builder
		for _, batch := range bs {
			b.WriteString("\t[")
			for _, e := range batch {
				fmt.Fprintf(&b, " {slot %d pos %d tokens %v blocks %v logits %v}", e.Slot, e.Pos, e.Tokens, e.Blocks, e.Logits != nil)
			}
			b.WriteString(" ]\n")
		}
		return b.String()
	}
	if g, w := f(got), f(want); g != w {
		t.Fatalf("backend batches:\n%s\nwant:\n%s", g, w)
	}
}

// TestFinishRules: max_tokens finishes on exactly the max_tokens-th
// token; an EOS id (unless SlotIgnoreEOS) or a stop token finishes with
// FinishStop (which wins when both apply); entries queued after the finish
// come back SKIPPED; CLOSE and a new OPEN clear the finished state.
func TestFinishRules(t *testing.T) {
	const vocab, bs, P = 64, 4, 3
	be := newNull(vocab, 32, bs)
	h := newHarness(t, be, config{slots: 5, blocks: 32, submitCap: 8, complCap: 8, staging: 256})

	// A seed whose first 8 tokens have a token at index 2 and another at
	// index 5 that do not appear earlier.
	var seed uint64
	var seq []uint32
	for seed = 1; ; seed++ {
		seq = seq[:0]
		for i := range 8 {
			seq = append(seq, nullTok(seed, P+i, vocab))
		}
		if !slices.Contains(seq[:2], seq[2]) && !slices.Contains(seq[:5], seq[5]) {
			break
		}
	}
	const K, M, N = 2, 5, 8 // EOS index, stop-token index, steps
	eos, stopTok := seq[K], seq[M]

	pMax := params(seed)
	pMax.MaxTokens = 3
	pEOS := params(seed)
	pEOS.NEOS, pEOS.EOS[0], pEOS.EOS[1] = 2, vocab+7, eos // an EOS id beyond the vocabulary never matches
	pIgn := pEOS
	pIgn.Flags = ringbuf.SlotIgnoreEOS
	pBoth := pEOS
	pBoth.MaxTokens = K + 1
	pOne := params(seed)
	pOne.MaxTokens = 1

	h.open(0, pMax, nil, nil, nil)
	h.open(1, pEOS, nil, nil, nil)
	h.open(2, pIgn, []uint32{stopTok}, nil, nil)
	h.open(3, pBoth, nil, nil, nil)
	h.open(4, pOne, nil, nil, nil)
	for s := range uint32(5) {
		h.grant(s, 0, 3*s, 3*s+1, 3*s+2) // 12 positions
	}
	match(t, h.sync(), nil)

	// finishAt[s]: the index of the finishing token, and its reason.
	finishAt := []int{2, K, M, K, 0}
	reason := []ringbuf.FinishReason{ringbuf.FinishLength, ringbuf.FinishStop, ringbuf.FinishStop, ringbuf.FinishStop, ringbuf.FinishLength}
	var want []ringbuf.Completion
	for i := range N {
		var ents []ent
		for s := range uint32(5) {
			if i == 0 {
				ents = append(ents, pre(s, true, 1, 2, 3))
			} else {
				ents = append(ents, fb(s))
			}
		}
		id := h.step(ents...)
		executed := uint32(0)
		for s := range uint32(5) {
			switch {
			case i < finishAt[s]:
				want = append(want, tok(id, s, seq[i], uint32(P+i), 0))
				executed++
			case i == finishAt[s]:
				want = append(want, tok(id, s, seq[i], uint32(P+i), reason[s]))
				executed++
			default:
				want = append(want, skipped(id, s))
			}
		}
		want = append(want, done(id, executed))
	}
	match(t, h.sync(), want)

	// A finished slot stays open: GRANT still works, CLOSE answers
	// SLOT_CLOSED, and a new OPEN starts afresh.
	h.grant(0, 3, 20)
	c0 := h.close(0)
	match(t, h.sync(), []ringbuf.Completion{closed(c0, 0)})
	h.open(0, params(seed+1), nil, nil, nil)
	h.grant(0, 0, 0)
	id := h.step(pre(0, true, 9))
	match(t, h.sync(), []ringbuf.Completion{tok(id, 0, nullTok(seed+1, 1, vocab), 1, 0), done(id, 1)})
	h.stop()
	be.check(t)
}

// witness is a slot that keeps generating while other slots fail: after
// every error the executor must still serve it correctly.
type witness struct {
	slot  uint32
	seed  uint64
	pos   int // position of the next sampled token
	vocab int
}

// tok is the witness's next TOKEN, answered in step id.
func (w *witness) tok(id uint64) ringbuf.Completion {
	c := tok(id, w.slot, nullTok(w.seed, w.pos, w.vocab), uint32(w.pos), 0)
	w.pos++
	return c
}

// TestErrors provokes every error code and checks that each comes back as
// a completion (never a hang), that a failed entry fails its slot, and
// that the executor keeps serving the witness slot correctly throughout.
func TestErrors(t *testing.T) {
	const vocab, bs, pool, slots = 100, 4, 32, 4
	be := newNull(vocab, pool, bs)
	be.poison = []int32{42, 43}
	h := newHarness(t, be, config{slots: slots, blocks: pool, submitCap: 4, complCap: 8, staging: 256})
	top := uint32(h.a.Staging.Cap()) // staging words
	w := &witness{slot: 0, seed: 77, pos: 2, vocab: vocab}
	h.open(0, params(w.seed), nil, nil, nil)
	h.grant(0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11) // 48 positions
	id := h.step(pre(0, true, 1, 2))
	match(t, h.sync(), []ringbuf.Completion{w.tok(id), done(id, 1)})
	// check runs one more witness step and expects want before it.
	check := func(name string, want ...ringbuf.Completion) {
		t.Helper()
		id := h.step(fb(0))
		want = append(want, w.tok(id), done(id, 1))
		t.Log(name)
		match(t, h.sync(), want)
	}

	// BAD_OP.
	a := h.push(ringbuf.SubmitRecord{Op: 9})
	b := h.push(ringbuf.SubmitRecord{Op: 0})
	check("bad op", errc(a, ringbuf.NoSlot, ringbuf.CodeBadOp, 9), errc(b, ringbuf.NoSlot, ringbuf.CodeBadOp, 0))

	// BAD_SLOT, for every op that names a slot and for a step entry.
	a = h.open(slots, params(1), nil, nil, nil)
	b = h.grant(0xFFFFFFFE, 0, 1)
	c := h.close(slots + 3)
	d := h.step(fb(0), pre(slots, true, 1))
	check("bad slot",
		errc(a, slots, ringbuf.CodeBadSlot, slots),
		errc(b, 0xFFFFFFFE, ringbuf.CodeBadSlot, 0xFFFFFFFE),
		errc(c, slots+3, ringbuf.CodeBadSlot, slots+3),
		w.tok(d), errc(d, slots, ringbuf.CodeBadSlot, slots), done(d, 1))

	// SLOT_STATE: OPEN of an open slot (one error, although its payload is
	// outside staging too); GRANT, STEP entry, CLOSE of a closed slot.
	a = h.open(0, params(1), nil, nil, nil)
	b = h.push(ringbuf.SubmitRecord{Op: ringbuf.OpOpenSlot, Slot: 0, PayloadOff: top - 4, PayloadLen: 32})
	c = h.grant(2, 0, 1)
	d = h.step(pre(2, true, 5), fb(0))
	e := h.close(3)
	check("slot state",
		errc(a, 0, ringbuf.CodeSlotState, uint32(ringbuf.OpOpenSlot)),
		errc(b, 0, ringbuf.CodeSlotState, uint32(ringbuf.OpOpenSlot)),
		errc(c, 2, ringbuf.CodeSlotState, uint32(ringbuf.OpGrantBlocks)),
		errc(d, 2, ringbuf.CodeSlotState, uint32(ringbuf.OpStep)), w.tok(d), done(d, 1),
		errc(e, 3, ringbuf.CodeSlotState, uint32(ringbuf.OpCloseSlot)))

	// BAD_PAYLOAD on OPEN and GRANT (outside staging; a count that is not
	// the payload length): the slot stays as it was.
	a = h.push(ringbuf.SubmitRecord{Op: ringbuf.OpOpenSlot, Slot: 1, PayloadOff: top - 8, PayloadLen: 32})
	h.open(1, params(5), nil, nil, nil) // now it opens
	b = h.push(ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: 1, PayloadOff: top, PayloadLen: 1, GrantCount: 1})
	off, buf := h.alloc(1)
	buf[0] = 16
	c = h.push(ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: 1, PayloadOff: off, PayloadLen: 1, GrantCount: 2})
	check("bad payload: open, grant",
		errc(a, 1, ringbuf.CodeBadPayload, top-8),
		errc(b, 1, ringbuf.CodeBadPayload, top),
		errc(c, 1, ringbuf.CodeBadPayload, off))

	// A STEP refused whole: payload outside staging, a length that is not
	// n entries, totals that disagree with the entries. Nothing in it runs,
	// the witness entry included.
	refused := []ringbuf.SubmitRecord{{Op: ringbuf.OpStep, Slot: 1, PayloadOff: top - 2, PayloadLen: 4, StepTokens: 1, StepSample: 1}}
	r := h.stepRecord([]ent{fb(0)})
	r.Slot = 2
	refused = append(refused, r)
	r = h.stepRecord([]ent{fb(0)})
	r.StepTokens = 2
	refused = append(refused, r)
	r = h.stepRecord([]ent{fb(0)})
	r.StepSample = 0
	refused = append(refused, r)
	r = h.stepRecord([]ent{fb(0)})
	r.Slot, r.PayloadLen = 0, 0 // no entries, but StepTokens 1
	refused = append(refused, r)
	var want []ringbuf.Completion
	for _, r := range refused {
		id := h.push(r)
		want = append(want, errc(id, ringbuf.NoSlot, ringbuf.CodeBadPayload, r.PayloadOff), done(id, 0))
	}
	check("refused steps", want...)

	// Entry token runs: outside staging, n_tokens 0. A failed entry fails
	// its slot: later entries are SKIPPED until CLOSE.
	h.grant(1, 0, 16, 17)
	a = h.step(ent{slot: 1, toks: []uint32{1}, n: 3, setN: true, off: top - 2, setOff: true, sample: true}, fb(0))
	b = h.step(pre(1, true, 1))
	c = h.close(1)
	check("entry outside staging",
		errc(a, 1, ringbuf.CodeBadPayload, top-2), w.tok(a), done(a, 1),
		skipped(b, 1), done(b, 0), closed(c, 1))
	h.open(1, params(5), nil, nil, nil)
	h.grant(1, 0, 16, 17)
	a = h.step(ent{slot: 1, toks: []uint32{1}, n: 0, setN: true, off: 17, setOff: true}, fb(0))
	b = h.step(pre(1, true, 1))
	c = h.close(1)
	check("entry with no tokens",
		errc(a, 1, ringbuf.CodeBadPayload, 17), w.tok(a), done(a, 1),
		skipped(b, 1), done(b, 0), closed(c, 1))

	// GRANT: a first index beyond the table; a block id beyond the pool
	// (nothing of that grant applies).
	h.open(1, params(5), nil, nil, nil)
	h.grant(1, 0, 16)
	off, buf = h.alloc(1)
	buf[0] = 17
	a = h.push(ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: 1, PayloadOff: off, PayloadLen: 1, GrantFirst: 2, GrantCount: 1})
	b = h.grant(1, 1, 17, pool)
	c = h.grant(1, 1, pool+100)
	check("grant errors",
		errc(a, 1, ringbuf.CodeBadPayload, off),
		errc(b, 1, ringbuf.CodeNoBlock, pool),
		errc(c, 1, ringbuf.CodeNoBlock, pool+100))
	be.takeCalls()
	// NO_BLOCK on an entry: the table is still [16], and 5 tokens need 2
	// blocks (NO_BLOCK comes before BAD_TOKEN in LAYOUT.md's order). The
	// entry never reaches the backend.
	a = h.step(pre(1, false, 1, 2, vocab, 4, 5), fb(0))
	b = h.step(pre(1, false, 1))
	c = h.close(1)
	check("entry beyond the blocks",
		errc(a, 1, ringbuf.CodeNoBlock, 4), w.tok(a), done(a, 1),
		skipped(b, 1), done(b, 0), closed(c, 1))
	for _, batch := range be.takeCalls() {
		for _, e := range batch {
			if e.Slot == 1 {
				t.Fatalf("slot 1 reached the backend: %+v", e)
			}
		}
	}
	// A grant whose first index is inside the table replaces blocks (a
	// copy-on-write of a shared prefix block).
	h.open(1, params(5), nil, nil, nil)
	h.grant(1, 0, 16, 17)
	h.grant(1, 0, 18) // the table is [18, 17]
	a = h.step(pre(1, false, 1, 2, 3, 4, 5), fb(0))
	check("grant replacing a block", w.tok(a), done(a, 2))
	calls := be.takeCalls()
	if len(calls) != 2 || len(calls[0]) != 2 || calls[0][0].Slot != 1 || !slices.Equal(calls[0][0].Blocks, []int32{18, 17}) {
		t.Fatalf("after the replacing grant the backend saw %+v, want slot 1 with blocks [18 17]", calls)
	}

	// BAD_TOKEN: the entry fails, its slot too.
	h.open(2, params(6), nil, nil, nil)
	h.grant(2, 0, 20, 21)
	a = h.step(pre(2, true, 5, vocab, 6), fb(0))
	b = h.step(fb(2))
	c = h.close(2)
	check("bad token",
		errc(a, 2, ringbuf.CodeBadToken, vocab), w.tok(a), done(a, 1),
		skipped(b, 2), done(b, 0), closed(c, 2))

	// BAD_PARAMS with the word index; the slot stays closed, so the next
	// OPEN succeeds.
	good := make([]uint32, ringbuf.SlotParamsWords)
	p := params(9)
	ringbuf.PutSlotPayload(good, &p, nil, nil, nil)
	bad := func(word int, v uint32) []uint32 {
		w := slices.Clone(good)
		w[word] = v
		return w
	}
	ids := []uint64{
		h.openWords(2, bad(26, 1)),                     // reserved
		h.openWords(2, bad(31, 1)),                     // reserved
		h.openWords(2, bad(ringbuf.SPOffNEOS, 9)),      // too many EOS ids
		h.openWords(2, bad(ringbuf.SPOffFlags, 4)),     // unknown flag
		h.openWords(2, bad(ringbuf.SPOffNStop, 1)),     // counts need 33 words
		h.openWords(2, append(slices.Clone(good), 7)),  // 33 words, counts say 32
		h.openWords(2, good[:10]),                      // short
		h.openWords(2, nil),                            // no payload
		h.openWords(2, bad(ringbuf.SPOffNHist, 1<<31)), // counts need 2^31+32 words
	}
	words := []uint32{26, 31, ringbuf.SPOffNEOS, ringbuf.SPOffFlags, ringbuf.SPOffNStop, ringbuf.SPOffNStop, 10, 0, ringbuf.SPOffNStop}
	want = nil
	for i, id := range ids {
		want = append(want, errc(id, 2, ringbuf.CodeBadParams, words[i]))
	}
	check("bad params", want...)
	h.openWords(2, good)
	h.grant(2, 0, 20)
	a = h.step(pre(2, true, 3), fb(0))
	check("open after bad params", tok(a, 2, nullTok(9, 1, vocab), 1, 0), w.tok(a), done(a, 2))

	// NO_FEEDBACK: before the slot sampled anything; n_tokens != 1.
	h.open(3, params(10), nil, nil, nil)
	h.grant(3, 0, 22)
	a = h.step(fb(3), fb(0))
	b = h.step(pre(3, true, 1))
	c = h.close(3)
	h.open(3, params(10), nil, nil, nil)
	h.grant(3, 0, 22)
	d = h.step(pre(3, true, 1))
	e = h.step(ent{slot: 3, n: 2, setN: true, sample: true}, fb(0))
	f := h.step(fb(3))
	g := h.close(3)
	check("no feedback",
		errc(a, 3, ringbuf.CodeNoFeedback, 1), w.tok(a), done(a, 1),
		skipped(b, 3), done(b, 0), closed(c, 3),
		tok(d, 3, nullTok(10, 1, vocab), 1, 0), done(d, 1),
		errc(e, 3, ringbuf.CodeNoFeedback, 2), w.tok(e), done(e, 1),
		skipped(f, 3), done(f, 0), closed(g, 3))

	// DEVICE: Forward fails; every entry of the batch gets an ERROR, none
	// counts as executed, and the slots are finished. The witness is in
	// that batch, so a new one replaces it.
	h.open(3, params(11), nil, nil, nil)
	h.grant(3, 0, 22)
	a = h.step(pre(3, true, 42, 43), fb(0))
	b = h.step(fb(3), fb(0))
	c = h.close(0)
	d = h.close(3)
	match(t, h.sync(), []ringbuf.Completion{
		errc(a, 3, ringbuf.CodeDevice, 0), errc(a, 0, ringbuf.CodeDevice, 0), done(a, 0),
		skipped(b, 3), skipped(b, 0), done(b, 0), closed(c, 0), closed(d, 3)})
	w = &witness{slot: 3, seed: 12, pos: 3, vocab: vocab}
	h.open(3, params(w.seed), nil, nil, nil)
	h.grant(3, 0, 0, 1)
	a = h.step(pre(3, true, 1, 2, 3), pre(1, true, 1))
	b = h.step(fb(3), fb(1))
	match(t, h.sync(), []ringbuf.Completion{
		w.tok(a), tok(a, 1, nullTok(5, 6, vocab), 6, 0), done(a, 2),
		w.tok(b), tok(b, 1, nullTok(5, 7, vocab), 7, 0), done(b, 2)})
	h.stop()
	be.check(t)
}

// seqSpec is one sequence for drive.
type seqSpec struct {
	slot   uint32
	p      ringbuf.SlotParams
	hist   []uint32
	prompt []uint32 // the tokens fed as prefill, from p.StartPos on
	blocks []uint32
	chunks []int // prefill chunk sizes; the rest of the prompt goes in one
	gen    int   // tokens to sample
	delay  int   // steps before it opens
}

// output is what one sequence sampled.
type output struct {
	tokens   []uint32
	logprobs []float32
	top      [][]sample.TokenLogprob // each token's alternatives (TOP_LOGPROBS)
}

// drive runs the sequences together, one STEP per round: each open
// sequence adds its next prefill chunk (SAMPLE on the last) or a feedback
// entry, and is closed once it has queued gen samples. It checks the
// TOKEN positions and every STEP_DONE count and returns the outputs.
func drive(t *testing.T, h *harness, specs ...seqSpec) []output {
	t.Helper()
	type state struct {
		opened, closed bool
		fed, chunk     int
		queued         int
	}
	st := make([]state, len(specs))
	executed := map[uint64]uint32{}
	for round := 0; ; round++ {
		var ents []ent
		busy := false
		for i := range specs {
			sp, s := &specs[i], &st[i]
			if s.closed {
				continue
			}
			busy = true
			if round < sp.delay {
				continue
			}
			if !s.opened {
				h.open(sp.slot, sp.p, nil, nil, sp.hist)
				h.grant(sp.slot, 0, sp.blocks...)
				s.opened = true
			}
			switch {
			case s.fed < len(sp.prompt):
				n := len(sp.prompt) - s.fed
				if s.chunk < len(sp.chunks) {
					n = sp.chunks[s.chunk]
					s.chunk++
				}
				last := s.fed+n == len(sp.prompt)
				ents = append(ents, pre(sp.slot, last, sp.prompt[s.fed:s.fed+n]...))
				s.fed += n
				if last {
					s.queued++
				}
			case s.queued < sp.gen:
				ents = append(ents, fb(sp.slot))
				s.queued++
			default:
				h.close(sp.slot)
				s.closed = true
			}
		}
		if !busy {
			break
		}
		if len(ents) > 0 {
			executed[h.step(ents...)] = uint32(len(ents))
		}
	}
	out := make([]output, len(specs))
	bySlot := map[uint32]int{}
	for i, sp := range specs {
		bySlot[sp.slot] = i
	}
	got := h.sync()
	for k, c := range got {
		switch c.Kind {
		case ringbuf.KindTopLogprobs:
			// Right after its TOKEN (or the TOKEN's previous TOP records),
			// the pairs filled in order.
			prev := got[k-1]
			if k == 0 || (prev.Kind != ringbuf.KindToken && prev.Kind != ringbuf.KindTopLogprobs) || prev.Slot != c.Slot || prev.Step != c.Step {
				t.Fatalf("%s does not follow its TOKEN", show(c))
			}
			if prev.Kind == ringbuf.KindTopLogprobs && prev.Top[ringbuf.TopPerRecord-1].Token == ringbuf.TopNone {
				t.Fatalf("%s follows a record with an unused pair", show(c))
			}
			o := &out[bySlot[c.Slot]]
			top := &o.top[len(o.top)-1]
			for j, tl := range c.Top {
				if tl.Token == ringbuf.TopNone {
					if j == 0 || tl.Logprob != 0 {
						t.Fatalf("%s: unused pair at %d", show(c), j)
					}
					continue
				}
				*top = append(*top, sample.TokenLogprob{Token: int32(tl.Token), Logprob: tl.Logprob})
			}
		case ringbuf.KindToken:
			i := bySlot[c.Slot]
			o, sp := &out[i], &specs[i]
			want := sp.p.StartPos + uint32(len(sp.prompt)+len(o.tokens))
			if c.Position != want || c.Finish != ringbuf.FinishNone || c.Token >= uint32(h.vocab) {
				t.Fatalf("%s: want position %d, no finish, a token below %d", show(c), want, h.vocab)
			}
			// A Picker's tokens have logprob 0 (certain), asked for or not.
			if lp := sp.p.Flags&ringbuf.SlotLogprobs != 0 && !h.picker; lp != (c.Logprob != 0) || c.Logprob > 0 {
				t.Fatalf("%s: logprob with flags %#x", show(c), sp.p.Flags)
			}
			o.tokens = append(o.tokens, c.Token)
			o.logprobs = append(o.logprobs, c.Logprob)
			o.top = append(o.top, nil)
		case ringbuf.KindStepDone:
			if c.Slot != executed[c.Step] {
				t.Fatalf("%s: want %d executed", show(c), executed[c.Step])
			}
		case ringbuf.KindSlotClosed:
		default:
			t.Fatalf("unexpected %s", show(c))
		}
	}
	for i, o := range out {
		if len(o.tokens) != specs[i].gen {
			t.Fatalf("slot %d sampled %d tokens, want %d", specs[i].slot, len(o.tokens), specs[i].gen)
		}
		for j, top := range o.top {
			if n := int(specs[i].p.NTop); len(top) > n || (n > 0 && len(top) == 0) {
				t.Fatalf("slot %d token %d: %d alternatives, n_top %d", specs[i].slot, j, len(top), n)
			}
		}
	}
	return out
}

func seqOf(n int, f func(i int) uint32) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

func sameOutput(t *testing.T, what string, got, want output) {
	t.Helper()
	if !slices.Equal(got.tokens, want.tokens) || !slices.Equal(got.logprobs, want.logprobs) ||
		!slices.EqualFunc(got.top, want.top, slices.Equal) {
		t.Fatalf("%s:\n got %v %v %v\nwant %v %v %v", what, got.tokens, got.logprobs, got.top, want.tokens, want.logprobs, want.top)
	}
}

// TestDeterminism: with temperature sampling over a backend whose logits
// depend only on the sequence, a seed gives the same tokens (and
// logprobs) whether its slot runs alone or batched with others, in any
// slot, over any blocks, whatever the prefill chunking.
func TestDeterminism(t *testing.T) {
	const vocab, bs, pool = 32, 4, 64
	run := func(specs ...seqSpec) []output {
		be := newLogits(vocab, pool, bs)
		h := newHarness(t, be, config{slots: 4, blocks: pool, submitCap: 4, complCap: 4, staging: 128})
		out := drive(t, h, specs...)
		h.stop()
		be.check(t)
		return out
	}
	pA := ringbuf.SlotParams{Temperature: 0.9, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1, Seed: 101, Flags: ringbuf.SlotLogprobs, NTop: 3}
	a := seqSpec{slot: 0, p: pA, prompt: seqOf(9, func(i int) uint32 { return uint32(3*i+1) % vocab }),
		blocks: []uint32{0, 1, 2, 3, 4, 5}, gen: 16}
	pB := ringbuf.SlotParams{Temperature: 1.2, TopP: 1, TopK: 8, RepeatPenalty: 1.1, RepeatLastN: -1, Presence: 0.5, Seed: 202}
	b := seqSpec{slot: 3, p: pB, prompt: seqOf(7, func(i int) uint32 { return uint32(i*i) % vocab }),
		blocks: []uint32{10, 11, 12, 13, 14, 15}, gen: 14}
	pC := ringbuf.SlotParams{Temperature: 0, TopP: 1, RepeatPenalty: 1.5, RepeatLastN: 4, Seed: 303, Flags: ringbuf.SlotLogprobs, NTop: 20}
	c := seqSpec{slot: 1, p: pC, prompt: []uint32{5, 6, 7}, blocks: []uint32{20, 21, 22, 23, 24}, gen: 12}

	alone := run(a)[0]
	if n := len(slices.Compact(slices.Sorted(slices.Values(alone.tokens)))); n < 4 {
		t.Fatalf("only %d distinct tokens in %v: the sampling test is too weak", n, alone.tokens)
	}
	bAlone := run(b)[0]
	cAlone := run(c)[0]

	// a in another slot over other blocks, in uneven chunks, opening late,
	// with b and c (chunked differently) in the same steps.
	a2 := a
	a2.slot, a2.blocks, a2.chunks, a2.delay = 2, []uint32{40, 34, 27, 8, 50, 33}, []int{2, 3, 1, 3}, 3
	b2 := b
	b2.slot, b2.chunks = 0, []int{4, 3}
	c2 := c
	c2.chunks, c2.delay = []int{1, 1, 1}, 1
	mixed := run(b2, c2, a2)
	sameOutput(t, "a batched with b and c", mixed[2], alone)
	sameOutput(t, "b batched with a and c", mixed[0], bAlone)
	sameOutput(t, "c batched with a and b", mixed[1], cAlone)

	a3 := a
	a3.chunks = []int{1, 1, 1, 1, 1, 1, 1, 1, 1}
	sameOutput(t, "a in one-token chunks", run(a3)[0], alone)

	// The seed matters.
	a4 := a
	a4.p.Seed++
	if got := run(a4)[0]; slices.Equal(got.tokens, alone.tokens) {
		t.Fatalf("seeds %d and %d sampled the same tokens %v", a.p.Seed, a4.p.Seed, got.tokens)
	}
}

// TestRecomputePenalties: a sequence reopened after preemption, with the
// tokens it generated fed again as prefill (PromptLen = the original
// prompt length) or partly reused from its KV blocks and sent as history,
// samples the same next tokens as the original slot did, with presence,
// frequency and repetition penalties on.
func TestRecomputePenalties(t *testing.T) {
	const vocab, bs, pool, P = 16, 4, 32, 6
	be := newLogits(vocab, pool, bs)
	h := newHarness(t, be, config{slots: 4, blocks: pool, submitCap: 4, complCap: 8, staging: 128})
	pp := ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1.3, RepeatLastN: 8, Presence: 1.5, Frequency: 0.8,
		Seed: 4242, Flags: ringbuf.SlotLogprobs}
	prompt := []uint32{1, 2, 3, 1, 2, 3}
	orig := drive(t, h, seqSpec{slot: 0, p: pp, prompt: prompt, blocks: []uint32{0, 1, 2, 3, 4, 5}, gen: 16})[0]
	seq := append(slices.Clone(prompt), orig.tokens...)
	want := output{tokens: orig.tokens[7:], logprobs: orig.logprobs[7:], top: orig.top[7:]}

	// From scratch: prompt and 7 generated tokens fed as prefill.
	pa := pp
	pa.PromptLen = P
	ga := drive(t, h, seqSpec{slot: 1, p: pa, prompt: seq[:P+7], blocks: []uint32{8, 9, 10, 11, 12, 13}, chunks: []int{5, 8}, gen: 9})[0]
	sameOutput(t, "recompute from scratch", ga, want)

	// Prefix reuse: positions 0..8 (the prompt and 3 generated tokens)
	// stay in the original's blocks 0..2 and travel as history; the next
	// 4 generated tokens are fed.
	pb := pp
	pb.PromptLen, pb.StartPos = P, P+3
	gb := drive(t, h, seqSpec{slot: 2, p: pb, hist: seq[:P+3], prompt: seq[P+3 : P+7], blocks: []uint32{0, 1, 2, 16, 17, 18}, gen: 9})[0]
	sameOutput(t, "recompute over a reused prefix", gb, want)

	// The test has teeth: counting the generated tokens as prompt (no
	// PromptLen), or leaving out the history, changes the tokens.
	pc := pp
	gc := drive(t, h, seqSpec{slot: 3, p: pc, prompt: seq[:P+7], blocks: []uint32{20, 21, 22, 23, 24, 25}, gen: 9})[0]
	if slices.Equal(gc.tokens, want.tokens) {
		t.Fatalf("PromptLen 0 gave the same tokens %v: the penalties do not matter", gc.tokens)
	}
	gd := drive(t, h, seqSpec{slot: 2, p: pb, prompt: seq[P+3 : P+7], blocks: []uint32{0, 1, 2, 16, 17, 18}, gen: 9})[0]
	if slices.Equal(gd.tokens, want.tokens) {
		t.Fatalf("no history gave the same tokens %v: the history does not matter", gd.tokens)
	}
	h.stop()
	be.check(t)
}

// TestBadParamValues: sampling parameters out of range are refused with
// the word index of the field; the slot stays closed and opens afterwards.
func TestBadParamValues(t *testing.T) {
	const vocab, bs, pool = 32, 4, 8
	be := newLogits(vocab, pool, bs)
	h := newHarness(t, be, config{slots: 2, blocks: pool, submitCap: 4, complCap: 4, staging: 128})
	good := ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, RepeatLastN: 64, Seed: 5}
	type tc struct {
		set  func(p *ringbuf.SlotParams)
		stop []uint32
		bias []ringbuf.TokenBias
		word uint32
	}
	nan := float32(math.NaN())
	cases := []tc{
		{set: func(p *ringbuf.SlotParams) { p.Temperature = -1 }, word: ringbuf.SPOffTemperature},
		{set: func(p *ringbuf.SlotParams) { p.Temperature = nan }, word: ringbuf.SPOffTemperature},
		{set: func(p *ringbuf.SlotParams) { p.TopP = 0 }, word: ringbuf.SPOffTopP},
		{set: func(p *ringbuf.SlotParams) { p.TopP = 1.5 }, word: ringbuf.SPOffTopP},
		{set: func(p *ringbuf.SlotParams) { p.MinP = 2 }, word: ringbuf.SPOffMinP},
		{set: func(p *ringbuf.SlotParams) { p.RepeatPenalty = 0 }, word: ringbuf.SPOffRepeatPenalty},
		{set: func(p *ringbuf.SlotParams) { p.RepeatLastN = -2 }, word: ringbuf.SPOffRepeatLastN},
		{set: func(p *ringbuf.SlotParams) { p.Presence = 3 }, word: ringbuf.SPOffPresence},
		{set: func(p *ringbuf.SlotParams) { p.Frequency = -2.5 }, word: ringbuf.SPOffFrequency},
		{stop: []uint32{7}, bias: []ringbuf.TokenBias{{Token: 3, Bias: 1}, {Token: vocab, Bias: 1}}, word: ringbuf.SlotParamsWords + 1 + 2},
		{bias: []ringbuf.TokenBias{{Token: 0x80000000, Bias: 1}}, word: ringbuf.SlotParamsWords},
		{bias: []ringbuf.TokenBias{{Token: 2, Bias: 1}, {Token: 3, Bias: 200}}, word: ringbuf.SlotParamsWords + 3},
		{set: func(p *ringbuf.SlotParams) { p.Flags, p.NTop = ringbuf.SlotLogprobs, ringbuf.MaxTop+1 }, word: ringbuf.SPOffNTop},
		{set: func(p *ringbuf.SlotParams) { p.NTop = 1 }, word: ringbuf.SPOffNTop}, // without the logprobs flag
	}
	var want []ringbuf.Completion
	for _, c := range cases {
		p := good
		if c.set != nil {
			c.set(&p)
		}
		want = append(want, errc(h.open(1, p, c.stop, c.bias, nil), 1, ringbuf.CodeBadParams, c.word))
	}
	match(t, h.sync(), want)
	h.open(1, good, nil, []ringbuf.TokenBias{{Token: 9, Bias: 100}}, nil) // a bias of 100 makes token 9 certain
	h.grant(1, 0, 0)
	id := h.step(pre(1, true, 1, 2))
	match(t, h.sync(), []ringbuf.Completion{tok(id, 1, 9, 2, 0), done(id, 1)})
	h.stop()
	be.check(t)
}

// TestFullCompletionRing: with a Cap-4 completion ring (and Cap-4 submit
// ring, a small staging area) and a host that reads slowly, the executor
// waits for room and no completion is lost, duplicated or reordered.
func TestFullCompletionRing(t *testing.T) {
	const vocab, bs, slots, steps = 500, 4, 6, 60
	const perSlot = (steps+2)/bs + 1
	be := newNull(vocab, slots*perSlot, bs)
	h := newHarness(t, be, config{slots: slots, blocks: slots * perSlot, submitCap: 4, complCap: 4, staging: 128})
	h.slow = 20 * time.Microsecond
	var want []ringbuf.Completion
	for s := range uint32(slots) {
		h.open(s, params(uint64(1000+s)), nil, nil, nil)
		h.grant(s, 0, seqOf(perSlot, func(i int) uint32 { return s*perSlot + uint32(i) })...)
	}
	pos := make([]int, slots)
	for i := range steps {
		var ents []ent
		var active []uint32
		for s := range uint32(slots) {
			// Slot s skips the steps i with i%(s+2) == 1, so batches vary.
			if i > 0 && i%(int(s)+2) == 1 {
				continue
			}
			if i == 0 {
				ents = append(ents, pre(s, true, s, s+1))
				pos[s] = 2
			} else {
				ents = append(ents, fb(s))
			}
			active = append(active, s)
		}
		id := h.step(ents...)
		for _, s := range active {
			want = append(want, tok(id, s, nullTok(uint64(1000+s), pos[s], vocab), uint32(pos[s]), 0))
			pos[s]++
		}
		want = append(want, done(id, uint32(len(active))))
		if i%10 == 5 {
			want = append(want, errc(h.push(ringbuf.SubmitRecord{Op: 77}), ringbuf.NoSlot, ringbuf.CodeBadOp, 77))
		}
	}
	for s := range uint32(slots) {
		want = append(want, closed(h.close(s), s))
	}
	got := h.stop()
	// Strict order: the executor emits a step's TOKENs in entry order.
	if len(got) != len(want) {
		t.Fatalf("%d completions, want %d", len(got), len(want))
	}
	for i := range got {
		g := got[i]
		g.StartNS, g.EndNS = 0, 0
		if g != want[i] {
			t.Fatalf("completion %d: %s, want %s", i, show(g), show(want[i]))
		}
	}
	if h.maxFill != h.a.Completion.Cap() {
		t.Errorf("the completion ring never filled up (at most %d of %d waiting)", h.maxFill, h.a.Completion.Cap())
	}
	be.check(t)
}

// TestTopLogprobs: a slot opened with n_top gets, right after each TOKEN,
// the first n_top tokens of the sampler's order with their logprobs
// (sample.Result.Top for the same logits, history and position), two per
// TOP_LOGPROBS record, fewer when fewer candidates exist; the null
// device's are PickerTop's placeholders; a slot without n_top gets none.
func TestTopLogprobs(t *testing.T) {
	const vocab, bs, pool = 32, 4, 64
	for _, c := range []struct {
		name   string
		p      ringbuf.SlotParams
		finite int
	}{
		{"sampled, odd n_top", ringbuf.SlotParams{Temperature: 0.9, TopP: 0.9, RepeatPenalty: 1.2, RepeatLastN: -1,
			Presence: 0.3, Seed: 77, Flags: ringbuf.SlotLogprobs, NTop: 5}, 0},
		{"greedy, n_top 20", ringbuf.SlotParams{Temperature: 0, TopP: 1, RepeatPenalty: 1, Seed: 1, Flags: ringbuf.SlotLogprobs,
			NTop: ringbuf.MaxTop}, 0},
		{"top-k path, even n_top", ringbuf.SlotParams{Temperature: 1.3, TopP: 1, TopK: 4, RepeatPenalty: 1, Seed: 9,
			Flags: ringbuf.SlotLogprobs, NTop: 6}, 0},
		{"three candidates", ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: 3, Flags: ringbuf.SlotLogprobs,
			NTop: 5}, 3},
		{"no n_top", ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: 3, Flags: ringbuf.SlotLogprobs}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := newLogits(vocab, pool, bs)
			be.finite = c.finite
			h := newHarness(t, be, config{slots: 2, blocks: pool, submitCap: 4, complCap: 4, staging: 128})
			prompt := []uint32{3, 1, 4, 1, 5, 9}
			out := drive(t, h, seqSpec{slot: 1, p: c.p, prompt: prompt, blocks: seqOf(8, func(i int) uint32 { return uint32(i) }), gen: 10})[0]
			h.stop()
			be.check(t)

			// The same sampling on the CPU, token by token.
			sp := sample.Defaults()
			sp.Temperature, sp.TopP, sp.TopK, sp.RepeatPenalty, sp.RepeatLastN = c.p.Temperature, c.p.TopP, int(c.p.TopK), c.p.RepeatPenalty, int(c.p.RepeatLastN)
			sp.PresencePenalty, sp.Seed, sp.Logprobs, sp.TopLogprobs = c.p.Presence, c.p.Seed, true, int(c.p.NTop)
			sm, err := sample.New(sp, vocab)
			if err != nil {
				t.Fatal(err)
			}
			var seq []int32
			for _, tk := range prompt {
				seq = append(seq, int32(tk))
				sm.Observe(int32(tk), false)
			}
			alts := 0
			for i := range out.tokens {
				res := sm.Sample(logitsOf(seq, vocab, c.finite), len(seq))
				if uint32(res.Token) != out.tokens[i] || res.Logprob != out.logprobs[i] || !slices.Equal(res.Top, out.top[i]) {
					t.Fatalf("token %d: device %d %v %v, sampler %d %v %v", i, out.tokens[i], out.logprobs[i], out.top[i], res.Token, res.Logprob, res.Top)
				}
				want := int(c.p.NTop)
				if c.finite > 0 {
					want = min(want, c.finite)
				}
				if len(out.top[i]) != want {
					t.Fatalf("token %d: %d alternatives, want %d", i, len(out.top[i]), want)
				}
				alts += len(out.top[i])
				seq = append(seq, res.Token)
				sm.Observe(res.Token, true)
			}
			if c.p.NTop > 0 && alts == 0 {
				t.Fatal("no alternatives at all")
			}
		})
	}

	t.Run("null device", func(t *testing.T) {
		be := newNull(1000, 16, bs)
		h := newHarness(t, be, config{slots: 2, blocks: 16, submitCap: 4, complCap: 4, staging: 128})
		p := params(42)
		p.Flags, p.NTop = ringbuf.SlotLogprobs, 3
		out := drive(t, h, seqSpec{slot: 0, p: p, prompt: []uint32{1, 2}, blocks: []uint32{0, 1, 2, 3}, gen: 6})[0]
		h.stop()
		for i, tk := range out.tokens {
			want := kernels.PickerTop(nil, int32(tk), 3, 1000)
			if !slices.Equal(out.top[i], want) || want[0].Token != int32(tk) || want[2].Logprob != -2 {
				t.Fatalf("token %d (%d): alternatives %v, want %v", i, tk, out.top[i], want)
			}
		}
	})
}
