package cuda

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"ringlm/ringbuf"
)

// The Go side of a running kernel (no cgo here, so the tests drive it with
// a fake kernel):
//
//   - the doorbell: the kernel cannot signal a Go channel, so a goroutine
//     polls the completion ring's producer index and rings the engine's
//     doorbell when it moves (yielding, then sleeping up to 50 µs while
//     steps flow; polling every 2 ms after that while the kernel owes an
//     answer; parked on Notify alone, no timer, when nothing is owed);
//   - the fault path: when the kernel dies (rlm_wait fails) nothing would
//     ever answer the engine's records again and Engine.Close would wait
//     forever for STOPPED. The supervisor takes the device's side of both
//     rings over and answers every outstanding and later record so the
//     engine drains: each running sequence fails with ERROR DEVICE, steps
//     get STEP_DONE, closes get SLOT_CLOSED, STOP gets STOPPED. Wait then
//     returns the CUDA error.
//
// To know which records the dead kernel had answered (it may have released
// a STEP before finishing it, or finished one without releasing it), the
// watcher follows both rings while the kernel runs: the STEP, CLOSE_SLOT and
// STOP records the host publishes, and the STEP_DONE, SLOT_CLOSED and
// STOPPED that answer them. Only inline record fields are read (never
// staging), right after they are published.

const (
	activeFor = 200 * time.Millisecond // keep polling fast this long after progress or Notify
	idlePoll  = 2 * time.Millisecond   // poll period while quiet but an answer is owed
	pollMax   = 50 * time.Microsecond  // longest sleep between polls while active
)

// DetailFault is the ERROR detail of the DEVICE errors the Go side writes
// after the kernel died.
const DetailFault = 0xFA17

type supervisor struct {
	arena    *ringbuf.Arena
	slots    int
	doorbell chan struct{} // engine side
	notify   chan struct{} // Notify pokes it
	epoch    time.Time

	exited  chan struct{} // closed once the kernel has exited
	exitErr error         // why, set before exited closes

	quit     chan struct{}
	quitOnce sync.Once

	done chan struct{} // closed when the supervisor stops touching the arena
	err  error         // what Wait returns, set before done closes

	faulted atomic.Bool
	tr      tracker

	parked atomic.Bool   // the watcher waits for Notify or an exit, with no timer (tests)
	parks  atomic.Uint64 // times it parked so (tests)
}

