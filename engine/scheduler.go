package engine

import (
	"runtime"
	"slices"
	"time"

	"ringlm/ringbuf"
	"ringlm/sample"
)

// The engine loop: one goroutine owns every seq, the block manager's
// allocation decisions and the host side of both rings. Each turn it
// drains completions, takes new requests and cancellations, and keeps up
// to PipelineDepth steps queued on the device.

// pollEvery bounds how long the loop sleeps without a doorbell while the
// device owes it an answer (owed); an idle loop parks without a timer.
const pollEvery = 2 * time.Millisecond

func (e *Engine) loop() {
	defer close(e.loopDone)
	defer e.stopTracing()
	var c ringbuf.Completion
	timer := time.NewTimer(pollEvery)
	defer timer.Stop()
	for !e.stopped {
		progress := false
		if g := e.traceGen.Load(); g != e.traceSeen {
			e.switchTracer(g)
		}
		e.now = sinceEpoch()
		// Read every published completion, then release them with one store.
		for _, rec, ok := e.arena.Completion.Next(); ok; _, rec, ok = e.arena.Completion.Next() {
			c.Get(rec)
			e.handle(&c)
			progress = true
		}
		if progress {
			e.arena.Completion.Done()
		}
		// The stats before deliver wakes the readers: a client that got its
		// last token sees it counted (httpapi TestMetrics saw 7 of 10 once).
		if e.genDelta > 0 {
			e.statsMu.Lock()
			e.stats.GeneratedTokens += e.genDelta
			e.statsMu.Unlock()
			e.genDelta = 0
		}
		e.deliver()
		if e.takeInbox() {
			progress = true
		}
		e.flushCtrl()
		if len(e.fences) > 0 {
			e.releaseFences()
		}
		if e.closingSeen {
			if len(e.running) == 0 && e.inflight == 0 && len(e.ctrl) == 0 && len(e.fences) == 0 && !e.stopSent {
				e.hostSeq++
				if _, ok := e.arena.PushSubmit(&ringbuf.SubmitRecord{Op: ringbuf.OpStop, ID: e.hostSeq}); ok {
					e.stopSent = true
					e.dev.Notify()
				}
			}
		} else {
			for e.inflight < e.cfg.PipelineDepth && len(e.ctrl) == 0 {
				if e.tr == nil {
					if !e.schedule() {
						break
					}
				} else if !e.scheduleTraced() {
					break
				}
				progress = true
			}
		}
		e.publishStats()
		if e.tr != nil {
			e.tr.flush()
		}
		if progress {
			continue
		}
		if e.inflight > 0 && e.spin() {
			continue
		}
		if e.owed() {
			timer.Reset(pollEvery)
			select {
			case <-e.dev.Doorbell():
			case <-e.wake:
			case <-timer.C:
			}
			continue
		}
		// Idle: the device owes nothing, so only Submit, a cancel, Close,
		// SetTracer (wake) or a device that answers unasked (a fault's
		// responder rings) can make work. A signal left from work already
		// done would wake the park at once: drop it and look once more.
		if e.dropSignals() {
			continue
		}
		e.parked.Store(true)
		e.parks.Add(1)
		select {
		case <-e.dev.Doorbell():
		case <-e.wake:
		}
		e.parked.Store(false)
	}
}

// owed reports whether the device owes the loop something it may not
// ring the doorbell for: the answer to a step, a CLOSE_SLOT or a STOP,
// room in the submit ring (CLOSE_SLOTs waiting for it), the consumption
// a failed OPEN's fence waits for, or records not yet consumed. While it
// does, the loop also polls every pollEvery; when it does not, it parks
// without a timer, so an idle server costs no CPU.
func (e *Engine) owed() bool {
	if e.inflight > 0 || len(e.ctrl) > 0 || len(e.fences) > 0 || (e.closingSeen && !e.stopped) ||
		e.arena.Submit.Produced() != e.arena.Submit.Consumed() {
		return true
	}
	for _, s := range e.running {
		if s.closing {
			return true // its SLOT_CLOSED
		}
	}
	return false
}

// dropSignals empties the doorbell and wake channels and reports whether
// either held a signal.
func (e *Engine) dropSignals() bool {
	got := false
	for {
		select {
		case <-e.dev.Doorbell():
			got = true
		case <-e.wake:
			got = true
		default:
			return got
		}
	}
}

// spinFor is how long the loop polls the completion ring while steps are
// in flight before it parks: a step's answer usually comes sooner, and a
// futex wake-up per step costs more than the poll.
const spinFor = 30 * time.Microsecond

