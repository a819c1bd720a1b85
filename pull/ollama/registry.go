package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"ringlm/pull"
)

// ErrUnauthorized is wrapped when a registry answers 401 or 403.
var ErrUnauthorized = errors.New("access denied")

// Options tune a Pull. The zero value pulls from the name's host over
// HTTPS into DefaultStore.
type Options struct {
	// Store is the model store's directory; "" is DefaultStore().
	Store string
	// Registry is a base URL that stands for the name's host
	// (scheme://host[:port][/path]): a mirror, or a test server. The model
	// is stored under the name's host all the same.
	Registry string
	// Insecure reaches the name's host over plain HTTP, as `ollama pull
	// --insecure`; a name written with http:// needs it.
	Insecure bool
	Client   *http.Client     // nil: http.DefaultClient
	Progress func(pull.Event) // nil: no progress
}

// Pull brings model name from its registry into the store and returns
// it as Open does: GET /v2/{namespace}/{model}/manifests/{tag}, then
// every blob the manifest names that the store lacks with pull.Fetch
// (which follows the registry's redirects and checks each sha256). A
// blob already present with the manifest's size is not fetched again;
// one of another size is replaced. The manifest is written, as the
// registry served it, only once all its blobs are in place, so a pull
// that stops half-way leaves no model behind, only blobs (and a
// .partial file the next pull resumes). Blobs that a replaced manifest
// of the same name used and no other manifest uses are removed, as
// Ollama removes them.
func Pull(ctx context.Context, name string, o Options) (*Model, error) {
	n, err := ParseName(name)
	if err != nil {
		return nil, err
	}
	store := o.Store
	if store == "" {
		if store, err = DefaultStore(); err != nil {
			return nil, err
		}
	}
	base, err := o.baseURL(n)
	if err != nil {
		return nil, fmt.Errorf("ollama: pull %s: %w", n, err)
	}
	progress := func(e pull.Event) {
		if o.Progress != nil {
			o.Progress(e)
		}
	}
	client := o.Client
	if client == nil {
		client = http.DefaultClient
	}

	progress(pull.Event{Status: "pulling manifest"})
	data, man, err := fetchManifest(ctx, client, base, n)
	if err != nil {
		return nil, fmt.Errorf("ollama: pull %s: %w", n, err)
	}
	if err := os.MkdirAll(filepath.Join(store, "blobs"), 0o755); err != nil {
		return nil, fmt.Errorf("ollama: pull %s: %w", n, err)
	}
	seen := map[string]bool{}
	for _, l := range man.Blobs() {
		if seen[l.Digest] {
			continue
		}
		seen[l.Digest] = true
		if err := fetchBlob(ctx, client, base, n, store, l, progress); err != nil {
			return nil, fmt.Errorf("ollama: pull %s: %s blob %s: %w", n, l.MediaType, l.Digest, err)
		}
	}

	progress(pull.Event{Status: "writing manifest"})
	path := manifestFile(store, n)
	_, old, _ := readManifest(path)
	if err := writeFileAtomic(path, data); err != nil {
		return nil, fmt.Errorf("ollama: pull %s: writing the manifest: %w", n, err)
	}
	if old != nil {
		if err := removeUnused(store, old.Blobs()); err != nil {
			return nil, fmt.Errorf("ollama: pull %s: removing the blobs the model no longer uses: %w", n, err)
		}
	}
	progress(pull.Event{Status: "success"})
	return Open(store, n)
}

// baseURL is the URL the registry API of n's host is under.
func (o Options) baseURL(n Name) (*url.URL, error) {
	if o.Registry != "" {
		u, err := url.Parse(o.Registry)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("registry %q is not an http:// or https:// base URL", o.Registry)
		}
		return u, nil
	}
	scheme := n.Scheme
	if scheme == "" {
		scheme = "https"
		if o.Insecure {
			scheme = "http"
		}
	}
	if scheme == "http" && !o.Insecure {
		return nil, fmt.Errorf("http://%s is plain HTTP; allow it with --insecure", n.Host)
	}
	return &url.URL{Scheme: scheme, Host: n.Host}, nil
}

// fetchManifest GETs n's manifest and decodes it.
func fetchManifest(ctx context.Context, client *http.Client, base *url.URL, n Name) ([]byte, *Manifest, error) {
	u := base.JoinPath("v2", n.Namespace, n.Model, "manifests", n.Tag)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", MediaTypeManifest)
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifestSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the manifest from %s: %w", u, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, nil, fmt.Errorf("pull model manifest: file does not exist (model %s %w at %s)", n.DisplayShort(), pull.ErrNotFound, base.Host)
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, nil, fmt.Errorf("%w by %s: %s%s (ringlm pulls public models only)", ErrUnauthorized, base.Host, resp.Status, registryMessage(body))
	default:
		return nil, nil, fmt.Errorf("%s answered %s%s", u, resp.Status, registryMessage(body))
	}
	m, err := DecodeManifest(body)
	if err != nil {
		return nil, nil, fmt.Errorf("manifest from %s: %w", u, err)
	}
	return body, m, nil
}

// fetchBlob brings one blob into the store unless it is there already.
func fetchBlob(ctx context.Context, client *http.Client, base *url.URL, n Name, store string, l Layer, progress func(pull.Event)) error {
	dest := blobFile(store, l.Digest)
	if fi, err := os.Stat(dest); err == nil {
		if fi.Mode().IsRegular() && fi.Size() == l.Size {
			progress(pull.Event{Status: pullingStatus(l.Digest), Digest: l.Digest, Total: l.Size, Completed: l.Size})
			return nil
		}
		// Not the blob the manifest names, whatever it is: pull.Fetch
		// would take any file at dest as done.
		if err := os.Remove(dest); err != nil {
			return err
		}
	}
	blob := pull.Blob{
		URL:    base.JoinPath("v2", n.Namespace, n.Model, "blobs", l.Digest).String(),
		Size:   l.Size,
		SHA256: strings.TrimPrefix(l.Digest, "sha256:"),
	}
	return pull.Fetch(ctx, blob, dest, pull.Options{Client: client, Progress: progress})
}

// registryMessage is ": " and the first error a registry's JSON error
// body (the registry API's {"errors":[{"code","message"}]}) gives, made
// one short line; "" when the body has none.
func registryMessage(body []byte) string {
	var e struct {
		Errors []struct{ Code, Message string }
	}
	if json.Unmarshal(body, &e) != nil || len(e.Errors) == 0 {
		return ""
	}
	msg := strings.Join(strings.Fields(e.Errors[0].Code+" "+e.Errors[0].Message), " ")
	msg = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, msg)
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "..."
	}
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// pullingStatus is a blob's progress status as pull.Fetch and `ollama pull`
// print it: "pulling" and the digest's first 12 hex digits.
func pullingStatus(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	return "pulling " + hex[:min(12, len(hex))]
}
