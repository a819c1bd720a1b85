package httpapi

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"ringlm/engine"
	"ringlm/kernels"
	"ringlm/ringbuf"
)

var chatHi = []map[string]any{{"role": "user", "content": "Tell me about rings."}}

// checkChatTop checks one logprobs.content entry of chat: top_logprobs
// holds n {token, logprob, bytes}, bytes the token's UTF-8, most likely
// first; greedy, the chosen token leads them with the same logprob.
func checkChatTop(t *testing.T, e any, n int, greedy bool) {
	t.Helper()
	lp, ok := path(e, "logprob").(float64)
	top, _ := path(e, "top_logprobs").([]any)
	if !ok || lp > 0 || len(top) != n {
		t.Fatalf("entry %v: want a logprob <= 0 and %d top_logprobs", e, n)
	}
	prev := 0.0
	for i, a := range top {
		tok, ok1 := path(a, "token").(string)
		alp, ok2 := path(a, "logprob").(float64)
		bs, ok3 := path(a, "bytes").([]any)
		if !ok1 || !ok2 || !ok3 || alp > 0 || (i > 0 && alp > prev) {
			t.Fatalf("entry %v: alternative %d %v is not {token, logprob <= the previous one, bytes}", e, i, a)
		}
		if utf8.ValidString(tok) && len(bs) != len(tok) {
			t.Fatalf("alternative %v: %d bytes for %q", a, len(bs), tok)
		}
		if greedy && lp < alp {
			t.Fatalf("entry %v: greedy token's logprob %v below alternative %v", e, lp, alp)
		}
		prev = alp
	}
	if greedy && (str(path(top, 0, "token")) != str(path(e, "token")) || num(path(top, 0, "logprob")) != lp) {
		t.Fatalf("entry %v: greedy token does not lead its alternatives", e)
	}
}

func TestTopLogprobsChat(t *testing.T) {
	ts := startServer(t, nil)
	for _, temp := range []float64{0, 1} {
		req := map[string]any{"messages": chatHi, "max_tokens": 8, "temperature": temp, "seed": 4, "logprobs": true, "top_logprobs": 3}
		r := ts.post("/v1/chat/completions", req)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		content, _ := path(r.json(t), "choices", 0, "logprobs", "content").([]any)
		if len(content) == 0 {
			t.Fatalf("no logprobs content: %s", r.body)
		}
		for _, e := range content {
			checkChatTop(t, e, 3, temp == 0)
		}

		// Streamed: the same entries, one per chunk.
		req["stream"] = true
		r = ts.post("/v1/chat/completions", req)
		var streamed []any
		for _, ev := range readSSE(t, r.body) {
			if ev.data == "[DONE]" {
				continue
			}
			c := mustJSON(t, ev.data)
			if path(c, "error") != nil {
				t.Fatalf("error chunk %s", ev.data)
			}
			if es, ok := path(c, "choices", 0, "logprobs", "content").([]any); ok {
				for _, e := range es {
					checkChatTop(t, e, 3, temp == 0)
				}
				streamed = append(streamed, es...)
			}
		}
		if !jsonEqual(streamed, content) {
			t.Errorf("T=%v: streamed logprobs\n%v\ndiffer from\n%v", temp, streamed, content)
		}
	}
	// top_logprobs 0 keeps an empty list (greedy: a random seed may sample EOS first, leaving no content); out of range or without logprobs is a 400.
	r := ts.post("/v1/chat/completions", map[string]any{"messages": chatHi, "max_tokens": 2, "temperature": 0, "seed": 4, "logprobs": true, "top_logprobs": 0})
	if top, ok := path(r.json(t), "choices", 0, "logprobs", "content", 0, "top_logprobs").([]any); !ok || len(top) != 0 {
		t.Errorf("top_logprobs 0: %s", r.body)
	}
	for _, body := range []map[string]any{
		{"messages": chatHi, "logprobs": true, "top_logprobs": 21},
		{"messages": chatHi, "logprobs": false, "top_logprobs": 2},
		{"messages": chatHi, "top_logprobs": 2},
	} {
		r := ts.post("/v1/chat/completions", body)
		if r.status != 400 || str(path(r.json(t), "error", "param")) != "top_logprobs" {
			t.Errorf("%v: %d %s", body, r.status, r.body)
		}
	}
	waitNoLeaks(t, ts)
}

