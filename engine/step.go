package engine

import (
	"fmt"
	"slices"
	"time"

	"ringlm/ringbuf"
)

// What goes into the ring for one step. Planning happens in host memory
// first (which sequences, how many tokens, which blocks), then the records
// are emitted in order: OPEN_SLOT and GRANT_BLOCKS records, each with its
// staging payload allocated right before it is pushed (a staging run is
// reclaimed once the device consumes the record pushed after it was
// allocated), then the STEP with its entries and prompt tokens.

type plannedEntry struct {
	s      *seq
	n      int  // tokens
	from   int  // first token index in s.tokens (prefill); -1 for feedback
	sample bool // sample after the last token
}

type stepScratch struct {
	entries []plannedEntry
	opens   []*seq
	grows   []*seq
	regs    []*seq
	open    ringbuf.SlotOpen // emit's OPEN_SLOT being encoded
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// schedule plans and submits one step. It returns false when there is
// nothing to run or no room in the rings.
func (e *Engine) schedule() bool {
	a := e.arena
	a.Staging.Release(a.Submit.Consumed())
	// Room: every record this step could need, and staging words for the
	// largest step, counted generously (runs are contiguous).
	if a.Submit.Space() < 2*e.cfg.Slots+2 {
		return false
	}
	words := (a.Staging.Cap() - a.Staging.Used()) / 2
	sc := &e.scratch
	sc.entries, sc.opens, sc.grows, sc.regs = sc.entries[:0], sc.opens[:0], sc.grows[:0], sc.regs[:0]
	budget := e.cfg.TokenBudget
	words -= ringbuf.StepEntryWords * e.cfg.Slots

	// 1. Decode: every running sequence whose prompt is submitted gets one
	// fed-back token, as long as it still has tokens to sample.
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		if s.state != Decoding || s.closing || s.pendFin != 0 || s.samples >= s.maxTokens-s.openGen {
			continue
		}
		if !e.grow(s, s.computed+1, &words) {
			continue
		}
		sc.entries = append(sc.entries, plannedEntry{s: s, n: 1, from: -1, sample: true})
		s.computed++
		s.samples++
		budget--
	}
	// 2. Prefill chunks of sequences already admitted.
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		if s.state == Prefilling && !s.closing {
			e.planChunk(s, &budget, &words)
		}
	}
	// 3. Admit waiting sequences, first come first served.
	for len(e.waiting) > 0 && len(e.freeSlots) > 0 && budget > 0 {
		s := e.waiting[0]
		if !e.admit(s, &words) {
			break
		}
		e.waiting = e.waiting[1:]
		e.planChunk(s, &budget, &words)
	}
	if len(sc.entries) == 0 && len(sc.opens) == 0 {
		return false
	}
	e.emit()
	return true
}

// grow makes sure s's block table covers positions [0, upto), allocating
// blocks or, when the pool is dry, preempting the most recently admitted
// other sequence. It returns false if s must wait.
func (e *Engine) grow(s *seq, upto int, words *int) bool {
	bs, have := e.cfg.BlockSize, len(s.blocks)
	if upto <= have*bs { // every decode step asks; a division costs here
		return true
	}
	need := (upto+bs-1)/bs - have
	if *words < need+8 {
		return false
	}
	blocks, err := e.blocks.AllocateAppend(s.blocks, need)
	if err != nil {
		e.preemptFor(s)
		return false
	}
	if s.granted == have {
		// Every block it had is granted, so it is not listed yet.
		e.scratch.grows = append(e.scratch.grows, s)
	}
	s.blocks = blocks
	*words -= need
	return true
}

// preemptFor frees KV memory for s by closing the newest running sequence
// (not s, unless s is alone) and queueing it for recompute. The blocks come
// back when the device acknowledges the close.
func (e *Engine) preemptFor(s *seq) {
	for _, r := range e.running {
		if r.closing && r.requeue {
			return // a preemption is already freeing memory
		}
	}
	for i := len(e.running) - 1; i >= 0; i-- {
		v := e.running[i]
		// A sequence whose finish waits for its last alternatives is done.
		if v == s || v.closing || v.pendFin != 0 || slices.ContainsFunc(e.scratch.entries, func(p plannedEntry) bool { return p.s == v }) {
			continue
		}
		v.requeue = true
		v.stream.mu.Lock()
		v.stream.timeline.Preempted++
		v.stream.mu.Unlock()
		e.statsMu.Lock()
		e.stats.Preemptions++
		e.statsMu.Unlock()
		e.close(v)
		return
	}
}

