package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Every bad request gets its status and an OpenAI-shaped error with a
// message that says what is wrong, and the server keeps serving.
func TestBadRequests(t *testing.T) {
	ts := startServer(t, nil)
	chatMsgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body string
		status           int
		param, contains  string
	}{
		{"malformed JSON", "/v1/completions", `{"prompt": "x",`, 400, "", "invalid JSON"},
		{"trailing garbage", "/v1/completions", `{"prompt":"x"} xyz`, 400, "", "invalid JSON"},
		{"empty body", "/v1/completions", ``, 400, "", "empty"},
		{"array body", "/v1/completions", `[1,2]`, 400, "", "JSON object"},
		{"max_tokens string", "/v1/completions", `{"prompt":"x","max_tokens":"ten"}`, 400, "max_tokens", "expected an integer"},
		{"max_tokens float", "/v1/completions", `{"prompt":"x","max_tokens":1.5}`, 400, "max_tokens", "expected an integer"},
		{"temperature string", "/v1/completions", `{"prompt":"x","temperature":"hot"}`, 400, "temperature", "expected a number"},
		{"stream string", "/v1/completions", `{"prompt":"x","stream":"yes"}`, 400, "stream", "expected a boolean"},
		{"prompt number", "/v1/completions", `{"prompt":42}`, 400, "prompt", "expected a string"},
		{"prompt missing", "/v1/completions", `{"max_tokens":3}`, 400, "prompt", "required"},
		{"prompt empty array", "/v1/completions", `{"prompt":[]}`, 400, "prompt", "empty"},
		{"prompt id out of vocabulary", "/v1/completions", `{"prompt":[1,2,99999]}`, 400, "prompt", "outside the vocabulary"},
		{"invalid UTF-8", "/v1/completions", "{\"prompt\":\"\xff\xfe\"}", 400, "", "UTF-8"},
		{"negative max_tokens", "/v1/completions", `{"prompt":"x","max_tokens":-5}`, 400, "max_tokens", "at least 1"},
		{"zero max_tokens", "/v1/completions", `{"prompt":"x","max_tokens":0}`, 400, "max_tokens", "at least 1"},
		{"max_tokens over the limit", "/v1/completions", `{"prompt":"x","max_tokens":100000}`, 400, "max_tokens", "at most"},
		{"max_tokens over the context", "/v1/completions", `{"prompt":` + longPrompt(1500) + `,"max_tokens":1000}`, 400, "max_tokens", "context length"},
		{"prompt over the context", "/v1/completions", `{"prompt":` + longPrompt(3000) + `}`, 400, "prompt", "context length"},
		{"unknown model", "/v1/completions", `{"model":"gpt-9","prompt":"x"}`, 404, "model", "does not exist"},
		{"unknown model chat", "/v1/chat/completions", `{"model":"gpt-9",` + chatMsgs + `}`, 404, "model", "does not exist"},
		{"negative temperature", "/v1/completions", `{"prompt":"x","temperature":-1}`, 400, "temperature", ">= 0"},
		{"top_p zero", "/v1/completions", `{"prompt":"x","top_p":0}`, 400, "top_p", "(0, 1]"},
		{"top_k negative", "/v1/completions", `{"prompt":"x","top_k":-3}`, 400, "top_k", ">= 0"},
		{"presence_penalty", "/v1/completions", `{"prompt":"x","presence_penalty":3}`, 400, "presence_penalty", "[-2, 2]"},
		{"n zero", "/v1/completions", `{"prompt":"x","n":0}`, 400, "n", "between 1"},
		{"n too many", "/v1/completions", `{"prompt":"x","n":1000}`, 400, "n", "between 1"},
		{"stop empty", "/v1/completions", `{"prompt":"x","stop":[""]}`, 400, "stop", "empty"},
		{"stop number", "/v1/completions", `{"prompt":"x","stop":7}`, 400, "stop", "string"},
		{"logit_bias key", "/v1/completions", `{"prompt":"x","logit_bias":{"abc":1}}`, 400, "logit_bias", "token ids"},
		{"logit_bias range", "/v1/completions", `{"prompt":"x","logit_bias":{"5":500}}`, 400, "logit_bias", "[-100, 100]"},
		{"logit_bias id", "/v1/completions", `{"prompt":"x","logit_bias":{"99999":1}}`, 400, "logit_bias", "vocabulary"},
		{"logprobs type chat", "/v1/chat/completions", `{` + chatMsgs + `,"logprobs":3}`, 400, "logprobs", "boolean"},
		{"echo", "/v1/completions", `{"prompt":"x","echo":true}`, 400, "echo", "not supported"},
		{"stream_options without stream", "/v1/completions", `{"prompt":"x","stream_options":{"include_usage":true}}`, 400, "stream_options", "stream"},
		{"chat no messages", "/v1/chat/completions", `{"max_tokens":2}`, 400, "messages", "required"},
		{"chat messages empty", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", "empty"},
		{"chat messages type", "/v1/chat/completions", `{"messages":"hi"}`, 400, "messages", "array"},
		{"chat bad role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages", "role"},
		{"chat image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "messages[0].content", "text parts"},
		{"execute n", "/execute", `{"prompt":"x","n":2}`, 400, "n", "one sequence"},
		{"execute both", "/execute", `{"prompt":"x",` + chatMsgs + `}`, 400, "messages", "not both"},
		{"cancel without id", "/cancel", `{}`, 400, "request_id", "required"},
		{"cancel unknown id", "/cancel", `{"request_id":"nope"}`, 404, "request_id", "no running request"},
		{"unknown endpoint", "/v2/everything", `{}`, 404, "", "no such endpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.post(c.path, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			v := r.json(t)
			e, _ := v["error"].(map[string]any)
			if e == nil || str(e["type"]) == "" {
				t.Fatalf("not an OpenAI error: %s", r.body)
			}
			if _, ok := e["param"]; !ok {
				t.Errorf("no param field: %s", r.body)
			}
			if _, ok := e["code"]; !ok {
				t.Errorf("no code field: %s", r.body)
			}
			if c.param != "" && str(e["param"]) != c.param {
				t.Errorf("param %q, want %q: %s", e["param"], c.param, r.body)
			}
			if !strings.Contains(str(e["message"]), c.contains) {
				t.Errorf("message %q does not say %q", e["message"], c.contains)
			}
			if r.header.Get("X-Request-Id") == "" {
				t.Errorf("no X-Request-Id")
			}
		})
	}
	if r := ts.do("GET", "/v1/completions", nil); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Errorf("GET on a POST endpoint: %d %v", r.status, r.header)
	}
	if r := ts.post("/v1/completions", map[string]any{"prompt": "still serving", "max_tokens": 2}); r.status != 200 {
		t.Fatalf("server stopped serving: %d %s", r.status, r.body)
	}
	waitNoLeaks(t, ts)
}

