package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"ringlm/sample"
)

func TestModels(t *testing.T) {
	ts := startServer(t, nil)
	r := ts.do("GET", "/v1/models", nil)
	v := r.json(t)
	if r.status != 200 || str(v["object"]) != "list" || str(path(v, "data", 0, "id")) != ts.m.Name || str(path(v, "data", 0, "object")) != "model" {
		t.Fatalf("models: %d %s", r.status, r.body)
	}
	for _, name := range append([]string{ts.m.Name}, ts.m.Aliases...) {
		if r := ts.do("GET", "/v1/models/"+strings.ReplaceAll(name, " ", "%20"), nil); r.status != 200 {
			t.Errorf("GET /v1/models/%s: %d %s", name, r.status, r.body)
		}
	}
	if r := ts.do("GET", "/v1/models/nope", nil); r.status != 404 || str(path(r.json(t), "error", "code")) != "model_not_found" {
		t.Errorf("unknown model: %d %s", r.status, r.body)
	}
	// Both the GGUF's general.name and the file's base name are accepted.
	for _, name := range []string{"tiny-llama (synthetic)", "tiny-test", "tiny-test.gguf", ""} {
		r := ts.post("/v1/completions", map[string]any{"model": name, "prompt": "The ring", "max_tokens": 2})
		if r.status != 200 {
			t.Errorf("model %q: %d %s", name, r.status, r.body)
		}
	}
}

func TestCompletion(t *testing.T) {
	ts := startServer(t, nil)
	r := ts.post("/v1/completions", map[string]any{"model": "tiny-test", "prompt": "The quick brown fox", "max_tokens": 8, "temperature": 0})
	v := r.json(t)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if str(v["object"]) != "text_completion" || !strings.HasPrefix(str(v["id"]), "cmpl-") || str(v["model"]) != "tiny-test" ||
		!strings.HasPrefix(str(v["system_fingerprint"]), "fp_") || num(v["created"]) == 0 {
		t.Errorf("envelope: %s", r.body)
	}
	if str(path(v, "choices", 0, "finish_reason")) != "length" || path(v, "choices", 0, "text") == nil {
		t.Errorf("choice: %s", r.body)
	}
	u := path(v, "usage")
	if num(path(u, "completion_tokens")) != 8 || num(path(u, "prompt_tokens")) < 2 ||
		num(path(u, "total_tokens")) != num(path(u, "prompt_tokens"))+8 {
		t.Errorf("usage: %s", r.body)
	}
	if r.header.Get("X-Request-Id") == "" || !strings.HasSuffix(str(v["id"]), r.header.Get("X-Request-Id")) {
		t.Errorf("request id header %q vs id %q", r.header.Get("X-Request-Id"), v["id"])
	}
}

// Streaming and non-streaming give the same text for the same seed, and
// the stream is well-formed SSE ending with [DONE].
func TestCompletionStreaming(t *testing.T) {
	ts := startServer(t, nil)
	req := map[string]any{"prompt": "In the beginning", "max_tokens": 12, "seed": 11, "temperature": 0.9}
	plain := ts.post("/v1/completions", req)
	want := str(path(plain.json(t), "choices", 0, "text"))

	req["stream"] = true
	req["stream_options"] = map[string]any{"include_usage": true}
	r := ts.post("/v1/completions", req)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	evs := readSSE(t, r.body)
	if evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("last event %q", evs[len(evs)-1].data)
	}
	var got strings.Builder
	finishes := 0
	var usage map[string]any
	for _, ev := range evs[:len(evs)-1] {
		c := mustJSON(t, ev.data)
		if str(c["object"]) != "text_completion" {
			t.Fatalf("chunk object: %s", ev.data)
		}
		if _, ok := c["usage"]; !ok {
			t.Fatalf("include_usage: chunk without usage field: %s", ev.data)
		}
		ch, _ := c["choices"].([]any)
		if len(ch) == 0 {
			usage, _ = c["usage"].(map[string]any)
			continue
		}
		got.WriteString(str(path(ch, 0, "text")))
		if f := path(ch, 0, "finish_reason"); f != nil {
			finishes++
			if f != "length" {
				t.Errorf("finish %v", f)
			}
		}
	}
	if got.String() != want {
		t.Errorf("streamed text %q != non-streamed %q", got.String(), want)
	}
	if finishes != 1 || usage == nil || num(usage["completion_tokens"]) != 12 {
		t.Errorf("finishes %d, usage %v", finishes, usage)
	}
}

