package httpapi

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"
)

// corsPolicy answers browsers on the pages of the origins --cors-origins
// lists (llama.cpp's server and Ollama do the same for web UIs). A
// response to a listed origin carries Access-Control-Allow-Origin, errors
// included, so a page can read why it was refused; a preflight OPTIONS is
// answered before authentication, since browsers never send credentials
// with one. Other origins get no CORS headers, and the browser keeps the
// page from reading the answer.
type corsPolicy struct {
	any     bool     // "*"
	origins [][]byte // lowercase scheme://host[:port]
}

const (
	corsMethods = "GET, POST, OPTIONS"
	// corsHeaders are always allowed: the bearer token and the JSON body's
	// type. Headers a preflight asks for beyond them (the OpenAI SDKs'
	// X-Stainless-*, for one) are allowed too: the origin is trusted.
	corsHeaders = "Authorization, Content-Type"
	// corsMaxAge lets a browser reuse a preflight for two hours, the most
	// Chromium keeps one.
	corsMaxAge = "7200"
	// maxRequestHeaders bounds the Access-Control-Request-Headers echoed back.
	maxRequestHeaders = 1024
)

// parseOrigins reads --cors-origins: nil when it is empty.
func parseOrigins(s string) (*corsPolicy, error) {
	var p corsPolicy
	seen := false
	for o := range strings.SplitSeq(s, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		seen = true
		if o == "*" {
			p.any = true
			continue
		}
		norm, err := normalizeOrigin(o)
		if err != nil {
			return nil, err
		}
		p.origins = append(p.origins, []byte(norm))
	}
	if !seen {
		return nil, nil
	}
	return &p, nil
}

// normalizeOrigin checks that o is an origin as browsers send it in the
// Origin header (scheme://host[:port], no path) and lowercases it.
func normalizeOrigin(o string) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("%q is not an origin (%s); write scheme://host[:port] such as http://localhost:3000, or * for any", o, why)
	}
	u, err := url.Parse(o)
	switch {
	case err != nil:
		return "", bad("unparsable")
	case u.Scheme == "" || u.Host == "" || u.Opaque != "":
		return "", bad("no scheme:// or host")
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?"):
		return "", bad("an origin has no path, query or user")
	case strings.Contains(u.Host, "*"):
		return "", bad("no wildcards in a host")
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// allowed reports whether origin may read answers.
func (p *corsPolicy) allowed(origin []byte) bool {
	if p.any {
		return true
	}
	for _, o := range p.origins {
		if bytes.EqualFold(o, origin) {
			return true
		}
	}
	return false
}

// apply adds the headers of a response to an allowed origin, and reports
// whether the request came from one.
func (p *corsPolicy) apply(ctx *fasthttp.RequestCtx) bool {
	h := &ctx.Response.Header
	if !p.any {
		// The answer depends on the Origin: caches must key on it.
		h.Add("Vary", "Origin")
	}
	origin := ctx.Request.Header.Peek("Origin")
	if len(origin) == 0 || !p.allowed(origin) {
		return false
	}
	if p.any {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.SetBytesV("Access-Control-Allow-Origin", origin)
	}
	h.Set("Access-Control-Expose-Headers", "X-Request-Id")
	return true
}

// isPreflight tells a CORS preflight from a plain OPTIONS request.
func isPreflight(ctx *fasthttp.RequestCtx) bool {
	return string(ctx.Method()) == fasthttp.MethodOptions && len(ctx.Request.Header.Peek("Access-Control-Request-Method")) > 0
}

// preflight answers an allowed origin's preflight: 204 with what it may send.
func (p *corsPolicy) preflight(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("Access-Control-Allow-Methods", corsMethods)
	allow := corsHeaders
	if req := ctx.Request.Header.Peek("Access-Control-Request-Headers"); len(req) > 0 && validHeaderList(req) {
		allow += ", " + string(req)
	}
	h.Set("Access-Control-Allow-Headers", allow)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// validHeaderList accepts a comma-separated list of header names (RFC 9110
// tokens), the only thing echoed back from a preflight.
func validHeaderList(v []byte) bool {
	if len(v) > maxRequestHeaders {
		return false
	}
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~, ", c) >= 0:
		default:
			return false
		}
	}
	return true
}
