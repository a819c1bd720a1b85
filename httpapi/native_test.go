package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExecute(t *testing.T) {
	ts := startServer(t, nil)
	r := ts.post("/execute", map[string]any{"prompt": "The ring", "max_tokens": 6, "logprobs": true, "seed": 9}, "X-Request-Id", "exec-1")
	evs := readSSE(t, r.body)
	var names []string
	for _, ev := range evs {
		names = append(names, ev.event)
	}
	want := "started " + strings.Repeat("token ", 6) + "metrics end"
	if got := strings.Join(names, " "); got != want && !strings.HasPrefix(got, "started token") {
		t.Fatalf("events %q, want %q", got, want)
	}
	if names[len(names)-2] != "metrics" || names[len(names)-1] != "end" {
		t.Fatalf("events %v", names)
	}
	st := mustJSON(t, evs[0].data)
	if str(st["request_id"]) != "exec-1" || num(st["seed"]) == 0 && st["seed"] == nil {
		t.Errorf("started %s", evs[0].data)
	}
	tokens := 0
	lastPos := -1.0
	for _, ev := range evs {
		if ev.event != "token" {
			continue
		}
		v := mustJSON(t, ev.data)
		if v["id"] == nil {
			continue // a held-back tail
		}
		tokens++
		if _, ok := v["text"].(string); !ok || num(v["pos"]) <= lastPos || v["logprob"] == nil || num(v["t_engine_ns"]) <= 0 {
			t.Errorf("token %s", ev.data)
		}
		lastPos = num(v["pos"])
	}
	m := mustJSON(t, evs[len(evs)-2].data)
	if tokens != 6 || num(m["generated_tokens"]) != 6 || m["ttft_ms"] == nil || m["e2e_ms"] == nil || m["itl_ms_mean"] == nil || num(m["prompt_tokens"]) < 2 {
		t.Errorf("%d tokens, metrics %s", tokens, evs[len(evs)-2].data)
	}
	if end := mustJSON(t, evs[len(evs)-1].data); str(end["finish_reason"]) != "length" {
		t.Errorf("end %v", end)
	}
	// Chat messages through /execute.
	r = ts.post("/execute", map[string]any{"messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 3})
	if evs := readSSE(t, r.body); evs[len(evs)-1].event != "end" {
		t.Errorf("chat /execute: %v", evs)
	}
}

// /cancel ends a running request; its stream closes with finish_reason
// cancelled and its KV blocks return.
func TestCancel(t *testing.T) {
	ts := startServer(t, nil)
	sr := ts.openStream("/execute", map[string]any{"prompt": "The ring", "max_tokens": 1000, "ignore_eos": true}, "X-Request-Id", "to-cancel")
	defer sr.close()
	ev, ok := sr.next()
	if !ok || ev.event != "started" {
		t.Fatalf("first event %v", ev)
	}
	if ev, _ := sr.next(); ev.event != "token" {
		t.Fatalf("second event %v", ev)
	}
	r := ts.post("/cancel", map[string]any{"request_id": "to-cancel"})
	if r.status != 200 || r.json(t)["cancelled"] != true {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	var last []sseEvent
	for {
		ev, ok := sr.next()
		if !ok {
			break
		}
		last = append(last, ev)
	}
	n := len(last)
	if n < 2 || last[n-2].event != "metrics" || last[n-1].event != "end" || str(mustJSON(t, last[n-1].data)["finish_reason"]) != "cancelled" {
		t.Fatalf("after cancel: %v", last[max(0, n-3):])
	}
	if gen := num(mustJSON(t, last[n-2].data)["generated_tokens"]); gen >= 1000 {
		t.Errorf("generated %v tokens after a cancel", gen)
	}
	waitNoLeaks(t, ts)
	// An OpenAI stream cancelled by id ends with finish_reason cancelled.
	sr2 := ts.openStream("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1000, "ignore_eos": true, "stream": true}, "X-Request-Id", "oai")
	defer sr2.close()
	sr2.next()
	if r := ts.post("/cancel?request_id=oai", nil); r.status != 200 {
		t.Fatalf("cancel by query: %d %s", r.status, r.body)
	}
	var finish string
	for {
		ev, ok := sr2.next()
		if !ok {
			break
		}
		if f := path(mustJSONOrNil(ev.data), "choices", 0, "finish_reason"); f != nil {
			finish = str(f)
		}
	}
	if finish != "cancelled" {
		t.Errorf("OpenAI stream finish %q", finish)
	}
	waitNoLeaks(t, ts)
}

func mustJSONOrNil(s string) map[string]any {
	if s == "[DONE]" {
		return nil
	}
	var v map[string]any
	_ = jsonUnmarshal(s, &v)
	return v
}

// A client that goes away cancels its request: streaming (seen when a
// write fails or by the watchdog), non-streaming (by the watchdog), and
// while queued. Blocks return and no goroutine stays behind.
func TestDisconnect(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Slots = 2 })
	addr := strings.TrimPrefix(ts.url, "http://")
	rawPost := func(path, body string) net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
		return conn
	}
	long := `{"prompt":"The ring","max_tokens":1000,"ignore_eos":true%s}`

	// Streaming: read a little, then hang up.
	for _, ep := range []string{"/v1/completions", "/v1/chat/completions", "/execute"} {
		body := fmt.Sprintf(long, `,"stream":true`)
		if ep == "/v1/chat/completions" {
			body = `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"ignore_eos":true,"stream":true}`
		}
		conn := rawPost(ep, body)
		br := bufio.NewReader(conn)
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		seen := 0
		for seen < 3 {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v", ep, err)
			}
			if strings.HasPrefix(line, "data: ") {
				seen++
			}
		}
		waitFor(t, "blocks in use", func() bool { return ts.m.Engine.Stats().Blocks.Used > 0 })
		conn.Close()
		waitNoLeaks(t, ts)
	}

	// Non-streaming: nothing is written until the end; the watchdog sees
	// the closed socket.
	conn := rawPost("/v1/completions", fmt.Sprintf(long, ""))
	waitFor(t, "the request to run", func() bool { return ts.m.Engine.Stats().Running > 0 })
	conn.Close()
	waitNoLeaks(t, ts)

	// Queued behind two running requests, then gone.
	a := ts.openStream("/execute", map[string]any{"prompt": "a", "max_tokens": 1000, "ignore_eos": true})
	b := ts.openStream("/execute", map[string]any{"prompt": "b", "max_tokens": 1000, "ignore_eos": true})
	a.next()
	b.next()
	conn = rawPost("/v1/completions", fmt.Sprintf(long, `,"stream":true`))
	waitFor(t, "a waiting request", func() bool { return ts.m.Engine.Stats().Waiting > 0 })
	conn.Close()
	waitFor(t, "the queue to empty", func() bool { return ts.m.Engine.Stats().Waiting == 0 })
	a.close()
	b.close()
	waitNoLeaks(t, ts)
}