// planChunk adds the next prompt chunk of s to the step.
func (e *Engine) planChunk(s *seq, budget, words *int) {
	rest := len(s.tokens) - s.computed
	n := min(rest, e.cfg.PrefillChunk, *budget, *words-8)
	if n <= 0 {
		return
	}
	if !e.grow(s, s.computed+n, words) {
		return
	}
	last := n == rest
	e.scratch.entries = append(e.scratch.entries, plannedEntry{s: s, n: n, from: s.computed, sample: last})
	s.computed += n
	*budget -= n
	*words -= n
	s.stream.mu.Lock()
	s.stream.timeline.Chunks = append(s.stream.timeline.Chunks, time.Now())
	s.stream.mu.Unlock()
	if last {
		s.state = Decoding
		s.samples++
		if s.register {
			e.scratch.regs = append(e.scratch.regs, s)
			s.register = false
		}
	}
}

// admit gives s a slot: prefix-cache match, KV blocks for its whole
// prompt available, an OPEN_SLOT planned. False: s must keep waiting.
func (e *Engine) admit(s *seq, words *int) bool {
	bs := e.cfg.BlockSize
	need := (len(s.tokens)+1+bs-1)/bs + 1
	p := &s.req.Params
	payload := ringbuf.SlotPayloadWords(len(p.StopTokens), len(p.LogitBias), e.histLen(s, len(s.tokens)))
	if *words < payload+need+16 {
		return false
	}
	var matched []int32
	cached := 0
	if e.cfg.PrefixCache {
		matched, cached = e.blocks.Match(s.tokens)
	}
	if e.blocks.Free() < need-len(matched) {
		if len(matched) > 0 {
			_ = e.blocks.Release(matched)
		}
		return false
	}
	*words -= payload
	slot := e.freeSlots[len(e.freeSlots)-1]
	e.freeSlots = e.freeSlots[:len(e.freeSlots)-1]
	// The table's capacity covers the whole request, so growing it per
	// block never allocates.
	table := make([]int32, len(matched), (s.nPrompt+s.maxTokens+bs-1)/bs+1)
	copy(table, matched)
	// Likewise the history, sized once, here rather than at Submit so
	// that queued requests hold only their prompts.
	if n := s.nPrompt + s.maxTokens; cap(s.tokens) < n {
		s.tokens = append(newHistory(n), s.tokens...)
	}
	s.slot, s.blocks, s.granted, s.computed, s.samples, s.cached = slot, table, 0, cached, 0, cached
	s.openGen = s.generated
	s.state = Prefilling
	s.register = e.cfg.PrefixCache && s.generated == 0
	e.bySlot[slot] = s
	e.running = append(e.running, s)
	if len(matched) > 0 {
		e.scratch.grows = append(e.scratch.grows, s)
	}
	e.scratch.opens = append(e.scratch.opens, s)
	s.stream.mu.Lock()
	if s.stream.timeline.Scheduled.IsZero() {
		s.stream.timeline.Scheduled = time.Now()
		s.stream.timeline.CachedToks = cached
	}
	s.stream.mu.Unlock()
	e.statsMu.Lock()
	e.stats.CachedTokens += uint64(cached)
	e.statsMu.Unlock()
	return true
}

// newHistory returns an empty token history with room for n tokens, its
// memory touched. Go zeroes a large array at allocation when its memory
// was used before, but not when the memory is fresh from the OS: then
// each page is faulted in at its first store, during decode, and at
// batch 256 on this VM those faults (one per 1024 tokens of each
// sequence) were a quarter of the null device's step time. Touching a
// word per page here makes fresh memory cost what reused memory does,
// at admission.
func newHistory(n int) []int32 {
	h := make([]int32, n)
	if n*4 >= 32<<10 { // smaller arrays share pages with other objects
		for i := 0; i < n; i += 4096 / 4 {
			h[i] = 0
		}
	}
	return h[:0]
}

// histLen is how many tokens before start the repetition penalty's window
// reaches (the device never sees them when they come from the cache).
func (e *Engine) histLen(s *seq, start int) int {
	n := s.req.Params.RepeatLastN
	if s.req.Params.RepeatPenalty == 1 || n == 0 {
		return 0
	}
	if n < 0 || n > start {
		return start
	}
	return n
}