func (e *Engine) spin() bool {
	deadline := time.Now().Add(spinFor)
	for time.Now().Before(deadline) {
		if e.arena.Completion.Produced() != e.arena.Completion.Consumed() {
			return true
		}
		runtime.Gosched()
	}
	return false
}

// takeInbox moves new requests to the queue and applies cancellations.
func (e *Engine) takeInbox() bool {
	e.inMu.Lock()
	in, cancels, closing := e.inbox, e.cancels, e.closing
	e.inbox, e.cancels = nil, nil
	e.inMu.Unlock()
	e.closingSeen = closing
	for _, s := range in {
		e.waiting = append(e.waiting, s)
	}
	if e.tr != nil && len(in) > 0 {
		e.tr.queued(in)
	}
	for _, s := range cancels {
		e.cancelSeq(s, FinishCancelled, ErrCancelled)
	}
	if closing {
		for _, s := range slices.Clone(e.waiting) {
			e.cancelSeq(s, FinishCancelled, ErrClosed)
		}
		for _, s := range slices.Clone(e.running) {
			e.cancelSeq(s, FinishCancelled, ErrClosed)
		}
	}
	return len(in) > 0 || len(cancels) > 0
}

func (e *Engine) cancelSeq(s *seq, f Finish, err error) {
	switch {
	case s.state == Queued || s.state == Preempted:
		if i := slices.Index(e.waiting, s); i >= 0 {
			e.waiting = slices.Delete(e.waiting, i, i+1)
		}
		s.state = Cancelled
		e.endStream(s, f, err)
		e.countDone(false)
	case s.slot >= 0 && !s.closing:
		s.requeue = false
		s.state = Cancelled
		e.endStream(s, f, err)
		e.countDone(false)
		e.close(s)
	case s.slot >= 0 && s.requeue:
		// Preempted and closing: it must not come back.
		s.requeue = false
		s.state = Cancelled
		e.endStream(s, f, err)
		e.countDone(false)
	}
}

// ctrl holds control records (CLOSE_SLOT) waiting for room in the ring.
func (e *Engine) close(s *seq) {
	s.closing = true
	e.hostSeq++
	e.ctrl = append(e.ctrl, ringbuf.SubmitRecord{Op: ringbuf.OpCloseSlot, Slot: uint32(s.slot), ID: e.hostSeq})
}

func (e *Engine) flushCtrl() {
	pushed := false
	for len(e.ctrl) > 0 {
		if _, ok := e.arena.StageSubmit(&e.ctrl[0]); !ok {
			break
		}
		e.ctrl = e.ctrl[1:]
		pushed = true
	}
	if pushed {
		e.arena.Submit.Publish()
		e.dev.Notify()
	}
}

