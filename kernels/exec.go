package kernels

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"ringlm/ringbuf"
	"ringlm/sample"
)

// Entry is one slot's share of a step, handed to a Backend: Tokens at
// positions Pos, Pos+1, … through the slot's block table. Logits, when not
// nil, receives the logits after the last token.
type Entry struct {
	Slot   int
	Tokens []int32
	Pos    int
	Blocks []int32
	Logits []float32
}

// Backend is what differs between devices that share this executor: the
// forward pass over a batch of entries.
type Backend interface {
	Vocab() int
	Forward(batch []Entry) error
}

// Picker is implemented by backends that choose tokens without logits
// (the null device); the executor then skips sampling. A Picker's token
// has logprob 0, and a slot that asks for n_top alternatives gets
// PickerTop's placeholders.
type Picker interface {
	Pick(slot int, seed uint64, pos int) int32
}

// PickerTop appends to dst the n alternatives the executor reports for
// a Picker's token tok: min(n, vocab) placeholders, tok itself first with
// its logprob 0, then tok+1, tok+2, … (mod vocab) with logprobs -1, -2, ….
// They are deterministic and shaped like a sampler's (distinct tokens,
// descending logprobs, the chosen token's logprob the largest), but they
// are no distribution: there are no logits behind a Picker.
func PickerTop(dst []sample.TokenLogprob, tok int32, n, vocab int) []sample.TokenLogprob {
	for i := range min(n, vocab) {
		dst = append(dst, sample.TokenLogprob{Token: int32((int(tok) + i) % vocab), Logprob: -float32(i)})
	}
	return dst
}

// Executor is the device side of the ring protocol for devices written in
// Go: it consumes submit records in order, keeps the per-slot state the
// protocol puts on the device (position, last token, sampler, stop ids,
// token limit, block table), runs steps through a Backend and publishes
// completions. The CUDA kernel implements the same state machine on the GPU.
type Executor struct {
	arena     *ringbuf.Arena
	be        Backend
	picker    Picker
	slots     []slot
	numBlocks int
	blockSize int
	vocab     int
	lim       Limits

	notify   chan struct{} // host -> device: submit records were published
	parked   atomic.Bool   // waiting for notify (tests)
	parks    atomic.Uint64 // times it parked (tests)
	doorbell chan struct{} // device -> host: completions were published
	done     chan struct{}
	err      error
	once     sync.Once
	start    time.Time
	emitted  bool // the record being executed wrote completions

	batch   []Entry
	samples []int // index into batch of entries that sample
	logits  [][]float32
	toks    []int32
	spans   []span
	top     []sample.TokenLogprob // a Picker's alternatives
	openBuf ringbuf.SlotOpen      // the OPEN_SLOT being decoded
	hist    []int32               // its history tokens' buffer, reused
}

type span struct{ lo, hi int }

type slot struct {
	open      bool
	finished  bool // sampled EOS/stop or reached max tokens: later entries are skipped
	pos       int
	last      int32 // last sampled token; -1 before the first
	blocks    []int32
	sampler   *sample.Sampler
	seed      uint64
	maxTokens int
	sampled   int
	eos       []int32
	stop      []int32
	ignoreEOS bool
	logprobs  bool
	nTop      int // alternatives per token (TOP_LOGPROBS records)
	promptLen int // fed tokens at positions >= promptLen are generated ones (0: none are)
}

// Limits are the sizes a device was opened with, which the protocol makes
// part of what it answers (ringbuf/PROTOCOL.md, "Capacity"): positions
// below Context (a slot's block table holds ceil(Context/BlockSize)
// blocks), at most MaxStepTokens tokens a STEP. Zero: no limit.
type Limits struct {
	Context       int
	MaxStepTokens int
}

// Limiter is implemented by backends with capacity limits.
type Limiter interface{ Limits() Limits }

