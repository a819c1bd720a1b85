package httpapi

import (
	"strings"
	"testing"
)

const page = "http://localhost:3000"

func preflight(ts *testServer, path, origin string, hdr ...string) response {
	ts.t.Helper()
	return ts.do("OPTIONS", path, nil, append([]string{"Origin", origin, "Access-Control-Request-Method", "POST"}, hdr...)...)
}

func corsOf(r response) string {
	var out []string
	for k := range r.header {
		if strings.HasPrefix(k, "Access-Control-") {
			out = append(out, k)
		}
	}
	return strings.Join(out, ", ")
}

// Off by default: a browser's preflight is refused as before (405) and no
// answer carries CORS headers.
func TestCORSOff(t *testing.T) {
	ts := startServer(t, nil)
	if r := preflight(ts, "/v1/chat/completions", page); r.status != 405 || corsOf(r) != "" {
		t.Errorf("preflight with CORS off: %d, CORS headers %q", r.status, corsOf(r))
	}
	if r := ts.do("GET", "/v1/models", nil, "Origin", page); r.status != 200 || corsOf(r) != "" {
		t.Errorf("GET with CORS off: %d, CORS headers %q", r.status, corsOf(r))
	}
}

func TestCORSOrigins(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.APIKey = "sekret"; c.CORSOrigins = "https://app.example.org, " + page })
	key := []string{"Authorization", "Bearer sekret"}

	// The preflight needs no key (browsers never send one with it) and
	// says what the page may send.
	r := preflight(ts, "/v1/chat/completions", page, "Access-Control-Request-Headers", "authorization, content-type, x-stainless-os")
	h := r.header
	if r.status != 204 || h.Get("Access-Control-Allow-Origin") != page {
		t.Fatalf("preflight: %d %v", r.status, h)
	}
	for _, m := range []string{"GET", "POST"} {
		if !strings.Contains(h.Get("Access-Control-Allow-Methods"), m) {
			t.Errorf("Allow-Methods %q lacks %s", h.Get("Access-Control-Allow-Methods"), m)
		}
	}
	allow := strings.ToLower(h.Get("Access-Control-Allow-Headers"))
	for _, want := range []string{"authorization", "content-type", "x-stainless-os"} {
		if !strings.Contains(allow, want) {
			t.Errorf("Allow-Headers %q lacks %s", allow, want)
		}
	}
	if h.Get("Access-Control-Max-Age") == "" || !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
		t.Errorf("Max-Age %q, Vary %q", h.Get("Access-Control-Max-Age"), h.Values("Vary"))
	}
	// Origins compare case-insensitively, as hosts do.
	if r := preflight(ts, "/v1/models", "HTTPS://App.Example.org"); r.status != 204 || r.header.Get("Access-Control-Allow-Origin") == "" {
		t.Errorf("second origin: %d %v", r.status, r.header)
	}
	// A header list that is not one is not echoed back.
	if r := preflight(ts, "/v1/models", page, "Access-Control-Request-Headers", "x-a@b"); r.status == 204 &&
		strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "x-a") {
		t.Errorf("bad header list echoed: %v", r.header)
	}

	// Answers to the page carry its origin: successes, streams and errors
	// (a page can read why it was refused).
	body := map[string]any{"prompt": "x", "max_tokens": 2}
	r = ts.post("/v1/completions", body, append([]string{"Origin", page}, key...)...)
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != page || r.header.Get("Access-Control-Expose-Headers") != "X-Request-Id" {
		t.Errorf("POST: %d %v", r.status, r.header)
	}
	s := ts.openStream("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2, "stream": true}, append([]string{"Origin", page}, key...)...)
	if got := s.resp.Header.Get("Access-Control-Allow-Origin"); got != page {
		t.Errorf("stream: Allow-Origin %q", got)
	}
	for _, ok := s.next(); ok; _, ok = s.next() {
	}
	s.close()
	if r := ts.post("/v1/completions", body, "Origin", page); r.status != 401 || r.header.Get("Access-Control-Allow-Origin") != page {
		t.Errorf("401: %d %v", r.status, r.header)
	}
	if r := ts.do("GET", "/nope", nil, "Origin", page); r.status != 404 || r.header.Get("Access-Control-Allow-Origin") != page {
		t.Errorf("404: %d %v", r.status, r.header)
	}
	if r := ts.do("GET", "/metrics", nil, "Origin", page); r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != page {
		t.Errorf("/metrics: %d %v", r.status, r.header)
	}
	// Refused by fasthttp before any handler runs: a body over --max-body.
	big := `{"prompt":"` + strings.Repeat("x", ts.s.cfg.MaxBody) + `"}`
	if r := ts.post("/v1/completions", big, append([]string{"Origin", page}, key...)...); r.status != 413 ||
		r.header.Get("Access-Control-Allow-Origin") != page {
		t.Errorf("413: %d %v", r.status, r.header)
	}

	// Other origins get no CORS headers: the browser keeps their pages
	// from reading anything. The key still guards the API.
	for _, o := range []string{"http://evil.example", "http://localhost:3001", "null"} {
		if r := preflight(ts, "/v1/chat/completions", o); r.status == 204 || corsOf(r) != "" {
			t.Errorf("preflight from %s: %d, CORS headers %q", o, r.status, corsOf(r))
		}
		if r := ts.do("GET", "/v1/models", nil, append([]string{"Origin", o}, key...)...); r.status != 200 || corsOf(r) != "" {
			t.Errorf("GET from %s: %d, CORS headers %q", o, r.status, corsOf(r))
		}
	}
	// Without an Origin (curl, SDKs outside a browser) nothing changes.
	if r := ts.do("GET", "/v1/models", nil, key...); r.status != 200 || corsOf(r) != "" {
		t.Errorf("no Origin: %d, CORS headers %q", r.status, corsOf(r))
	}
}

