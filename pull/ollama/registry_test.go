package ollama

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/pull"
	"ringlm/pull/pulltest"
)

func digestOf(data []byte) string { return "sha256:" + pulltest.Digest(data) }

// layer is one layer of a test model.
func layer(mediaType string, data []byte) pulltest.Layer {
	return pulltest.Layer{MediaType: mediaType, Data: data}
}

// manifestAccepts are the Accept headers of the manifest requests.
func manifestAccepts(reg *pulltest.Registry) []string {
	var out []string
	for _, r := range reg.Requests() {
		if strings.Contains(r.Path, "/manifests/") {
			out = append(out, r.Accept)
		}
	}
	return out
}

// blobGets counts the registry's blob downloads, the GETs its CDN
// answered.
func blobGets(reg *pulltest.Registry) int {
	n := 0
	for _, r := range reg.CDN.Requests() {
		if r.Method == http.MethodGet {
			n++
		}
	}
	return n
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

func tinyModel(t *testing.T, seed byte) []pulltest.Layer {
	return []pulltest.Layer{
		layer(MediaTypeModel, tinyGGUF(t, seed)),
		layer(MediaTypeTemplate, testTemplate),
		layer(MediaTypeSystem, []byte("You are a tiny test model.")),
		layer(MediaTypeParams, testParams),
		layer(MediaTypeLicense, testLicense),
		layer(MediaTypeLicense, testUsePol),
	}
}

func TestPull(t *testing.T) {
	reg := pulltest.NewRegistry(t)
	layers := tinyModel(t, 1)
	served := reg.Push("library/tiny", "latest", layers...)
	store := t.TempDir()

	var events []pull.Event
	o := Options{Store: store, Registry: reg.URL(), Progress: func(e pull.Event) { events = append(events, e) }}
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
	_, blobs := pulltest.Manifest(layers...)
	for d, data := range blobs {
		got, err := os.ReadFile(filepath.Join(store, "blobs", "sha256-"+strings.TrimPrefix(d, "sha256:")))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("blob %s: %v", d, err)
		}
		total += int64(len(data))
	}
	if got := reg.CDN.Served(); got != total {
		t.Errorf("the CDN sent %d blob bytes, want %d", got, total)
	}
	if got := blobGets(reg); got != len(blobs) {
		t.Errorf("%d redirected blob GETs, want %d", got, len(blobs))
	}
	if accept := manifestAccepts(reg); len(accept) != 1 || accept[0] != MediaTypeManifest {
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
	before := reg.CDN.Served()
	events = nil
	m2, err := Pull(context.Background(), "library/tiny:latest", o)
	if err != nil {
		t.Fatal(err)
	}
	if n := reg.CDN.Served() - before; n != 0 {
		t.Errorf("second pull transferred %d blob bytes", n)
	}
	if accept := manifestAccepts(reg); len(accept) != 2 || m2.Digest != m.Digest {
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
	reg := pulltest.NewRegistry(t)
	layers := tinyModel(t, 2)
	reg.Push("library/tiny", "latest", layers...)
	store := t.TempDir()
	bad := filepath.Join(store, "blobs", "sha256-"+strings.TrimPrefix(digestOf(layers[0].Data), "sha256:"))
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("GGUF but cut short"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Pull(context.Background(), "tiny", Options{Store: store, Registry: reg.URL()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(m.GGUFPath)
	if err != nil || !bytes.Equal(got, layers[0].Data) {
		t.Errorf("the short blob was kept (%d bytes, %v)", len(got), err)
	}
}

// A blob whose bytes do not match its digest fails the pull, and no
// manifest names the model afterwards.
func TestPullCorruptBlob(t *testing.T) {
	reg := pulltest.NewRegistry(t)
	layers := tinyModel(t, 3)
	reg.Push("library/tiny", "latest", layers...)
	d := digestOf(layers[0].Data)
	reg.CDN.Corrupt(pulltest.BlobPath(d), int64(len(layers[0].Data)-1))
	store := t.TempDir()
	_, err := Pull(context.Background(), "tiny", Options{Store: store, Registry: reg.URL()})
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
	reg := pulltest.NewRegistry(t)
	store := t.TempDir()
	_, err := Pull(context.Background(), "nosuch:7b", Options{Store: store, Registry: reg.URL()})
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
		reg := pulltest.NewRegistry(t)
		reg.Fail(status, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication\nrequired"}]}`)
		_, err := Pull(context.Background(), "someone/private", Options{Store: t.TempDir(), Registry: reg.URL()})
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
	reg := pulltest.NewRegistry(t)
	reg.Fail(http.StatusBadGateway, "<html>\n<h1>502</h1>\n</html>")
	_, err := Pull(context.Background(), "tiny", Options{Store: t.TempDir(), Registry: reg.URL()})
	if err == nil || !strings.Contains(err.Error(), "502 Bad Gateway") {
		t.Fatalf("got %v", err)
	}
	checkOneLine(t, err)
}

func TestPullBadManifest(t *testing.T) {
	gg := tinyGGUF(t, 4)
	noModel, _ := pulltest.Manifest(layer(MediaTypeTemplate, testTemplate))
	for _, c := range []struct{ name, manifest, want string }{
		{"malformed JSON", `{"schemaVersion":2,"layers":[`, "not a JSON manifest"},
		{"no model layer", string(noModel), "no application/vnd.ollama.image.model layer"},
		{"traversal digest", manifestJSON(MediaTypeModel, "sha256:../../../../../../tmp/evil", "5"), "is not sha256"},
		{"bad digest", manifestJSON(MediaTypeModel, "md5:abc", "5"), "is not sha256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := pulltest.NewRegistry(t)
			reg.PushManifest("library/bad", "latest", []byte(c.manifest), map[string][]byte{digestOf(gg): gg})
			store := t.TempDir()
			_, err := Pull(context.Background(), "bad", Options{Store: store, Registry: reg.URL()})
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
	reg := pulltest.NewRegistry(t)
	reg.Push("library/tiny", "latest", tinyModel(t, 5)...)
	if _, err := Pull(ctx, "tiny", Options{Store: t.TempDir(), Registry: reg.URL()}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled pull: %v", err)
	}
}

// A name written with http:// reaches its host over plain HTTP, and only
// when allowed; the model is stored under that host.
func TestPullInsecure(t *testing.T) {
	reg := pulltest.NewRegistry(t)
	reg.Push("team/tiny", "v1", tinyModel(t, 6)...)
	host := strings.TrimPrefix(reg.URL(), "http://")
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
	reg := pulltest.NewRegistry(t)
	v1 := tinyModel(t, 7)
	reg.Push("library/tiny", "latest", v1...)
	store := t.TempDir()
	o := Options{Store: store, Registry: reg.URL()}
	old, err := Pull(context.Background(), "tiny", o)
	if err != nil {
		t.Fatal(err)
	}
	v2 := tinyModel(t, 8) // a new GGUF, the same template, params and licenses
	reg.Push("library/tiny", "latest", v2...)
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
