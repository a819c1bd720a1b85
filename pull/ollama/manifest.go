package ollama

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Media types of an Ollama manifest and its layers.
const (
	MediaTypeManifest = "application/vnd.docker.distribution.manifest.v2+json"
	MediaTypeConfig   = "application/vnd.docker.container.image.v1+json"

	MediaTypeModel     = "application/vnd.ollama.image.model" // the GGUF file
	MediaTypeTemplate  = "application/vnd.ollama.image.template"
	MediaTypeSystem    = "application/vnd.ollama.image.system"
	MediaTypeParams    = "application/vnd.ollama.image.params"
	MediaTypeLicense   = "application/vnd.ollama.image.license"
	MediaTypeMessages  = "application/vnd.ollama.image.messages"
	MediaTypeProjector = "application/vnd.ollama.image.projector"
	MediaTypeAdapter   = "application/vnd.ollama.image.adapter"
)

// Bounds on what a registry or a store may hand over as a manifest:
// real ones are about a kilobyte with a handful of layers.
const (
	MaxManifestSize = 4 << 20
	MaxLayers       = 1024
)

// ErrBadManifest is wrapped by every error about a manifest's content.
var ErrBadManifest = errors.New("bad manifest")

// Layer is one blob of a manifest.
type Layer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"` // sha256:<64 lowercase hex>
	Size      int64  `json:"size"`
}

// Manifest is an image manifest (Docker's schema 2) as Ollama's
// registries serve it: a config blob and the model's layers.
type Manifest struct {
	SchemaVersion int     `json:"schemaVersion"`
	MediaType     string  `json:"mediaType"`
	Config        Layer   `json:"config"`
	Layers        []Layer `json:"layers"`
}

// DecodeManifest parses and checks a manifest: schema version 2, every
// digest a sha256 digest (so that it names a file inside the store and
// nothing else), no negative size, and a model layer.
func DecodeManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("ollama: %w: %d bytes, the limit is %d", ErrBadManifest, len(data), MaxManifestSize)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("ollama: %w: not a JSON manifest: %v", ErrBadManifest, err)
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("ollama: %w: schemaVersion %d, want 2 (%s)", ErrBadManifest, m.SchemaVersion, MediaTypeManifest)
	}
	if len(m.Layers) > MaxLayers {
		return nil, fmt.Errorf("ollama: %w: %d layers, the limit is %d", ErrBadManifest, len(m.Layers), MaxLayers)
	}
	model := false
	for i, l := range m.Blobs() {
		if err := checkDigest(l.Digest); err != nil {
			return nil, fmt.Errorf("ollama: %w: layer %d (%s): %v", ErrBadManifest, i, l.MediaType, err)
		}
		if l.Size < 0 {
			return nil, fmt.Errorf("ollama: %w: layer %d (%s): size %d", ErrBadManifest, i, l.MediaType, l.Size)
		}
		model = model || l.MediaType == MediaTypeModel
	}
	if !model {
		return nil, fmt.Errorf("ollama: %w: no %s layer (not a model, or not one this Ollama format knows)", ErrBadManifest, MediaTypeModel)
	}
	return &m, nil
}

// Blobs are the layers and then the config when the manifest has one:
// every blob a pull must bring.
func (m *Manifest) Blobs() []Layer {
	blobs := m.Layers[:len(m.Layers):len(m.Layers)]
	if m.Config.Digest != "" {
		blobs = append(blobs, m.Config)
	}
	return blobs
}

// Size is the bytes of all the manifest's blobs, as `ollama list` counts.
func (m *Manifest) Size() int64 {
	var n int64
	for _, l := range m.Blobs() {
		n += l.Size
	}
	return n
}

// checkDigest accepts sha256:<64 lowercase hex> only: a blob's file name
// is made from it.
func checkDigest(d string) error {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return fmt.Errorf("digest %s is not sha256:<64 lowercase hex digits>", quoteName(d))
	}
	return nil
}
