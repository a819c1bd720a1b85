package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"ringlm/engine"
	"ringlm/kernels"
	"ringlm/ringbuf"
	"ringlm/tokenizer"
)

// nullModels serves models over null devices, each load a fresh engine,
// and records loads and closes in order.
type nullModels struct {
	t      *testing.T
	vocab  int
	tok    *tokenizer.Tokenizer
	mu     sync.Mutex
	events []string
	gates  map[string]chan struct{} // a model's steps wait for its gate
	fail   map[string]error         // a model whose load fails
}

func (nm *nullModels) record(e string) {
	nm.mu.Lock()
	nm.events = append(nm.events, e)
	nm.mu.Unlock()
}

func (nm *nullModels) log() string {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	return strings.Join(nm.events, ", ")
}

func (nm *nullModels) source(name string) ModelSource {
	return ModelSource{Name: name, Load: func(context.Context) (*Model, error) {
		nm.mu.Lock()
		gate, fail := nm.gates[name], nm.fail[name]
		nm.mu.Unlock()
		if fail != nil {
			nm.record("fail " + name)
			return nil, fail
		}
		var forward func([]kernels.Entry) error
		if gate != nil {
			forward = func([]kernels.Entry) error { <-gate; return nil }
		}
		dev := newNullDevice("null-"+name, nm.vocab, 64, 4, forward)
		eng, err := engine.New(engine.Config{Slots: 4, NumBlocks: 64, Context: 512, Vocab: nm.vocab,
			Allocator: ringbuf.HeapAllocator{}}, dev)
		if err != nil {
			return nil, err
		}
		nm.record("load " + name)
		return &Model{Engine: eng, Tokenizer: nm.tok, Name: name, Context: 512, Created: time.Now().Unix(), Fingerprint: "fp_" + name,
			Info:    ModelInfo{Digest: "digest-" + name, Family: "null", ParameterSize: "1K", QuantizationLevel: "F16", Size: 1 << 20},
			Backend: closer{eng, func() { nm.record("close " + name) }}}, nil
	}}
}

// closer is a Backend that records its Close.
type closer struct {
	e    *engine.Engine
	done func()
}

func (c closer) Fault() error { return nil }
func (c closer) Close() error { c.done(); return c.e.Close() }

// startModels serves nm's models named names, the first loaded, with
// cfg's queue bound.
func startModels(t *testing.T, nm *nullModels, maxQueue int, names ...string) *testServer {
	t.Helper()
	v, tok := tinyTokenizer(t)
	nm.vocab, nm.tok = len(v.Tokens), tok
	cfg := testConfig()
	cfg.MaxQueue = maxQueue
	logs := &syncBuffer{}
	s := New(cfg, zerolog.New(logs))
	srcs := make([]ModelSource, len(names))
	for i, n := range names {
		srcs[i] = nm.source(n)
	}
	first, err := srcs[0].Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.SetModels(srcs, first)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := contextWithTimeout(5 * time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := s.CloseModels(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", tail(logs.String(), 4000))
		}
	})
	return &testServer{t: t, s: s, url: "http://" + ln.Addr().String(), logs: logs}
}

func (ts *testServer) queued() int {
	sw := ts.s.sw.Load()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return len(sw.queue)
}