// forcedEOS is the test model's EOS and a logit_bias that makes every
// token it (under ignore_eos, a run of hidden tokens).
func forcedEOS(t *testing.T, ts *testServer) (int32, map[string]any) {
	t.Helper()
	eos := ts.m.Tokenizer.Vocab().EOS
	if eos < 0 {
		t.Fatal("the test model has no EOS")
	}
	return eos, map[string]any{fmt.Sprint(eos): 100}
}

// A streamed completion has a chunk for a hidden token too: under
// ignore_eos with the EOS forced by logit_bias,
// six EOS tokens are six chunks of empty text before the finish, as vLLM
// streams them (a client times tokens by chunks).
func TestCompletionStreamingHiddenTokens(t *testing.T) {
	ts := startServer(t, nil)
	_, bias := forcedEOS(t, ts)
	req := map[string]any{"prompt": "In the beginning", "max_tokens": 6, "temperature": 0, "ignore_eos": true,
		"logit_bias": bias, "stream": true}
	evs := readSSE(t, ts.post("/v1/completions", req).body)
	if len(evs) == 0 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("events %v", evs)
	}
	tokens, finishes := 0, 0
	for _, ev := range evs[:len(evs)-1] {
		ch, _ := mustJSON(t, ev.data)["choices"].([]any)
		if len(ch) == 0 {
			continue
		}
		if text := str(path(ch, 0, "text")); text != "" {
			t.Errorf("a hidden token made text %q", text)
		}
		if path(ch, 0, "finish_reason") != nil {
			finishes++
			continue
		}
		if finishes > 0 {
			t.Errorf("a token chunk after the finish: %s", ev.data)
		}
		tokens++
	}
	if tokens != 6 || finishes != 1 {
		t.Errorf("%d token chunks and %d finishes, want 6 and 1", tokens, finishes)
	}
	// Not streamed: the same six tokens, no text.
	delete(req, "stream")
	r := ts.post("/v1/completions", req).json(t)
	if text := str(path(r, "choices", 0, "text")); text != "" || num(path(r, "usage", "completion_tokens")) != 6 {
		t.Errorf("not streamed: %v", r)
	}
}

// Logprobs list every generated token, hidden ones too, with their
// vocabulary text, as vLLM lists every sampled token: as many entries as
// completion_tokens, in completions and chat, streamed or not; a hidden
// token adds no text, so its text_offset does not move.
func TestLogprobsHiddenTokens(t *testing.T) {
	ts := startServer(t, nil)
	eos, bias := forcedEOS(t, ts)
	want := ts.m.Tokenizer.Decode([]int32{eos})
	if want == "" {
		t.Fatal("the EOS has no vocabulary text")
	}
	// Under ignore_eos: four EOS tokens; without it, one, which stops.
	for _, c := range []struct {
		ignore bool
		n      int
		finish string
	}{{true, 4, "length"}, {false, 1, "stop"}} {
		req := map[string]any{"prompt": "In the beginning", "max_tokens": 4, "temperature": 0, "ignore_eos": c.ignore,
			"logit_bias": bias, "logprobs": 2}
		r := ts.post("/v1/completions", req).json(t)
		lp, _ := path(r, "choices", 0, "logprobs").(map[string]any)
		toks, _ := lp["tokens"].([]any)
		offs, _ := lp["text_offset"].([]any)
		tops, _ := lp["top_logprobs"].([]any)
		if num(path(r, "usage", "completion_tokens")) != float64(c.n) || len(toks) != c.n || len(offs) != c.n || len(tops) != c.n ||
			str(path(r, "choices", 0, "finish_reason")) != c.finish {
			t.Fatalf("ignore_eos %v: %v", c.ignore, r)
		}
		for i := range toks {
			if str(toks[i]) != want || num(offs[i]) != 0 {
				t.Errorf("ignore_eos %v: entry %d is %v at %v, want %q at 0", c.ignore, i, toks[i], offs[i], want)
			}
		}
		chat := map[string]any{"messages": []map[string]any{{"role": "user", "content": "Hi"}}, "max_completion_tokens": 4,
			"temperature": 0, "ignore_eos": c.ignore, "logit_bias": bias, "logprobs": true, "top_logprobs": 1}
		r = ts.post("/v1/chat/completions", chat).json(t)
		content, _ := path(r, "choices", 0, "logprobs", "content").([]any)
		if len(content) != c.n || num(path(r, "usage", "completion_tokens")) != float64(c.n) {
			t.Fatalf("chat, ignore_eos %v: %v", c.ignore, r)
		}
		for _, e := range content {
			if str(path(e, "token")) != want {
				t.Errorf("chat, ignore_eos %v: entry %v, want %q", c.ignore, e, want)
			}
		}
		// Streamed: the same entries, spread over the chunks.
		chat["stream"] = true
		n := 0
		for _, ev := range readSSE(t, ts.post("/v1/chat/completions", chat).body) {
			if ev.data == "[DONE]" {
				continue
			}
			entries, _ := path(mustJSON(t, ev.data), "choices", 0, "logprobs", "content").([]any)
			for _, e := range entries {
				if str(path(e, "token")) != want {
					t.Errorf("chat stream, ignore_eos %v: entry %v", c.ignore, e)
				}
				n++
			}
		}
		if n != c.n {
			t.Errorf("chat stream, ignore_eos %v: %d entries, want %d", c.ignore, n, c.n)
		}
	}
}

