package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzRequestBodies sends arbitrary bodies to every generating endpoint:
// the server never panics, answers with one of the documented statuses
// and keeps serving.
func FuzzRequestBodies(f *testing.F) {
	ts := startServer(f, func(c *Config) { c.MaxTokens = 3 })
	paths := []string{"/v1/completions", "/v1/chat/completions", "/execute", "/cancel"}
	for i, body := range []string{
		`{"prompt":"Hello","max_tokens":2}`,
		`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"stream":true}`,
		`{"prompt":[1,2,3],"max_tokens":1,"n":2,"seed":7,"stop":["a","b"]}`,
		`{"prompt":"x","max_tokens":-1}`,
		`{"prompt":"x","logit_bias":{"5":1.5},"temperature":0.7,"top_k":3}`,
		`{"request_id":"nope"}`,
		`{"prompt":`, `[]`, `null`, "\xff\xfe", `{"prompt":"\u0000","stream_options":{"include_usage":true},"stream":true}`,
	} {
		f.Add(uint8(i%len(paths)), []byte(body))
	}
	ok := map[int]bool{200: true, 400: true, 404: true, 413: true, 429: true, 503: true}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := paths[int(which)%len(paths)]
		resp, err := client.Post(ts.url+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !ok[resp.StatusCode] {
			t.Fatalf("%s %q: status %d: %s", path, body, resp.StatusCode, out)
		}
		if resp.StatusCode != 200 && !bytes.Contains(out, []byte(`"error"`)) {
			t.Fatalf("%s %q: status %d without an error object: %s", path, body, resp.StatusCode, out)
		}
		h, err := http.Get(ts.url + "/health")
		if err != nil {
			t.Fatal(err)
		}
		h.Body.Close()
		if h.StatusCode != 200 {
			t.Fatalf("health %d after %s %q", h.StatusCode, path, body)
		}
	})
}
