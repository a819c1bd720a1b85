package hf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"ringlm/pull"
)

// metaTimeout bounds one API or HEAD request: they carry no file data.
const metaTimeout = 30 * time.Second

// maxRepoInfo bounds the api/models answer read: a repository of
// thousands of files lists them in a few megabytes.
const maxRepoInfo = 64 << 20

// client speaks the Hub's HTTP API.
type client struct {
	endpoint string
	token    string
	http     *http.Client // follows redirects (renamed repositories)
	noFollow *http.Client // follows none: the X-Linked-* headers are on the redirect itself
}

func newClient(o Options) *client {
	c := o.Transfer.Client
	if c == nil {
		c = http.DefaultClient
	}
	nf := *c
	nf.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client{endpoint: o.Endpoint, token: o.Token, http: c, noFollow: &nf}
}

func (c *client) header() http.Header {
	h := http.Header{"User-Agent": {"ringlm"}}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	return h
}

// escapePath escapes each segment of a '/'-separated path.
func escapePath(p string) string {
	seg := strings.Split(p, "/")
	for i, s := range seg {
		seg[i] = url.PathEscape(s)
	}
	return strings.Join(seg, "/")
}

// resolveURL is where the Hub serves a file at a revision; the revision
// is one segment, its slashes escaped, as huggingface_hub sends it.
func (c *client) resolveURL(repo, rev, file string) string {
	return c.endpoint + "/" + escapePath(repo) + "/resolve/" + url.PathEscape(rev) + "/" + escapePath(file)
}

func (c *client) do(ctx context.Context, hc *http.Client, method, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	req.Header = c.header()
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("hf: %w", ctx.Err())
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("hf: cannot reach %s: %w", c.endpoint, err)
	}
	return resp, nil
}

// repoInfo is what api/models says of a repository at a revision.
type repoInfo struct {
	Commit string
	Files  []string
}

// repo lists n's repository at n's revision.
func (c *client) repo(ctx context.Context, n Name) (repoInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	u := c.endpoint + "/api/models/" + escapePath(n.Repo)
	if n.Revision != "" {
		u += "/revision/" + url.PathEscape(n.Revision)
	}
	resp, err := c.do(ctx, c.http, http.MethodGet, u)
	if err != nil {
		return repoInfo{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return repoInfo{}, c.explain(n, "", resp)
	}
	var body struct {
		SHA      string `json:"sha"`
		Siblings []struct {
			RFilename string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRepoInfo)).Decode(&body); err != nil {
		return repoInfo{}, fmt.Errorf("hf: %s: reading the Hub's answer: %w", n, err)
	}
	if !isCommit(body.SHA) {
		return repoInfo{}, fmt.Errorf("hf: %s: the Hub's answer has no commit (sha %q)", n, body.SHA)
	}
	info := repoInfo{Commit: body.SHA}
	for _, s := range body.Siblings {
		info.Files = append(info.Files, s.RFilename)
	}
	return info, nil
}

// fileMeta is what a HEAD of a file's resolve URL says.
type fileMeta struct {
	URL    string // the resolve URL, after the redirects of a renamed repository
	SHA256 string
	Size   int64
}

// stat asks the Hub for a file's sha256 and size. Like huggingface_hub it
// follows only relative redirects (a renamed repository) and reads
// X-Linked-Etag and X-Linked-Size from the answer that redirects to the
// CDN: the CDN's own ETag is not the content's digest.
func (c *client) stat(ctx context.Context, n Name, commit, file string) (fileMeta, error) {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	u := c.resolveURL(n.Repo, commit, file)
	for hops := 0; ; hops++ {
		resp, err := c.do(ctx, c.noFollow, http.MethodHead, u)
		if err != nil {
			return fileMeta{}, err
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			loc, err := url.Parse(resp.Header.Get("Location"))
			if err != nil {
				return fileMeta{}, fmt.Errorf("hf: %s: a redirect to %q: %w", n, resp.Header.Get("Location"), err)
			}
			if loc.Host == "" && hops < 5 {
				base, _ := url.Parse(u)
				u = base.ResolveReference(loc).String()
				continue
			}
		} else if resp.StatusCode != http.StatusOK {
			return fileMeta{}, c.explain(n, file, resp)
		}
		etag := resp.Header.Get("X-Linked-Etag")
		if etag == "" {
			etag = resp.Header.Get("ETag")
		}
		sha := strings.ToLower(strings.Trim(strings.TrimPrefix(etag, "W/"), `"`))
		if !isSHA256(sha) {
			return fileMeta{}, fmt.Errorf("hf: %s: %s is not stored in LFS (ETag %q): there is no sha256 to verify it by", n, file, etag)
		}
		size := int64(-1)
		if s := resp.Header.Get("X-Linked-Size"); s != "" {
			if size, err = strconv.ParseInt(s, 10, 64); err != nil || size < 0 {
				return fileMeta{}, fmt.Errorf("hf: %s: %s: X-Linked-Size %q", n, file, s)
			}
		}
		return fileMeta{URL: u, SHA256: sha, Size: size}, nil
	}
}

// explain turns the Hub's refusal into one line that says what to do.
// The Hub names the kind of refusal in X-Error-Code; it answers 401 for
// a repository that does not exist when no token is sent, so as not to
// tell private repositories from missing ones.
func (c *client) explain(n Name, file string, resp *http.Response) error {
	code := resp.Header.Get("X-Error-Code")
	why := resp.Header.Get("X-Error-Message")
	if why == "" {
		why = resp.Status
	}
	tokens := c.endpoint + "/settings/tokens"
	switch {
	case code == "RevisionNotFound":
		return fail(pull.ErrNotFound, "%s: %s has no revision %q", n, n.Repo, n.rev())
	case code == "EntryNotFound":
		return fail(pull.ErrNotFound, "%s: %s has no file %s", n, n.Repo, file)
	case code == "GatedRepo":
		return fail(pull.ErrUnauthorized, "%s is gated: accept its conditions at %s/%s, then set HF_TOKEN to an access token of that account (%s)", n, c.endpoint, n.Repo, tokens)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		if c.token == "" {
			return fail(pull.ErrUnauthorized, "%s: no such repository, or it is private or gated and needs a token: set HF_TOKEN to a Hugging Face access token (%s)", n, tokens)
		}
		return fail(pull.ErrUnauthorized, "%s: the Hub refused the token (%s): check HF_TOKEN, and that the token may read %s (%s)", n, why, n.Repo, tokens)
	case resp.StatusCode == http.StatusNotFound:
		return fail(pull.ErrNotFound, "%s: no such repository on %s", n, c.endpoint)
	}
	return fail(&pull.HTTPError{URL: resp.Request.URL.String(), StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header},
		"%s: the Hub answered %s", n, why)
}

func isCommit(s string) bool { return len(s) == 40 && isHex(s) }
func isSHA256(s string) bool { return len(s) == 64 && isHex(s) }

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