func TestChat(t *testing.T) {
	ts := startServer(t, nil)
	msgs := []map[string]any{
		{"role": "system", "content": "You are terse."},
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "Say "}, {"type": "text", "text": "hello"}}},
	}
	r := ts.post("/v1/chat/completions", map[string]any{"messages": msgs, "max_completion_tokens": 6, "seed": 5})
	v := r.json(t)
	if r.status != 200 || str(v["object"]) != "chat.completion" || !strings.HasPrefix(str(v["id"]), "chatcmpl-") ||
		str(path(v, "choices", 0, "message", "role")) != "assistant" || num(path(v, "usage", "completion_tokens")) < 1 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	want := str(path(v, "choices", 0, "message", "content"))

	r = ts.post("/v1/chat/completions", map[string]any{"messages": msgs, "max_completion_tokens": 6, "seed": 5, "stream": true})
	evs := readSSE(t, r.body)
	first := mustJSON(t, evs[0].data)
	if str(path(first, "choices", 0, "delta", "role")) != "assistant" || str(first["object"]) != "chat.completion.chunk" {
		t.Fatalf("first chunk %s", evs[0].data)
	}
	var got strings.Builder
	var finish any
	for _, ev := range evs[1 : len(evs)-1] {
		c := mustJSON(t, ev.data)
		got.WriteString(str(path(c, "choices", 0, "delta", "content")))
		if f := path(c, "choices", 0, "finish_reason"); f != nil {
			finish = f
		}
	}
	if got.String() != want || finish == nil || evs[len(evs)-1].data != "[DONE]" {
		t.Errorf("stream %q finish %v, want %q", got.String(), finish, want)
	}
}

// Same seed, same text; n=2 with a seed uses seed and seed+1.
func TestSeedsAndN(t *testing.T) {
	ts := startServer(t, nil)
	one := func(seed int) string {
		r := ts.post("/v1/completions", map[string]any{"prompt": "Every request has", "max_tokens": 10, "seed": seed})
		return str(path(r.json(t), "choices", 0, "text"))
	}
	a, b := one(100), one(101)
	if again := one(100); again != a {
		t.Fatalf("seed 100 gave %q then %q", a, again)
	}
	r := ts.post("/v1/completions", map[string]any{"prompt": "Every request has", "max_tokens": 10, "seed": 100, "n": 2})
	v := r.json(t)
	ch, _ := v["choices"].([]any)
	if len(ch) != 2 || num(path(ch, 1, "index")) != 1 {
		t.Fatalf("n=2: %s", r.body)
	}
	if str(path(ch, 0, "text")) != a || str(path(ch, 1, "text")) != b {
		t.Errorf("n=2 texts %q %q, want %q %q", path(ch, 0, "text"), path(ch, 1, "text"), a, b)
	}
	if num(path(v, "usage", "completion_tokens")) != 20 {
		t.Errorf("usage %v", v["usage"])
	}

	// Streaming n=2: chunks of both indices, one finish each.
	r = ts.post("/v1/completions", map[string]any{"prompt": "Every request has", "max_tokens": 10, "seed": 100, "n": 2, "stream": true})
	texts := map[int]string{}
	fin := map[int]int{}
	for _, ev := range readSSE(t, r.body) {
		if ev.data == "[DONE]" {
			continue
		}
		c := mustJSON(t, ev.data)
		i := int(num(path(c, "choices", 0, "index")))
		texts[i] += str(path(c, "choices", 0, "text"))
		if path(c, "choices", 0, "finish_reason") != nil {
			fin[i]++
		}
	}
	if texts[0] != a || texts[1] != b || fin[0] != 1 || fin[1] != 1 {
		t.Errorf("streamed n=2: %q %q %v", texts[0], texts[1], fin)
	}

	// Without a seed, two requests draw different seeds.
	r1 := ts.post("/v1/completions", map[string]any{"prompt": "Every request has", "max_tokens": 16})
	r2 := ts.post("/v1/completions", map[string]any{"prompt": "Every request has", "max_tokens": 16})
	if str(path(r1.json(t), "choices", 0, "text")) == str(path(r2.json(t), "choices", 0, "text")) {
		t.Errorf("unseeded requests agree: %s", r1.body)
	}
}

