package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is the runner's clock in tests: the fake server sets it as it
// writes each chunk and waits until the client has read it, so recorded
// times are exactly the script's.
type svClock struct {
	mu    sync.Mutex
	now   time.Time
	reads int
}

func newSvClock() *svClock { return &svClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now is what the runner calls.
func (c *svClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.now
}

func (c *svClock) peek() (time.Time, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now, c.reads
}

func (c *svClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// waitReads waits until the clock has been read more than n times.
func (c *svClock) waitReads(t *testing.T, n int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, r := c.peek(); r > n {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the client never read the clock after a chunk with text")
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// step is one event of a scripted stream: data at offset at from the
// request's send. text marks events carrying generated text (the client
// reads the clock for those).
type svStep struct {
	at   time.Duration
	data string
	text bool
}

type svScript struct {
	status int    // non-200: answer this with body
	body   string // for status
	steps  []svStep
	end    time.Duration // offset of the stream's end (0: leave the clock)
	done   bool          // write data: [DONE]
	abort  bool          // close the connection instead of ending the response
}

func svCompletion(text string) string {
	return fmt.Sprintf(`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":%q,"logprobs":null,"finish_reason":null}],"usage":null}`, text)
}

func svChatDelta(content string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`, content)
}

func svUsage(prompt, completion int) string {
	return fmt.Sprintf(`{"id":"x","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, prompt, completion, prompt+completion)
}

// fakeServer answers each request by the script its prompt names.
type svFake struct {
	t       *testing.T
	clock   *svClock
	scripts map[string]svScript
	mu      sync.Mutex
	bodies  []map[string]any
}

func (f *svFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.t.Errorf("request body: %v", err)
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	prompt, _ := body["prompt"].(string)
	if msgs, ok := body["messages"].([]any); ok && len(msgs) == 1 {
		prompt, _ = msgs[0].(map[string]any)["content"].(string)
	}
	sc, ok := f.scripts[prompt]
	if !ok {
		f.t.Errorf("no script for prompt %q", prompt)
		http.Error(w, "no script", 400)
		return
	}
	if sc.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(sc.status)
		fmt.Fprint(w, sc.body)
		return
	}
	base, _ := f.clock.peek()
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for _, s := range sc.steps {
		_, reads := f.clock.peek()
		if s.text {
			f.clock.set(base.Add(s.at))
		}
		fmt.Fprintf(w, "data: %s\n\n", s.data)
		fl.Flush()
		if s.text {
			f.clock.waitReads(f.t, reads)
		}
	}
	if sc.end > 0 { // (a client that left early may be on its next request)
		f.clock.set(base.Add(sc.end))
	}
	if sc.abort {
		panic(http.ErrAbortHandler) // the connection closes mid-stream
	}
	if sc.done {
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// A scripted fake OpenAI server: exact TTFT, ITL and E2EL from its
// script, both chunk shapes, usage, a 500, an aborted stream, an error
// event, and a server that reports no usage.
func TestRunScriptedServer(t *testing.T) {
	clock := newSvClock()
	fake := &svFake{t: t, clock: clock, scripts: map[string]svScript{
		// Completions chunks with usage.
		"A": {steps: []svStep{
			{100 * svMS, svCompletion("Hello"), true}, {130 * svMS, svCompletion(" world"), true}, {170 * svMS, svCompletion("!"), true},
			{0, `{"choices":[{"index":0,"text":"","finish_reason":"length"}],"usage":null}`, false},
			{0, svUsage(12, 3), false},
		}, end: 170 * svMS, done: true},
		// Chat chunks: the role chunk and an empty delta carry no text;
		// usage says 5 tokens for 2 chunks with text.
		"B": {steps: []svStep{
			{0, `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, false},
			{40 * svMS, svChatDelta("a"), true}, {0, svChatDelta(""), false}, {90 * svMS, svChatDelta("bc"), true},
			{0, `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`, false},
			{0, svUsage(7, 5), false},
		}, end: 95 * svMS, done: true},
		"C": {status: 500, body: `{"error":{"message":"boom","type":"server_error"}}`},
		"D": {steps: []svStep{{20 * svMS, svCompletion("x"), true}}, end: 30 * svMS, abort: true},
		// No usage: output tokens are the chunks with text, prompt tokens
		// the estimate.
		"E": {steps: []svStep{{10 * svMS, svCompletion("p"), true}, {25 * svMS, svCompletion("q"), true}, {45 * svMS, svCompletion("r"), true}}, end: 50 * svMS, done: true},
		"F": {steps: []svStep{{10 * svMS, svCompletion("p"), true}, {0, `{"error":{"message":"device failed","code":500}}`, false}}},
		// Ends cleanly after a finish_reason but without [DONE]: accepted.
		"G": {steps: []svStep{{5 * svMS, svCompletion("z"), true}, {0, `{"choices":[{"index":0,"text":"","finish_reason":"stop"}]}`, false}}, end: 6 * svMS},
		// Ends cleanly with neither: failed.
		"H": {steps: []svStep{{5 * svMS, svCompletion("z"), true}}, end: 7 * svMS},
		// Tokens without text (EOS under ignore_eos): completions chunks of
		// empty text before the finish are tokens, as vLLM's client counts
		// them; the finish chunk is not.
		"I": {steps: []svStep{
			{10 * svMS, svCompletion(""), true}, {20 * svMS, svCompletion(""), true},
			{0, `{"choices":[{"index":0,"text":"","finish_reason":"length"}],"usage":null}`, false},
			{0, svUsage(4, 2), false},
		}, end: 21 * svMS, done: true},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	var reqs []ServeRequest
	for _, p := range []string{"A", "B", "C", "D", "E", "F", "G", "H", "I"} {
		reqs = append(reqs, ServeRequest{Prompt: p, MaxTokens: 3, InputLen: 4})
	}
	var ok, bad atomic.Int32
	res, err := RunServe(context.Background(), ServeRunOptions{URL: srv.URL + "/v1/completions", Model: "m", Requests: reqs,
		Concurrency: 1, IgnoreEOS: true, Now: clock.Now, Done: func(good bool) {
			if good {
				ok.Add(1)
			} else {
				bad.Add(1)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	recs := res.Records
	if len(recs) != 9 || res.Interrupted {
		t.Fatalf("%d records, interrupted %v", len(recs), res.Interrupted)
	}
	rec := func(i int) *ServeRecord { return &recs[i] }
	durs := func(ds []time.Duration) string { return fmt.Sprint(ds) }

	a := rec(0)
	if !a.OK() || a.TTFT() != 100*svMS || durs(a.ITLs()) != durs([]time.Duration{30 * svMS, 40 * svMS}) || a.Latency() != 170*svMS ||
		a.OutputTokens != 3 || !a.OutputReported || a.PromptTokens != 12 || !a.PromptReported {
		t.Errorf("A: %+v", *a)
	}
	b := rec(1)
	if !b.OK() || b.TTFT() != 40*svMS || durs(b.ITLs()) != durs([]time.Duration{50 * svMS}) || b.Latency() != 95*svMS ||
		b.OutputTokens != 5 || b.PromptTokens != 7 {
		t.Errorf("B: %+v", *b)
	}
	// Requests go one after another on the script's clock.
	if a.Sent != 0 || b.Sent != 170*svMS {
		t.Errorf("sent at %v and %v", a.Sent, b.Sent)
	}
	if c := rec(2); c.OK() || !strings.Contains(c.Err, "HTTP 500") || !strings.Contains(c.Err, "boom") {
		t.Errorf("C: %+v", *c)
	}
	if d := rec(3); d.OK() || !strings.Contains(d.Err, "reading the stream") || d.TTFT() != 20*svMS || d.Latency() != 30*svMS {
		t.Errorf("D: %+v", *d)
	}
	if e := rec(4); !e.OK() || e.OutputTokens != 3 || e.OutputReported || e.PromptTokens != 4 || e.PromptReported ||
		durs(e.ITLs()) != durs([]time.Duration{15 * svMS, 20 * svMS}) || e.Latency() != 50*svMS {
		t.Errorf("E: %+v", *e)
	}
	if f := rec(5); f.OK() || !strings.Contains(f.Err, "device failed") {
		t.Errorf("F: %+v", *f)
	}
	if g := rec(6); !g.OK() || g.Latency() != 6*svMS {
		t.Errorf("G: %+v", *g)
	}
	if h := rec(7); h.OK() || !strings.Contains(h.Err, "[DONE]") {
		t.Errorf("H: %+v", *h)
	}
	if i := rec(8); !i.OK() || i.TTFT() != 10*svMS || durs(i.ITLs()) != durs([]time.Duration{10 * svMS}) || i.Latency() != 21*svMS ||
		i.OutputTokens != 2 {
		t.Errorf("I: %+v", *i)
	}
	if ok.Load() != 5 || bad.Load() != 4 {
		t.Errorf("Done callback: %d ok, %d failed", ok.Load(), bad.Load())
	}

	s := SummarizeServe(recs, []float64{50})
	// Completed: A, B, E, G, I (3+5+3+1+2 tokens; 12+7+4+4+4 prompt tokens).
	if s.Completed != 5 || s.Failed != 4 || s.TotalOutput != 14 || s.TotalInput != 31 {
		t.Errorf("summary: %d completed, %d failed, %d out, %d in", s.Completed, s.Failed, s.TotalOutput, s.TotalInput)
	}
	// TTFTs 100, 40, 10, 5, 10: mean 33.
	svNear(t, "mean TTFT", s.TTFT.Mean, 33)
	// ITLs 30, 40, 50, 15, 20, 10: median 25.
	svNear(t, "median ITL", s.ITL.Median, 25)

	// What was sent: a streaming completions request with usage, the
	// model, max_tokens and ignore_eos.
	first := fake.bodies[0]
	so, _ := first["stream_options"].(map[string]any)
	if first["prompt"] != "A" || first["stream"] != true || so["include_usage"] != true || first["max_tokens"] != 3.0 ||
		first["ignore_eos"] != true || first["model"] != "m" || first["messages"] != nil {
		t.Errorf("completions request body: %v", first)
	}
}

// Chat requests carry messages, and chat chunks are read.
func TestRunChat(t *testing.T) {
	clock := newSvClock()
	fake := &svFake{t: t, clock: clock, scripts: map[string]svScript{
		"hi": {steps: []svStep{
			{0, `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, false},
			{12 * svMS, svChatDelta("x"), true}, {19 * svMS, svChatDelta("y"), true}, {0, svUsage(3, 2), false},
		}, end: 20 * svMS, done: true},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	res, err := RunServe(context.Background(), ServeRunOptions{URL: srv.URL + "/v1/chat/completions", Chat: true,
		Requests: []ServeRequest{{Prompt: "hi", MaxTokens: 2, InputLen: 1}}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Records[0]
	if !r.OK() || r.TTFT() != 12*svMS || r.Latency() != 20*svMS || len(r.ITLs()) != 1 || r.ITLs()[0] != 7*svMS || r.OutputTokens != 2 {
		t.Errorf("chat record: %+v", r)
	}
	body := fake.bodies[0]
	msgs, _ := body["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["role"] != "user" || body["prompt"] != nil || body["model"] != nil {
		t.Errorf("chat request body: %v", body)
	}
}

// SSE details: CRLF line ends, comments, multi-line data, a final event
// without its blank line, a long line, and a body that is not a stream.
func TestRunSSEParsing(t *testing.T) {
	long := strings.Repeat("w", 100<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Prompt string }
		json.NewDecoder(r.Body).Decode(&body)
		switch body.Prompt {
		case "json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[{"text":"all at once"}]}`)
		case "garbage":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {not json\n\n")
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": keep-alive\r\n\r\nevent: message\r\ndata: "+svCompletion("a")+"\r\n\r\n")
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\n")
			fmt.Fprint(w, "data: \"text\":\"b\"}]}\n\n")
			fmt.Fprint(w, "data: "+svCompletion(long)+"\n\n")
			fmt.Fprint(w, "data: "+svUsage(2, 9)+"\n\n")
			fmt.Fprint(w, "data: [DONE]")
		}
	}))
	defer srv.Close()
	res, err := RunServe(context.Background(), ServeRunOptions{URL: srv.URL,
		Requests: []ServeRequest{{Prompt: "ok", MaxTokens: 9}, {Prompt: "json", MaxTokens: 9}, {Prompt: "garbage", MaxTokens: 9}}})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Records
	if !r[0].OK() || len(r[0].Chunks) != 3 || r[0].OutputTokens != 9 || r[0].PromptTokens != 2 {
		t.Errorf("stream: %+v", r[0])
	}
	if r[1].OK() || !strings.Contains(r[1].Err, "did not stream") {
		t.Errorf("not streamed: %+v", r[1])
	}
	if r[2].OK() || !strings.Contains(r[2].Err, "not JSON") {
		t.Errorf("garbage: %+v", r[2])
	}
}

// streamServer streams n chunks with text per request (max_tokens, else
// 4), with usage, sleeping pause between chunks. It counts requests in
// flight; a request waits until want are in flight, all total requests
// have come, or hold has passed. It notes when each prompt arrived.
type svStream struct {
	pause      time.Duration
	want       int32
	total      int32
	hold       time.Duration
	arrived    sync.Map // prompt → time.Time
	inflight   atomic.Int32
	maxSeen    atomic.Int32
	count      atomic.Int32
	hangUntilC bool // never answer; wait for the client to go away
}

func (s *svStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
		return
	case "/tokenize", "/detokenize": // as OpenAI's API: no such endpoints
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"message":"not found"}}`)
		return
	}
	s.count.Add(1)
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		m := s.maxSeen.Load()
		if n <= m || s.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	var body struct {
		MaxTokens int    `json:"max_tokens"`
		Prompt    string `json:"prompt"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	s.arrived.Store(body.Prompt, time.Now())
	if s.hangUntilC {
		<-r.Context().Done()
		return
	}
	deadline := time.Now().Add(s.hold)
	for s.inflight.Load() < s.want && s.count.Load() < s.total && time.Now().Before(deadline) {
		time.Sleep(200 * time.Microsecond)
	}
	tokens := body.MaxTokens
	if tokens == 0 {
		tokens = 4
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i := range tokens {
		if s.pause > 0 {
			time.Sleep(s.pause)
		}
		fmt.Fprintf(w, "data: %s\n\n", svCompletion(fmt.Sprint(" t", i)))
		w.(http.Flusher).Flush()
	}
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", svUsage(5, tokens))
}

// The concurrency cap is never exceeded, and is reached; without a cap
// every request is in flight at once. A rate and a cap combine.
func TestRunConcurrencyCap(t *testing.T) {
	for _, c := range []struct {
		cap, n int
		rate   float64
	}{{3, 12, 0}, {1, 4, 0}, {0, 10, 0}, {2, 8, 2000}} {
		want := c.cap
		if want == 0 {
			want = c.n
		}
		fs := &svStream{want: int32(want), total: int32(c.n), hold: 2 * time.Second}
		srv := httptest.NewServer(fs)
		res, err := RunServe(context.Background(), ServeRunOptions{URL: srv.URL, Requests: svPrompts(c.n, 8, 3, 1),
			Concurrency: c.cap, Rate: c.rate, Burstiness: 1})
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		s := SummarizeServe(res.Records, nil)
		if s.Completed != c.n || fs.count.Load() != int32(c.n) {
			t.Errorf("cap %d: %d completed, %d served", c.cap, s.Completed, fs.count.Load())
		}
		if got := fs.maxSeen.Load(); got != int32(want) {
			t.Errorf("cap %d rate %v: the server saw up to %d in flight, want %d", c.cap, c.rate, got, want)
		}
		if c.cap > 0 && s.MaxInFlight > c.cap {
			t.Errorf("cap %d: the client recorded %d in flight", c.cap, s.MaxInFlight)
		}
		if s.TotalOutput != 3*c.n {
			t.Errorf("cap %d: %d output tokens", c.cap, s.TotalOutput)
		}
	}
}

// With a rate, no request goes out before it is due.
func TestRunPacing(t *testing.T) {
	fs := &svStream{}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	const n, rate = 12, 200.0
	offsets := ArrivalOffsets(n, rate, 1, seededRand(5, randArrivals))
	reqs := svPrompts(n, 6, 2, 5)
	start := time.Now() // the dispatcher starts after this
	res, err := RunServe(context.Background(), ServeRunOptions{URL: srv.URL, Requests: reqs, Rate: rate, Burstiness: 1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if s := SummarizeServe(res.Records, nil); s.Completed != n {
		t.Fatalf("%d completed", s.Completed)
	}
	for i, rq := range reqs {
		v, ok := fs.arrived.Load(rq.Prompt)
		if !ok {
			t.Fatalf("request %d never arrived", i)
		}
		if at := v.(time.Time).Sub(start); at < offsets[i] {
			t.Errorf("request %d arrived at %v, due at %v", i, at, offsets[i])
		}
	}
	if offsets[n-1] < 20*svMS {
		t.Errorf("the schedule is too short to test pacing: %v", offsets)
	}
}

// Ending the context stops sending; requests in flight finish within the
// grace period, or are cancelled and recorded as interrupted.
func TestRunInterrupt(t *testing.T) {
	t.Run("grace", func(t *testing.T) {
		fs := &svStream{pause: 2 * svMS}
		srv := httptest.NewServer(fs)
		defer srv.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		res, err := RunServe(ctx, ServeRunOptions{URL: srv.URL, Requests: svPrompts(50, 4, 5, 1), Concurrency: 2,
			Grace: 10 * time.Second, Done: func(bool) { cancel() }})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Interrupted || len(res.Records) == 0 || len(res.Records) >= 50 {
			t.Fatalf("interrupted %v, %d records", res.Interrupted, len(res.Records))
		}
		for i, r := range res.Records {
			if !r.OK() || r.OutputTokens != 5 {
				t.Errorf("request %d in flight did not finish: %+v", i, r)
			}
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		fs := &svStream{hangUntilC: true}
		srv := httptest.NewServer(fs)
		defer srv.Close()
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for fs.count.Load() < 3 {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		start := time.Now()
		res, err := RunServe(ctx, ServeRunOptions{URL: srv.URL, Requests: svPrompts(10, 4, 5, 1), Concurrency: 3, Grace: 20 * svMS})
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("took %v", time.Since(start))
		}
		if !res.Interrupted || len(res.Records) != 3 {
			t.Fatalf("interrupted %v, %d records", res.Interrupted, len(res.Records))
		}
		for _, r := range res.Records {
			if r.OK() || !strings.Contains(r.Err, "interrupted") {
				t.Errorf("hung request: %+v", r)
			}
		}
	})
}

// A per-request timeout fails the request with a clear error.
func TestRunTimeout(t *testing.T) {
	fs := &svStream{hangUntilC: true}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	res, err := RunServe(context.Background(), ServeRunOptions{URL: srv.URL, Requests: svPrompts(2, 4, 5, 1), Timeout: 30 * svMS})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records {
		if r.OK() || !strings.Contains(r.Err, "timed out after 30ms") {
			t.Errorf("timeout: %+v", r)
		}
	}
}
