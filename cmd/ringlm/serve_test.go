package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ringlm/httpapi"
	"ringlm/runner"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func tinyGGUF(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if code, _, errOut := runCmd(t, "synth", "--preset", "tiny", "--arch", "llama", "-o", p); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	return p
}

// serve answers once loaded and, when its context ends (SIGTERM), lets a
// running stream finish, refuses new work and returns nil (exit 0).
func TestServeGracefulStop(t *testing.T) {
	model := tinyGGUF(t)
	rt := t.TempDir()
	t.Setenv("RINGLM_RUNTIME_DIR", rt)
	// Settings come from the environment too; flags win.
	t.Setenv("RINGLM_SLOTS", "4")
	t.Setenv("RINGLM_PORT", "1") // overridden by --port 0
	t.Setenv("RINGLM_KV_BLOCKS", "128")
	t.Setenv("RINGLM_PREFILL_CHUNK", "64")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrCh := make(chan string, 1)
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, []string{"-m", model, "--port", "0", "--log-format", "json", "--shutdown-timeout", "20s"}, logs,
			func(addr string) { addrCh <- addr }, nil)
	}()
	var base string
	select {
	case a := <-addrCh:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("serve returned early: %v\n%s", err, logs.String())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			var h struct {
				Status string
				Queue  struct{ Slots int }
			}
			json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				if h.Queue.Slots != 4 {
					t.Errorf("RINGLM_SLOTS not applied: %+v", h)
				}
				break
			}
			if resp.StatusCode != 503 || h.Status != "loading" {
				t.Fatalf("health while loading: %d %+v", resp.StatusCode, h)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %v\n%s", err, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Registered for ringlm ps while it runs.
	// ({pid}.json, or {pid}-{n}.json after other tests' servers.)
	var reg registration
	if files, _ := filepath.Glob(filepath.Join(rt, strconv.Itoa(os.Getpid())+"*.json")); len(files) != 1 {
		t.Errorf("registrations %q, want one", files)
	} else if b, err := os.ReadFile(files[0]); err != nil || json.Unmarshal(b, &reg) != nil || reg.PID != os.Getpid() || "http://"+reg.Address != base {
		t.Errorf("registration %s: %v", b, err)
	}

	resp, err := http.Post(base+"/execute", "application/json", strings.NewReader(`{"prompt":"The ring","max_tokens":40,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "event: started\n" {
		t.Fatalf("first line %q", line)
	}
	cancel() // what SIGTERM does
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "event: end\ndata: {\"finish_reason\":\"length\"}") {
		t.Errorf("the running request did not finish:\n%s", rest)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return")
	}
	// The step sizes reach the engine: --prefill-chunk as given, the
	// device's default token budget.
	kind := "cpu"
	if strings.Contains(logs.String(), `"device":"cuda`) {
		kind = "cuda"
	}
	steps := fmt.Sprintf(`"token_budget":%d,"prefill_chunk":64`, runner.DefaultTokenBudget(kind))
	for _, want := range []string{`"message":"ready"`, steps, `"message":"shutting down: no new requests; ^C again exits at once"`, `"message":"stopped"`, `"request_id"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Errorf("still serving after shutdown")
	}
	if left, _ := filepath.Glob(filepath.Join(rt, "*")); len(left) != 0 {
		t.Errorf("registration left after shutdown: %q", left)
	}
}

func TestServeUsage(t *testing.T) {
	if code, _, errOut := runCmd(t, "serve", "-m", "x.gguf", "--port", "99999"); code != 2 || !strings.Contains(errOut, "port") {
		t.Errorf("bad port: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "serve", "-m", "x.gguf", "--kv-type", "q4"); code != 2 || !strings.Contains(errOut, "kv-type") {
		t.Errorf("bad kv type: %d %q", code, errOut)
	}
	// A host without a scheme is the likely slip: one line naming the flag,
	// and the pointer to -h every usage error has.
	if code, _, errOut := runCmd(t, "serve", "-m", "x.gguf", "--cors-origins", "localhost:3000"); code != 2 ||
		!strings.Contains(errOut, "--cors-origins") || !strings.Contains(errOut, "http://localhost:3000") || strings.Count(errOut, "\n") != 2 ||
		!strings.HasSuffix(errOut, "Run 'ringlm serve -h' for usage.\n") {
		t.Errorf("bad CORS origin: %d %q", code, errOut)
	}
	t.Setenv("RINGLM_CORS_ORIGINS", "https://app.example.org/chat")
	if code, _, errOut := runCmd(t, "serve", "-m", "x.gguf"); code != 2 || !strings.Contains(errOut, "--cors-origins") {
		t.Errorf("bad CORS origin from the environment: %d %q", code, errOut)
	}
	t.Setenv("RINGLM_CORS_ORIGINS", "")
	t.Setenv("RINGLM_MAX_BODY", "lots")
	if code, _, errOut := runCmd(t, "serve", "-m", "x.gguf"); code != 2 || !strings.Contains(errOut, "RINGLM_MAX_BODY") {
		t.Errorf("bad env: %d %q", code, errOut)
	}
	t.Setenv("RINGLM_MAX_BODY", "")
	if code, _, errOut := runCmd(t, "serve", "-m", filepath.Join(t.TempDir(), "missing.gguf")); code != 1 || strings.Contains(errOut, "goroutine") {
		t.Errorf("missing model: %d %q", code, errOut)
	}
	// Several -m: each needs a name of its own, and --model-name cannot
	// name them all.
	model := tinyGGUF(t)
	other := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.Link(model, other); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "serve", "-m", model, "-m", other); code != 2 || !strings.Contains(errOut, `both named "tiny"`) {
		t.Errorf("two models of one name: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "serve", "-m", model, "-m", synthModel(t, t.TempDir(), "b", "llama"), "--model-name", "x"); code != 2 ||
		!strings.Contains(errOut, "--model-name") {
		t.Errorf("--model-name with two models: %d %q", code, errOut)
	}
	if code, out, _ := runCmd(t, "serve", "-h"); code != 0 || !strings.Contains(out, "One model is loaded at a time") {
		t.Errorf("serve -h does not say how several models are served:\n%s", out)
	}
	if code, out, _ := runCmd(t, "help"); code != 0 || !strings.Contains(out, "serve") {
		t.Errorf("help does not list serve: %q", out)
	}
}

// `ringlm serve` with no flags but the port serves the built-in model's
// chat (ChatML, as it has no template of its own), streaming and not, as
// the official openai client calls it.
func TestServeBuiltinChat(t *testing.T) {
	base, logs := startServe(t, "--port", "0", "--log-format", "json")
	const body = `{"model":"gocoder","messages":[{"role":"system","content":"You write Go."},{"role":"user","content":"Print hello."}],"max_tokens":12,"seed":1%s}`
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(fmt.Sprintf(body, "")))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Object  string
		Choices []struct {
			Message      struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" || c.Usage.CompletionTokens == 0 {
		t.Fatalf("chat: %d %v %+v", resp.StatusCode, err, c)
	}

	resp, err = http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(fmt.Sprintf(body, `,"stream":true`)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var text strings.Builder
	chunks := 0
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Object  string
			Choices []struct{ Delta struct{ Content string } }
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil || ch.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %q: %v", data, err)
		}
		chunks++
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if resp.StatusCode != 200 || chunks < 3 || !strings.HasSuffix(strings.TrimSpace(string(raw)), "data: [DONE]") {
		t.Fatalf("stream: %d, %d chunks\n%s", resp.StatusCode, chunks, raw)
	}
	// The same seed and messages: the same text, streamed or not.
	if text.String() != c.Choices[0].Message.Content {
		t.Errorf("streamed %q, not streamed %q", text.String(), c.Choices[0].Message.Content)
	}
	if n := strings.Count(logs.String(), "no chat template; using ChatML"); n != 1 {
		t.Errorf("the ChatML fallback logged %d times:\n%s", n, logs.String())
	}
}

// startServe runs `ringlm serve` with args until the test ends and waits
// for /health; it returns the base URL and the log.
func startServe(t *testing.T, args ...string) (string, *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrCh := make(chan string, 1)
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, args, logs, func(addr string) { addrCh <- addr }, nil)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("serve did not return")
		}
	})
	var base string
	select {
	case a := <-addrCh:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("serve returned early: %v\n%s", err, logs.String())
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready:\n%s", logs.String())
		}
	}
	return base, logs
}

// synthModel writes a tiny model of arch as dir/name.gguf.
func synthModel(t *testing.T, dir, name, arch string) string {
	t.Helper()
	p := filepath.Join(dir, name+".gguf")
	if code, _, errOut := runCmd(t, "synth", "--preset", "tiny", "--arch", arch, "-o", p); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	return p
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

type completion struct {
	Status      int
	Fingerprint string `json:"system_fingerprint"`
	Choices     []struct {
		FinishReason string `json:"finish_reason"`
	}
	Error struct{ Code, Message string }
}

func postCompletion(url, body string) (completion, error) {
	var c completion
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	c.Status = resp.StatusCode
	return c, json.NewDecoder(resp.Body).Decode(&c)
}

// serve with two -m: both listed, requests routed by name (none: the
// first); a request for b while a streams waits for that stream to end,
// then b is loaded and answers; an unknown name is 404 with both names.
func TestServeModels(t *testing.T) {
	dir := t.TempDir()
	a, b := synthModel(t, dir, "a", "llama"), synthModel(t, dir, "b", "qwen2")
	base, logs := startServe(t, "-m", a, "-m", b, "--port", "0", "--log-format", "json", "--slots", "2", "--kv-blocks", "256")

	var list struct {
		Data []struct {
			ID     string
			Loaded bool
		}
	}
	if code := getJSON(t, base+"/v1/models", &list); code != 200 || len(list.Data) != 2 || list.Data[0].ID != "a" || !list.Data[0].Loaded ||
		list.Data[1].ID != "b" || list.Data[1].Loaded {
		t.Fatalf("/v1/models: %d %+v", code, list)
	}
	c, err := postCompletion(base, `{"model":"nope","prompt":"x"}`)
	if err != nil || c.Status != 404 || c.Error.Code != "model_not_found" || !strings.Contains(c.Error.Message, `served: "a", "b"`) {
		t.Fatalf("unknown model: %v %+v", err, c)
	}
	ca, err := postCompletion(base, `{"prompt":"x","max_tokens":2}`)
	if err != nil || ca.Status != 200 {
		t.Fatalf("default model: %v %+v", err, ca)
	}

	// a streams long enough for b's request to arrive meanwhile.
	const streamed = 150
	resp, err := http.Post(base+"/execute", "application/json", strings.NewReader(fmt.Sprintf(`{"model":"a","prompt":"The ring","max_tokens":%d,"ignore_eos":true}`, streamed)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "event: started\n" {
		t.Fatalf("first line %q", line)
	}
	type answer struct {
		c   completion
		err error
	}
	bDone := make(chan answer, 1)
	go func() {
		c, err := postCompletion(base, `{"model":"b","prompt":"x","max_tokens":2}`)
		bDone <- answer{c, err}
	}()
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "event: end\ndata: {\"finish_reason\":\"length\"}") ||
		!strings.Contains(string(rest), fmt.Sprintf(`"generated_tokens":%d,`, streamed)) {
		t.Fatalf("a's stream did not complete (%v):\n%s", err, tail(string(rest), 400))
	}
	var ans answer
	select {
	case ans = <-bDone:
	case <-time.After(time.Minute):
		t.Fatal("b never answered")
	}
	if ans.err != nil || ans.c.Status != 200 || ans.c.Fingerprint == ca.Fingerprint || len(ans.c.Choices) != 1 {
		t.Fatalf("b: %v %+v (a's fingerprint %s)", ans.err, ans.c, ca.Fingerprint)
	}
	// The switch began while a's stream was running and waited for it.
	if !strings.Contains(logs.String(), `"from":"a","to":"b","running":1,"waiting":1,`) {
		t.Errorf("no switch from a running stream in the log:\n%s", tail(logs.String(), 3000))
	}

	var ps httpapi.RunningModels
	if code := getJSON(t, base+"/api/ps", &ps); code != 200 || len(ps.Models) != 1 {
		t.Fatalf("/api/ps: %d %+v", code, ps)
	}
	m := ps.Models[0]
	if m.Name != "b" || m.Details.Family != "qwen2" || m.Details.QuantizationLevel != "F16" || m.Size <= 0 || m.Device != "cpu" ||
		len(m.Digest) != 12 || m.ContextLength != 2048 || !strings.HasSuffix(m.Details.ParameterSize, "M") {
		t.Errorf("/api/ps: %+v", m)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