// longPrompt is a JSON array of n token ids.
func longPrompt(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("65,", n), ",") + "]"
}

// A body over --max-body gets 413 in OpenAI's shape, whether its size is
// announced or it is sent chunked; the server keeps serving.
func TestBodyTooLarge(t *testing.T) {
	ts := startServer(t, nil)
	big := `{"prompt":"` + strings.Repeat("a", 10<<20) + `"}`

	r := ts.post("/v1/completions", big)
	if r.status != 413 || str(path(r.json(t), "error", "code")) != "request_too_large" ||
		!strings.Contains(str(path(r.json(t), "error", "message")), "exceeds the limit") {
		t.Fatalf("10 MB body: %d %s", r.status, r.body)
	}
	// Chunked: the size is only known while reading.
	req, _ := http.NewRequest("POST", ts.url+"/v1/completions", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	resp, err := client.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Fatalf("chunked 10 MB body: %d %s", resp.StatusCode, b)
		}
	} // else: the server may close before the client finished sending; what matters is below.
	if r := ts.post("/v1/completions", map[string]any{"prompt": "after the big one", "max_tokens": 2}); r.status != 200 {
		t.Fatalf("server stopped serving: %d %s", r.status, r.body)
	}
}

// Random bytes and mangled requests never get a 5xx or a dropped
// server.
func TestGarbage(t *testing.T) {
	ts := startServer(t, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	valid := `{"prompt":"The ring","max_tokens":2,"temperature":0.5,"stop":["x"],"logit_bias":{"3":1},"n":1}`
	for i := range 150 {
		var body []byte
		switch i % 3 {
		case 0:
			body = make([]byte, rng.IntN(64))
			for j := range body {
				body[j] = byte(rng.IntN(256))
			}
		case 1: // truncate
			body = []byte(valid[:rng.IntN(len(valid))])
		default: // flip a byte
			body = []byte(valid)
			body[rng.IntN(len(body))] = byte(rng.IntN(256))
		}
		ep := []string{"/v1/completions", "/v1/chat/completions", "/execute", "/cancel"}[i%4]
		r := ts.post(ep, body)
		if r.status >= 500 {
			t.Fatalf("%s %q: %d %s", ep, body, r.status, r.body)
		}
	}
	// Raw protocol garbage on a socket.
	for _, raw := range []string{"GARBAGE\r\n\r\n", "POST /v1/completions HTTP/1.1\r\nContent-Length: -4\r\n\r\n", "\x00\x01\x02\r\n\r\n"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(conn, raw)
		status, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if !strings.Contains(status, " 400 ") {
			t.Errorf("%q: status line %q", raw, status)
		}
	}
	if r := ts.post("/v1/completions", map[string]any{"prompt": "still here", "max_tokens": 2}); r.status != 200 {
		t.Fatalf("server stopped serving: %d %s", r.status, r.body)
	}
	waitNoLeaks(t, ts)
}

func TestAuth(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.APIKey = "sekret" })
	body := map[string]any{"prompt": "x", "max_tokens": 1}
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "sekret"}, {"Authorization", "Basic sekret"}} {
		r := ts.post("/v1/completions", body, hdr...)
		if r.status != 401 || str(path(r.json(t), "error", "code")) != "invalid_api_key" || r.header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%v: %d %s", hdr, r.status, r.body)
		}
	}
	for _, p := range []string{"/v1/models", "/execute", "/cancel"} {
		method := "POST"
		if p == "/v1/models" {
			method = "GET"
		}
		if r := ts.do(method, p, nil); r.status != 401 {
			t.Errorf("%s without a key: %d", p, r.status)
		}
	}
	if r := ts.post("/v1/completions", body, "Authorization", "Bearer sekret"); r.status != 200 {
		t.Errorf("right key: %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/health", nil); r.status != 200 {
		t.Errorf("/health needs no key: %d", r.status)
	}
	if r := ts.do("GET", "/metrics", nil); r.status != 200 {
		t.Errorf("/metrics needs no key: %d", r.status)
	}
}

