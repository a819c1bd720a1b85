package pulltest

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Hub is a fake Hugging Face Hub on loopback, answering as the real one
// does (as huggingface_hub reads it):
//
//	GET  /api/models/{user}/{repo}[/revision/{rev}]  {"id", "sha", "siblings": [{"rfilename"}]}
//	HEAD /{user}/{repo}/resolve/{rev}/{file}         302 to the CDN, with X-Repo-Commit,
//	                                                 X-Linked-Etag (the sha256) and X-Linked-Size
//	GET  the same                                    the same 302; the CDN serves the bytes
//
// Errors carry X-Error-Code (RepoNotFound, RevisionNotFound,
// EntryNotFound, GatedRepo). An unknown repository is 401 to a request
// without a token and 404 to one with, as the Hub hides private ones.
// Downloads come from CDN, another host, whose faults and byte counter a
// test uses like any Server's.
type Hub struct {
	CDN *Server

	srv *httptest.Server

	mu      sync.Mutex
	repos   map[string]*hubRepo
	moved   map[string]string // an old repository id → its new one
	token   string
	log     []Request
	commits int
}

type hubRepo struct {
	refs    map[string]string            // branch → commit
	commits map[string]map[string][]byte // commit → file → content
}

// NewHub starts a Hub and its CDN, closed when the test ends.
func NewHub(t testing.TB) *Hub {
	h := &Hub{CDN: NewServer(t), repos: map[string]*hubRepo{}, moved: map[string]string{}}
	h.srv = httptest.NewServer(h)
	t.Cleanup(h.srv.Close)
	return h
}

// URL is the Hub's endpoint, what HF_ENDPOINT would say.
func (h *Hub) URL() string { return h.srv.URL }

// Push makes files the whole tree of repo ("user/name") in a new commit
// on main, creating the repository if need be, and returns the commit.
func (h *Hub) Push(repo string, files map[string][]byte) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.repos[repo]
	if r == nil {
		r = &hubRepo{refs: map[string]string{}, commits: map[string]map[string][]byte{}}
		h.repos[repo] = r
	}
	h.commits++
	sum := sha1.New()
	fmt.Fprintf(sum, "%s %d\n", repo, h.commits)
	tree := map[string][]byte{}
	for name, data := range files {
		fmt.Fprintf(sum, "%s %s\n", name, Digest(data))
		tree[name] = data
		h.CDN.Add("/"+Digest(data), data)
	}
	commit := hex.EncodeToString(sum.Sum(nil))
	r.commits[commit] = tree
	r.refs["main"] = commit
	return commit
}

// Branch points the branch at commit.
func (h *Hub) Branch(repo, branch, commit string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.repos[repo].refs[branch] = commit
}

// RequireToken makes every repository answer only requests bearing token.
func (h *Hub) RequireToken(token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.token = token
}

// Rename moves a repository; the old name redirects to the new.
func (h *Hub) Rename(from, to string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.repos[to] = h.repos[from]
	delete(h.repos, from)
	h.moved[from] = to
}

// Requests is every request the Hub (not its CDN) was asked.
func (h *Hub) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.log...)
}

func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status := h.serve(w, r)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, logged(r, status))
}

// segments splits the escaped path, unescaping each part: a revision
// such as refs/pr/1 travels as one segment, refs%2Fpr%2F1.
func segments(r *http.Request) []string {
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	return parts
}

func hubError(w http.ResponseWriter, status int, code, msg string) int {
	w.Header().Set("X-Error-Code", code)
	w.Header().Set("X-Error-Message", msg)
	http.Error(w, msg, status)
	return status
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) int {
	seg := segments(r)
	api := len(seg) >= 4 && seg[0] == "api" && seg[1] == "models"
	if api {
		seg = seg[2:]
	}
	if len(seg) < 2 {
		http.NotFound(w, r)
		return http.StatusNotFound
	}
	id := seg[0] + "/" + seg[1]
	rest := seg[2:]

	h.mu.Lock()
	to, moved := h.moved[id]
	repo := h.repos[id]
	token := h.token
	var tree map[string][]byte
	commit := "main"
	switch {
	case api && len(rest) == 2 && rest[0] == "revision":
		commit = rest[1]
	case !api && len(rest) >= 3 && rest[0] == "resolve":
		commit = rest[1]
	case api && len(rest) == 0:
	default:
		h.mu.Unlock()
		http.NotFound(w, r)
		return http.StatusNotFound
	}
	if repo != nil {
		if c, ok := repo.refs[commit]; ok {
			commit = c
		}
		tree = repo.commits[commit]
	}
	h.mu.Unlock()

	if moved {
		// The Hub answers a renamed repository with a relative redirect.
		old := "/" + url.PathEscape(seg[0]) + "/" + url.PathEscape(seg[1])
		loc := "/" + to + strings.TrimPrefix(r.URL.EscapedPath(), old)
		if api {
			loc = "/api/models/" + to + strings.TrimPrefix(r.URL.EscapedPath(), "/api/models"+old)
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return http.StatusTemporaryRedirect
	}
	auth := r.Header.Get("Authorization")
	if token != "" && auth != "Bearer "+token {
		if auth == "" {
			return hubError(w, http.StatusUnauthorized, "GatedRepo", "Access to model "+id+" is restricted. You must be authenticated to access it.")
		}
		return hubError(w, http.StatusUnauthorized, "", "Invalid credentials in Authorization header")
	}
	if repo == nil {
		if auth == "" {
			return hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		}
		return hubError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
	}
	if tree == nil {
		return hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+commit)
	}
	w.Header().Set("X-Repo-Commit", commit)
	if api {
		type sibling struct {
			RFilename string `json:"rfilename"`
		}
		info := struct {
			ID       string    `json:"id"`
			ModelID  string    `json:"modelId"`
			SHA      string    `json:"sha"`
			Siblings []sibling `json:"siblings"`
		}{ID: id, ModelID: id, SHA: commit}
		for _, name := range slices.Sorted(maps.Keys(tree)) {
			info.Siblings = append(info.Siblings, sibling{name})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(info)
		return http.StatusOK
	}
	file := strings.Join(rest[2:], "/")
	data, ok := tree[file]
	if !ok {
		return hubError(w, http.StatusNotFound, "EntryNotFound", "Entry not found")
	}
	sha := Digest(data)
	w.Header().Set("ETag", `"`+sha+`"`)
	w.Header().Set("X-Linked-Etag", `"`+sha+`"`)
	w.Header().Set("X-Linked-Size", strconv.Itoa(len(data)))
	// A signed CDN address, as the Hub gives for LFS files.
	w.Header().Set("Location", h.CDN.URL("/"+sha+"?X-Amz-Signature=loopback"))
	w.WriteHeader(http.StatusFound)
	return http.StatusFound
}