func TestCORSAnyOrigin(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.CORSOrigins = "*" })
	for _, o := range []string{page, "https://anything.example", "null"} {
		r := preflight(ts, "/v1/completions", o)
		if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("preflight from %s: %d %v", o, r.status, r.header)
		}
		if r := ts.post("/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1}, "Origin", o); r.status != 200 ||
			r.header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("POST from %s: %d %v", o, r.status, r.header)
		}
	}
	// A plain OPTIONS (no Access-Control-Request-Method) is no preflight.
	if r := ts.do("OPTIONS", "/v1/completions", nil, "Origin", page); r.status != 405 {
		t.Errorf("plain OPTIONS: %d", r.status)
	}
}

func TestCORSConfig(t *testing.T) {
	for _, tc := range []struct {
		in      string
		any     bool
		origins []string
		err     string
	}{
		{in: ""},
		{in: " , "},
		{in: "*", any: true},
		{in: "http://localhost:3000", origins: []string{"http://localhost:3000"}},
		{in: "HTTPS://App.Example.org/, tauri://localhost", origins: []string{"https://app.example.org", "tauri://localhost"}},
		{in: "localhost:3000", err: "not an origin"},
		{in: "example.org", err: "not an origin"},
		{in: "http://example.org/app", err: "no path"},
		{in: "http://example.org?x=1", err: "no path"},
		{in: "http://user@example.org", err: "no path"},
		{in: "https://*.example.org", err: "wildcards"},
		{in: "http://[::1", err: "unparsable"},
	} {
		p, err := parseOrigins(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
			}
			cfg := DefaultConfig()
			cfg.CORSOrigins = tc.in
			if err := cfg.Check(); err == nil || !strings.HasPrefix(err.Error(), "--cors-origins: ") {
				t.Errorf("%q: Check says %v", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if (p == nil) != (!tc.any && len(tc.origins) == 0) {
			t.Errorf("%q: policy %v", tc.in, p)
			continue
		}
		if p == nil {
			continue
		}
		var got []string
		for _, o := range p.origins {
			got = append(got, string(o))
		}
		if p.any != tc.any || strings.Join(got, " ") != strings.Join(tc.origins, " ") {
			t.Errorf("%q: any %v, origins %q", tc.in, p.any, got)
		}
	}
}
