package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/ringbuf"
	"ringlm/runner"
	"ringlm/tokenizer"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testmodel.Cleanup()
	os.Exit(code)
}

// tinyModel is the tiny llama shape with synth's built-in 512-token
// vocabulary (ChatML template), written once per test binary.
func tinyModel(t testing.TB) string { return testmodel.Path(t, "llama", gguf.TypeF16) }

// testServer is a server with the tiny model on a loopback port.
type testServer struct {
	t    testing.TB
	s    *Server
	m    *Model
	url  string
	logs *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Device = "cpu" // the same device (and outputs) with or without a GPU; package runner covers the others
	cfg.Slots = 8
	cfg.KVBlocks = 256
	cfg.MaxBody = 1 << 20
	cfg.MaxTokens = 1024
	return cfg
}

// startServer starts a server; edit may change the configuration. The
// model is loaded unless noModel.
func startServer(t testing.TB, edit func(*Config), noModel ...bool) *testServer {
	t.Helper()
	return startServerWith(t, edit, nil, len(noModel) == 0 || !noModel[0])
}

// startServerWith lets a test wrap the listener (to tune accepted sockets).
func startServerWith(t testing.TB, edit func(*Config), wrap func(net.Listener) net.Listener, withModel bool) *testServer {
	t.Helper()
	cfg := testConfig()
	cfg.Models = []string{tinyModel(t)}
	if edit != nil {
		edit(&cfg)
	}
	logs := &syncBuffer{}
	log := zerolog.New(logs).Level(zerolog.DebugLevel)
	s := New(cfg, log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, s: s, url: "http://" + ln.Addr().String(), logs: logs, done: make(chan error, 1)}
	if wrap != nil {
		ln = wrap(ln)
	}
	go func() { ts.done <- s.Serve(ln) }()
	if withModel {
		ts.load()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		if ts.m != nil {
			ts.m.Close()
		}
		if t.Failed() {
			t.Logf("server log:\n%s", tail(logs.String(), 4000))
		}
	})
	return ts
}

func (ts *testServer) load() { ts.loadWith(nil) }

// loadWith loads the model as `ringlm serve` does; edit may change the
// Model before the server has it.
func (ts *testServer) loadWith(edit func(*Model)) {
	ts.t.Helper()
	r, err := runner.Load(ts.s.cfg.Models[0], runner.Options{Name: ts.s.cfg.ModelName, ChatTemplate: ts.s.cfg.ChatTemplate, ChatTemplateFile: ts.s.cfg.ChatTemplateFile,
		Device: ts.s.cfg.Device, Slots: ts.s.cfg.Slots, TokenBudget: ts.s.cfg.TokenBudget, PrefillChunk: ts.s.cfg.PrefillChunk, KVBlocks: ts.s.cfg.KVBlocks,
		KVMemoryMiB: ts.s.cfg.KVMemoryMiB, KVType: ts.s.cfg.KVType, PrefixCache: ts.s.cfg.PrefixCache, MaxQueue: ts.s.cfg.MaxQueue,
		Allocator: ringbuf.HeapAllocator{}, Log: ts.s.log, StepHook: ts.s.StepHook()})
	if err != nil {
		ts.t.Fatal(err)
	}
	// As `ringlm serve` builds its Model (cmd/ringlm serve.go).
	ts.m = &Model{Engine: r.Engine, Tokenizer: r.Tokenizer, Chat: r.Chat, ChatErr: r.ChatErr, Name: r.Name, Aliases: r.Aliases,
		Context: r.Model.Context, Created: time.Now().Unix(), Fingerprint: r.Fingerprint, Backend: r}
	if edit != nil {
		edit(ts.m)
	}
	ts.s.SetModel(ts.m)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

var client = &http.Client{Timeout: 2 * time.Minute}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("status %d, body is not JSON: %v\n%s", r.status, err, r.body)
	}
	return v
}

func (ts *testServer) do(method, path string, body any, hdr ...string) response {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, ts.url+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: reading: %v", method, path, err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func (ts *testServer) post(path string, body any, hdr ...string) response {
	ts.t.Helper()
	return ts.do("POST", path, body, hdr...)
}

// sseEvent is one server-sent event.
type sseEvent struct {
	event string
	data  string
}

// readSSE parses a whole SSE body, checking the framing: every event is
// "field: value" lines ended by a blank line.
func readSSE(t testing.TB, body []byte) []sseEvent {
	t.Helper()
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Fatalf("SSE body does not end with a blank line: %q", tail(string(body), 200))
	}
	var out []sseEvent
	for _, block := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				if ev.data != "" {
					t.Fatalf("event with two data lines: %q", block)
				}
				ev.data = line[len("data: "):]
			default:
				t.Fatalf("bad SSE line %q in %q", line, block)
			}
		}
		out = append(out, ev)
	}
	return out
}

// streamReader reads SSE events from a live response.
type streamReader struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func (ts *testServer) openStream(path string, body any, hdr ...string) *streamReader {
	ts.t.Helper()
	js, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", ts.url+path, bytes.NewReader(js))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	// A dedicated transport: closing the body must close the connection.
	tr := &http.Transport{DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		ts.t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &streamReader{resp: resp, sc: sc}
}

func (r *streamReader) next() (sseEvent, bool) {
	var ev sseEvent
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			return ev, true
		case strings.HasPrefix(line, "event: "):
			ev.event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[len("data: "):]
		}
	}
	return ev, false
}

func (r *streamReader) close() { r.resp.Body.Close() }

// waitFor polls cond until it holds or a generous deadline (the race
// detector on a loaded 2-core machine is slow).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leaks lists goroutines still running request code: a job's reader,
// watchdog or writer, or the engine's per-request context watcher.
func leaks() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "httpapi.(*job)") || strings.Contains(g, "httpapi.(*Server).generate") ||
			strings.Contains(g, "engine.(*Engine).Submit") {
			out = append(out, g)
		}
	}
	return out
}

func waitNoLeaks(t testing.TB, ts *testServer) {
	t.Helper()
	waitFor(t, "requests to end", func() bool { return ts.s.Active() == 0 })
	waitFor(t, "KV blocks to return", func() bool { return ts.m.Engine.Stats().Blocks.Used == 0 })
	deadline := time.Now().Add(10 * time.Second)
	for {
		l := leaks()
		if len(l) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines leaked:\n%s", len(l), strings.Join(l, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func path(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func mustJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v: %q", err, s)
	}
	return v
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// serveModel serves m (an engine the test built on its own device) with s
// on a loopback port until the test ends, then shuts down, closes m and,
// if the test failed, logs the end of the server's log.
func serveModel(t *testing.T, s *Server, m *Model, logs *syncBuffer) *testServer {
	t.Helper()
	s.SetModel(m)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := contextWithTimeout(5 * time.Second)
		defer cancel()
		s.Shutdown(ctx)
		m.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", tail(logs.String(), 4000))
		}
	})
	return &testServer{t: t, s: s, m: m, url: "http://" + ln.Addr().String(), logs: logs}
}

// tinyTokenizer is the test model's vocabulary and tokenizer, for tests
// that serve it over an engine on a device of their own.
func tinyTokenizer(t testing.TB) (*tokenizer.Vocab, *tokenizer.Tokenizer) {
	t.Helper()
	f, err := gguf.Open(tinyModel(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // the vocabulary may point into the mapping
	tok, err := tokenizer.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Vocab(), tok
}