// Requests route by their model field; another model's request waits
// until the loaded model's running stream has finished, then that model
// is closed and the other loaded; the waiting line is bounded; unknown
// names are 404 with the names served.
func TestModelSwitch(t *testing.T) {
	gate := make(chan struct{})
	nm := &nullModels{t: t, gates: map[string]chan struct{}{"a": gate}}
	ts := startModels(t, nm, 1, "a", "b")

	r := ts.do("GET", "/v1/models", nil)
	data, _ := path(r.json(t), "data").([]any)
	if r.status != 200 || len(data) != 2 || str(path(data, 0, "id")) != "a" || path(data, 0, "loaded") != true ||
		num(path(data, 0, "max_model_len")) != 512 || str(path(data, 1, "id")) != "b" || path(data, 1, "loaded") != false ||
		path(data, 1, "max_model_len") != nil {
		t.Fatalf("/v1/models: %d %s", r.status, r.body)
	}
	r = ts.post("/v1/completions", map[string]any{"model": "c", "prompt": "x"})
	if msg := str(path(r.json(t), "error", "message")); r.status != 404 || str(path(r.json(t), "error", "code")) != "model_not_found" ||
		!strings.Contains(msg, `"a", "b"`) {
		t.Fatalf("unknown model: %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/v1/models/b", nil); r.status != 200 || str(path(r.json(t), "id")) != "b" {
		t.Fatalf("/v1/models/b: %d %s", r.status, r.body)
	}

	// No model field: the first. Its steps wait at the gate, so the
	// stream holds model a until the gate opens.
	st := ts.openStream("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 6, "ignore_eos": true, "stream": true})
	defer st.close()
	type answer struct {
		r   response
		err error
	}
	bDone := make(chan answer, 1)
	go func() {
		// ts.post fails the test from this goroutine; do it by hand.
		resp, err := client.Post(ts.url+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"b","prompt":"x","max_tokens":3,"ignore_eos":true}`))
		if err != nil {
			bDone <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		bDone <- answer{r: response{status: resp.StatusCode, body: body}, err: err}
	}()
	waitFor(t, "the request for b to wait", func() bool { return ts.queued() == 1 })
	// The line holds one (--max-queue 1): the next gets 503 at once.
	if r := ts.post("/v1/completions", map[string]any{"model": "b", "prompt": "x"}); r.status != 503 ||
		str(path(r.json(t), "error", "code")) != "queue_full" {
		t.Fatalf("over the bound: %d %s", r.status, r.body)
	}
	// Ready while switching; a is draining, b not loaded.
	if r := ts.do("GET", "/health", nil); r.status != 200 || str(path(r.json(t), "status")) != "switching" {
		t.Errorf("/health while switching: %d %s", r.status, r.body)
	}
	select {
	case a := <-bDone:
		t.Fatalf("b answered while a's stream ran: %+v", a)
	default:
	}

	close(gate)
	var finish string
	for {
		ev, ok := st.next()
		if !ok || ev.data == "[DONE]" {
			break
		}
		if f := str(path(mustJSON(t, ev.data), "choices", 0, "finish_reason")); f != "" {
			finish = f
		}
	}
	if finish != "length" {
		t.Fatalf("a's stream ended with %q, want length", finish)
	}
	var b answer
	select {
	case b = <-bDone:
	case <-time.After(30 * time.Second):
		t.Fatal("b never answered")
	}
	if b.err != nil || b.r.status != 200 || str(path(b.r.json(t), "system_fingerprint")) != "fp_b" {
		t.Fatalf("b: %v %d %s", b.err, b.r.status, b.r.body)
	}
	if got := nm.log(); got != "load a, close a, load b" {
		t.Errorf("events %q", got)
	}

	r = ts.do("GET", "/api/ps", nil)
	if r.status != 200 || str(path(r.json(t), "models", 0, "name")) != "b" || path(r.json(t), "models", 1) != nil {
		t.Fatalf("/api/ps after the switch: %d %s", r.status, r.body)
	}
	// Back to a, through another endpoint that names a model.
	if r := ts.post("/tokenize", map[string]any{"model": "a", "content": "hello"}); r.status != 200 {
		t.Fatalf("/tokenize a: %d %s", r.status, r.body)
	}
	if got := nm.log(); got != "load a, close a, load b, close b, load a" {
		t.Errorf("events %q", got)
	}
	r = ts.do("GET", "/v1/models", nil)
	if data, _ := path(r.json(t), "data").([]any); path(data, 0, "loaded") != true || path(data, 1, "loaded") != false ||
		num(path(data, 1, "max_model_len")) != 512 {
		t.Errorf("/v1/models after switching back: %s", r.body)
	}
}

// A model that fails to load answers its waiting requests with one line
// naming it; the server goes on serving the others.
func TestModelLoadFails(t *testing.T) {
	nm := &nullModels{t: t, fail: map[string]error{"b": errors.New("gguf: b.gguf: bad magic")}}
	ts := startModels(t, nm, 4, "a", "b")
	r := ts.post("/v1/completions", map[string]any{"model": "b", "prompt": "x", "max_tokens": 2})
	if msg := str(path(r.json(t), "error", "message")); r.status != 500 || str(path(r.json(t), "error", "code")) != "model_load_failed" ||
		msg != `loading the model "b": gguf: b.gguf: bad magic` {
		t.Fatalf("failed load: %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/api/ps", nil); r.status != 200 || string(r.body) != `{"models":[]}` {
		t.Errorf("/api/ps with none loaded: %d %s", r.status, r.body)
	}
	if r := ts.post("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2}); r.status != 200 ||
		str(path(r.json(t), "system_fingerprint")) != "fp_a" {
		t.Fatalf("a after b failed: %d %s", r.status, r.body)
	}
	if got := nm.log(); got != "load a, close a, fail b, load a" {
		t.Errorf("events %q", got)
	}
}

// Shutdown answers the requests waiting for a switch at once; the model
// they waited for is not loaded, and CloseModels closes the loaded one.
func TestModelSwitchShutdown(t *testing.T) {
	gate := make(chan struct{})
	nm := &nullModels{t: t, gates: map[string]chan struct{}{"a": gate}}
	ts := startModels(t, nm, 4, "a", "b")
	st := ts.openStream("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2, "stream": true})
	defer st.close()
	bDone := make(chan int, 1)
	go func() {
		resp, err := client.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(`{"model":"b","prompt":"x"}`))
		if err != nil {
			bDone <- 0
			return
		}
		resp.Body.Close()
		bDone <- resp.StatusCode
	}()
	waitFor(t, "the request for b to wait", func() bool { return ts.queued() == 1 })
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := contextWithTimeout(20 * time.Second)
		defer cancel()
		shut <- ts.s.Shutdown(ctx)
	}()
	if code := <-bDone; code != 503 {
		t.Errorf("waiting request at shutdown: %d, want 503", code)
	}
	close(gate) // a's stream may finish now
	for {
		if _, ok := st.next(); !ok {
			break
		}
	}
	if err := <-shut; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if err := ts.s.CloseModels(); err != nil {
		t.Fatal(err)
	}
	if got := nm.log(); got != "load a, close a" {
		t.Errorf("events %q", got)
	}
}

// GET /api/ps answers Ollama's shape for the loaded model, with ringlm's
// device and loaded_at; behind --api-key like /v1/*.
func TestAPIPs(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.APIKey = "k" })
	if r := ts.do("GET", "/api/ps", nil); r.status != 401 {
		t.Fatalf("without the key: %d", r.status)
	}
	ts.m.Info = ModelInfo{Digest: "0123456789abcdef", Family: "llama", ParameterSize: "1.2M", QuantizationLevel: "F16", Size: 3 << 20}
	ts.s.SetModel(ts.m) // published again, with its Info
	r := ts.do("GET", "/api/ps", nil, "Authorization", "Bearer k")
	var ps RunningModels
	if err := jsonUnmarshal(string(r.body), &ps); err != nil || r.status != 200 || len(ps.Models) != 1 {
		t.Fatalf("/api/ps: %d %v %s", r.status, err, r.body)
	}
	m := ps.Models[0]
	want := RunningModel{Name: ts.m.Name, Model: ts.m.Name, Size: 3 << 20, Digest: "0123456789abcdef", ContextLength: ts.m.Context,
		Details: ModelDetails{Format: "gguf", Family: "llama", Families: []string{"llama"}, ParameterSize: "1.2M", QuantizationLevel: "F16"},
		Device:  "cpu"}
	loaded, expires := m.LoadedAt, m.ExpiresAt
	m.LoadedAt, m.ExpiresAt = time.Time{}, time.Time{}
	if !equalJSON(t, m, want) {
		t.Errorf("/api/ps model:\n got %+v\nwant %+v", m, want)
	}
	if time.Since(loaded) > time.Minute || loaded.Unix() != ts.m.Created || expires.Year() < 2200 {
		t.Errorf("loaded_at %v, expires_at %v (Ollama's ps shows Forever past 20 years)", loaded, expires)
	}
	for _, key := range []string{`"size_vram":0`, `"parent_model":""`, `"expires_at":"`, `"context_length":`} {
		if !strings.Contains(string(r.body), key) {
			t.Errorf("/api/ps lacks %s: %s", key, r.body)
		}
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err1 := marshal(a)
	jb, err2 := marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(ja) == string(jb)
}
