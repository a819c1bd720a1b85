package ollama

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ringlm/gguf"
	"ringlm/pull"
)

// testRegistry serves the registry API as registry.ollama.ai does:
// manifests itself, blob GETs redirected to a second server standing for
// its CDN, which honours Range.
type testRegistry struct {
	t        *testing.T
	srv, cdn *httptest.Server

	mu        sync.Mutex
	manifests map[string][]byte // "namespace/model:tag"
	blobs     map[string][]byte // digest: the bytes served for it
	accept    []string          // Accept headers of manifest GETs
	status    int               // when not 0, every manifest GET's answer
	errBody   string

	blobBytes atomic.Int64 // blob bytes the CDN sent
	blobGets  atomic.Int64
}

func newTestRegistry(t *testing.T) *testRegistry {
	r := &testRegistry{t: t, manifests: map[string][]byte{}, blobs: map[string][]byte{}}
	r.cdn = httptest.NewServer(http.HandlerFunc(r.serveCDN))
	r.srv = httptest.NewServer(http.HandlerFunc(r.serveRegistry))
	t.Cleanup(func() { r.srv.Close(); r.cdn.Close() })
	return r
}

func (r *testRegistry) serveRegistry(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/v2/"), "/")
	if req.Method != http.MethodGet || len(parts) != 4 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	ns, model, kind, ref := parts[0], parts[1], parts[2], parts[3]
	r.mu.Lock()
	defer r.mu.Unlock()
	switch kind {
	case "manifests":
		r.accept = append(r.accept, req.Header.Get("Accept"))
		if r.status != 0 {
			w.WriteHeader(r.status)
			w.Write([]byte(r.errBody))
			return
		}
		data, ok := r.manifests[ns+"/"+model+":"+ref]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`))
			return
		}
		w.Header().Set("Content-Type", MediaTypeManifest)
		w.Write(data)
	case "blobs":
		if _, ok := r.blobs[ref]; !ok {
			http.NotFound(w, req)
			return
		}
		http.Redirect(w, req, r.cdn.URL+"/cdn/"+strings.Replace(ref, ":", "-", 1)+"?sig=test", http.StatusTemporaryRedirect)
	default:
		http.NotFound(w, req)
	}
}

func (r *testRegistry) serveCDN(w http.ResponseWriter, req *http.Request) {
	digest := strings.Replace(strings.TrimPrefix(req.URL.Path, "/cdn/"), "-", ":", 1)
	r.mu.Lock()
	data, ok := r.blobs[digest]
	r.mu.Unlock()
	if !ok || req.URL.Query().Get("sig") != "test" {
		http.NotFound(w, req)
		return
	}
	r.blobGets.Add(1)
	http.ServeContent(countingWriter{w, &r.blobBytes}, req, "", time.Time{}, bytes.NewReader(data))
}

// locked runs f holding the registry's lock, for a test to change or
// read what the handlers use.
func (r *testRegistry) locked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

type testLayer struct {
	mediaType string
	data      []byte
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// publish makes repo:tag (repo is namespace/model) a model of the given
// layers and a config blob, and returns its manifest as served.
func (r *testRegistry) publish(repo, tag string, layers ...testLayer) []byte {
	r.t.Helper()
	data, blobs := buildManifest(r.t, layers...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.manifests[repo+":"+tag] = data
	for d, b := range blobs {
		r.blobs[d] = b
	}
	return data
}

// buildManifest is a manifest of layers plus a config blob, and every
// blob it names by digest.
func buildManifest(t *testing.T, layers ...testLayer) ([]byte, map[string][]byte) {
	t.Helper()
	blobs := map[string][]byte{}
	config := []byte(`{"model_format":"gguf","model_family":"llama","model_type":"tiny"}`)
	m := Manifest{SchemaVersion: 2, MediaType: MediaTypeManifest,
		Config: Layer{MediaType: MediaTypeConfig, Digest: digestOf(config), Size: int64(len(config))}}
	blobs[m.Config.Digest] = config
	for _, l := range layers {
		d := digestOf(l.data)
		blobs[d] = l.data
		m.Layers = append(m.Layers, Layer{MediaType: l.mediaType, Digest: d, Size: int64(len(l.data))})
	}
	// Indented, as registries serve it: the stored file must be these
	// bytes, not a re-encoding.
	data, err := json.MarshalIndent(m, "", "   ")
	if err != nil {
		t.Fatal(err)
	}
	return data, blobs
}

// tinyGGUF is a small real GGUF file; seed makes different files.
func tinyGGUF(t *testing.T, seed byte) []byte {
	t.Helper()
	w := gguf.NewWriter()
	w.Set("general.architecture", gguf.String("llama"))
	w.Set("general.name", gguf.String("tiny"))
	w.Set("general.file_type", gguf.Uint32(0))
	data := make([]byte, 4*8)
	for i := range data {
		data[i] = seed + byte(i)
	}
	if err := w.AddTensor("token_embd.weight", gguf.TypeF32, []uint64{4, 2}, data); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var (
	testTemplate = []byte(`{{ if .System }}<|im_start|>system
{{ .System }}<|im_end|>
{{ end }}{{ if .Prompt }}<|im_start|>user
{{ .Prompt }}<|im_end|>
{{ end }}<|im_start|>assistant
{{ .Response }}<|im_end|>
`)
	testParams  = []byte(`{"stop":["<|im_start|>","<|im_end|>"],"temperature":0.7,"top_k":20,"num_ctx":4096}`)
	testLicense = []byte("Apache License 2.0\n")
	testUsePol  = []byte("Acceptable use policy\n")
)

func tinyModel(t *testing.T, seed byte) []testLayer {
	return []testLayer{
		{MediaTypeModel, tinyGGUF(t, seed)},
		{MediaTypeTemplate, testTemplate},
		{MediaTypeSystem, []byte("You are a tiny test model.")},
		{MediaTypeParams, testParams},
		{MediaTypeLicense, testLicense},
		{MediaTypeLicense, testUsePol},
	}
}

func TestPull(t *testing.T) {
	reg := newTestRegistry(t)
	layers := tinyModel(t, 1)
	served := reg.publish("library/tiny", "latest", layers...)
	store := t.TempDir()

	var events []pull.Event
	o := Options{Store: store, Registry: reg.srv.URL, Progress: func(e pull.Event) { events = append(events, e) }}
	m, err := Pull(context.Background(), "tiny", o)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name.String() != "registry.ollama.ai/library/tiny:latest" {
		t.Errorf("name %s", m.Name)
	}
	if m.Template != string(testTemplate) || m.System != "You are a tiny test model." {
		t.Errorf("template %q, system %q", m.Template, m.System)
	}
	if !slices.Equal(m.License, []string{string(testLicense), string(testUsePol)}) {
		t.Errorf("licenses %q", m.License)
	}
	if m.Params["temperature"] != 0.7 || m.Params["num_ctx"] != 4096.0 {
		t.Errorf("params %v", m.Params)
	}
	if m.Digest != digestOf(served) {
		t.Errorf("digest %s, want the served manifest's %s", m.Digest, digestOf(served))
	}
	f, err := gguf.Open(m.GGUFPath)
	if err != nil {
		t.Fatalf("the model blob is not the GGUF file: %v", err)
	}
	if arch, _ := f.Architecture(); arch != "llama" {
		t.Errorf("architecture %q", arch)
	}
	f.Close()

	// Ollama's layout, with the manifest byte for byte as served.
	stored, err := os.ReadFile(filepath.Join(store, "manifests", "registry.ollama.ai", "library", "tiny", "latest"))
	if err != nil || !bytes.Equal(stored, served) {
		t.Fatalf("stored manifest %q (%v), want the served bytes", stored, err)
	}
	var total int64
	var blobs map[string][]byte
	var accept []string
	reg.locked(func() { blobs, accept = maps.Clone(reg.blobs), slices.Clone(reg.accept) })
	for d, data := range blobs {
		got, err := os.ReadFile(filepath.Join(store, "blobs", "sha256-"+strings.TrimPrefix(d, "sha256:")))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("blob %s: %v", d, err)
		}
		total += int64(len(data))
	}
	if got := reg.blobBytes.Load(); got != total {
		t.Errorf("the CDN sent %d blob bytes, want %d", got, total)
	}
	if got := reg.blobGets.Load(); got != int64(len(blobs)) {
		t.Errorf("%d redirected blob GETs, want %d", got, len(blobs))
	}
	if len(accept) != 1 || accept[0] != MediaTypeManifest {
		t.Errorf("manifest GETs sent Accept %q", accept)
	}
	checkNoLeftovers(t, store)
	statuses := map[string]bool{}
	for _, e := range events {
		statuses[e.Status] = true
	}
	for _, l := range m.Manifest.Layers {
		statuses["pulling"] = statuses["pulling"] || statuses[pullingStatus(l.Digest)]
	}
	for _, s := range []string{"pulling manifest", "pulling", "writing manifest", "success"} {
		if !statuses[s] {
			t.Errorf("no %q progress event in %+v", s, events)
		}
	}

	// A second pull asks for the manifest again and transfers no blob.
	reg.blobBytes.Store(0)
	events = nil
	m2, err := Pull(context.Background(), "library/tiny:latest", o)
	if err != nil {
		t.Fatal(err)
	}
	if n := reg.blobBytes.Load(); n != 0 {
		t.Errorf("second pull transferred %d blob bytes", n)
	}
	reg.locked(func() { accept = slices.Clone(reg.accept) })
	if len(accept) != 2 || m2.Digest != m.Digest {
		t.Errorf("second pull: %d manifest GETs, digest %s", len(accept), m2.Digest)
	}
	for _, e := range events {
		if strings.HasPrefix(e.Status, "pulling ") && e.Digest != "" && e.Completed != e.Total {
			t.Errorf("a present blob reported as incomplete: %+v", e)
		}
	}
}

// checkNoLeftovers fails on partial downloads or temporary manifests.
func checkNoLeftovers(t *testing.T, store string) {
	t.Helper()
	filepath.WalkDir(store, func(path string, d os.DirEntry, err error) error {
		if err == nil && (strings.HasSuffix(path, pull.PartialSuffix) || strings.Contains(d.Name(), ".tmp-")) {
			t.Errorf("left behind: %s", path)
		}
		return nil
	})
}

// A blob file of the wrong size is not the blob: it is fetched again.
func TestPullReplacesWrongSizeBlob(t *testing.T) {
	reg := newTestRegistry(t)
	layers := tinyModel(t, 2)
	reg.publish("library/tiny", "latest", layers...)
	store := t.TempDir()
	bad := filepath.Join(store, "blobs", "sha256-"+strings.TrimPrefix(digestOf(layers[0].data), "sha256:"))
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("GGUF but cut short"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Pull(context.Background(), "tiny", Options{Store: store, Registry: reg.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(m.GGUFPath)
	if err != nil || !bytes.Equal(got, layers[0].data) {
		t.Errorf("the short blob was kept (%d bytes, %v)", len(got), err)
	}
}

// A blob whose bytes do not match its digest fails the pull, and no
// manifest names the model afterwards.
func TestPullCorruptBlob(t *testing.T) {
	reg := newTestRegistry(t)
	layers := tinyModel(t, 3)
	reg.publish("library/tiny", "latest", layers...)
	d := digestOf(layers[0].data)
	corrupt := bytes.Clone(layers[0].data)
	corrupt[len(corrupt)-1] ^= 0xff
	reg.locked(func() { reg.blobs[d] = corrupt })
	store := t.TempDir()
	_, err := Pull(context.Background(), "tiny", Options{Store: store, Registry: reg.srv.URL})
	if err == nil || !strings.Contains(err.Error(), "sha256") || !strings.Contains(err.Error(), "registry.ollama.ai/library/tiny:latest") {
		t.Fatalf("got %v, want a sha256 error naming the model", err)
	}
	checkOneLine(t, err)
	if _, err := os.Stat(filepath.Join(store, "manifests")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a manifest was written for a model with a corrupt blob (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(store, "blobs", "sha256-"+strings.TrimPrefix(d, "sha256:"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the corrupt blob is in the store (%v)", err)
	}
	if _, err := Resolve(store, "tiny"); !errors.Is(err, pull.ErrNotFound) {
		t.Errorf("Resolve after a failed pull: %v", err)
	}
}

func TestPullNotFound(t *testing.T) {
	reg := newTestRegistry(t)
	store := t.TempDir()
	_, err := Pull(context.Background(), "nosuch:7b", Options{Store: store, Registry: reg.srv.URL})
	if !errors.Is(err, pull.ErrNotFound) {
		t.Fatalf("got %v, want pull.ErrNotFound", err)
	}
	for _, want := range []string{"registry.ollama.ai/library/nosuch:7b", "file does not exist", "nosuch:7b not found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	checkOneLine(t, err)
	if entries, _ := os.ReadDir(store); len(entries) != 0 {
		t.Errorf("a failed pull wrote %v into the store", entries)
	}
}

func TestPullUnauthorized(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		reg := newTestRegistry(t)
		reg.locked(func() {
			reg.status = status
			reg.errBody = `{"errors":[{"code":"UNAUTHORIZED","message":"authentication\nrequired"}]}`
		})
		_, err := Pull(context.Background(), "someone/private", Options{Store: t.TempDir(), Registry: reg.srv.URL})
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("%d: got %v, want ErrUnauthorized", status, err)
		}
		for _, want := range []string{"registry.ollama.ai/someone/private:latest", http.StatusText(status), "UNAUTHORIZED authentication required"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %q", err, want)
			}
		}
		checkOneLine(t, err)
	}
}

func TestPullServerError(t *testing.T) {
	reg := newTestRegistry(t)
	reg.locked(func() {
		reg.status = http.StatusBadGateway
		reg.errBody = "<html>\n<h1>502</h1>\n</html>"
	})
	_, err := Pull(context.Background(), "tiny", Options{Store: t.TempDir(), Registry: reg.srv.URL})
	if err == nil || !strings.Contains(err.Error(), "502 Bad Gateway") {
		t.Fatalf("got %v", err)
	}
	checkOneLine(t, err)
}

func TestPullBadManifest(t *testing.T) {
	gg := tinyGGUF(t, 4)
	noModel, _ := buildManifest(t, testLayer{MediaTypeTemplate, testTemplate})
	for _, c := range []struct{ name, manifest, want string }{
		{"malformed JSON", `{"schemaVersion":2,"layers":[`, "not a JSON manifest"},
		{"no model layer", string(noModel), "no application/vnd.ollama.image.model layer"},
		{"traversal digest", manifestJSON(MediaTypeModel, "sha256:../../../../../../tmp/evil", "5"), "is not sha256"},
		{"bad digest", manifestJSON(MediaTypeModel, "md5:abc", "5"), "is not sha256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := newTestRegistry(t)
			reg.locked(func() {
				reg.manifests["library/bad:latest"] = []byte(c.manifest)
				reg.blobs[digestOf(gg)] = gg
			})
			store := t.TempDir()
			_, err := Pull(context.Background(), "bad", Options{Store: store, Registry: reg.srv.URL})
			if !errors.Is(err, ErrBadManifest) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "library/bad:latest") {
				t.Fatalf("got %v, want ErrBadManifest naming the model and %q", err, c.want)
			}
			checkOneLine(t, err)
			if entries, _ := os.ReadDir(store); len(entries) != 0 {
				t.Errorf("a bad manifest wrote %v into the store", entries)
			}
		})
	}
}

func TestPullNoNetwork(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	_, err := Pull(context.Background(), "tiny", Options{Store: t.TempDir(), Registry: url})
	if err == nil || !strings.Contains(err.Error(), "registry.ollama.ai/library/tiny:latest") || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("got %v, want a connection error naming the model", err)
	}
	checkOneLine(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reg := newTestRegistry(t)
	reg.publish("library/tiny", "latest", tinyModel(t, 5)...)
	if _, err := Pull(ctx, "tiny", Options{Store: t.TempDir(), Registry: reg.srv.URL}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled pull: %v", err)
	}
}

// A name written with http:// reaches its host over plain HTTP, and only
// when allowed; the model is stored under that host.
func TestPullInsecure(t *testing.T) {
	reg := newTestRegistry(t)
	reg.publish("team/tiny", "v1", tinyModel(t, 6)...)
	host := strings.TrimPrefix(reg.srv.URL, "http://")
	name := "http://" + host + "/team/tiny:v1"
	store := t.TempDir()
	_, err := Pull(context.Background(), name, Options{Store: store})
	if err == nil || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("plain HTTP without Insecure: %v", err)
	}
	checkOneLine(t, err)
	m, err := Pull(context.Background(), name, Options{Store: store, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name.DisplayShort() != host+"/team/tiny:v1" {
		t.Errorf("stored as %s", m.Name.DisplayShort())
	}
	if _, err := os.Stat(filepath.Join(store, "manifests", host, "team", "tiny", "v1")); err != nil {
		t.Error(err)
	}
	// Insecure alone: the name's host over HTTP.
	if _, err := Pull(context.Background(), host+"/team/tiny:v1", Options{Store: store, Insecure: true}); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"ftp://x", "http://", "127.0.0.1:80", "http://h/?q=1"} {
		_, err := Pull(context.Background(), "tiny", Options{Store: store, Registry: bad})
		if err == nil || !strings.Contains(err.Error(), "not an http:// or https:// base URL") {
			t.Errorf("Registry %q: %v", bad, err)
		}
	}
}

// Re-pulling a tag that moved replaces its manifest and removes the
// blobs only the old version used.
func TestPullUpdatedTag(t *testing.T) {
	reg := newTestRegistry(t)
	v1 := tinyModel(t, 7)
	reg.publish("library/tiny", "latest", v1...)
	store := t.TempDir()
	o := Options{Store: store, Registry: reg.srv.URL}
	old, err := Pull(context.Background(), "tiny", o)
	if err != nil {
		t.Fatal(err)
	}
	v2 := tinyModel(t, 8) // a new GGUF, the same template, params and licenses
	reg.publish("library/tiny", "latest", v2...)
	m, err := Pull(context.Background(), "tiny", o)
	if err != nil {
		t.Fatal(err)
	}
	if m.GGUFPath == old.GGUFPath {
		t.Fatal("the new version has the old GGUF")
	}
	if _, err := os.Stat(old.GGUFPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old GGUF blob is still there (%v)", err)
	}
	for _, l := range m.Manifest.Blobs() {
		if _, err := os.Stat(blobFile(store, l.Digest)); err != nil {
			t.Errorf("blob %s of the new version: %v", l.Digest, err)
		}
	}
}