// NewExecutor prepares an executor for slots slots over a KV pool of
// numBlocks blocks. It refuses an arena whose completion ring cannot hold
// one step's records (ringbuf.MinCompletionCap), as every device does.
func NewExecutor(a *ringbuf.Arena, be Backend, slots, numBlocks int) (*Executor, error) {
	if c, need := a.Completion.Cap(), ringbuf.MinCompletionCap(slots); c < need {
		return nil, fmt.Errorf("kernels: a completion ring of %d records for %d slots (one step can answer %d; at least %d)",
			c, slots, ringbuf.StepRecords(slots), need)
	}
	x := &Executor{arena: a, be: be, slots: make([]slot, slots), numBlocks: numBlocks, vocab: be.Vocab(),
		notify: make(chan struct{}, 1), doorbell: make(chan struct{}, 1), done: make(chan struct{})}
	x.picker, _ = be.(Picker)
	x.blockSize = 16
	if b, ok := be.(BlockSizer); ok {
		x.blockSize = b.BlockSize()
	}
	if l, ok := be.(Limiter); ok {
		x.lim = l.Limits()
	}
	return x, nil
}

// tableLen is the length of a slot's block table.
func (x *Executor) tableLen() int {
	if x.lim.Context <= 0 {
		return math.MaxInt
	}
	return (x.lim.Context + x.blockSize - 1) / x.blockSize
}

// Notify tells the device that submit records were published. It never
// blocks; a signal is kept until the device looks at the ring.
func (x *Executor) Notify() {
	select {
	case x.notify <- struct{}{}:
	default:
	}
}

// Doorbell is signalled after completions are published.
func (x *Executor) Doorbell() <-chan struct{} { return x.doorbell }

// Start runs the executor on its own goroutine until OpStop.
func (x *Executor) Start() {
	x.start = time.Now()
	go func() {
		defer close(x.done)
		x.err = x.run()
	}()
}

// Wait waits for the executor to stop and returns why it stopped.
func (x *Executor) Wait() error {
	<-x.done
	return x.err
}

func (x *Executor) ring() {
	select {
	case x.doorbell <- struct{}{}:
	default:
	}
}

// spinFor is how long the executor polls an empty submit ring before it
// parks: the host usually has the next step queued within microseconds, and
// a futex wake-up per step costs more than the poll.
const spinFor = 30 * time.Microsecond

func (x *Executor) spin() bool {
	deadline := time.Now().Add(spinFor)
	for time.Now().Before(deadline) {
		if x.arena.Submit.Produced() != x.arena.Submit.Consumed() {
			return true
		}
		runtime.Gosched()
	}
	return false
}

func (x *Executor) run() error {
	var rec ringbuf.SubmitRecord
	held := false // records executed but not yet released
	for {
		if _, ok := x.arena.NextSubmit(&rec); !ok {
			if held {
				// Release before waiting for more.
				x.arena.Submit.Done()
				held = false
			}
			if x.spin() {
				continue
			}
			// Park until Notify, with no timer: the host notifies after
			// every publish, and a signal sent while we looked is kept in
			// the channel, so none is lost and an idle device costs nothing.
			// A signal left from records already executed would wake the
			// park at once: drop it and look once more.
			select {
			case <-x.notify:
				continue
			default:
			}
			x.parked.Store(true)
			x.parks.Add(1)
			<-x.notify
			x.parked.Store(false)
			continue
		}
		x.emitted = false
		stop := x.exec(&rec)
		held = true
		// Records that answer nothing (a successful OPEN or GRANT) are
		// released with the next one that does: one release store per
		// step on each ring, however many GRANTs precede it.
		if x.emitted || stop {
			x.arena.Submit.Done()
			x.arena.Completion.Publish()
			x.ring()
			held = false
		}
		if stop {
			return nil
		}
	}
}

// emit writes a completion. Records are published together at the end
// of each submit record's execution (one release store per step, not per
// token), or early when the ring is full and the host must drain it.
func (x *Executor) emit(c *ringbuf.Completion) {
	x.emitted = true
	for {
		if _, b, ok := x.arena.Completion.Reserve(); ok {
			c.Put(b)
			return
		}
		x.arena.Completion.Publish()
		x.ring()
		time.Sleep(20 * time.Microsecond)
	}
}

