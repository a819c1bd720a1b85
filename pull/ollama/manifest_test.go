package ollama

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

const (
	digestA = "sha256:" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// manifestJSON is a manifest with the given layers (mediaType, digest,
// size triples) and a config blob.
func manifestJSON(layers ...string) string {
	var ls []string
	for i := 0; i+2 < len(layers); i += 3 {
		ls = append(ls, fmt.Sprintf(`{"mediaType":%q,"digest":%q,"size":%s}`, layers[i], layers[i+1], layers[i+2]))
	}
	return fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,"config":{"mediaType":%q,"digest":%q,"size":2},"layers":[%s]}`,
		MediaTypeManifest, MediaTypeConfig, digestB, strings.Join(ls, ","))
}

func TestDecodeManifest(t *testing.T) {
	m, err := DecodeManifest([]byte(manifestJSON(MediaTypeModel, digestA, "1000", MediaTypeTemplate, digestB, "20")))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 2 || m.Layers[0].Digest != digestA || m.Config.Digest != digestB {
		t.Fatalf("decoded %+v", m)
	}
	if got := len(m.Blobs()); got != 3 {
		t.Errorf("%d blobs, want the 2 layers and the config", got)
	}
	if got := m.Size(); got != 1022 {
		t.Errorf("Size() = %d, want 1022", got)
	}
	// Blobs must not write into the manifest's own layer slice.
	_ = append(m.Blobs()[:1], Layer{Digest: "x"})
	if m.Layers[1].Digest != digestB {
		t.Errorf("Blobs changed the layers: %+v", m.Layers)
	}
}

func TestDecodeManifestErrors(t *testing.T) {
	many := make([]string, 0, 3*(MaxLayers+1))
	for range MaxLayers + 1 {
		many = append(many, MediaTypeModel, digestA, "1")
	}
	for _, c := range []struct{ name, json, want string }{
		{"not JSON", `<html>rate limited</html>`, "not a JSON manifest"},
		{"truncated", manifestJSON(MediaTypeModel, digestA, "1")[:40], "not a JSON manifest"},
		{"an array", `[]`, "not a JSON manifest"},
		{"schema 1", `{"schemaVersion":1,"layers":[]}`, "schemaVersion 1, want 2"},
		{"no model layer", manifestJSON(MediaTypeTemplate, digestA, "5"), "no application/vnd.ollama.image.model layer"},
		{"no layers", manifestJSON(), "no application/vnd.ollama.image.model layer"},
		{"upper-case digest", manifestJSON(MediaTypeModel, strings.ToUpper(digestA), "1"), "is not sha256:<64 lowercase hex digits>"},
		{"short digest", manifestJSON(MediaTypeModel, "sha256:abc", "1"), "is not sha256"},
		{"other algorithm", manifestJSON(MediaTypeModel, "sha512:"+strings.Repeat("a", 128), "1"), "is not sha256"},
		{"traversal", manifestJSON(MediaTypeModel, "sha256:../../../../etc/passwd", "1"), "is not sha256"},
		{"traversal in hex", manifestJSON(MediaTypeModel, "sha256:"+strings.Repeat("a", 58)+"/../..", "1"), "is not sha256"},
		{"bad config digest", strings.Replace(manifestJSON(MediaTypeModel, digestA, "1"), digestB, "sha256:..", 1), "layer 1 (application/vnd.docker.container.image.v1+json)"},
		{"negative size", manifestJSON(MediaTypeModel, digestA, "-1"), "size -1"},
		{"too many layers", manifestJSON(many...), "1025 layers, the limit is 1024"},
		{"too large", manifestJSON(MediaTypeModel, digestA, "1") + strings.Repeat(" ", MaxManifestSize), "the limit is"},
	} {
		_, err := DecodeManifest([]byte(c.json))
		if err == nil {
			t.Errorf("%s: decoded, want an error containing %q", c.name, c.want)
			continue
		}
		if !errors.Is(err, ErrBadManifest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrBadManifest and %q", c.name, err, c.want)
		}
		checkOneLine(t, err)
	}
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(manifestJSON(MediaTypeModel, digestA, "1000", MediaTypeTemplate, digestB, "20", MediaTypeLicense, digestA, "3")))
	f.Add([]byte(manifestJSON(MediaTypeModel, "sha256:../x", "1")))
	f.Add([]byte(`{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"","size":0}]}`))
	f.Add([]byte(`{"schemaVersion":2,"config":null,"layers":null}`))
	store := filepath.Join("store", "root")
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			if !errors.Is(err, ErrBadManifest) {
				t.Fatalf("%v does not wrap ErrBadManifest", err)
			}
			checkOneLine(t, err)
			return
		}
		for _, l := range m.Blobs() {
			path := blobFile(store, l.Digest)
			rel, err := filepath.Rel(store, path)
			if err != nil || !filepath.IsLocal(rel) || filepath.Dir(rel) != "blobs" {
				t.Fatalf("digest %q makes blob path %q, outside %s/blobs", l.Digest, path, store)
			}
			if l.Size < 0 {
				t.Fatalf("size %d accepted", l.Size)
			}
		}
	})
}
