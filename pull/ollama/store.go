package ollama

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"ringlm/pull"
)

// EnvModels names the store's directory; DefaultStore reads it.
const EnvModels = "RINGLM_MODELS"

// MaxTextLayer bounds a template, system, params or license layer, which
// Open reads into memory; real ones are a few kilobytes.
const MaxTextLayer = 1 << 20

// DefaultStore is $RINGLM_MODELS, or ~/.ringlm/models when it is unset.
// RINGLM_MODELS=~/.ollama/models uses the models an Ollama installation
// has pulled, in place.
func DefaultStore() (string, error) {
	if dir := os.Getenv(EnvModels); dir != "" {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("ollama: no model store: set %s (%v)", EnvModels, err)
	}
	return filepath.Join(home, ".ringlm", "models"), nil
}

// Model is a pulled model: its GGUF file and what the other layers of its
// manifest say about running it.
type Model struct {
	Name Name
	// Manifest has every layer, those this package does not read too:
	// a projector (vision), an adapter (LoRA) or messages that a caller
	// may have to refuse or report.
	Manifest *Manifest
	// Digest is the sha256 of the manifest file, sha256:<hex>; `ollama
	// list` shows its first 12 hex digits as the model's ID.
	Digest   string
	GGUFPath string
	// Template is the chat template, Go text/template source as Ollama
	// renders it (ParseTemplate), "" when the model has none.
	Template string
	// System is the default system prompt, "" when the model has none.
	System string
	// Params are the model's default options from its params layer,
	// decoded from JSON (numbers are float64, stop is []any of strings):
	// temperature, top_k, top_p, num_ctx, stop, ... (SampleParams).
	Params  map[string]any
	License []string
}

// Entry is one model in a store, as `ollama list` shows it.
type Entry struct {
	Name     Name
	Digest   string // of the manifest, as Model.Digest
	Size     int64  // all blobs of the manifest, in bytes
	Modified time.Time
	GGUFPath string
}

// Resolve finds a pulled model by the name a user gave, without the
// network. It reads the store and never writes to it.
func Resolve(store, name string) (*Model, error) {
	n, err := ParseName(name)
	if err != nil {
		return nil, err
	}
	return Open(store, n)
}

// Open reads model n's manifest from store and the small layers it
// names (template, system, params, license), checking each blob's size
// against the manifest and the small ones' sha256. A name the store does
// not hold wraps pull.ErrNotFound. It never writes to the store.
func Open(store string, n Name) (*Model, error) {
	data, man, err := readManifest(manifestFile(store, n))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ollama: model %s %w in %s (ringlm pull %s)", n, pull.ErrNotFound, store, n.DisplayShort())
	}
	if err != nil {
		return nil, fmt.Errorf("ollama: model %s: %w", n, err)
	}
	sum := sha256.Sum256(data)
	m := &Model{Name: n, Manifest: man, Digest: "sha256:" + hex.EncodeToString(sum[:])}
	for _, l := range man.Layers {
		var text []byte
		switch l.MediaType {
		case MediaTypeModel:
			if m.GGUFPath != "" {
				continue // the first model layer is the model, as Ollama reads it
			}
			m.GGUFPath, err = presentBlob(store, l)
		case MediaTypeTemplate, MediaTypeSystem, MediaTypeParams, MediaTypeLicense:
			text, err = readTextBlob(store, l)
		}
		if err != nil {
			return nil, fmt.Errorf("ollama: model %s: %w", n, err)
		}
		switch l.MediaType {
		case MediaTypeTemplate:
			m.Template = string(text)
		case MediaTypeSystem:
			m.System = string(text)
		case MediaTypeLicense:
			m.License = append(m.License, string(text))
		case MediaTypeParams:
			if err := json.Unmarshal(text, &m.Params); err != nil {
				return nil, fmt.Errorf("ollama: model %s: params layer %s is not a JSON object: %v", n, l.Digest, err)
			}
		}
	}
	return m, nil
}