// emitToken writes a TOKEN record: emit without a Completion to fill
// and encode on the per-token path.
func (x *Executor) emitToken(slot uint32, step uint64, tok uint32, lp float32, fin ringbuf.FinishReason, pos uint32) {
	if _, b, ok := x.arena.Completion.Reserve(); ok {
		x.emitted = true
		ringbuf.PutToken(b, slot, step, tok, lp, fin, pos)
		return
	}
	x.emit(&ringbuf.Completion{Kind: ringbuf.KindToken, Slot: slot, Step: step, Token: tok, Logprob: lp, Finish: fin, Position: pos})
}

func (x *Executor) fail(id uint64, slot uint32, code ringbuf.ErrorCode, detail uint32) {
	x.emit(&ringbuf.Completion{Kind: ringbuf.KindError, Slot: slot, Step: id, Code: code, Detail: detail})
}

// failEntry fails a step entry of an open slot: the slot is finished, so
// its later entries are SKIPPED until the host closes it.
func (x *Executor) failEntry(id uint64, slot uint32, code ringbuf.ErrorCode, detail uint32) {
	x.fail(id, slot, code, detail)
	x.slots[slot].finished = true
}

func (x *Executor) payload(r *ringbuf.SubmitRecord) ([]uint32, bool) {
	if r.PayloadLen == 0 {
		return nil, true
	}
	if uint64(r.PayloadOff)+uint64(r.PayloadLen) > uint64(x.arena.Staging.Cap()) {
		slot := r.Slot
		if r.Op == ringbuf.OpStep {
			slot = ringbuf.NoSlot // a STEP's Slot field counts its entries
		}
		x.fail(r.ID, slot, ringbuf.CodeBadPayload, r.PayloadOff)
		return nil, false
	}
	return x.arena.Staging.Words(r.PayloadOff, r.PayloadLen), true
}

func (x *Executor) slotOf(r *ringbuf.SubmitRecord, wantOpen bool) *slot {
	if int(r.Slot) >= len(x.slots) {
		x.fail(r.ID, r.Slot, ringbuf.CodeBadSlot, r.Slot)
		return nil
	}
	s := &x.slots[r.Slot]
	if s.open != wantOpen {
		x.fail(r.ID, r.Slot, ringbuf.CodeSlotState, uint32(r.Op))
		return nil
	}
	return s
}

func (x *Executor) exec(r *ringbuf.SubmitRecord) (stop bool) {
	switch r.Op {
	case ringbuf.OpOpenSlot:
		x.open(r)
	case ringbuf.OpGrantBlocks:
		s := x.slotOf(r, true)
		if s == nil {
			return false
		}
		w, ok := x.payload(r)
		if !ok {
			return false
		}
		if r.GrantCount != r.PayloadLen || int(r.GrantFirst) > len(s.blocks) || uint64(r.GrantFirst)+uint64(r.GrantCount) > uint64(x.tableLen()) {
			x.fail(r.ID, r.Slot, ringbuf.CodeBadPayload, r.PayloadOff)
			return false
		}
		for _, b := range w {
			if int(b) >= x.numBlocks {
				x.fail(r.ID, r.Slot, ringbuf.CodeNoBlock, b)
				return false
			}
		}
		// table[first+i] = id[i]: appends, or replaces granted entries (a
		// copy-on-write of a shared prefix block).
		for i, b := range w {
			if j := int(r.GrantFirst) + i; j < len(s.blocks) {
				s.blocks[j] = int32(b)
			} else {
				s.blocks = append(s.blocks, int32(b))
			}
		}
	case ringbuf.OpStep:
		x.step(r)
	case ringbuf.OpCloseSlot:
		if s := x.slotOf(r, true); s != nil {
			s.open = false
			s.sampler = nil
			x.emit(&ringbuf.Completion{Kind: ringbuf.KindSlotClosed, Slot: r.Slot, Step: r.ID})
		}
	case ringbuf.OpStop:
		x.emit(&ringbuf.Completion{Kind: ringbuf.KindStopped, Slot: ringbuf.NoSlot, Step: r.ID})
		return true
	default:
		x.fail(r.ID, ringbuf.NoSlot, ringbuf.CodeBadOp, uint32(r.Op))
	}
	return false
}

