package engine

import (
	"bufio"
	"context"
	"io"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Latency tracing: each request's timeline (arrival, queue, admission,
// prefill chunks, every token, end) and every device step's span, as
// fixed-size events in a bounded ring, written out as Chrome / Perfetto
// trace JSON (Trace.WriteChrome).
//
// Off, tracing costs the loop one atomic load per turn (has SetTracer
// been called?) and one predictable branch on a loop-owned pointer at
// each hook. On, an event is a 64-byte store into a buffer the loop owns,
// moved into the tracer's ring under its mutex once per loop turn: no
// allocation per event.
//
// Clocks. Host events carry the monotonic clock as nanoseconds since the
// package's epoch (what Token.Time counts from). A step's STEP_DONE
// carries the device's start and end on the device's own clock (any
// epoch) and its host receive time. The writer aligns the two clocks
// with one offset per trace: the smallest (host receive − device end)
// over the trace's steps. No step then ends after the host saw it, and
// every step is drawn late by no more than its receive latency minus the
// smallest one (the CUDA kernel's %globaltimer and the host clock do not
// drift apart measurably over a trace's seconds).

// TraceKind is what a TraceEvent records.
type TraceKind uint8

// Event kinds; the TraceEvent fields each one uses. T is always the host
// time, ns since the epoch.
const (
	// TraceQueued: the loop took the request from the inbox. A: arrival
	// (Submit) time; N: prompt tokens.
	TraceQueued TraceKind = iota + 1
	// TraceAdmitted: a slot was opened for it (again after a preemption).
	// T: when the step that opened it was planned; N: the slot; A: prompt
	// tokens reused from the prefix cache.
	TraceAdmitted
	// TraceChunk: a prefill chunk (a recompute after preemption re-feeds
	// generated tokens too). Step: the STEP; N: tokens; A: the first
	// token's position.
	TraceChunk
	// TraceToken: a TOKEN received. Step; N: tokens generated so far (1:
	// the first); A: position; B: token id.
	TraceToken
	// TracePreempted: its KV was taken back (at SLOT_CLOSED); it waits to
	// be recomputed. N: tokens generated so far.
	TracePreempted
	// TraceEnd: the request ended. Aux: finish (traceFinish); N: tokens
	// generated; A: prompt tokens; B: cached prompt tokens.
	TraceEnd
	// TraceStep: a STEP submitted (T: planned). N: entries; A: tokens;
	// B: prompt (prefill) tokens.
	TraceStep
	// TraceStepDone: its STEP_DONE received (T: when it was read).
	// N: entries executed; A, B: device start and end ns, device clock.
	TraceStepDone
)

// TraceEvent is one fixed-size trace record (64 bytes).
type TraceEvent struct {
	Kind TraceKind
	Aux  uint8
	N    uint32
	Req  uint64 // the request's number in Submit order (0 for steps)
	Step uint64
	T    int64 // host monotonic ns since the epoch
	A, B int64
	ID   string // Request.ID (request events)
}

// Finish codes in TraceEnd's Aux.
var traceFinish = [...]Finish{"", FinishStop, FinishLength, FinishCancelled, FinishError}

func finishCode(f Finish) uint8 {
	for i, g := range traceFinish {
		if g == f && i > 0 {
			return uint8(i)
		}
	}
	return 0
}

// DefaultTraceEvents is NewTracer's capacity when none is given: 64 MiB.
const DefaultTraceEvents = 1 << 20

// traceLocal is how many events the loop gathers before it must move
// them into the ring (it also does at the end of every turn).
const traceLocal = 1024

// Tracer keeps the newest events of one engine in a ring. Attach it
// with Config.Tracer or Engine.SetTracer; one engine at a time.
type Tracer struct {
	local []TraceEvent // the engine loop's, moved into ring by flush

	mu      sync.Mutex
	ring    []TraceEvent
	n       uint64 // events ever flushed; ring[i%len] holds event i
	created int64
}

// NewTracer makes a tracer that keeps the newest capacity events
// (DefaultTraceEvents if capacity <= 0).
func NewTracer(capacity int) *Tracer {
	if capacity <= 0 {
		capacity = DefaultTraceEvents
	}
	t := &Tracer{local: make([]TraceEvent, 0, traceLocal), ring: make([]TraceEvent, capacity), created: sinceEpoch()}
	// Fault the ring's pages in here rather than on the loop's flushes
	// (memory fresh from the OS is not touched by make; see newHistory).
	for i := 0; i < capacity; i += 4096 / 64 {
		t.ring[i].T = 0
	}
	return t
}

func (t *Tracer) add(ev TraceEvent) {
	if len(t.local) == cap(t.local) {
		t.flush()
	}
	t.local = append(t.local, ev)
}

// flush moves the loop's events into the ring.
func (t *Tracer) flush() {
	if len(t.local) == 0 {
		return
	}
	t.mu.Lock()
	evs := t.local
	if len(evs) > len(t.ring) {
		t.n += uint64(len(evs) - len(t.ring))
		evs = evs[len(evs)-len(t.ring):]
	}
	for len(evs) > 0 {
		i := int(t.n % uint64(len(t.ring)))
		k := copy(t.ring[i:], evs)
		evs = evs[k:]
		t.n += uint64(k)
	}
	t.mu.Unlock()
	t.local = t.local[:0]
}

// Window returns the events with from <= T <= to that the ring still
// holds, oldest first, as a Trace.
func (t *Tracer) Window(from, to int64) Trace {
	t.mu.Lock()
	defer t.mu.Unlock()
	size := uint64(len(t.ring))
	first := uint64(0)
	if t.n > size {
		first = t.n - size
	}
	tr := Trace{Start: from, End: to, Overwritten: first}
	for i := first; i < t.n; i++ {
		ev := &t.ring[i%size]
		if ev.T < from {
			continue
		}
		if ev.T > to {
			break
		}
		tr.Events = append(tr.Events, *ev)
	}
	// Lost: the window began before the oldest event the ring kept.
	tr.Lost = first > 0 && t.ring[first%size].T > from
	return tr
}

// All returns every event the ring holds, from the tracer's creation to
// now.
func (t *Tracer) All() Trace { return t.Window(t.created, sinceEpoch()) }

// Trace is a window of events and what WriteChrome needs to lay them out.
type Trace struct {
	Events      []TraceEvent // oldest first
	Start, End  int64        // the window, ns since the epoch
	Overwritten uint64       // events the ring dropped since the tracer was made
	Lost        bool         // some of them were in the window
	Device      string
}

// SetTracer attaches t (nil detaches) and returns the tracer attached
// before. It returns once the loop has switched, so every event of the
// previous tracer is in its ring (its Window and All are complete). A
// tracer serves one engine at a time.
func (e *Engine) SetTracer(t *Tracer) *Tracer {
	old := e.tracer.Swap(t)
	e.syncTrace()
	return old
}

// syncTrace makes the loop flush its events and look at e.tracer again,
// and waits until it has (or has ended).
func (e *Engine) syncTrace() {
	g := e.traceGen.Add(1)
	e.poke()
	for e.traceAck.Load() < g {
		select {
		case <-e.loopDone:
			return
		case <-time.After(50 * time.Microsecond):
		}
	}
}

// switchTracer runs on the loop when traceGen moved.
func (e *Engine) switchTracer(g uint64) {
	if e.tr != nil {
		e.tr.flush()
	}
	e.tr = e.tracer.Load()
	e.traceSeen = g
	e.traceAck.Store(g)
}

// stopTracing runs when the loop ends.
func (e *Engine) stopTracing() {
	if e.tr != nil {
		e.tr.flush()
		e.tr = nil
	}
	e.traceAck.Store(math.MaxUint64)
}

// Record traces the engine for d (or until ctx is done) and returns that
// window. It uses the tracer attached, if any (Config.Tracer, SetTracer),
// else attaches one of capacity events (shared by the Records that
// overlap it) and detaches it at the end.
func (e *Engine) Record(ctx context.Context, d time.Duration, capacity int) Trace {
	start := sinceEpoch()
	e.recMu.Lock()
	t := e.tracer.Load()
	if t == nil {
		t = NewTracer(capacity)
		e.SetTracer(t)
		e.recOwned = t
	}
	owned := t == e.recOwned
	if owned {
		e.recUsers++
	}
	e.recMu.Unlock()

	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
	}
	end := sinceEpoch()

	e.recMu.Lock()
	if owned {
		e.recUsers--
		if e.recUsers == 0 {
			e.recOwned = nil
			e.tracer.CompareAndSwap(t, nil)
		}
	}
	e.syncTrace() // the window's events are in the ring
	e.recMu.Unlock()
	tr := t.Window(start, end)
	tr.Device = e.dev.Name()
	return tr
}

