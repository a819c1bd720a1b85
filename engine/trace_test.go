package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"ringlm/sample"
)

// chromeEvent is one Trace Event Format event, pointers where a missing
// field must be told from a zero.
type chromeEvent struct {
	Name string         `json:"name"`
	Ph   *string        `json:"ph"`
	Ts   *float64       `json:"ts"`
	Dur  *float64       `json:"dur"`
	Pid  *int           `json:"pid"`
	Tid  *int           `json:"tid"`
	S    string         `json:"s"`
	Args map[string]any `json:"args"`
}

type chromeTrace struct {
	TraceEvents     []chromeEvent  `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	Metadata        map[string]any `json:"metadata"`
}

// eps absorbs the decimal µs of ts + dur parsed as floats (1 ns).
const eps = 0.0011

func (ev chromeEvent) end() float64 { return *ev.Ts + *ev.Dur }

// reqTrack is what a request's thread holds.
type reqTrack struct {
	name                     string
	queue, prefill, decode   []chromeEvent
	chunks, tokens, requeued []chromeEvent
}

// parseChrome parses and checks the generic shape: every event has
// ph, ts, pid, tid (and dur ≥ 0 for X), names resolve. It returns the
// request tracks by thread name and the device steps.
func parseChrome(t *testing.T, js []byte) (chromeTrace, map[string]*reqTrack, []chromeEvent) {
	t.Helper()
	var tr chromeTrace
	dec := json.NewDecoder(bytes.NewReader(js))
	if err := dec.Decode(&tr); err != nil {
		t.Fatalf("not Chrome trace JSON: %v\n%s", err, head(js, 2000))
	}
	if tr.DisplayTimeUnit != "ms" || tr.Metadata == nil || len(tr.TraceEvents) == 0 {
		t.Fatalf("displayTimeUnit %q, metadata %v, %d events", tr.DisplayTimeUnit, tr.Metadata, len(tr.TraceEvents))
	}
	procs := map[int]string{}
	threads := map[[2]int]string{}
	for i, ev := range tr.TraceEvents {
		if ev.Ph == nil || ev.Ts == nil || ev.Pid == nil || ev.Tid == nil || ev.Name == "" {
			t.Fatalf("event %d lacks name, ph, ts, pid or tid: %+v", i, ev)
		}
		switch *ev.Ph {
		case "X":
			if ev.Dur == nil || *ev.Dur < 0 {
				t.Fatalf("X event %d without dur >= 0: %+v", i, ev)
			}
		case "M":
			name, _ := ev.Args["name"].(string)
			switch ev.Name {
			case "process_name":
				procs[*ev.Pid] = name
			case "thread_name":
				threads[[2]int{*ev.Pid, *ev.Tid}] = name
			}
		case "i":
			if ev.S != "t" {
				t.Fatalf("instant %d not thread-scoped: %+v", i, ev)
			}
		case "C":
		default:
			t.Fatalf("event %d: unexpected ph %q", i, *ev.Ph)
		}
	}
	var reqPid, devPid int
	for pid, name := range procs {
		switch name {
		case "requests":
			reqPid = pid
		case "device":
			devPid = pid
		}
	}
	if reqPid == 0 || devPid == 0 {
		t.Fatalf("processes %v: want requests and device", procs)
	}
	reqs := map[string]*reqTrack{}
	var steps []chromeEvent
	for _, ev := range tr.TraceEvents {
		if *ev.Ph == "M" {
			continue
		}
		switch *ev.Pid {
		case devPid:
			if ev.Name == "step" {
				steps = append(steps, ev)
			}
		case reqPid:
			name, ok := threads[[2]int{reqPid, *ev.Tid}]
			if !ok {
				t.Fatalf("event on an unnamed request thread: %+v", ev)
			}
			r := reqs[name]
			if r == nil {
				r = &reqTrack{name: name}
				reqs[name] = r
			}
			switch ev.Name {
			case "queue":
				r.queue = append(r.queue, ev)
			case "prefill":
				r.prefill = append(r.prefill, ev)
			case "decode":
				r.decode = append(r.decode, ev)
			case "chunk", "recompute":
				r.chunks = append(r.chunks, ev)
			case "token":
				r.tokens = append(r.tokens, ev)
			case "requeued":
				r.requeued = append(r.requeued, ev)
			default:
				t.Fatalf("unexpected request event %q", ev.Name)
			}
		default:
			t.Fatalf("event of unknown pid %d: %+v", *ev.Pid, ev)
		}
	}
	return tr, reqs, steps
}

// checkSteps: device steps on the host clock end no later than the host
// received them and start no earlier than the host planned them.
func checkSteps(t *testing.T, steps []chromeEvent) {
	t.Helper()
	if len(steps) == 0 {
		t.Fatal("no device step events")
	}
	for _, st := range steps {
		done, ok := st.Args["host_done_us"].(float64)
		if !ok || st.end() > done+eps {
			t.Fatalf("step ends at %.3f µs, after the host received it (%v): %+v", st.end(), st.Args["host_done_us"], st)
		}
		if sub, ok := st.Args["host_submit_us"].(float64); ok && *st.Ts < sub-eps {
			t.Fatalf("step starts at %.3f µs, before the host planned it at %.3f", *st.Ts, sub)
		}
		if _, ok := st.Args["step"].(float64); !ok {
			t.Fatalf("step without a step id: %+v", st)
		}
		if _, ok := st.Args["entries_executed"].(float64); !ok {
			t.Fatalf("step without entries: %+v", st)
		}
	}
}

// checkRequest checks one finished request's track: one queue, prefill
// and decode span in that order, chunks nested, every token inside
// decode.
func checkRequest(t *testing.T, r *reqTrack, prompt, output int, finish string) {
	t.Helper()
	if len(r.queue) != 1 || len(r.prefill) != 1 {
		t.Fatalf("%s: %d queue and %d prefill spans, want 1 each", r.name, len(r.queue), len(r.prefill))
	}
	q, p := r.queue[0], r.prefill[0]
	if q.end() > *p.Ts+eps {
		t.Fatalf("%s: queue ends at %.3f after prefill starts at %.3f", r.name, q.end(), *p.Ts)
	}
	last := p
	if output > 0 {
		if len(r.decode) != 1 {
			t.Fatalf("%s: %d decode spans for %d tokens", r.name, len(r.decode), output)
		}
		d := r.decode[0]
		if p.end() > *d.Ts+eps {
			t.Fatalf("%s: prefill ends at %.3f after decode starts at %.3f", r.name, p.end(), *d.Ts)
		}
		if got := int(d.Args["output_tokens"].(float64)); got != output {
			t.Fatalf("%s: decode says %d output tokens, the stream gave %d", r.name, got, output)
		}
		if d.Args["finish"] != finish || int(d.Args["prompt_tokens"].(float64)) != prompt {
			t.Fatalf("%s: decode args %v, want finish %s, prompt_tokens %d", r.name, d.Args, finish, prompt)
		}
		if len(r.tokens) != output {
			t.Fatalf("%s: %d token instants, %d tokens", r.name, len(r.tokens), output)
		}
		for i, tk := range r.tokens {
			if *tk.Ts < *d.Ts-eps || *tk.Ts > d.end()+eps {
				t.Fatalf("%s: token %d at %.3f outside decode [%.3f, %.3f]", r.name, i, *tk.Ts, *d.Ts, d.end())
			}
			if int(tk.Args["n"].(float64)) != i+1 {
				t.Fatalf("%s: token instant %d says n=%v", r.name, i, tk.Args["n"])
			}
		}
		last = d
	}
	fed := 0
	for _, c := range r.chunks {
		in := func(sp chromeEvent) bool { return *c.Ts >= *sp.Ts-eps && c.end() <= sp.end()+eps }
		if !in(p) && !(output > 0 && in(r.decode[0])) {
			t.Fatalf("%s: %s [%.3f, %.3f] nested in neither prefill [%.3f, %.3f] nor decode", r.name, c.Name, *c.Ts, c.end(), *p.Ts, p.end())
		}
		fed += int(c.Args["tokens"].(float64))
	}
	if fed < prompt {
		t.Fatalf("%s: chunks feed %d tokens of a %d-token prompt", r.name, fed, prompt)
	}
	for _, rq := range r.requeued {
		if *rq.Ts < *q.Ts || rq.end() > last.end()+eps {
			t.Fatalf("%s: requeued span outside the request", r.name)
		}
	}
}

func head(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// TestTraceChrome50 traces 50 requests on the null device, queued behind
// 8 slots, prefilled in chunks, some preempted, and checks the Chrome
// trace request by request.
func TestTraceChrome50(t *testing.T) {
	tracer := NewTracer(1 << 16)
	e := newNullEngine(t, Config{Slots: 8, TokenBudget: 48, PrefillChunk: 16, NumBlocks: 24, Tracer: tracer})
	const n = 50
	type result struct {
		prompt int
		toks   []Token
		finish Finish
	}
	res := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		prompt := make([]int32, 5+i*7%60)
		for j := range prompt {
			prompt[j] = int32((i*31 + j) % 1000)
		}
		p := sample.Defaults()
		p.Seed, p.MaxTokens = uint64(i), 1+i*13%80
		s, err := e.Submit(context.Background(), Request{ID: fmt.Sprintf("t-%d", i), Prompt: prompt, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			res[i].prompt = len(prompt)
			res[i].toks = collect(t, s)
			res[i].finish, _ = s.Finish()
		})
	}
	wg.Wait()
	if err := e.Close(); err != nil { // the loop flushes its last events
		t.Fatal(err)
	}
	tr := tracer.All()
	tr.Device = e.DeviceName()
	var buf bytes.Buffer
	if err := tr.WriteChrome(&buf); err != nil {
		t.Fatal(err)
	}
	ct, reqs, steps := parseChrome(t, buf.Bytes())
	if len(reqs) != n {
		t.Fatalf("%d request tracks, want %d", len(reqs), n)
	}
	for i, r := range res {
		track := reqs[fmt.Sprintf("t-%d", i)]
		if track == nil {
			t.Fatalf("no track for t-%d", i)
		}
		checkRequest(t, track, r.prompt, len(r.toks), string(r.finish))
	}
	checkSteps(t, steps)
	st := e.Stats()
	if uint64(len(steps)) != st.Steps {
		t.Fatalf("%d step events, the engine ran %d steps", len(steps), st.Steps)
	}
	requeued := 0
	for _, r := range reqs {
		requeued += len(r.requeued)
	}
	if st.Preemptions == 0 {
		t.Fatal("no preemption: the test's KV pool is meant to be too small")
	}
	if uint64(requeued) != st.Preemptions {
		t.Fatalf("%d requeued spans, %d preemptions", requeued, st.Preemptions)
	}
	if ct.Metadata["window_complete"] != true || ct.Metadata["device"] != "null" {
		t.Fatalf("metadata %v", ct.Metadata)
	}
	if _, ok := ct.Metadata["device_clock_offset_ns"].(float64); !ok {
		t.Fatalf("metadata without the device clock offset: %v", ct.Metadata)
	}
	t.Logf("%d events, %d bytes, %d steps, %d preemptions", len(ct.TraceEvents), buf.Len(), st.Steps, st.Preemptions)
}

// TestTraceRecord: Record attaches a tracer for its window when none is,
// shares it between overlapping windows and detaches it after; with a
// tracer attached it leaves it attached.
func TestTraceRecord(t *testing.T) {
	e := newNullEngine(t, Config{Slots: 4})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { // requests keep coming while the windows record
		p := sample.Defaults()
		p.MaxTokens = 8
		for i := 0; ctx.Err() == nil; i++ {
			s, err := e.Submit(ctx, Request{Prompt: []int32{1, 2, int32(i % 1000)}, Params: p})
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := collectErr(s); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond) // a trace of a few MB parses slowly under the race detector
		}
	})
	var a, b Trace
	var rec sync.WaitGroup
	rec.Go(func() { a = e.Record(context.Background(), 300*time.Millisecond, 1<<14) })
	rec.Go(func() { b = e.Record(context.Background(), 150*time.Millisecond, 1<<14) })
	rec.Wait()
	if e.tracer.Load() != nil {
		t.Fatal("Record left its tracer attached")
	}
	for _, tr := range []Trace{a, b} {
		kinds := map[TraceKind]int{}
		for _, ev := range tr.Events {
			if ev.T < tr.Start || ev.T > tr.End {
				t.Fatalf("event at %d outside the window [%d, %d]", ev.T, tr.Start, tr.End)
			}
			kinds[ev.Kind]++
		}
		if kinds[TraceToken] == 0 || kinds[TraceStepDone] == 0 || kinds[TraceEnd] == 0 {
			t.Fatalf("window of %v: events by kind %v", time.Duration(tr.End-tr.Start), kinds)
		}
		var buf bytes.Buffer
		if err := tr.WriteChrome(&buf); err != nil {
			t.Fatal(err)
		}
		_, _, steps := parseChrome(t, buf.Bytes())
		checkSteps(t, steps)
	}
	// An attached tracer serves the window and stays.
	mine := NewTracer(1 << 14)
	e.SetTracer(mine)
	// A window of 50 ms may see no step on a loaded machine: a few tries.
	var c Trace
	for try := 0; try < 20 && len(c.Events) == 0; try++ {
		c = e.Record(context.Background(), 50*time.Millisecond, 0)
	}
	if e.tracer.Load() != mine || len(c.Events) == 0 {
		t.Fatalf("attached tracer: %d events, still attached %v", len(c.Events), e.tracer.Load() == mine)
	}
	// A cancelled context ends the window early.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	t0 := time.Now()
	e.Record(cctx, time.Minute, 0)
	if time.Since(t0) > 10*time.Second {
		t.Fatal("a cancelled Record kept recording")
	}
	if old := e.SetTracer(nil); old != mine {
		t.Fatal("SetTracer(nil) did not return the attached tracer")
	}
	stop()
	wg.Wait()
}

// TestTracerRing: the ring keeps the newest events and says what it lost.
func TestTracerRing(t *testing.T) {
	tr := NewTracer(8)
	for i := range 20 {
		tr.add(TraceEvent{Kind: TraceStep, Step: uint64(i), T: int64(100 + i)})
		if i%3 == 0 {
			tr.flush()
		}
	}
	tr.flush()
	w := tr.Window(0, math.MaxInt64)
	if len(w.Events) != 8 || w.Overwritten != 12 || !w.Lost {
		t.Fatalf("%d events, %d overwritten, lost %v", len(w.Events), w.Overwritten, w.Lost)
	}
	for i, ev := range w.Events {
		if ev.Step != uint64(12+i) {
			t.Fatalf("event %d is step %d, want %d", i, ev.Step, 12+i)
		}
	}
	w = tr.Window(114, 116)
	if len(w.Events) != 3 || w.Lost {
		t.Fatalf("window [114, 116]: %d events, lost %v", len(w.Events), w.Lost)
	}
	// More than the ring in one flush.
	for i := range traceLocal {
		tr.add(TraceEvent{Kind: TraceStep, Step: uint64(1000 + i), T: int64(1000 + i)})
	}
	tr.flush()
	w = tr.Window(0, math.MaxInt64)
	if len(w.Events) != 8 || w.Events[7].Step != 1000+traceLocal-1 || w.Overwritten != 20+traceLocal-8 {
		t.Fatalf("after a large flush: %d events, last step %d, %d overwritten", len(w.Events), w.Events[7].Step, w.Overwritten)
	}
}

func TestTraceJSONText(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "ctl\x00\x1f\n\t", "utf8 ✓ 日本", "bad \xff\xfe end", "\u2028"} {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q -> %s: %v", s, b, err)
		}
		want := string(bytes.ToValidUTF8([]byte(s), []byte("\ufffd\ufffd")))
		if s == "bad \xff\xfe end" {
			want = "bad \ufffd\ufffd end"
		}
		if got != want {
			t.Fatalf("%q -> %s -> %q", s, b, got)
		}
	}
	for ns, want := range map[int64]string{0: "0.000", 1: "0.001", 999: "0.999", 1000: "1.000", 1234567: "1234.567", -1500: "-1.500"} {
		if got := string(appendUS(nil, ns)); got != want {
			t.Fatalf("appendUS(%d) = %s, want %s", ns, got, want)
		}
	}
}

// TestTraceAllocs: the loop allocates nothing per step with tracing off,
// and nothing with it on either (events go into preallocated buffers).
// Measured as the benchmarks do, over the whole process, with one
// drainer goroutine reading every stream.
func TestTraceAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("tracing=%v", on), func(t *testing.T) {
			const batch, maxTokens = 16, 1 << 16 // no request ends inside the window, however fast the steps
			var tracer *Tracer
			if on {
				tracer = NewTracer(1 << 12) // overwritten many times over: no allocation either
			}
			e := newNullEngine(t, Config{Slots: batch, NumBlocks: batch * (maxTokens/16 + 3), Context: maxTokens + 8,
				TokenBudget: 2 * batch, Tracer: tracer})
			p := sample.Defaults()
			p.MaxTokens = maxTokens
			streams := make([]*Stream, batch)
			for i := range streams {
				s, err := e.Submit(context.Background(), Request{Prompt: []int32{int32(i), 1, 2, 3}, Params: p, IgnoreEOS: true})
				if err != nil {
					t.Fatal(err)
				}
				streams[i] = s
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				expired, cancel := context.WithCancel(context.Background())
				cancel()
				buf := make([]Token, 0, 4096)
				for {
					select {
					case <-stop:
						return
					default:
					}
					for _, s := range streams {
						buf, _, _ = s.Recv(expired, buf[:0])
					}
					time.Sleep(200 * time.Microsecond)
				}
			})
			waitSteps := func(n uint64) uint64 {
				deadline := time.Now().Add(time.Minute)
				for e.Stats().Steps < n {
					if time.Now().After(deadline) {
						t.Fatalf("only %d steps", e.Stats().Steps)
					}
					time.Sleep(time.Millisecond)
				}
				return e.Stats().Steps
			}
			waitSteps(300) // every buffer has grown
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			s0 := e.Stats().Steps
			s1 := waitSteps(s0 + 1500)
			runtime.ReadMemStats(&m1)
			close(stop)
			wg.Wait()
			per := float64(m1.Mallocs-m0.Mallocs) / float64(s1-s0)
			t.Logf("%.3f allocations per step over %d steps", per, s1-s0)
			if e.Stats().RequestsDone > 0 {
				t.Fatal("a request ended inside the window")
			}
			// The whole process counts: the test's own polling, timers and
			// the runtime; the loop's per-step code must add nothing.
			if per > 0.25 {
				t.Fatalf("%.3f allocations per step", per)
			}
			for _, s := range streams {
				s.Cancel()
			}
		})
	}
}