func newSupervisor(a *ringbuf.Arena, slots int, doorbell, notify chan struct{}) *supervisor {
	s := &supervisor{arena: a, slots: slots, doorbell: doorbell, notify: notify, epoch: time.Now(),
		exited: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	s.tr.init(a)
	return s
}

// kernelExited records how the kernel ended; called once.
func (s *supervisor) kernelExited(err error) {
	s.exitErr = err
	close(s.exited)
}

// stop makes the supervisor give up (the fault responder stops answering).
func (s *supervisor) stop() { s.quitOnce.Do(func() { close(s.quit) }) }

// wait returns once nothing on the Go side touches the arena any more.
func (s *supervisor) wait() error {
	<-s.done
	return s.err
}

func (s *supervisor) hasExited() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

func (s *supervisor) ring() {
	select {
	case s.doorbell <- struct{}{}:
	default:
	}
}

// run is the watcher goroutine.
func (s *supervisor) run() {
	defer close(s.done)
	a := s.arena
	var bo ringbuf.Backoff
	bo.Max = pollMax
	last := a.Completion.Produced()
	active := time.Now()
	timer := time.NewTimer(idlePoll)
	defer timer.Stop()
	for {
		select {
		case <-s.exited:
			s.tr.update()
			s.ring()
			if s.exitErr != nil {
				s.err = s.exitErr
				s.faulted.Store(true)
				s.respond()
				s.ring()
			}
			return
		case <-s.quit:
			return
		default:
		}
		if p := a.Completion.Produced(); p != last {
			last = p
			s.tr.update()
			s.ring()
			bo.Reset()
			active = time.Now()
			continue
		}
		if s.tr.sub != a.Submit.Produced() {
			s.tr.update()
		}
		if time.Since(active) < activeFor {
			bo.Wait()
			continue
		}
		if s.owed(last) {
			timer.Reset(idlePoll)
			select {
			case <-s.notify:
				active = time.Now()
				bo.Reset()
			case <-s.exited:
			case <-s.quit:
			case <-timer.C:
			}
			continue
		}
		// Nothing owed: park with no timer until the engine publishes
		// (Notify) or the kernel exits, so an idle server costs no CPU.
		// A Notify left from records already answered would wake the
		// park at once: take it as new work (the old behaviour) first.
		select {
		case <-s.notify:
			active = time.Now()
			bo.Reset()
			continue
		default:
		}
		s.parked.Store(true)
		s.parks.Add(1)
		select {
		case <-s.notify:
			active = time.Now()
			bo.Reset()
		case <-s.exited:
		case <-s.quit:
		}
		s.parked.Store(false)
	}
}

// owed reports whether the kernel may still publish a completion the
// engine waits for: a record it has not consumed, a STEP, CLOSE_SLOT or
// STOP not answered, or a completion published since last. The kernel
// publishes what a batch of control records answers before it releases
// them, and a STEP stays in the tracker until its STEP_DONE, so when
// nothing is owed no completion can come without a new Notify, except
// at an exit, which the watcher also waits for.
func (s *supervisor) owed(last uint64) bool {
	a := s.arena
	if a.Submit.Consumed() != a.Submit.Produced() {
		return true
	}
	s.tr.update()
	return s.tr.head < len(s.tr.pending) || a.Completion.Produced() != last
}

// tracker follows the records that expect an answer.
type tracker struct {
	mem       []byte
	sl, cl    ringbuf.RingLayout
	subProd   *uint64
	compProd  *uint64
	sub, comp uint64 // next submit / completion index to read
	pending   []pendingRec
	head      int
	answered  uint64 // submit records [0, answered) are known to be answered
	stopped   bool
}

type pendingRec struct {
	index uint64
	op    ringbuf.Op
	id    uint64
	slot  uint32
}

func (t *tracker) init(a *ringbuf.Arena) {
	t.mem, t.sl, t.cl = a.Mem, a.Layout.Submit, a.Layout.Completion
	t.subProd = (*uint64)(unsafe.Pointer(&a.Mem[t.sl.Off+ringbuf.RingOffProd]))
	t.compProd = (*uint64)(unsafe.Pointer(&a.Mem[t.cl.Off+ringbuf.RingOffProd]))
	t.sub = a.Submit.Produced()
	t.comp = a.Completion.Produced()
	t.answered = a.Submit.Consumed()
}

func (t *tracker) record(l ringbuf.RingLayout, i uint64) []byte {
	o := l.Off + ringbuf.RingOffRecords + int(i&uint64(l.Cap-1))*l.RecSize
	return t.mem[o : o+l.RecSize : o+l.RecSize]
}

// update reads every record published since the last call. The completion
// index is loaded first: every record a completion answers was published
// before it, so it is in pending by the time its answer is read.
func (t *tracker) update() {
	le := binary.LittleEndian
	cp := atomic.LoadUint64(t.compProd)
	sp := atomic.LoadUint64(t.subProd)
	for ; t.sub < sp; t.sub++ {
		b := t.record(t.sl, t.sub)
		op := ringbuf.Op(le.Uint32(b[ringbuf.SubOffOp:]))
		switch op {
		case ringbuf.OpStep, ringbuf.OpCloseSlot, ringbuf.OpStop:
			t.pending = append(t.pending, pendingRec{index: t.sub, op: op,
				id: le.Uint64(b[ringbuf.SubOffID:]), slot: le.Uint32(b[ringbuf.SubOffSlot:])})
		}
	}
	for ; t.comp < cp; t.comp++ {
		b := t.record(t.cl, t.comp)
		switch ringbuf.Kind(le.Uint32(b[ringbuf.ComOffKind:])) {
		case ringbuf.KindStepDone:
			t.answer(ringbuf.OpStep, le.Uint64(b[ringbuf.ComOffStep:]))
		case ringbuf.KindSlotClosed:
			t.answer(ringbuf.OpCloseSlot, le.Uint64(b[ringbuf.ComOffStep:]))
		case ringbuf.KindStopped:
			t.answer(ringbuf.OpStop, le.Uint64(b[ringbuf.ComOffStep:]))
			t.stopped = true
		}
	}
}

// answer retires the pending record (op, id) and, records being executed in
// order, every one before it.
func (t *tracker) answer(op ringbuf.Op, id uint64) {
	for i := t.head; i < len(t.pending); i++ {
		if p := t.pending[i]; p.op == op && p.id == id {
			t.answered = max(t.answered, p.index+1)
			t.head = i + 1
			if t.head == len(t.pending) {
				t.pending, t.head = t.pending[:0], 0
			} else if t.head >= 256 && t.head*2 >= len(t.pending) {
				n := copy(t.pending, t.pending[t.head:])
				t.pending, t.head = t.pending[:n], 0
			}
			return
		}
	}
}

// Slot states the fault responder keeps. A slot it knows nothing about may
// have been open on the dead kernel.
const (
	slotUnknown = iota
	slotFailed
	slotClosed
)

// respond answers for a dead kernel until STOP (or stop()).
func (s *supervisor) respond() {
	t := &s.tr
	if t.stopped {
		return
	}
	a, err := ringbuf.Attach(s.arena.Mem) // ring views at the indices the kernel left
	if err != nil {
		return
	}
	r := &responder{a: a, s: s, state: make([]uint8, s.slots)}
	// Records the kernel released but never answered.
	start := max(a.Submit.Consumed(), t.answered)
	for _, p := range t.pending[t.head:] {
		if p.index >= start {
			break
		}
		switch p.op {
		case ringbuf.OpStep:
			r.emit(ringbuf.Completion{Kind: ringbuf.KindStepDone, Step: p.id, StartNS: r.now(), EndNS: r.now()})
		case ringbuf.OpCloseSlot:
			if int(p.slot) < s.slots {
				r.state[p.slot] = slotClosed
			}
			r.emit(ringbuf.Completion{Kind: ringbuf.KindSlotClosed, Slot: p.slot, Step: p.id})
		case ringbuf.OpStop:
			r.emit(ringbuf.Completion{Kind: ringbuf.KindStopped, Slot: ringbuf.NoSlot, Step: p.id})
			a.Completion.Publish()
			return
		}
	}
	a.Completion.Publish()
	// Records it executed (and answered) without releasing them.
	var rec ringbuf.SubmitRecord
	skipped := false
	for k := a.Submit.Consumed(); k < start; k++ {
		if _, ok := a.NextSubmit(&rec); !ok {
			break
		}
		skipped = true
		switch {
		case int(rec.Slot) >= s.slots:
		case rec.Op == ringbuf.OpOpenSlot:
			r.state[rec.Slot] = slotUnknown
		case rec.Op == ringbuf.OpCloseSlot:
			r.state[rec.Slot] = slotClosed
		}
	}
	if skipped {
		a.Submit.Done()
	}
	r.serve()
}

type responder struct {
	a     *ringbuf.Arena
	s     *supervisor
	state []uint8
}

func (r *responder) now() uint64 { return uint64(time.Since(r.s.epoch).Nanoseconds()) }

func (r *responder) quitting() bool {
	select {
	case <-r.s.quit:
		return true
	default:
		return false
	}
}

// emit writes a completion, publishing and waiting while the ring is full
// (the host drains it). False when told to quit.
func (r *responder) emit(c ringbuf.Completion) bool {
	for {
		if _, b, ok := r.a.Completion.Reserve(); ok {
			c.Put(b)
			return true
		}
		r.a.Completion.Publish()
		r.s.ring()
		if r.quitting() {
			return false
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func (r *responder) fail(id uint64, slot uint32, code ringbuf.ErrorCode, detail uint32) {
	r.emit(ringbuf.Completion{Kind: ringbuf.KindError, Slot: slot, Step: id, Code: code, Detail: detail})
}

// serve consumes the submit ring as a device that fails everything.
func (r *responder) serve() {
	a, slots := r.a, r.s.slots
	var rec ringbuf.SubmitRecord
	var bo ringbuf.Backoff
	bo.Max = pollMax
	active := time.Now()
	for {
		if _, ok := a.NextSubmit(&rec); !ok {
			if time.Since(active) < activeFor {
				if r.quitting() {
					return
				}
				bo.Wait()
				continue
			}
			// Idle: park until Notify or quit, with no timer. The
			// responder answers every record it takes before it looks
			// again, so nothing is owed while the ring is empty, and the
			// engine notifies after each publish.
			select {
			case <-r.s.notify:
				active = time.Now()
			case <-r.s.quit:
				return
			}
			continue
		}
		bo.Reset()
		active = time.Now()
		stop := false
		switch rec.Op {
		case ringbuf.OpOpenSlot:
			if int(rec.Slot) >= slots {
				r.fail(rec.ID, rec.Slot, ringbuf.CodeBadSlot, rec.Slot)
			} else {
				r.state[rec.Slot] = slotClosed
				r.fail(rec.ID, rec.Slot, ringbuf.CodeDevice, DetailFault)
			}
		case ringbuf.OpGrantBlocks:
		case ringbuf.OpStep:
			r.step(&rec)
		case ringbuf.OpCloseSlot:
			switch {
			case int(rec.Slot) >= slots:
				r.fail(rec.ID, rec.Slot, ringbuf.CodeBadSlot, rec.Slot)
			case r.state[rec.Slot] == slotClosed:
				r.fail(rec.ID, rec.Slot, ringbuf.CodeSlotState, uint32(rec.Op))
			default:
				r.state[rec.Slot] = slotClosed
				r.emit(ringbuf.Completion{Kind: ringbuf.KindSlotClosed, Slot: rec.Slot, Step: rec.ID})
			}
		case ringbuf.OpStop:
			r.emit(ringbuf.Completion{Kind: ringbuf.KindStopped, Slot: ringbuf.NoSlot, Step: rec.ID})
			stop = true
		default:
			r.fail(rec.ID, ringbuf.NoSlot, ringbuf.CodeBadOp, uint32(rec.Op))
		}
		a.Submit.Done()
		a.Completion.Publish()
		r.s.ring()
		if stop || r.quitting() {
			return
		}
	}
}

// step fails every entry of a live slot once (later entries are SKIPPED)
// and answers STEP_DONE with nothing executed.
func (r *responder) step(rec *ringbuf.SubmitRecord) {
	t0 := r.now()
	n := uint64(rec.Slot)
	var w []uint32
	if n > 0 {
		w = r.a.Staging.Words(rec.PayloadOff, rec.PayloadLen)
	}
	if n*ringbuf.StepEntryWords != uint64(rec.PayloadLen) || (n > 0 && w == nil) {
		r.fail(rec.ID, ringbuf.NoSlot, ringbuf.CodeBadPayload, rec.PayloadOff)
	} else {
		var e ringbuf.StepEntry
		for i := 0; i < int(n); i++ {
			e.Get(w[i*ringbuf.StepEntryWords:])
			switch {
			case int(e.Slot) >= r.s.slots:
				r.fail(rec.ID, e.Slot, ringbuf.CodeBadSlot, e.Slot)
			case r.state[e.Slot] == slotUnknown:
				r.state[e.Slot] = slotFailed
				r.fail(rec.ID, e.Slot, ringbuf.CodeDevice, DetailFault)
			default:
				r.emit(ringbuf.Completion{Kind: ringbuf.KindSkipped, Slot: e.Slot, Step: rec.ID})
			}
		}
	}
	r.emit(ringbuf.Completion{Kind: ringbuf.KindStepDone, Step: rec.ID, StartNS: t0, EndNS: r.now()})
}