func TestRequestIDs(t *testing.T) {
	ts := startServer(t, nil)
	body := map[string]any{"prompt": "x", "max_tokens": 1}
	if r := ts.post("/v1/completions", body, "X-Request-Id", "abc-123"); r.header.Get("X-Request-Id") != "abc-123" ||
		str(r.json(t)["id"]) != "cmpl-abc-123" {
		t.Errorf("X-Request-Id not kept: %v %s", r.header, r.body)
	}
	if r := ts.post("/v1/completions", body, "X-Correlation-Id", "corr-9"); r.header.Get("X-Request-Id") != "corr-9" {
		t.Errorf("X-Correlation-Id not kept: %v", r.header)
	}
	r := ts.post("/v1/completions", body, "X-Request-Id", strings.Repeat("x", 500))
	if id := r.header.Get("X-Request-Id"); len(id) != 36 {
		t.Errorf("an overlong id should be replaced by a UUID, got %q", id)
	}
	if !strings.Contains(ts.logs.String(), `"request_id":"abc-123"`) {
		t.Errorf("log lines lack the request id")
	}
	for _, line := range strings.Split(strings.TrimSpace(ts.logs.String()), "\n") {
		if strings.Contains(line, `"message":"request"`) && !strings.Contains(line, `"request_id"`) {
			t.Errorf("request log line without request_id: %s", line)
		}
	}
	if bytes.Count([]byte(ts.logs.String()), []byte(`"route":"/v1/completions"`)) < 3 {
		t.Errorf("access lines missing:\n%s", ts.logs.String())
	}
}