func (x *Executor) open(r *ringbuf.SubmitRecord) {
	s := x.slotOf(r, false)
	if s == nil {
		return
	}
	w, ok := x.payload(r)
	if !ok {
		return
	}
	pl, err := ringbuf.ParseSlotPayload(w)
	if err != nil {
		var pe *ringbuf.PayloadError
		detail := uint32(0)
		if errors.As(err, &pe) {
			detail = uint32(pe.Word)
		}
		x.fail(r.ID, r.Slot, ringbuf.CodeBadParams, detail)
		return
	}
	p := pl.Params
	if (x.lim.Context > 0 && int64(p.StartPos) > int64(x.lim.Context)) || len(pl.Hist) > int(p.StartPos) {
		x.fail(r.ID, r.Slot, ringbuf.CodeBadParams, ringbuf.SPOffStartPos)
		return
	}
	// Decode into the slot's own stop and EOS buffers (and the
	// executor's history buffer): an OPEN reuses what the last one grew.
	o := &x.openBuf
	*o = ringbuf.SlotOpen{EOS: s.eos[:0], Hist: x.hist[:0]}
	o.Params.StopTokens = s.stop[:0]
	pl.Open(o)
	// The stop ids are the executor's to match, not the sampler's, and
	// the CUDA kernel does not check them against the vocabulary either:
	// an id outside it never matches. Every device refuses the same
	// parameters, those that pick tokens without a sampler too.
	sp := o.Params
	sp.StopTokens = nil
	if err := sp.Validate(x.vocab); err != nil {
		detail, _ := pl.ParamWord(err, x.vocab)
		x.fail(r.ID, r.Slot, ringbuf.CodeBadParams, detail)
		x.hist, *o = o.Hist[:0], ringbuf.SlotOpen{}
		return
	}
	var sm *sample.Sampler
	if x.picker == nil {
		// Validated above, so New takes sp.
		if sm, err = sample.New(sp, x.vocab); err != nil {
			x.fail(r.ID, r.Slot, ringbuf.CodeBadParams, 0)
			x.hist, *o = o.Hist[:0], ringbuf.SlotOpen{}
			return
		}
		for i, t := range o.Hist {
			pos := o.StartPos - len(o.Hist) + i
			sm.Observe(t, o.PromptLen > 0 && pos >= o.PromptLen)
		}
	}
	// Size the block table for the whole sequence once, so GRANTs never
	// grow it step by step.
	if need := (o.PromptLen+o.Params.MaxTokens)/x.blockSize + 2; cap(s.blocks) < need {
		s.blocks = make([]int32, 0, need)
	}
	*s = slot{open: true, pos: o.StartPos, promptLen: o.PromptLen, last: -1, blocks: s.blocks[:0], sampler: sm, seed: o.Params.Seed,
		maxTokens: o.Params.MaxTokens, ignoreEOS: o.IgnoreEOS, logprobs: o.Params.Logprobs, nTop: o.Params.TopLogprobs,
		eos: o.EOS, stop: o.Params.StopTokens}
	// Keep the history buffer; drop the references to the slot's lists
	// and the biases, which the slot and the sampler own now.
	x.hist, *o = o.Hist[:0], ringbuf.SlotOpen{}
}