// Hooks, called on the loop when e.tr != nil.

func (t *Tracer) queued(in []*seq) {
	now := sinceEpoch()
	for _, s := range in {
		// Arrival is written by Submit before the request is published
		// through the inbox, and never again.
		t.add(TraceEvent{Kind: TraceQueued, Req: s.serial, T: now, N: uint32(s.nPrompt),
			A: int64(s.stream.timeline.Arrival.Sub(epoch)), ID: s.req.ID})
	}
}

// scheduleTraced is schedule with the admissions, prefill chunks and the
// step it planned recorded. Taken before planning, t0 is no later than
// the step's publication, so no device time of the step precedes it.
func (e *Engine) scheduleTraced() bool {
	t0 := sinceEpoch()
	prev := e.stepID
	if !e.schedule() {
		return false
	}
	t, sc := e.tr, &e.scratch
	for _, s := range sc.opens {
		t.add(TraceEvent{Kind: TraceAdmitted, Req: s.serial, T: t0, N: uint32(s.slot), A: int64(s.cached), ID: s.req.ID})
	}
	if e.stepID == prev {
		return true // OPENs only: no STEP
	}
	tokens, prompt := 0, 0
	for _, p := range sc.entries {
		tokens += p.n
		if p.from >= 0 {
			prompt += p.n
			t.add(TraceEvent{Kind: TraceChunk, Req: p.s.serial, Step: e.stepID, T: t0, N: uint32(p.n), A: int64(p.from), ID: p.s.req.ID})
		}
	}
	t.add(TraceEvent{Kind: TraceStep, Step: e.stepID, T: t0, N: uint32(len(sc.entries)), A: int64(tokens), B: int64(prompt)})
	return true
}