// List returns the models in store, the most recently pulled first. A
// store that does not exist yet holds none. Paths under manifests/ that
// are not a valid name, and manifests that do not decode, are left out,
// as `ollama list` leaves them. It never writes to the store.
func List(store string) ([]Entry, error) {
	var list []Entry
	err := walkManifests(store, func(n Name, path string) error {
		fi, err := os.Stat(path)
		if err != nil {
			return nil // removed since the directory was read
		}
		data, man, err := readManifest(path)
		if err != nil {
			return nil
		}
		sum := sha256.Sum256(data)
		e := Entry{Name: n, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: man.Size(), Modified: fi.ModTime()}
		if i := slices.IndexFunc(man.Layers, func(l Layer) bool { return l.MediaType == MediaTypeModel }); i >= 0 {
			e.GGUFPath = blobFile(store, man.Layers[i].Digest)
		}
		list = append(list, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list, func(a, b Entry) int {
		return cmp.Or(b.Modified.Compare(a.Modified), cmp.Compare(a.Name.String(), b.Name.String()))
	})
	return list, nil
}

// Remove deletes a model's manifest, then the directories that leaves
// empty and the blobs no other manifest uses. When some other manifest
// cannot be read, no blob is removed: it may be one of that model's.
func Remove(store, name string) error {
	n, err := ParseName(name)
	if err != nil {
		return err
	}
	path := manifestFile(store, n)
	_, man, err := readManifest(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ollama: rm: model %s %w in %s", n, pull.ErrNotFound, store)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("ollama: rm %s: %w", n, err)
	}
	removeEmptyDirs(filepath.Join(store, "manifests"), filepath.Dir(path))
	if man == nil {
		return nil // unreadable, so its blobs are unknown; they stay
	}
	if err := removeUnused(store, man.Blobs()); err != nil {
		return fmt.Errorf("ollama: rm %s: %w", n, err)
	}
	return nil
}

// removeUnused deletes those of blobs that no manifest in store names.
func removeUnused(store string, blobs []Layer) error {
	used := map[string]bool{}
	unreadable := false
	err := walkManifests(store, func(_ Name, path string) error {
		_, man, err := readManifest(path)
		if err != nil {
			unreadable = true
			return nil
		}
		for _, l := range man.Blobs() {
			used[l.Digest] = true
		}
		return nil
	})
	if err != nil || unreadable {
		return err
	}
	for _, l := range blobs {
		if used[l.Digest] {
			continue
		}
		if err := os.Remove(blobFile(store, l.Digest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// removeEmptyDirs removes dir and its parents while they are empty,
// stopping at root, which stays.
func removeEmptyDirs(root, dir string) {
	for dir != root && len(dir) > len(root) {
		if os.Remove(dir) != nil { // not empty, or not ours to remove
			return
		}
		dir = filepath.Dir(dir)
	}
}

// walkManifests calls fn for every file at manifests/{host}/{namespace}/
// {model}/{tag} whose four parts make a valid name; nothing else there
// can be a manifest, and nothing it visits can lie outside the store.
func walkManifests(store string, fn func(n Name, path string) error) error {
	root := filepath.Join(store, "manifests")
	kinds := []string{"host", "namespace", "model", "tag"}
	var walk func(dir string, parts []string) error
	walk = func(dir string, parts []string) error {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) && len(parts) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("ollama: %w", err)
		}
		for _, e := range entries {
			kind := kinds[len(parts)]
			if checkPart(kind, e.Name()) != "" {
				continue
			}
			path := filepath.Join(dir, e.Name())
			if kind != "tag" {
				if e.IsDir() {
					if err := walk(path, append(parts, e.Name())); err != nil {
						return err
					}
				}
				continue
			}
			if !e.Type().IsRegular() {
				continue
			}
			n := Name{Host: parts[0], Namespace: parts[1], Model: parts[2], Tag: e.Name()}
			if err := fn(n, path); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root, nil)
}

func manifestFile(store string, n Name) string {
	return filepath.Join(store, "manifests", n.relPath())
}

// blobFile is where a blob lives: blobs/sha256-<hex>. The digest must
// have passed checkDigest (DecodeManifest checks every one).
func blobFile(store, digest string) string {
	return filepath.Join(store, "blobs", "sha256-"+digest[len("sha256:"):])
}

// readManifest reads and decodes a manifest file.
func readManifest(path string) ([]byte, *Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return nil, nil, err
	}
	m, err := DecodeManifest(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, m, nil
}

// presentBlob returns the path of l's blob after checking that it is
// there with the manifest's size.
func presentBlob(store string, l Layer) (string, error) {
	path := blobFile(store, l.Digest)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s blob %s is missing (pull the model again)", l.MediaType, l.Digest)
	}
	if err != nil {
		return "", err
	}
	if fi.Size() != l.Size {
		return "", fmt.Errorf("%s blob %s has %d bytes, the manifest says %d (pull the model again)", l.MediaType, l.Digest, fi.Size(), l.Size)
	}
	return path, nil
}

// readTextBlob reads a small blob and checks its sha256.
func readTextBlob(store string, l Layer) ([]byte, error) {
	if l.Size > MaxTextLayer {
		return nil, fmt.Errorf("%s layer %s: %d bytes, the limit is %d", l.MediaType, l.Digest, l.Size, MaxTextLayer)
	}
	path, err := presentBlob(store, l)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != l.Digest {
		return nil, fmt.Errorf("%s blob %s holds data of digest %s (pull the model again)", l.MediaType, l.Digest, got)
	}
	return data, nil
}

// writeFileAtomic writes data to path through a temporary file in the
// same directory and a rename, so that path holds either its old content
// or all of data, never part of it.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	err = errors.Join(err, f.Sync(), f.Chmod(0o644), f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