func (e *Engine) handle(c *ringbuf.Completion) {
	if e.topOpen != nil && c.Kind != ringbuf.KindTopLogprobs {
		e.closeTop()
	}
	var s *seq
	if c.Kind != ringbuf.KindStepDone && c.Kind != ringbuf.KindStopped && int(c.Slot) < len(e.bySlot) {
		s = e.bySlot[c.Slot]
	}
	switch c.Kind {
	case ringbuf.KindToken:
		if s == nil || s.closing {
			return // after a cancel, stop or preemption: a recompute regenerates it
		}
		s.generated++
		s.tokens = append(s.tokens, int32(c.Token))
		e.genDelta++
		if e.tr != nil {
			e.tr.token(s, c.Step, c.Position, c.Token, e.now)
		}
		if s.nTop > 0 {
			if len(s.pending) == 0 {
				e.dirty = append(e.dirty, s)
			}
			e.tokenWithTop(s, c)
			return
		}
		e.put(s.stream, Token{ID: int32(c.Token), Logprob: c.Logprob, Pos: int(c.Position), at: e.now})
		switch c.Finish {
		case ringbuf.FinishStop:
			e.finish(s, FinishStop)
		case ringbuf.FinishLength:
			e.finish(s, FinishLength)
		default:
			if s.generated >= s.maxTokens {
				e.finish(s, FinishLength)
			}
		}
	case ringbuf.KindTopLogprobs:
		// A dropped TOKEN's records are dropped too: topOpen is the
		// sequence of the last TOKEN taken.
		if s == nil || s != e.topOpen || len(s.pending) == 0 {
			return
		}
		l := s.pending[len(s.pending)-1].top
		for _, p := range c.Top {
			if p.Token != ringbuf.TopNone && len(*l) < cap(*l) {
				*l = append(*l, sample.TokenLogprob{Token: int32(p.Token), Logprob: p.Logprob})
			}
		}
	case ringbuf.KindStepDone:
		e.unlock() // the step's tokens are visible to readers from here
		e.inflight--
		for _, s := range e.stepRegs[c.Step] {
			if s.slot >= 0 {
				full := s.nPrompt / e.cfg.BlockSize
				_ = e.blocks.Register(s.blocks[:min(full, len(s.blocks))], s.tokens[:full*e.cfg.BlockSize])
			}
		}
		delete(e.stepRegs, c.Step)
		e.statsMu.Lock()
		e.stats.Steps++
		e.stats.LastStepNS = c.EndNS - c.StartNS
		e.stats.StepNSTotal += c.EndNS - c.StartNS
		e.statsMu.Unlock()
		if e.cfg.StepHook != nil {
			e.cfg.StepHook(c.Step, int(c.Slot), c.StartNS, c.EndNS)
		}
		if e.tr != nil {
			e.tr.stepDone(c.Step, c.Slot, c.StartNS, c.EndNS)
		}
	case ringbuf.KindSlotClosed:
		if s != nil {
			e.slotClosed(s)
		}
	case ringbuf.KindSkipped:
	case ringbuf.KindError:
		e.log.Error().Str("code", c.Code.String()).Uint32("detail", c.Detail).Uint32("slot", c.Slot).Uint64("step", c.Step).Msg("device error")
		if s == nil {
			return
		}
		if !s.closing {
			s.state = Failed
			err := errorf("%w: %s (detail %d)", ErrDevice, c.Code, c.Detail)
			if c.Code == ringbuf.CodeNonFinite {
				err = errorf("%w at position %d", ErrNonFinite, c.Detail)
			}
			e.endStream(s, FinishError, err)
			e.countDone(true)
		}
		switch {
		case c.Step == s.openID && !s.fenced:
			// The OPEN itself failed: the device never opened the slot, so
			// no CLOSE can be acknowledged. Free the slot once the device
			// has consumed every record already queued for it.
			s.closing, s.requeue, s.fenced = true, false, true
			e.fences = append(e.fences, fence{s, e.arena.Submit.Produced()})
		case !s.closing && c.Code != ringbuf.CodeSlotState && c.Code != ringbuf.CodeBadSlot:
			e.close(s)
		}
	case ringbuf.KindStopped:
		e.stopped = true
	}
}

// releaseFences frees the slots of failed OPENs once the device is past
// every record that named them.
func (e *Engine) releaseFences() {
	done := e.arena.Submit.Consumed()
	kept := e.fences[:0]
	for _, f := range e.fences {
		if done >= f.index {
			e.slotClosed(f.s)
		} else {
			kept = append(kept, f)
		}
	}
	e.fences = kept
}

type fence struct {
	s     *seq
	index uint64
}

// slotClosed returns a closed slot and its KV blocks, and requeues a
// preempted sequence.
func (e *Engine) slotClosed(s *seq) {
	if err := e.blocks.Release(s.blocks); err != nil {
		e.log.Error().Err(err).Str("request_id", s.req.ID).Msg("releasing KV blocks")
	}
	e.bySlot[s.slot] = nil
	e.freeSlots = append(e.freeSlots, s.slot)
	if i := slices.Index(e.running, s); i >= 0 {
		e.running = slices.Delete(e.running, i, i+1)
	}
	s.slot, s.blocks, s.granted, s.computed, s.samples, s.closing = -1, nil, 0, 0, 0, false
	if s.requeue {
		s.requeue = false
		s.state = Preempted
		e.waiting = slices.Insert(e.waiting, 0, s)
		if e.tr != nil {
			e.tr.preempted(s, e.now)
		}
	}
}

// tokenWithTop takes a TOKEN of a sequence that asked for alternatives:
// its TOP_LOGPROBS records follow, and the token is complete (may be
// delivered, may finish the sequence) only at the next record of another
// kind (closeTop).
func (e *Engine) tokenWithTop(s *seq, c *ringbuf.Completion) {
	s.pending = append(s.pending, Token{ID: int32(c.Token), Logprob: c.Logprob, Pos: int(c.Position), at: e.now,
		top: s.topList()})
	e.topOpen, s.pendFin = s, 0
	switch {
	case c.Finish == ringbuf.FinishStop:
		s.pendFin = finStop
	case c.Finish == ringbuf.FinishLength || s.generated >= s.maxTokens:
		s.pendFin = finLength
	}
}

