package pulltest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The media types of an Ollama manifest that Manifest writes itself; the
// layers' own come from the caller (package ollama names them, and this
// package cannot import it: ollama's tests use this one).
const (
	MediaTypeManifest = "application/vnd.docker.distribution.manifest.v2+json"
	MediaTypeConfig   = "application/vnd.docker.container.image.v1+json"
)

// Layer is one blob of an Ollama model: its media type
// (application/vnd.ollama.image.model, .template, ...) and its bytes.
type Layer struct {
	MediaType string
	Data      []byte
}

type manifestLayer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int    `json:"size"`
}

// Manifest is the manifest of a model made of layers and a config blob,
// as registry.ollama.ai serves one (indented JSON, schema 2), and every
// blob it names by digest (sha256:<hex>).
func Manifest(layers ...Layer) ([]byte, map[string][]byte) {
	blobs := map[string][]byte{}
	add := func(mediaType string, data []byte) manifestLayer {
		d := "sha256:" + Digest(data)
		blobs[d] = data
		return manifestLayer{MediaType: mediaType, Digest: d, Size: len(data)}
	}
	m := struct {
		SchemaVersion int             `json:"schemaVersion"`
		MediaType     string          `json:"mediaType"`
		Config        manifestLayer   `json:"config"`
		Layers        []manifestLayer `json:"layers"`
	}{SchemaVersion: 2, MediaType: MediaTypeManifest,
		Config: add(MediaTypeConfig, []byte(`{"model_format":"gguf","model_family":"llama","model_type":"tiny"}`))}
	for _, l := range layers {
		m.Layers = append(m.Layers, add(l.MediaType, l.Data))
	}
	data, err := json.MarshalIndent(m, "", "   ")
	if err != nil {
		panic(err) // a struct of strings and ints always encodes
	}
	return data, blobs
}

// Registry is a fake Ollama registry on loopback, answering as
// registry.ollama.ai does:
//
//	GET /v2/{namespace}/{model}/manifests/{tag}   the manifest, as pushed
//	GET /v2/{namespace}/{model}/blobs/{digest}    307 to the CDN, a signed address
//
// An unknown manifest is 404 with the registry's JSON error
// (MANIFEST_UNKNOWN). Blobs come from CDN, another host, whose faults,
// corruptions and byte counter a test uses like any Server's; a blob's
// path there is /{hex digest}.
type Registry struct {
	CDN *Server

	srv *httptest.Server

	mu        sync.Mutex
	manifests map[string][]byte // "namespace/model:tag"
	blobs     map[string]bool   // digests pushed
	status    int
	body      string
	log       []Request
}

// NewRegistry starts a Registry and its CDN, closed when the test ends.
func NewRegistry(t testing.TB) *Registry {
	r := &Registry{CDN: NewServer(t), manifests: map[string][]byte{}, blobs: map[string]bool{}}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the registry's base URL, what ollama.Options.Registry takes.
func (r *Registry) URL() string { return r.srv.URL }

// Push makes repo:tag (repo is namespace/model) a model of layers and a
// config blob, and returns its manifest as served.
func (r *Registry) Push(repo, tag string, layers ...Layer) []byte {
	data, blobs := Manifest(layers...)
	r.PushManifest(repo, tag, data, blobs)
	return data
}

// PushManifest serves manifest, as it is (a broken one too), for
// repo:tag, and blobs by digest.
func (r *Registry) PushManifest(repo, tag string, manifest []byte, blobs map[string][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.manifests[repo+":"+tag] = manifest
	for d, b := range blobs {
		r.blobs[d] = true
		r.CDN.Add(BlobPath(d), b)
	}
}

// BlobPath is the CDN's path of the blob of digest (sha256:<hex>).
func BlobPath(digest string) string { return "/" + strings.TrimPrefix(digest, "sha256:") }

// Fail answers every manifest request with status and body; 0 answers
// them again.
func (r *Registry) Fail(status int, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.body = status, body
}

// Requests is every request the registry (not its CDN) was asked.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.log...)
}

func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	status := r.serve(w, req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, logged(req, status))
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) int {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/v2/"), "/")
	if req.Method != http.MethodGet || len(parts) != 4 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return http.StatusBadRequest
	}
	repo, kind, ref := parts[0]+"/"+parts[1], parts[2], parts[3]
	r.mu.Lock()
	status, body := r.status, r.body
	manifest, known := r.manifests[repo+":"+ref]
	blob := r.blobs[ref]
	r.mu.Unlock()
	switch {
	case kind == "manifests" && status != 0:
		w.WriteHeader(status)
		w.Write([]byte(body))
		return status
	case kind == "manifests" && !known:
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`))
		return http.StatusNotFound
	case kind == "manifests":
		w.Header().Set("Content-Type", MediaTypeManifest)
		w.Write(manifest)
		return http.StatusOK
	case kind == "blobs" && blob:
		http.Redirect(w, req, r.CDN.URL(BlobPath(ref)+"?sig=loopback"), http.StatusTemporaryRedirect)
		return http.StatusTemporaryRedirect
	}
	http.NotFound(w, req)
	return http.StatusNotFound
}