func (x *Executor) step(r *ringbuf.SubmitRecord) {
	startNS := x.now()
	w, ok := x.payload(r)
	if !ok {
		x.emit(&ringbuf.Completion{Kind: ringbuf.KindStepDone, Step: r.ID, StartNS: startNS, EndNS: x.now()})
		return
	}
	// A payload that is not n entries, or whose totals disagree with the
	// record's, is refused whole, before any entry runs.
	n := int(r.Slot)
	var e ringbuf.StepEntry
	valid := uint64(r.Slot)*ringbuf.StepEntryWords == uint64(len(w))
	if valid {
		var tokens uint64
		var samples uint32
		for i := 0; i < n; i++ {
			e.Get(w[i*ringbuf.StepEntryWords:])
			tokens += uint64(e.NTokens)
			if e.Flags&ringbuf.EntrySample != 0 {
				samples++
			}
		}
		valid = tokens == uint64(r.StepTokens) && samples == r.StepSample &&
			(x.lim.MaxStepTokens <= 0 || tokens <= uint64(x.lim.MaxStepTokens))
	}
	if !valid {
		x.fail(r.ID, ringbuf.NoSlot, ringbuf.CodeBadPayload, r.PayloadOff)
		x.emit(&ringbuf.Completion{Kind: ringbuf.KindStepDone, Step: r.ID, StartNS: startNS, EndNS: x.now()})
		return
	}
	x.batch, x.samples, x.toks = x.batch[:0], x.samples[:0], x.toks[:0]
	bs := x.blockSize
	// Gather the tokens first (their backing store is reused per step).
	spans := x.spans[:0]
	for i := 0; i < n; i++ {
		e.Get(w[i*ringbuf.StepEntryWords:])
		if int(e.Slot) >= len(x.slots) {
			x.fail(r.ID, e.Slot, ringbuf.CodeBadSlot, e.Slot)
			continue
		}
		s := &x.slots[e.Slot]
		if !s.open {
			x.fail(r.ID, e.Slot, ringbuf.CodeSlotState, uint32(ringbuf.OpStep))
			continue
		}
		if s.finished {
			x.emit(&ringbuf.Completion{Kind: ringbuf.KindSkipped, Slot: e.Slot, Step: r.ID})
			continue
		}
		// The checks in the order ringbuf/PROTOCOL.md gives ("What a device
		// does", STEP); an entry's error fails its slot (later entries are
		// SKIPPED until the host closes it).
		feedback := e.TokenOff == ringbuf.TokenOffFeedback
		var run []uint32
		if feedback {
			if e.NTokens != 1 || s.last < 0 {
				x.failEntry(r.ID, e.Slot, ringbuf.CodeNoFeedback, e.NTokens)
				continue
			}
		} else if run = x.arena.Staging.Words(e.TokenOff, e.NTokens); e.NTokens == 0 || run == nil {
			x.failEntry(r.ID, e.Slot, ringbuf.CodeBadPayload, e.TokenOff)
			continue
		}
		last := s.pos + int(e.NTokens) - 1
		if last/bs >= len(s.blocks) || (x.lim.Context > 0 && last >= x.lim.Context) {
			x.failEntry(r.ID, e.Slot, ringbuf.CodeNoBlock, uint32(last))
			continue
		}
		lo := len(x.toks)
		if feedback {
			x.toks = append(x.toks, s.last)
		} else {
			bad := false
			for _, t := range run {
				if uint64(t) >= uint64(x.vocab) {
					x.failEntry(r.ID, e.Slot, ringbuf.CodeBadToken, t)
					bad = true
					break
				}
				x.toks = append(x.toks, int32(t))
			}
			if bad {
				x.toks = x.toks[:lo]
				continue
			}
		}
		spans = append(spans, span{lo, len(x.toks)})
		ent := Entry{Slot: int(e.Slot), Pos: s.pos, Blocks: s.blocks}
		if e.Flags&ringbuf.EntrySample != 0 {
			x.samples = append(x.samples, len(x.batch))
		}
		x.batch = append(x.batch, ent)
		if !feedback && s.sampler != nil {
			for i, t := range x.toks[lo:] {
				s.sampler.Observe(t, s.promptLen > 0 && s.pos+i >= s.promptLen)
			}
		}
		s.pos += int(e.NTokens)
	}
	for i := range x.batch {
		x.batch[i].Tokens = x.toks[spans[i].lo:spans[i].hi]
	}
	x.spans = spans
	executed := len(x.batch)
	if len(x.batch) > 0 {
		if x.picker == nil {
			for len(x.logits) < len(x.samples) {
				x.logits = append(x.logits, make([]float32, x.vocab))
			}
			for j, i := range x.samples {
				x.batch[i].Logits = x.logits[j]
			}
		}
		if err := x.be.Forward(x.batch); err != nil {
			// Nothing ran: every entry fails, and so does its slot.
			for _, ent := range x.batch {
				x.failEntry(r.ID, uint32(ent.Slot), ringbuf.CodeDevice, 0)
			}
			x.samples = x.samples[:0]
			executed = 0
		}
	}
	for _, i := range x.samples {
		ent := &x.batch[i]
		s := &x.slots[ent.Slot]
		var tok int32
		var lp float32
		var top []sample.TokenLogprob
		if x.picker != nil {
			tok = x.picker.Pick(ent.Slot, s.seed, s.pos)
			if s.nTop > 0 {
				x.top = PickerTop(x.top[:0], tok, s.nTop, x.vocab)
				top = x.top
			}
		} else {
			if !anyFinite(ent.Logits) {
				x.failEntry(r.ID, uint32(ent.Slot), ringbuf.CodeNonFinite, uint32(s.pos))
				continue
			}
			// res.Top aliases the sampler's memory, which stays untouched
			// until its next Sample: after the records below are written.
			res := s.sampler.Sample(ent.Logits, s.pos)
			tok, lp, top = res.Token, res.Logprob, res.Top
			s.sampler.Observe(tok, true)
		}
		s.last = tok
		s.sampled++
		fin := ringbuf.FinishNone
		switch {
		case (!s.ignoreEOS && contains(s.eos, tok)) || contains(s.stop, tok):
			fin = ringbuf.FinishStop
		case s.maxTokens > 0 && s.sampled >= s.maxTokens:
			fin = ringbuf.FinishLength
		}
		if fin != ringbuf.FinishNone {
			s.finished = true
		}
		if !s.logprobs {
			lp = 0
		}
		x.emitToken(uint32(ent.Slot), r.ID, uint32(tok), lp, fin, uint32(s.pos))
		if s.nTop > 0 {
			x.emitTop(r.ID, uint32(ent.Slot), top)
		}
	}
	x.emit(&ringbuf.Completion{Kind: ringbuf.KindStepDone, Slot: uint32(executed), Step: r.ID, StartNS: startNS, EndNS: x.now()})
}