// closeTop ends the alternatives of the last TOKEN taken: the next
// record is of another kind. A finish that waited for them happens now,
// unless the sequence was cancelled meanwhile.
func (e *Engine) closeTop() {
	s := e.topOpen
	e.topOpen = nil
	fin := s.pendFin
	s.pendFin = 0
	if fin == 0 || s.closing || s.slot < 0 {
		return
	}
	if fin == finStop {
		e.finish(s, FinishStop)
	} else {
		e.finish(s, FinishLength)
	}
}

// deliver hands the tokens collected in this drain (those of sequences
// that asked for alternatives) to their streams and wakes the readers
// that wait. The last token of topOpen stays: its alternatives may still
// come (the device published part of a step).
func (e *Engine) deliver() {
	if e.topOpen != nil {
		e.deliverHolding()
		return
	}
	for _, s := range e.dirty {
		if len(s.pending) > 0 {
			e.handOver(s.stream, s.pending)
			s.pending = s.pending[:0]
		}
	}
	e.handedOver()
	e.dirty = e.dirty[:0]
}

// put appends a token to st, and handOver tokens. They keep st's lock
// after them, so that the next streams of the same lock (requests
// submitted one after another are usually adjacent in the batch) cost no
// lock operation of their own. The lock is let go at the next STEP_DONE
// (the step's tokens are visible to readers from then), at the end of
// the drain and before a stream ends; the readers that wait are woken at
// the end of the drain (handedOver). Only the tokens that wait for their
// alternatives (TOP_LOGPROBS) go through seq.pending and handOver; the
// others go from their completion record straight into the stream: the
// batch-256 null step with one drainer is 15-20% faster than when every
// token was collected in pending first; with a reader per request, which
// now finds tokens sooner and so looks more often, it is about 6% slower
// (on the 2-vCPU development VM, where 256 readers share a core).
func (e *Engine) put(st *Stream, t Token) {
	e.lock(st)
	if st.putLocked(t) {
		e.wakes = append(e.wakes, st)
	}
}

func (e *Engine) handOver(st *Stream, toks []Token) {
	e.lock(st)
	if st.deliverLocked(toks) {
		e.wakes = append(e.wakes, st)
	}
}

func (e *Engine) lock(st *Stream) {
	if st.mu != e.held {
		e.unlock()
		e.held = st.mu
		e.held.Lock()
	}
}

// unlock releases the lock put and handOver hold, if any. The readers to
// wake wait for handedOver: one wake-up per drain, not one per step.
func (e *Engine) unlock() {
	if e.held != nil {
		e.held.Unlock()
		e.held = nil
	}
}

// endStream ends s's stream; the engine must not hold its lock then.
func (e *Engine) endStream(s *seq, f Finish, err error) {
	e.handedOver()
	s.stream.end(f, err)
	if e.tr != nil {
		e.tr.end(s)
	}
}

func (e *Engine) handedOver() {
	e.unlock()
	for _, st := range e.wakes {
		st.wake()
	}
	clear(e.wakes)
	e.wakes = e.wakes[:0]
}

// deliverHolding is deliver while topOpen's last token waits for its
// alternatives: it stays pending, and topOpen stays dirty.
func (e *Engine) deliverHolding() {
	hold := e.topOpen
	kept := e.dirty[:0]
	for _, s := range e.dirty {
		if s != hold || len(s.pending) == 0 {
			if len(s.pending) > 0 {
				e.handOver(s.stream, s.pending)
				s.pending = s.pending[:0]
			}
			continue
		}
		n := len(s.pending) - 1
		if n > 0 {
			e.handOver(s.stream, s.pending[:n])
		}
		s.pending = append(s.pending[:0], s.pending[n])
		kept = append(kept, s)
	}
	e.handedOver()
	e.dirty = kept
}

func (e *Engine) finish(s *seq, f Finish) {
	s.state = Finished
	e.deliver() // the stream's last tokens come before its end
	e.endStream(s, f, nil)
	e.countDone(false)
	e.close(s)
}

func (e *Engine) countDone(failed bool) {
	e.statsMu.Lock()
	e.stats.RequestsDone++
	if failed {
		e.stats.Failed++
	}
	e.statsMu.Unlock()
}

// publishStats copies the queue lengths for Stats, only when they changed.
func (e *Engine) publishStats() {
	r, w := len(e.running), len(e.waiting)
	if r == e.pubRunning && w == e.pubWaiting {
		return
	}
	e.pubRunning, e.pubWaiting = r, w
	e.statsMu.Lock()
	e.stats.Running, e.stats.Waiting = r, w
	e.statsMu.Unlock()
}
