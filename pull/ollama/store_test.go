package ollama

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"ringlm/pull"
	"ringlm/pull/pulltest"
)

// writeModel puts a model into store by hand, as an Ollama installation
// would have left it, and returns its manifest file.
func writeModel(t *testing.T, store, name string, layers ...pulltest.Layer) string {
	t.Helper()
	n, err := ParseName(name)
	if err != nil {
		t.Fatal(err)
	}
	data, blobs := pulltest.Manifest(layers...)
	for d, b := range blobs {
		writeFile(t, blobFile(store, d), b)
	}
	path := manifestFile(store, n)
	writeFile(t, path, data)
	return path
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot records every path under root with its mode, size, time and
// content hash: two equal snapshots mean nothing was written.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	s := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String() + " " + fi.ModTime().String()
		if !d.IsDir() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %d %x", len(data), sha256.Sum256(data))
		}
		s[path] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// chmodTree makes root read-only (or writable again) throughout.
func chmodTree(t *testing.T, root string, writable bool) {
	t.Helper()
	var paths []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		paths = append(paths, path)
		return nil
	})
	if !writable {
		slices.Reverse(paths) // files before the directories holding them
	}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		mode := fs.FileMode(0o444)
		if fi.IsDir() {
			mode = 0o555
		}
		if writable {
			mode |= 0o200
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// An Ollama store made by hand, read-only, is listed and resolved, and
// nothing in it changes. (Under root the modes do not stop writes; the
// snapshot still would.)
func TestReadOnlyOllamaStore(t *testing.T) {
	store := t.TempDir()
	qwenTemplate, err := os.ReadFile(filepath.Join("testdata", "templates", "qwen2.5.gotmpl"))
	if err != nil {
		t.Fatal(err)
	}
	qwen := writeModel(t, store, "qwen2.5:0.5b",
		layer(MediaTypeModel, tinyGGUF(t, 10)),
		layer(MediaTypeTemplate, qwenTemplate),
		layer(MediaTypeSystem, []byte(qwenSystem)),
		layer(MediaTypeParams, []byte(`{"stop":["<|im_end|>"],"temperature":0.7,"top_p":0.8,"top_k":20,"repeat_penalty":1.05}`)),
		layer(MediaTypeLicense, testLicense))
	llama := writeModel(t, store, "llama3.2", tinyModel(t, 11)...)
	hf := writeModel(t, store, "hf.co/bartowski/Tiny-GGUF:Q8_0", layer(MediaTypeModel, tinyGGUF(t, 12)))
	// What else an Ollama store may hold: a stray file where a model
	// directory would be, a manifest that does not decode, Ollama's own
	// partial downloads.
	writeFile(t, filepath.Join(store, "manifests", "registry.ollama.ai", "library", ".DS_Store"), []byte("junk"))
	writeFile(t, filepath.Join(store, "manifests", "registry.ollama.ai", "library", "broken", "latest"), []byte("{not json"))
	writeFile(t, filepath.Join(store, "blobs", "sha256-"+strings.Repeat("c", 64)+"-partial"), []byte("half"))
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, p := range []string{qwen, hf, llama} {
		if err := os.Chtimes(p, base, base.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	chmodTree(t, store, false)
	t.Cleanup(func() { chmodTree(t, store, true) })
	before := snapshot(t, store)

	list, err := List(store)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name.DisplayShort())
	}
	if want := []string{"llama3.2:latest", "hf.co/bartowski/Tiny-GGUF:Q8_0", "qwen2.5:0.5b"}; !slices.Equal(names, want) {
		t.Fatalf("List = %q, want %q (newest first)", names, want)
	}
	data, err := os.ReadFile(qwen)
	if err != nil {
		t.Fatal(err)
	}
	man, err := DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	q := list[2]
	if q.Digest != digestOf(data) || q.Size != man.Size() || !q.Modified.Equal(base) || q.GGUFPath != blobFile(store, man.Layers[0].Digest) {
		t.Errorf("qwen entry %+v", q)
	}

	m, err := Resolve(store, "qwen2.5:0.5b")
	if err != nil {
		t.Fatal(err)
	}
	if m.System != qwenSystem || m.Template != string(qwenTemplate) || len(m.License) != 1 || m.Digest != q.Digest {
		t.Errorf("resolved %+v", m)
	}
	tmpl, err := ParseTemplate(m.Template)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := tmpl.Render(m.System, []Message{{"user", "Hi"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := os.ReadFile(filepath.Join("testdata", "templates", "qwen2.5.system.txt")); prompt != string(want) {
		t.Errorf("prompt %q", prompt)
	}
	if _, err := Resolve(store, "hf.co/bartowski/Tiny-GGUF:Q8_0"); err != nil {
		t.Error(err)
	}
	_, err = Resolve(store, "broken")
	if !errors.Is(err, ErrBadManifest) || !strings.Contains(err.Error(), "registry.ollama.ai/library/broken:latest") {
		t.Errorf("broken manifest: %v", err)
	}
	checkOneLine(t, err)
	_, err = Resolve(store, "mistral")
	if !errors.Is(err, pull.ErrNotFound) || !strings.Contains(err.Error(), "ringlm pull mistral:latest") {
		t.Errorf("absent model: %v", err)
	}
	checkOneLine(t, err)

	if after := snapshot(t, store); !maps.Equal(before, after) {
		t.Errorf("the store changed:\nbefore %v\nafter  %v", before, after)
	}
}

func TestListEmptyStore(t *testing.T) {
	list, err := List(filepath.Join(t.TempDir(), "never-made"))
	if err != nil || len(list) != 0 {
		t.Errorf("List of a missing store = %v, %v", list, err)
	}
}

func TestRemoveKeepsSharedBlobs(t *testing.T) {
	reg := pulltest.NewRegistry(t)
	a, b := tinyModel(t, 20), tinyModel(t, 21) // different GGUFs, the rest shared
	reg.Push("library/a", "latest", a...)
	reg.Push("team/b", "v1", b...)
	store := t.TempDir()
	o := Options{Store: store, Registry: reg.URL()}
	ma, err := Pull(context.Background(), "a", o)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := Pull(context.Background(), "team/b:v1", o)
	if err != nil {
		t.Fatal(err)
	}

	if err := Remove(store, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ma.GGUFPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a's own GGUF blob stayed (%v)", err)
	}
	for _, l := range mb.Manifest.Blobs() {
		if _, err := os.Stat(blobFile(store, l.Digest)); err != nil {
			t.Errorf("b's blob %s (%s): %v", l.Digest, l.MediaType, err)
		}
	}
	if _, err := os.Stat(filepath.Join(store, "manifests", "registry.ollama.ai", "library")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the emptied library directory stayed (%v)", err)
	}
	if _, err := Resolve(store, "team/b:v1"); err != nil {
		t.Errorf("b after removing a: %v", err)
	}

	if err := Remove(store, "team/b:v1"); err != nil {
		t.Fatal(err)
	}
	if blobs, _ := os.ReadDir(filepath.Join(store, "blobs")); len(blobs) != 0 {
		t.Errorf("blobs left with no model: %v", blobs)
	}
	if entries, err := os.ReadDir(filepath.Join(store, "manifests")); err != nil || len(entries) != 0 {
		t.Errorf("manifests/ holds %v (%v), want it empty and present", entries, err)
	}

	err = Remove(store, "a")
	if !errors.Is(err, pull.ErrNotFound) || !strings.Contains(err.Error(), "registry.ollama.ai/library/a:latest") {
		t.Errorf("removing it again: %v", err)
	}
	checkOneLine(t, err)
	if err := Remove(store, "../../etc"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Remove of a traversal: %v", err)
	}
}

// When some manifest cannot be read, its blobs are unknown: none go.
func TestRemoveWithUnreadableManifest(t *testing.T) {
	store := t.TempDir()
	layers := tinyModel(t, 30)
	writeModel(t, store, "a", layers...)
	writeFile(t, filepath.Join(store, "manifests", "registry.ollama.ai", "library", "c", "latest"), []byte("{"))
	if err := Remove(store, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(blobFile(store, digestOf(layers[0].Data))); err != nil {
		t.Errorf("a blob went although a manifest could not be read: %v", err)
	}
	// The broken manifest itself can be removed.
	if err := Remove(store, "c"); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(filepath.Join(store, "manifests")); err != nil || len(entries) != 0 {
		t.Errorf("manifests/ holds %v (%v)", entries, err)
	}
}

func TestOpenErrors(t *testing.T) {
	gg := tinyGGUF(t, 40)
	for _, c := range []struct {
		name   string
		layers []pulltest.Layer
		breakf func(store string, layers []pulltest.Layer)
		want   string
	}{
		{"missing GGUF", []pulltest.Layer{layer(MediaTypeModel, gg)}, func(store string, ls []pulltest.Layer) {
			os.Remove(blobFile(store, digestOf(ls[0].Data)))
		}, "application/vnd.ollama.image.model blob sha256:"},
		{"short GGUF", []pulltest.Layer{layer(MediaTypeModel, gg)}, func(store string, ls []pulltest.Layer) {
			os.Truncate(blobFile(store, digestOf(ls[0].Data)), 10)
		}, "has 10 bytes, the manifest says"},
		{"altered template", []pulltest.Layer{layer(MediaTypeModel, gg), layer(MediaTypeTemplate, []byte("{{ .Prompt }}"))}, func(store string, ls []pulltest.Layer) {
			os.WriteFile(blobFile(store, digestOf(ls[1].Data)), []byte("{{ .Evil   }}"), 0o644)
		}, "holds data of digest"},
		{"params not an object", []pulltest.Layer{layer(MediaTypeModel, gg), layer(MediaTypeParams, []byte(`["temperature", 1]`))}, nil,
			"params layer"},
		{"huge text layer", []pulltest.Layer{layer(MediaTypeModel, gg), layer(MediaTypeLicense, make([]byte, MaxTextLayer+1))}, nil,
			"the limit is"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := t.TempDir()
			writeModel(t, store, "m", c.layers...)
			if c.breakf != nil {
				c.breakf(store, c.layers)
			}
			_, err := Resolve(store, "m")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "registry.ollama.ai/library/m:latest") {
				t.Fatalf("got %v, want an error naming the model and %q", err, c.want)
			}
			checkOneLine(t, err)
		})
	}

	// A manifest in the store whose digest would leave it is refused.
	store := t.TempDir()
	writeFile(t, filepath.Join(store, "manifests", "registry.ollama.ai", "library", "evil", "latest"),
		[]byte(manifestJSON(MediaTypeModel, "sha256:../../../../etc/passwd", "1")))
	if _, err := Resolve(store, "evil"); !errors.Is(err, ErrBadManifest) {
		t.Errorf("traversal digest in a stored manifest: %v", err)
	}
	if list, err := List(store); err != nil || len(list) != 0 {
		t.Errorf("List shows %v, %v", list, err)
	}
	if _, err := Resolve(store, "../../../etc/passwd"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("traversal name: %v", err)
	}
}

func TestDefaultStore(t *testing.T) {
	t.Setenv(EnvModels, "/srv/models")
	if got, err := DefaultStore(); got != "/srv/models" || err != nil {
		t.Errorf("with %s set: %q, %v", EnvModels, got, err)
	}
	t.Setenv(EnvModels, "")
	t.Setenv("HOME", "/home/u")
	if got, err := DefaultStore(); got != "/home/u/.ringlm/models" || err != nil {
		t.Errorf("default: %q, %v", got, err)
	}
}