func (t *Tracer) token(s *seq, step uint64, pos, tok uint32, now int64) {
	t.add(TraceEvent{Kind: TraceToken, Req: s.serial, Step: step, T: now, N: uint32(s.generated), A: int64(pos), B: int64(tok), ID: s.req.ID})
}

// stepDone reads the clock itself: e.now is taken before the drain, so
// it may precede the device's end of a step published meanwhile, and the
// clock alignment needs a receive time after it.
func (t *Tracer) stepDone(step uint64, entries uint32, startNS, endNS uint64) {
	t.add(TraceEvent{Kind: TraceStepDone, Step: step, T: sinceEpoch(), N: entries, A: int64(startNS), B: int64(endNS)})
}

func (t *Tracer) preempted(s *seq, now int64) {
	t.add(TraceEvent{Kind: TracePreempted, Req: s.serial, T: now, N: uint32(s.generated), ID: s.req.ID})
}

// end records s's end with the stream's finish (a stop string the reader
// matched ends the stream before the loop hears of it). The loop holds
// no stream lock here.
func (t *Tracer) end(s *seq) {
	now := sinceEpoch()
	s.stream.mu.Lock()
	f := s.stream.finish
	s.stream.mu.Unlock()
	t.add(TraceEvent{Kind: TraceEnd, Aux: finishCode(f), Req: s.serial, T: now, N: uint32(s.generated),
		A: int64(s.nPrompt), B: int64(s.cached), ID: s.req.ID})
}

// The Chrome / Perfetto writer.

const (
	pidRequests = 1
	pidDevice   = 2
	tidSteps    = 1
)

type traceReq struct {
	id                 string
	serial             uint64
	tid                int
	queued, end        *TraceEvent
	admits, chunks     []*TraceEvent
	preempts, tokens   []*TraceEvent
	promptTokens, outN int
}

type traceStep struct{ submit, done *TraceEvent }

