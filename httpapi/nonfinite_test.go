package httpapi

import (
	"math"
	"strings"
	"testing"

	"ringlm/internal/testmodel"
)

// A model whose logits are NaN (NaN weights) fails its requests with the
// engine's message instead of answering an empty text with "stop":
// non-streaming with HTTP 500 in OpenAI's error shape, streaming with an
// error event after the headers went out.
func TestNonFiniteLogitsAnswerError(t *testing.T) {
	poisoned := testmodel.Poison(t, tinyModel(t), "output_norm.weight", float32(math.NaN()))
	ts := startServer(t, func(c *Config) { c.Models = []string{poisoned} })
	const want = "non-finite logits (NaN/Inf) at position"

	for _, p := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/completions", map[string]any{"prompt": "The ring", "max_tokens": 5}},
		{"/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 5}},
	} {
		r := ts.post(p.path, p.body)
		v := r.json(t)
		if r.status != 500 || str(path(v, "error", "type")) != "server_error" || !strings.Contains(str(path(v, "error", "message")), want) {
			t.Errorf("%s: %d %s", p.path, r.status, r.body)
		}

		p.body["stream"] = true
		r = ts.post(p.path, p.body)
		evs := readSSE(t, r.body)
		var errEv map[string]any
		for _, ev := range evs {
			if ev.data == "[DONE]" {
				continue
			}
			c := mustJSON(t, ev.data)
			if c["error"] != nil {
				errEv = c
				continue
			}
			if f := path(c, "choices", 0, "finish_reason"); f != nil {
				t.Errorf("%s stream: a chunk finished with %v", p.path, f)
			}
			if s := str(path(c, "choices", 0, "text")) + str(path(c, "choices", 0, "delta", "content")); s != "" {
				t.Errorf("%s stream: text %q", p.path, s)
			}
		}
		if r.status != 200 || errEv == nil || !strings.Contains(str(path(errEv, "error", "message")), want) {
			t.Errorf("%s stream: %d, no error event naming the non-finite logits:\n%s", p.path, r.status, r.body)
		}
	}
}
