package httpapi

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// POST /tokenize and /detokenize answer as llama.cpp's server does, and
// add_special counts a prompt as /v1/completions does.
func TestTokenizeDetokenize(t *testing.T) {
	ts := startServer(t, nil)
	_, tok := tinyTokenizer(t)
	ids := func(r response) []int32 {
		t.Helper()
		var v struct {
			Tokens []int32 `json:"tokens"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &v) != nil {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		return v.Tokens
	}

	text := "The ring buffer"
	plain := ids(ts.post("/tokenize", map[string]any{"content": text}))
	if !slices.Equal(plain, tok.Encode(text)) || len(plain) < 2 {
		t.Errorf("tokens %v, want %v", plain, tok.Encode(text))
	}
	withBOS := ids(ts.post("/tokenize", map[string]any{"content": text, "add_special": true}))
	if len(withBOS) != len(plain)+1 || withBOS[0] != tok.Vocab().BOS || !slices.Equal(withBOS[1:], plain) {
		t.Errorf("add_special: %v, plain %v", withBOS, plain)
	}
	// add_special's count is the prompt_tokens of a completion.
	c := ts.post("/v1/completions", map[string]any{"prompt": text, "max_tokens": 1}).json(t)
	if got := num(path(c, "usage", "prompt_tokens")); int(got) != len(withBOS) {
		t.Errorf("completion prompt_tokens %v, /tokenize with add_special %d", got, len(withBOS))
	}
	// parse_special (default true) matches special-token text; false takes it literally.
	bos := tok.Token(tok.Vocab().BOS)
	if got := ids(ts.post("/tokenize", map[string]any{"content": bos + "x"})); len(got) == 0 || got[0] != tok.Vocab().BOS {
		t.Errorf("special text %q: %v", bos, got)
	}
	if got := ids(ts.post("/tokenize", map[string]any{"content": bos + "x", "parse_special": false})); slices.Contains(got, tok.Vocab().BOS) {
		t.Errorf("parse_special false: %v holds BOS", got)
	}
	if got := ids(ts.post("/tokenize", map[string]any{"content": ""})); len(got) != 0 {
		t.Errorf("empty content: %v", got)
	}

	// with_pieces: a piece is a string, or the byte values of part of a
	// character; the pieces' bytes are the text.
	mixed := "ring 🤗"
	r := ts.post("/tokenize", map[string]any{"content": mixed, "with_pieces": true})
	var wp struct {
		Tokens []struct {
			ID    int32           `json:"id"`
			Piece json.RawMessage `json:"piece"`
		} `json:"tokens"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &wp) != nil {
		t.Fatalf("with_pieces: %d %s", r.status, r.body)
	}
	var joined []byte
	var gotIDs []int32
	byteLists := 0
	for _, p := range wp.Tokens {
		gotIDs = append(gotIDs, p.ID)
		var s string
		var bs []byte
		var ints []int
		switch {
		case json.Unmarshal(p.Piece, &s) == nil:
			bs = []byte(s)
		case json.Unmarshal(p.Piece, &ints) == nil:
			byteLists++
			for _, v := range ints {
				bs = append(bs, byte(v))
			}
		default:
			t.Fatalf("piece %s is neither a string nor a list of bytes", p.Piece)
		}
		if string(bs) != tok.Piece(p.ID) {
			t.Errorf("token %d: piece %q, want %q", p.ID, bs, tok.Piece(p.ID))
		}
		joined = append(joined, bs...)
	}
	if string(joined) != mixed || !slices.Equal(gotIDs, tok.Encode(mixed)) || byteLists == 0 {
		t.Errorf("pieces join to %q (want %q), ids %v, %d byte lists: %s", joined, mixed, gotIDs, byteLists, r.body)
	}

	// /detokenize reverses /tokenize, special tokens included.
	detok := func(tokens any) response { return ts.post("/detokenize", map[string]any{"tokens": tokens}) }
	if v := detok(plain).json(t); v["content"] != text {
		t.Errorf("detokenize: %v", v)
	}
	if v := detok(withBOS).json(t); v["content"] != bos+text {
		t.Errorf("detokenize with BOS: %v", v)
	}
	if v := detok([]int32{}).json(t); v["content"] != "" {
		t.Errorf("detokenize []: %v", v)
	}

	// Bad input: one clear 400 naming the field.
	for _, c := range []struct {
		path string
		body any
		want string
	}{
		{"/tokenize", map[string]any{"text": "x"}, "content is required"},
		{"/tokenize", map[string]any{"content": 5}, `"content"`},
		{"/tokenize", "", "empty"},
		{"/detokenize", map[string]any{}, "tokens is required"},
		{"/detokenize", map[string]any{"tokens": []int{1, -1}}, "token id -1 is outside the vocabulary"},
		{"/detokenize", map[string]any{"tokens": []int{1 << 20}}, "outside the vocabulary"},
		{"/detokenize", map[string]any{"tokens": "abc"}, `"tokens"`},
	} {
		r := ts.post(c.path, c.body)
		msg := str(path(r.json(t), "error", "message"))
		if r.status != 400 || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s %v: %d %q, want 400 with %q", c.path, c.body, r.status, msg, c.want)
		}
	}
	if r := ts.do("GET", "/tokenize", nil); r.status != 405 {
		t.Errorf("GET /tokenize: %d", r.status)
	}
}

// Like the other model endpoints: behind --api-key, 503 while loading.
func TestTokenizeAuthAndLoading(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.APIKey = "k" })
	for _, p := range []string{"/tokenize", "/detokenize"} {
		if r := ts.post(p, map[string]any{"content": "x", "tokens": []int{1}}); r.status != 401 {
			t.Errorf("%s without the key: %d", p, r.status)
		}
		if r := ts.post(p, map[string]any{"content": "x", "tokens": []int{1}}, "Authorization", "Bearer k"); r.status != 200 {
			t.Errorf("%s with the key: %d %s", p, r.status, r.body)
		}
	}
	loading := startServer(t, nil, true)
	for _, p := range []string{"/tokenize", "/detokenize"} {
		if r := loading.post(p, map[string]any{"content": "x", "tokens": []int{1}}); r.status != 503 {
			t.Errorf("%s while loading: %d", p, r.status)
		}
	}
}