// WriteChrome writes the trace in the Trace Event Format
// ({"traceEvents":[…],"displayTimeUnit":"ms","metadata":{…}}), which
// chrome://tracing and ui.perfetto.dev open. ts and dur are µs on the
// host clock since the epoch.
//
// Process "requests" has a thread per request (named by its ID) with
// the X slices queue (arrival → first admission), prefill (admission →
// first token; a chunk slice inside for each prefill chunk, drawn over
// its step's device span) and decode (first token → end), a token
// instant for every token, and inside prefill or decode a requeued slice
// per preemption (KV taken back → admitted again) and a recompute slice
// per chunk that re-feeds it. Process "device" has one thread with an X
// slice per step (device start → end, shifted onto the host clock, see
// the package's note on clocks) and a batch counter. A request or step
// cut by the window's edges keeps what the window holds.
func (tr *Trace) WriteChrome(w io.Writer) error {
	// Device clock offset: min over steps of host receive − device end.
	off, aligned := int64(0), 0
	steps := map[uint64]*traceStep{}
	reqs := map[uint64]*traceReq{}
	var order []*traceReq
	stepOf := func(id uint64) *traceStep {
		st := steps[id]
		if st == nil {
			st = &traceStep{}
			steps[id] = st
		}
		return st
	}
	var stepOrder []uint64
	for i := range tr.Events {
		ev := &tr.Events[i]
		switch ev.Kind {
		case TraceStep:
			stepOf(ev.Step).submit = ev
		case TraceStepDone:
			st := stepOf(ev.Step)
			st.done = ev
			stepOrder = append(stepOrder, ev.Step)
			if d := ev.T - ev.B; aligned == 0 || d < off {
				off = d
			}
			aligned++
		default:
			r := reqs[ev.Req]
			if r == nil {
				r = &traceReq{id: ev.ID, serial: ev.Req, tid: len(order) + 1}
				reqs[ev.Req] = r
				order = append(order, r)
			}
			switch ev.Kind {
			case TraceQueued:
				r.queued = ev
				r.promptTokens = int(ev.N)
			case TraceAdmitted:
				r.admits = append(r.admits, ev)
			case TraceChunk:
				r.chunks = append(r.chunks, ev)
			case TraceToken:
				r.tokens = append(r.tokens, ev)
			case TracePreempted:
				r.preempts = append(r.preempts, ev)
			case TraceEnd:
				if r.end == nil {
					r.end = ev
					r.promptTokens = int(ev.A)
				}
			}
		}
	}
	// devSpan is a step's device span on the host clock.
	devSpan := func(step uint64) (s, e int64, ok bool) {
		st := steps[step]
		if st == nil || st.done == nil {
			return 0, 0, false
		}
		return st.done.A + off, st.done.B + off, true
	}

	cw := &chromeWriter{w: bufio.NewWriterSize(w, 64<<10)}
	cw.raw(`{"displayTimeUnit":"ms","metadata":{"source":"ringlm engine trace","device":`)
	cw.b = appendJSONString(cw.b, tr.Device)
	cw.raw(`,"clock":"ts and dur are µs on the host's monotonic clock since the engine's epoch (epoch_unix_ns); token and request times are the engine loop's, device steps are the device's own timestamps shifted by device_clock_offset_ns"`)
	cw.raw(`,"device_clock_alignment":"device_clock_offset_ns = min over this trace's steps of (host receive time of STEP_DONE - device end ns): no step ends after the host received it; a step is drawn late by at most its receive latency minus the smallest one"`)
	cw.key("epoch_unix_ns").int(epoch.UnixNano())
	cw.key("device_clock_offset_ns").int(off)
	cw.key("steps_aligned").int(int64(aligned))
	cw.key("window_start_us").us(tr.Start)
	cw.key("window_end_us").us(tr.End)
	cw.key("events").int(int64(len(tr.Events)))
	cw.key("overwritten_events").int(int64(tr.Overwritten))
	cw.key("window_complete").bool(!tr.Lost)
	cw.raw(`},"traceEvents":[`)

	cw.meta("process_name", pidRequests, 0, "requests")
	cw.metaInt("process_sort_index", pidRequests, 0, pidRequests)
	cw.meta("process_name", pidDevice, 0, "device")
	cw.metaInt("process_sort_index", pidDevice, 0, pidDevice)
	cw.meta("thread_name", pidDevice, tidSteps, "steps")

	for _, r := range order {
		name := r.id
		if name == "" {
			name = "req " + strconv.FormatUint(r.serial, 10)
		}
		cw.meta("thread_name", pidRequests, r.tid, name)
		cw.metaInt("thread_sort_index", pidRequests, r.tid, r.tid)
		tr.writeRequest(cw, r, devSpan)
	}

	for _, id := range stepOrder {
		st := steps[id]
		s, e, _ := devSpan(id)
		cw.begin("step", 'X', pidDevice, tidSteps, s).dur(e - s).args()
		cw.key("step").uint(id)
		cw.key("entries_executed").int(int64(st.done.N))
		if st.submit != nil {
			cw.key("entries").int(int64(st.submit.N))
			cw.key("tokens").int(st.submit.A)
			cw.key("prefill_tokens").int(st.submit.B)
			cw.key("host_submit_us").us(st.submit.T)
		}
		cw.key("host_done_us").us(st.done.T)
		cw.key("device_start_ns").int(st.done.A)
		cw.key("device_end_ns").int(st.done.B)
		cw.end()
		if st.submit != nil {
			cw.begin("batch", 'C', pidDevice, tidSteps, s).args()
			cw.key("entries").int(int64(st.submit.N))
			cw.key("tokens").int(st.submit.A)
			cw.end()
		}
	}
	cw.raw("]}\n")
	if cw.err != nil {
		return cw.err
	}
	cw.flush()
	if cw.err != nil {
		return cw.err
	}
	return cw.w.Flush()
}