func jsonEqual(a, b any) bool {
	x, err1 := marshal(a)
	y, err2 := marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// checkTopMap checks one position of the legacy top_logprobs: an object
// of at most n+1 {text: logprob} holding the chosen token's text with its
// logprob (or a larger one: two tokens with the same text, e.g. partial
// UTF-8 shown as U+FFFD, share a key, and the more likely one keeps it);
// greedy, no alternative beats the chosen token.
func checkTopMap(t *testing.T, m any, token string, lp float64, n int, greedy bool) {
	t.Helper()
	o, ok := m.(map[string]any)
	if !ok || len(o) == 0 || len(o) > n+1 {
		t.Fatalf("top_logprobs entry %v: want an object of 1..%d entries", m, n+1)
	}
	if v, ok := o[token].(float64); !ok || v < lp || (greedy && v != lp) {
		t.Fatalf("top_logprobs entry %v lacks the chosen token %q at %v", m, token, lp)
	}
	for k, v := range o {
		f, ok := v.(float64)
		if !ok || f > 0 || (greedy && f > lp) {
			t.Fatalf("top_logprobs entry %v: %q: %v", m, k, v)
		}
	}
}

func TestTopLogprobsCompletions(t *testing.T) {
	ts := startServer(t, nil)
	for _, temp := range []float64{0, 1} {
		req := map[string]any{"prompt": "The ring buffer", "max_tokens": 8, "temperature": temp, "seed": 8, "logprobs": 3}
		r := ts.post("/v1/completions", req)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		lps := path(r.json(t), "choices", 0, "logprobs")
		toks, _ := path(lps, "tokens").([]any)
		tlps, _ := path(lps, "token_logprobs").([]any)
		tops, _ := path(lps, "top_logprobs").([]any)
		if len(toks) == 0 || len(tops) != len(toks) || len(tlps) != len(toks) {
			t.Fatalf("logprobs %v", lps)
		}
		for i := range toks {
			checkTopMap(t, tops[i], str(toks[i]), num(tlps[i]), 3, temp == 0)
		}

		req["stream"] = true
		r = ts.post("/v1/completions", req)
		var sToks, sTops []any
		for _, ev := range readSSE(t, r.body) {
			if ev.data == "[DONE]" {
				continue
			}
			c := mustJSON(t, ev.data)
			l := path(c, "choices", 0, "logprobs")
			if l == nil {
				continue
			}
			tk, _ := path(l, "tokens").([]any)
			tp, _ := path(l, "top_logprobs").([]any)
			if len(tk) != 1 || len(tp) != 1 {
				t.Fatalf("chunk logprobs %v", l)
			}
			checkTopMap(t, tp[0], str(tk[0]), num(path(l, "token_logprobs", 0)), 3, temp == 0)
			sToks, sTops = append(sToks, tk...), append(sTops, tp...)
		}
		if !jsonEqual(sToks, toks) || !jsonEqual(sTops, tops) {
			t.Errorf("T=%v: streamed %v %v, not streamed %v %v", temp, sToks, sTops, toks, tops)
		}
	}
	// logprobs 0: the chosen tokens only, top_logprobs null (as before).
	r := ts.post("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2, "logprobs": 0})
	if lps := path(r.json(t), "choices", 0, "logprobs"); path(lps, "tokens") == nil || path(lps, "top_logprobs") != nil {
		t.Errorf("logprobs 0: %s", r.body)
	}
	if r := ts.post("/v1/completions", map[string]any{"prompt": "x", "logprobs": 6}); r.status != 400 || str(path(r.json(t), "error", "param")) != "logprobs" {
		t.Errorf("logprobs 6: %d %s", r.status, r.body)
	}
	waitNoLeaks(t, ts)
}

// /execute's token events carry top_logprobs [{id, text, logprob}] when
// asked.
func TestTopLogprobsExecute(t *testing.T) {
	ts := startServer(t, nil)
	r := ts.post("/execute", map[string]any{"prompt": "The ring", "max_tokens": 5, "temperature": 0, "logprobs": true, "top_logprobs": 2})
	n := 0
	for _, ev := range readSSE(t, r.body) {
		if ev.event != "token" {
			continue
		}
		v := mustJSON(t, ev.data)
		if v["id"] == nil {
			continue // a held-back tail
		}
		n++
		top, _ := v["top_logprobs"].([]any)
		if len(top) != 2 || num(path(top, 0, "id")) != num(v["id"]) || num(path(top, 0, "logprob")) != num(v["logprob"]) ||
			num(path(top, 1, "logprob")) > num(path(top, 0, "logprob")) || path(top, 1, "text") == nil {
			t.Fatalf("token event %s", ev.data)
		}
	}
	if n != 5 {
		t.Fatalf("%d token events", n)
	}
	r = ts.post("/execute", map[string]any{"prompt": "The ring", "max_tokens": 2, "logprobs": true})
	for _, ev := range readSSE(t, r.body) {
		if ev.event == "token" && strings.Contains(ev.data, "top_logprobs") {
			t.Fatalf("top_logprobs not asked for: %s", ev.data)
		}
	}
}

// A request the device fails is a 500 in OpenAI's error shape, or, once
// streaming, an error chunk (an error event on /execute); the server goes
// on serving.
func TestDeviceError(t *testing.T) {
	v, tok := tinyTokenizer(t)
	const poison = 300
	cfg := testConfig()
	logs := &syncBuffer{}
	s := New(cfg, zerolog.New(logs).Level(zerolog.DebugLevel))
	// The forward pass fails for any batch holding a prompt with the poison
	// token, as a device fault would: every entry gets an ERROR
	// (CodeDevice). Only prompts (position 0): the null device samples
	// from the whole vocabulary, so a good request may generate the poison
	// token itself and feed it back.
	dev := newNullDevice("failing-null", len(v.Tokens), 256, cfg.Slots,
		func(batch []kernels.Entry) error {
			for _, e := range batch {
				if e.Pos == 0 && slices.Contains(e.Tokens, int32(poison)) {
					return errors.New("simulated device fault")
				}
			}
			return nil
		})
	eng, err := engine.New(engine.Config{Slots: cfg.Slots, NumBlocks: 256, Context: 2048, Vocab: len(v.Tokens),
		Allocator: ringbuf.HeapAllocator{}, Log: zerolog.New(logs)}, dev)
	if err != nil {
		t.Fatal(err)
	}
	ts := serveModel(t, s, &Model{Engine: eng, Tokenizer: tok, Name: "failing", Context: 2048, Fingerprint: "fp_failing"}, logs)
	bad := []int{1, 2, poison, 4}
	good := map[string]any{"prompt": []int{1, 2, 3, 4}, "max_tokens": 4}

	r := ts.post("/v1/completions", map[string]any{"prompt": bad, "max_tokens": 4})
	e := path(r.json(t), "error")
	if r.status != 500 || str(path(e, "type")) != "server_error" || str(path(e, "code")) != "internal_error" ||
		!strings.Contains(str(path(e, "message")), "device") {
		t.Fatalf("failed request: %d %s", r.status, r.body)
	}
	if _, ok := e.(map[string]any)["param"]; !ok {
		t.Errorf("no param field: %s", r.body)
	}
	if r := ts.post("/v1/completions", good); r.status != 200 || str(path(r.json(t), "choices", 0, "finish_reason")) != "length" {
		t.Fatalf("after a device error: %d %s", r.status, r.body)
	}

	// Streaming: headers are sent, so the error comes as a data chunk.
	r = ts.post("/v1/completions", map[string]any{"prompt": bad, "max_tokens": 4, "stream": true, "logprobs": 2})
	evs := readSSE(t, r.body)
	if r.status != 200 || len(evs) < 2 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream: %d %s", r.status, r.body)
	}
	ec := mustJSON(t, evs[len(evs)-2].data)
	if str(path(ec, "error", "type")) != "server_error" || !strings.Contains(str(path(ec, "error", "message")), "device") {
		t.Fatalf("stream: no error chunk before [DONE]: %s", r.body)
	}
	r = ts.post("/execute", map[string]any{"prompt": bad, "max_tokens": 4})
	evs = readSSE(t, r.body)
	if last := evs[len(evs)-1]; last.event != "error" || !strings.Contains(str(mustJSON(t, last.data)["message"]), "device") {
		t.Fatalf("/execute: %s", r.body)
	}
	if r := ts.post("/v1/completions", good); r.status != 200 {
		t.Fatalf("after a streamed device error: %d %s", r.status, r.body)
	}
	if st := eng.Stats(); st.Failed != 3 {
		t.Errorf("engine counts %d failed requests, want 3", st.Failed)
	}
	waitNoLeaks(t, ts)
}