func TestPromptForms(t *testing.T) {
	ts := startServer(t, nil)
	r := ts.post("/v1/completions", map[string]any{"prompt": []string{"The ring", "The fox"}, "max_tokens": 3, "n": 2, "seed": 1})
	v := r.json(t)
	if ch, _ := v["choices"].([]any); r.status != 200 || len(ch) != 4 || num(path(ch, 3, "index")) != 3 {
		t.Fatalf("two prompts × n=2: %d %s", r.status, r.body)
	}
	ids := ts.m.Tokenizer.Encode("The ring")
	r = ts.post("/v1/completions", map[string]any{"prompt": ids, "max_tokens": 3, "seed": 1})
	if r.status != 200 || num(path(r.json(t), "usage", "prompt_tokens")) != float64(len(ids)) {
		t.Fatalf("token ids: %d %s", r.status, r.body)
	}
	r = ts.post("/v1/completions", map[string]any{"prompt": [][]int32{ids, ids}, "max_tokens": 3})
	if ch, _ := r.json(t)["choices"].([]any); r.status != 200 || len(ch) != 2 {
		t.Fatalf("token id batches: %d %s", r.status, r.body)
	}
}

// A stop string cuts the text before it, and finish_reason is stop.
func TestStopStrings(t *testing.T) {
	ts := startServer(t, nil)
	base := map[string]any{"prompt": "The scheduler decides", "max_tokens": 24, "temperature": 0}
	full := str(path(ts.post("/v1/completions", base).json(t), "choices", 0, "text"))
	if len(full) < 8 {
		t.Skipf("greedy text too short for a stop string: %q", full)
	}
	// A stop string of whole characters from the middle of the greedy
	// text (the synthetic model also writes broken UTF-8 as U+FFFD).
	runes := []rune(full)
	stop := string(runes[len(runes)/2 : len(runes)/2+2])
	want := full[:strings.Index(full, stop)]
	for _, stream := range []bool{false, true} {
		req := map[string]any{"prompt": "The scheduler decides", "max_tokens": 24, "temperature": 0, "stop": []string{"NEVER-SEEN", stop}, "stream": stream}
		r := ts.post("/v1/completions", req)
		var text string
		var finish any
		if stream {
			for _, ev := range readSSE(t, r.body) {
				if ev.data != "[DONE]" {
					c := mustJSON(t, ev.data)
					text += str(path(c, "choices", 0, "text"))
					if f := path(c, "choices", 0, "finish_reason"); f != nil {
						finish = f
					}
				}
			}
		} else {
			v := r.json(t)
			text, finish = str(path(v, "choices", 0, "text")), path(v, "choices", 0, "finish_reason")
		}
		if text != want || finish != "stop" {
			t.Errorf("stream=%v stop %q: got %q (%v), want %q", stream, stop, text, finish, want)
		}
	}
	waitNoLeaks(t, ts)
}