// writeRequest writes one request's track; see WriteChrome.
func (tr *Trace) writeRequest(cw *chromeWriter, r *traceReq, devSpan func(uint64) (int64, int64, bool)) {
	endT, ended := tr.End, r.end != nil
	if ended {
		endT = r.end.T
	}
	var admit0 int64
	admitted := len(r.admits) > 0
	if admitted {
		admit0 = r.admits[0].T
	}
	// Decode starts at the first token the window holds.
	decode := len(r.tokens) > 0
	var decStart int64
	if decode {
		decStart = r.tokens[0].T
	}
	common := func() {
		cw.key("id").str(r.id)
		if r.promptTokens > 0 {
			cw.key("prompt_tokens").int(int64(r.promptTokens))
		}
	}
	outcome := func() {
		if ended {
			cw.key("output_tokens").int(int64(r.end.N))
			cw.key("cached_tokens").int(r.end.B)
			cw.key("finish").str(string(traceFinish[min(int(r.end.Aux), len(traceFinish)-1)]))
		} else {
			cw.key("output_tokens_in_window").int(int64(len(r.tokens)))
			cw.key("finish").str("(after the window)")
		}
		cw.key("preemptions").int(int64(len(r.preempts)))
	}

	// queue: arrival → first admission (or the end, or the window's).
	if r.queued != nil {
		stop := endT
		if admitted {
			stop = admit0
		}
		cw.begin("queue", 'X', pidRequests, r.tid, r.queued.A).dur(stop - r.queued.A).args()
		common()
		cw.key("queued_us").us(r.queued.T)
		if !admitted {
			outcome()
		}
		cw.end()
	}
	// prefill: first admission (or first chunk) → first token.
	preStart, prefill := admit0, admitted
	if !prefill && len(r.chunks) > 0 && (!decode || r.chunks[0].T < decStart) {
		preStart, prefill = r.chunks[0].T, true
	}
	if prefill && decode && r.tokens[0].N != 1 {
		prefill = false // the first token came before the window
	}
	preEnd := endT
	if decode {
		preEnd = decStart
	}
	if prefill {
		cw.begin("prefill", 'X', pidRequests, r.tid, preStart).dur(preEnd - preStart).args()
		common()
		cw.key("chunks").int(int64(len(r.chunks)))
		if admitted {
			cw.key("cached_tokens").int(r.admits[0].A)
			cw.key("slot").int(int64(r.admits[0].N))
		}
		if !decode {
			outcome()
		}
		cw.end()
	}
	if decode {
		cw.begin("decode", 'X', pidRequests, r.tid, decStart).dur(endT - decStart).args()
		common()
		outcome()
		cw.key("first_token_in_window").bool(r.tokens[0].N == 1)
		cw.end()
	}
	// parent returns the span a child starting at t nests in.
	parent := func(t int64) (s, e int64, inDecode, ok bool) {
		switch {
		case decode && t >= decStart:
			return decStart, endT, true, true
		case prefill && t >= preStart:
			return preStart, preEnd, false, true
		}
		return 0, 0, false, false
	}
	clampTo := func(s, e, ps, pe int64) (int64, int64) {
		s = min(max(s, ps), pe)
		e = min(max(e, s), pe)
		return s, e
	}
	for _, c := range r.chunks {
		ps, pe, inDecode, ok := parent(c.T)
		if !ok {
			continue
		}
		s, e, dev := devSpan(c.Step)
		if !dev {
			s, e = c.T, pe
		}
		s, e = clampTo(s, e, ps, pe)
		name := "chunk"
		if inDecode {
			name = "recompute"
		}
		cw.begin(name, 'X', pidRequests, r.tid, s).dur(e - s).args()
		cw.key("step").uint(c.Step)
		cw.key("tokens").int(int64(c.N))
		cw.key("from_pos").int(c.A)
		cw.key("host_submit_us").us(c.T)
		cw.key("on_device_clock").bool(dev)
		cw.end()
	}
	for _, p := range r.preempts {
		ps, pe, _, ok := parent(p.T)
		if !ok {
			continue
		}
		stop := pe
		for _, a := range r.admits {
			if a.T >= p.T {
				stop = a.T
				break
			}
		}
		s, e := clampTo(p.T, stop, ps, pe)
		cw.begin("requeued", 'X', pidRequests, r.tid, s).dur(e - s).args()
		cw.key("generated").int(int64(p.N))
		cw.end()
	}
	for _, t := range r.tokens {
		cw.begin("token", 'i', pidRequests, r.tid, t.T)
		cw.raw(`,"s":"t"`)
		cw.args()
		cw.key("n").int(int64(t.N))
		cw.key("pos").int(t.A)
		cw.key("token").int(t.B)
		cw.key("step").uint(t.Step)
		cw.end()
	}
}