// A streaming client that stops reading is dropped after StallTimeout.
func TestStalledClient(t *testing.T) {
	// Small socket buffers on both sides (set explicitly, which turns
	// Linux's autotuning off) make the server's writes block after a few
	// kilobytes.
	ts := startServerWith(t, func(c *Config) { c.StallTimeout = 300 * time.Millisecond }, func(ln net.Listener) net.Listener {
		return sndbufListener{ln}
	}, true)
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"The ring","max_tokens":1000,"ignore_eos":true,"stream":true,"logprobs":0}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	waitFor(t, "the request to run", func() bool { return ts.s.Active() > 0 })
	waitNoLeaks(t, ts)
	if !strings.Contains(ts.logs.String(), "client reads nothing") {
		t.Errorf("stall not detected")
	}
}

type sndbufListener struct{ net.Listener }

func (l sndbufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

func TestHealthAndLoading(t *testing.T) {
	ts := startServer(t, nil, true)
	r := ts.do("GET", "/health", nil)
	if r.status != 503 || str(r.json(t)["status"]) != "loading" {
		t.Fatalf("loading: %d %s", r.status, r.body)
	}
	if r := ts.post("/v1/completions", map[string]any{"prompt": "x"}); r.status != 503 || str(path(r.json(t), "error", "code")) != "model_loading" {
		t.Fatalf("generation while loading: %d %s", r.status, r.body)
	}
	ts.load()
	r = ts.do("GET", "/health", nil)
	v := r.json(t)
	if r.status != 200 || str(v["status"]) != "ok" || str(v["device"]) != "cpu" || str(v["model"]) != ts.m.Name ||
		num(path(v, "kv", "blocks_total")) != 256 || path(v, "queue", "waiting") == nil || path(v, "kv", "usage") == nil {
		t.Fatalf("ready: %d %s", r.status, r.body)
	}
}

func TestMetrics(t *testing.T) {
	ts := startServer(t, nil)
	ts.post("/v1/completions", map[string]any{"prompt": "The ring", "max_tokens": 5})
	ts.post("/v1/completions", map[string]any{"prompt": "The ring", "max_tokens": 5, "stream": true})
	r := ts.do("GET", "/metrics", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("%d %v", r.status, r.header)
	}
	text := string(r.body)
	for _, name := range []string{
		"ringlm:time_to_first_token_seconds_bucket", "ringlm:inter_token_latency_seconds_count", "ringlm:e2e_request_latency_seconds_sum",
		"ringlm:prompt_tokens_total", "ringlm:generation_tokens_total", "ringlm:num_requests_running", "ringlm:num_requests_waiting",
		"ringlm:kv_blocks_used", "ringlm:kv_blocks_free", "ringlm:prefix_cache_hits_total", "ringlm:step_time_seconds_count",
		"ringlm:request_success_total", "ringlm:kv_cache_usage_perc", "ringlm:http_requests_total",
	} {
		if !strings.Contains(text, name) {
			t.Errorf("missing %s", name)
		}
	}
	// Every line is a comment or `name{labels} value`.
	line := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eE]+|NaN|\+Inf$`)
	values := map[string]float64{}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(l, "# HELP ") || strings.HasPrefix(l, "# TYPE ") {
			continue
		}
		if !line.MatchString(l) {
			t.Errorf("bad exposition line %q", l)
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, _ := strconv.ParseFloat(l[i+1:], 64)
		values[l[:i]] = v
	}
	name := `ringlm:time_to_first_token_seconds_count{model_name="` + ts.m.Name + `"}`
	if values[name] != 2 {
		t.Errorf("%s = %v", name, values[name])
	}
	if v := values[`ringlm:generation_tokens_total{model_name="`+ts.m.Name+`"}`]; v != 10 {
		t.Errorf("generation tokens %v", v)
	}
	if v := values[`ringlm:step_time_seconds_count{model_name="`+ts.m.Name+`"}`]; v < 5 {
		t.Errorf("steps observed %v", v)
	}
}

// More requests than slots and queue: the excess gets 503 queue_full.
func TestQueueFull(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Slots = 1; c.MaxQueue = 1 })
	a := ts.openStream("/execute", map[string]any{"prompt": "a", "max_tokens": 1000, "ignore_eos": true})
	defer a.close()
	a.next()
	b := ts.openStream("/execute", map[string]any{"prompt": "b", "max_tokens": 1000, "ignore_eos": true})
	defer b.close()
	b.next()
	waitFor(t, "one waiting", func() bool { return ts.m.Engine.Stats().Waiting == 1 })
	r := ts.post("/v1/completions", map[string]any{"prompt": "c", "max_tokens": 2})
	if r.status != 503 || str(path(r.json(t), "error", "code")) != "queue_full" || r.header.Get("Retry-After") == "" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	a.close()
	b.close()
	waitNoLeaks(t, ts)
}

// Shutdown lets running requests finish within the deadline and ends the
// others with an error event; new requests are refused meanwhile.
func TestShutdown(t *testing.T) {
	t.Run("graceful", func(t *testing.T) {
		ts := startServer(t, nil)
		sr := ts.openStream("/execute", map[string]any{"prompt": "The ring", "max_tokens": 20, "ignore_eos": true})
		defer sr.close()
		sr.next()
		done := make(chan error, 1)
		go func() { done <- ts.s.Shutdown(context.Background()) }()
		waitFor(t, "draining", func() bool { return ts.s.draining.Load() })
		var last sseEvent
		for {
			ev, ok := sr.next()
			if !ok {
				break
			}
			last = ev
		}
		if last.event != "end" || str(mustJSON(t, last.data)["finish_reason"]) != "length" {
			t.Errorf("last event %v", last)
		}
		if err := <-done; err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if _, err := net.DialTimeout("tcp", strings.TrimPrefix(ts.url, "http://"), time.Second); err == nil {
			t.Errorf("still accepting connections")
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ts := startServer(t, nil)
		ex := ts.openStream("/execute", map[string]any{"prompt": "The ring", "max_tokens": 1000, "ignore_eos": true})
		defer ex.close()
		oai := ts.openStream("/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "hi"}},
			"max_tokens": 1000, "ignore_eos": true, "stream": true})
		defer oai.close()
		ex.next()
		oai.next()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- ts.s.Shutdown(ctx) }()
		var events []sseEvent
		for {
			ev, ok := ex.next()
			if !ok {
				break
			}
			events = append(events, ev)
		}
		n := len(events)
		if n < 2 || events[n-1].event != "error" || events[n-2].event != "metrics" || !strings.Contains(events[n-1].data, "shutting down") {
			t.Errorf("execute ended with %v", events[max(0, n-2):])
		}
		var sawErr, sawDone bool
		for {
			ev, ok := oai.next()
			if !ok {
				break
			}
			sawErr = sawErr || strings.Contains(ev.data, `"code":"shutting_down"`)
			sawDone = sawDone || ev.data == "[DONE]"
		}
		if !sawErr || !sawDone {
			t.Errorf("OpenAI stream: error %v, [DONE] %v", sawErr, sawDone)
		}
		if err := <-done; err == nil {
			t.Errorf("Shutdown past its deadline returned nil")
		}
		waitNoLeaks(t, ts)
	})
}

// A model whose device failed for good answers /health with 503 and the
// device's error (ringlm serve then exits for its supervisor to restart).
func TestHealthDeviceFailed(t *testing.T) {
	ts := startServer(t, nil)
	b := ts.m.Backend
	ts.m.Backend = failedBackend{b}
	r := ts.do("GET", "/health", nil)
	v := r.json(t)
	if r.status != 503 || str(v["status"]) != "device_failed" || !strings.Contains(str(v["error"]), "launch failure") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	ts.m.Backend = b
	if r := ts.do("GET", "/health", nil); r.status != 200 {
		t.Fatalf("healthy again: %d %s", r.status, r.body)
	}
}

// failedBackend is a backend whose device has faulted.
type failedBackend struct{ Backend }

func (failedBackend) Fault() error { return errors.New("cuda: kernel: unspecified launch failure") }