// A model's defaults (an Ollama model's params) are what a request
// starts from: its temperature, stop strings, length and seed apply to a
// request that gives none, and a request's own fields override them.
func TestModelDefaults(t *testing.T) {
	plain := startServer(t, nil)
	greedy := map[string]any{"prompt": "The scheduler decides", "max_tokens": 24, "temperature": 0}
	full := str(path(plain.post("/v1/completions", greedy).json(t), "choices", 0, "text"))
	runes := []rune(full)
	if len(runes) < 8 {
		t.Skipf("greedy text too short for a stop string: %q", full)
	}
	stop := string(runes[len(runes)/2 : len(runes)/2+2])

	withDefaults := func(d Defaults) *testServer {
		ts := startServer(t, nil, true)
		ts.loadWith(func(m *Model) { m.Defaults = &d })
		return ts
	}
	completion := func(ts *testServer, req map[string]any) (text string, finish any, tokens float64) {
		t.Helper()
		r := ts.post("/v1/completions", req)
		v := r.json(t)
		if r.status != 200 {
			t.Fatalf("%v: %d %s", req, r.status, r.body)
		}
		return str(path(v, "choices", 0, "text")), path(v, "choices", 0, "finish_reason"), num(path(v, "usage", "completion_tokens"))
	}

	p := sample.Defaults()
	p.Temperature, p.StopStrings, p.MaxTokens = 0, []string{stop}, 3
	ts := withDefaults(Defaults{Params: p})
	// The model's greedy temperature and its stop string; its length is
	// overridden.
	if text, finish, _ := completion(ts, map[string]any{"prompt": "The scheduler decides", "max_tokens": 24}); text != full[:strings.Index(full, stop)] || finish != "stop" {
		t.Errorf("the model's stop: %q (%v), want the greedy text up to %q", text, finish, stop)
	}
	// The request's own stop list, empty, replaces the model's.
	if text, finish, _ := completion(ts, map[string]any{"prompt": "The scheduler decides", "max_tokens": 24, "stop": []string{}}); text != full || finish != "length" {
		t.Errorf("stop []: %q (%v), want %q", text, finish, full)
	}
	// No max_tokens: the model's num_predict.
	if _, finish, n := completion(ts, map[string]any{"prompt": "The scheduler decides", "stop": []string{}}); n != 3 || finish != "length" {
		t.Errorf("the model's length: %v tokens (%v), want 3", n, finish)
	}

	p = sample.Defaults()
	p.Seed, p.MaxTokens = 42, 12
	seeded := withDefaults(Defaults{Params: p, Seeded: true})
	a, _, _ := completion(seeded, map[string]any{"prompt": "The ring"})
	b, _, _ := completion(seeded, map[string]any{"prompt": "The ring"})
	c, _, _ := completion(seeded, map[string]any{"prompt": "The ring", "seed": 42})
	if a != b || a != c {
		t.Errorf("the model's seed 42: %q, %q, and with seed 42 given %q; want one text", a, b, c)
	}
	if g, _, _ := completion(seeded, map[string]any{"prompt": "The scheduler decides", "max_tokens": 24, "temperature": 0}); g != full {
		t.Errorf("temperature 0 over the model's: %q, want %q", g, full)
	}
}

func TestLogprobs(t *testing.T) {
	ts := startServer(t, nil)
	r := ts.post("/v1/completions", map[string]any{"prompt": "The ring", "max_tokens": 5, "logprobs": 0, "seed": 2})
	v := r.json(t)
	lps, _ := path(v, "choices", 0, "logprobs", "token_logprobs").([]any)
	toks, _ := path(v, "choices", 0, "logprobs", "tokens").([]any)
	if r.status != 200 || len(lps) == 0 || len(lps) != len(toks) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for _, lp := range lps {
		if f, ok := lp.(float64); !ok || f > 0 {
			t.Errorf("logprob %v", lp)
		}
	}
	r = ts.post("/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 4, "logprobs": true, "stream": true, "temperature": 0})
	n := 0
	for _, ev := range readSSE(t, r.body) {
		if ev.data == "[DONE]" {
			continue
		}
		if c := path(mustJSON(t, ev.data), "choices", 0, "logprobs", "content", 0); c != nil {
			if _, ok := path(c, "logprob").(float64); !ok || path(c, "bytes") == nil {
				t.Errorf("chat logprob %v", c)
			}
			n++
		}
	}
	if n == 0 {
		t.Errorf("no chat logprobs streamed")
	}
}