// chromeWriter appends JSON to b and writes it out in large pieces.
type chromeWriter struct {
	w      *bufio.Writer
	b      []byte
	err    error
	events int
	inArgs bool
	first  bool // the next key is the first of its object
}

func (c *chromeWriter) raw(s string) *chromeWriter {
	c.b = append(c.b, s...)
	return c
}

func (c *chromeWriter) flush() {
	if c.err == nil && len(c.b) > 0 {
		_, c.err = c.w.Write(c.b)
	}
	c.b = c.b[:0]
}

// begin opens an event object.
func (c *chromeWriter) begin(name string, ph byte, pid, tid int, ts int64) *chromeWriter {
	if len(c.b) > 32<<10 {
		c.flush()
	}
	if c.events > 0 {
		c.b = append(c.b, ',', '\n')
	}
	c.events++
	c.b = append(c.b, `{"name":`...)
	c.b = appendJSONString(c.b, name)
	c.b = append(c.b, `,"ph":"`...)
	c.b = append(c.b, ph, '"')
	c.b = append(c.b, `,"pid":`...)
	c.b = strconv.AppendInt(c.b, int64(pid), 10)
	c.b = append(c.b, `,"tid":`...)
	c.b = strconv.AppendInt(c.b, int64(tid), 10)
	c.b = append(c.b, `,"ts":`...)
	c.b = appendUS(c.b, ts)
	return c
}

func (c *chromeWriter) dur(ns int64) *chromeWriter {
	c.b = append(c.b, `,"dur":`...)
	c.b = appendUS(c.b, max(ns, 0))
	return c
}

// args opens the event's args object; end closes it and the event.
func (c *chromeWriter) args() *chromeWriter {
	c.b = append(c.b, `,"args":{`...)
	c.inArgs, c.first = true, true
	return c
}

func (c *chromeWriter) end() {
	if c.inArgs {
		c.b = append(c.b, '}')
		c.inArgs = false
	}
	c.b = append(c.b, '}')
}

// key starts a member of the args (or metadata) object.
func (c *chromeWriter) key(k string) *chromeWriter {
	if !c.first {
		c.b = append(c.b, ',')
	}
	c.first = false
	c.b = appendJSONString(c.b, k)
	c.b = append(c.b, ':')
	return c
}

func (c *chromeWriter) int(v int64)   { c.b = strconv.AppendInt(c.b, v, 10) }
func (c *chromeWriter) uint(v uint64) { c.b = strconv.AppendUint(c.b, v, 10) }
func (c *chromeWriter) us(ns int64)   { c.b = appendUS(c.b, ns) }
func (c *chromeWriter) bool(v bool)   { c.b = strconv.AppendBool(c.b, v) }
func (c *chromeWriter) str(s string)  { c.b = appendJSONString(c.b, s) }

func (c *chromeWriter) meta(name string, pid, tid int, value string) {
	c.begin(name, 'M', pid, tid, 0).args()
	c.key("name").str(value)
	c.end()
}

func (c *chromeWriter) metaInt(name string, pid, tid int, v int) {
	c.begin(name, 'M', pid, tid, 0).args()
	c.key("sort_index").int(int64(v))
	c.end()
}

// appendUS writes ns as µs with three decimals, exactly.
func appendUS(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		if ns == math.MinInt64 {
			ns++ // off by a ns at the end of time
		}
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	f := ns % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

// appendJSONString writes s as a JSON string (invalid UTF-8 becomes
// U+FFFD).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