// emitTop writes a token's alternatives right after its TOKEN, two per
// TOP_LOGPROBS record; an odd count leaves the last record's second pair
// unused (TopNone, 0). No alternatives, no record.
func (x *Executor) emitTop(id uint64, slot uint32, top []sample.TokenLogprob) {
	for i := 0; i < len(top); i += ringbuf.TopPerRecord {
		c := ringbuf.Completion{Kind: ringbuf.KindTopLogprobs, Slot: slot, Step: id}
		for j := range c.Top {
			c.Top[j] = ringbuf.TopLogprob{Token: ringbuf.TopNone}
			if i+j < len(top) {
				c.Top[j] = ringbuf.TopLogprob{Token: uint32(top[i+j].Token), Logprob: top[i+j].Logprob}
			}
		}
		x.emit(&c)
	}
}

// anyFinite reports whether a row holds a logit that is neither NaN nor
// ±Inf (v-v is 0 only for those). A row without one (NaN weights, an
// overflow) is no distribution: the sampler would answer token 0 as if
// it had been chosen, so the entry fails with NON_FINITE instead. A
// sound row answers at its first logit.
func anyFinite(logits []float32) bool {
	for _, v := range logits {
		if v-v == 0 {
			return true
		}
	}
	return false
}

func contains(s []int32, t int32) bool {
	for _, v := range s {
		if v == t {
			return true
		}
	}
	return false
}

// BlockSizer is implemented by backends whose KV block size is not the
// default.
type BlockSizer interface{ BlockSize() int }

func (x *Executor) now() uint64 { return uint64(time.Since(x.start).Nanoseconds()) }

// String describes the executor for logs.
func (x *Executor) String() string {
	return fmt.Sprintf("executor(%d slots, %d blocks, vocab %d)", len(x.slots), x.numBlocks, x.vocab)
}