// emit pushes the planned records. Room was checked by schedule.
func (e *Engine) emit() {
	a := e.arena
	sc := &e.scratch
	for _, s := range sc.opens {
		// The device samples what is left of the budget: a preempted
		// sequence reopens with what it generated already fed back.
		o := &sc.open
		*o = ringbuf.SlotOpen{Params: s.req.Params, IgnoreEOS: s.req.IgnoreEOS, EOS: e.cfg.EOS,
			StartPos: s.cached, PromptLen: s.nPrompt}
		o.Params.MaxTokens = s.maxTokens - s.generated
		h := e.histLen(s, s.cached)
		o.Hist = s.tokens[s.cached-h : s.cached]
		n := o.Words()
		off, buf, _ := a.AllocStaging(n)
		o.Put(buf)
		// The scratch (reused so that an OPEN allocates nothing) must not
		// keep the request's lists alive.
		*o = ringbuf.SlotOpen{}
		rec := ringbuf.SubmitRecord{Op: ringbuf.OpOpenSlot, Slot: uint32(s.slot), PayloadOff: off, PayloadLen: uint32(n)}
		e.push(&rec)
		s.openID, s.fenced = rec.ID, false
	}
	for _, s := range sc.grows {
		n := len(s.blocks) - s.granted
		if n <= 0 {
			continue
		}
		off, buf, _ := a.AllocStaging(n)
		for i, b := range s.blocks[s.granted:] {
			buf[i] = uint32(b)
		}
		e.push(&ringbuf.SubmitRecord{Op: ringbuf.OpGrantBlocks, Slot: uint32(s.slot), PayloadOff: off, PayloadLen: uint32(n),
			GrantFirst: uint32(s.granted), GrantCount: uint32(n)})
		s.granted = len(s.blocks)
	}
	if len(sc.entries) == 0 {
		a.Submit.Publish()
		e.dev.Notify()
		return
	}
	tokens, samples := 0, 0
	for _, p := range sc.entries {
		tokens += p.n
		if p.sample {
			samples++
		}
	}
	// One run for the entries, then one per prefill chunk: all committed
	// to the STEP record.
	entOff, ents, _ := a.AllocStaging(len(sc.entries) * ringbuf.StepEntryWords)
	for i, p := range sc.entries {
		ent := ringbuf.StepEntry{Slot: uint32(p.s.slot), NTokens: uint32(p.n), TokenOff: ringbuf.TokenOffFeedback}
		if p.sample {
			ent.Flags = ringbuf.EntrySample
		}
		if p.from >= 0 {
			off, buf, _ := a.AllocStaging(p.n)
			toU32(buf[:0], p.s.tokens[p.from:p.from+p.n])
			ent.TokenOff = off
		}
		ent.Put(ents[i*ringbuf.StepEntryWords:])
	}
	// Step ids come from the counter of every other record's id (still
	// strictly increasing), so a completion's id names one record: the
	// ERROR of a failed step is never taken for its slot's failed OPEN.
	e.hostSeq++
	e.stepID = e.hostSeq
	if len(sc.regs) > 0 {
		e.stepRegs[e.stepID] = append([]*seq(nil), sc.regs...)
	}
	e.push(&ringbuf.SubmitRecord{Op: ringbuf.OpStep, Slot: uint32(len(sc.entries)), ID: e.stepID, PayloadOff: entOff,
		PayloadLen: uint32(len(sc.entries) * ringbuf.StepEntryWords), StepTokens: uint32(tokens), StepSample: uint32(samples)})
	e.inflight++
	prompt := tokens - (len(sc.entries) - countPrefill(sc.entries))
	e.statsMu.Lock()
	e.stats.PromptTokens += uint64(prompt)
	e.statsMu.Unlock()
	a.Submit.Publish()
	e.dev.Notify()
}

func countPrefill(es []plannedEntry) int {
	n := 0
	for _, p := range es {
		if p.from >= 0 {
			n++
		}
	}
	return n
}

// push stages r; emit publishes the step's records with one store.
func (e *Engine) push(r *ringbuf.SubmitRecord) {
	if r.Op != ringbuf.OpStep {
		e.hostSeq++
		r.ID = e.hostSeq
	}
	if _, ok := e.arena.StageSubmit(r); !ok {
		// schedule checked the room; a full ring here is a bug.
		panic("engine: submit ring full after the room check")
	}
}

func toU32(dst []uint32, src []int32) []uint32 {
	for _, v := range src {
		dst = append(dst, uint32(v))
	}
	return dst
}
