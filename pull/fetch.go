// Package pull downloads models by name: from the Hugging Face Hub
// (pull/hf) and from Ollama registries (pull/ollama), into the caches
// those tools use. This file is the transfer engine both share: Fetch
// brings one content-addressed blob to a final path, resuming what an
// earlier, interrupted call left, and verifies its sha256 before the file
// becomes visible under that path.
package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// Blob is one file to download.
type Blob struct {
	URL    string      // GET with redirects followed; Range must be honoured for resume
	Header http.Header // sent with every request (an Authorization bearer token, say)
	Size   int64       // bytes; -1 when the server did not say
	SHA256 string      // lowercase hex; required: nothing unverified becomes a model
}

// Event reports progress, in the shape of `ollama pull`'s JSON lines.
type Event struct {
	Status    string `json:"status"`
	Digest    string `json:"digest,omitempty"`
	Total     int64  `json:"total,omitempty"`
	Completed int64  `json:"completed,omitempty"`
}

// Options tune a Fetch. The zero value is usable.
type Options struct {
	Client   *http.Client // nil: http.DefaultClient
	Progress func(Event)  // nil: no progress
}

// PartialSuffix names the file an unfinished download is kept in, beside
// its final path; Fetch resumes from it.
const PartialSuffix = ".partial"

// Fetch downloads b to dest. The data is written to dest+PartialSuffix
// and renamed to dest only after its sha256 matched b.SHA256; a mismatch
// removes the partial data and names both digests. A dest that already
// exists is taken as done.
func Fetch(ctx context.Context, b Blob, dest string, o Options) error {
	want := strings.ToLower(b.SHA256)
	if len(want) != 64 {
		return fmt.Errorf("pull: %s: no sha256 to verify the download against", b.URL)
	}
	if _, err := os.Stat(dest); err == nil {
		return nil
	}
	client := o.Client
	if client == nil {
		client = http.DefaultClient
	}
	part := dest + PartialSuffix
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	have, err := io.Copy(h, f) // the hash of what an earlier call kept
	if err != nil {
		return fmt.Errorf("pull: reading %s: %w", part, err)
	}
	if b.Size < 0 || have < b.Size {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL, nil)
		if err != nil {
			return fmt.Errorf("pull: %w", err)
		}
		for k, v := range b.Header {
			req.Header[k] = v
		}
		if have > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("pull: %w", err)
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusPartialContent && have > 0:
		case resp.StatusCode == http.StatusOK:
			// The server ignored Range: start again.
			if err := f.Truncate(0); err != nil {
				return fmt.Errorf("pull: %w", err)
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("pull: %w", err)
			}
			h.Reset()
			have = 0
		default:
			return fmt.Errorf("pull: %s: %s", b.URL, resp.Status)
		}
		n, err := io.Copy(io.MultiWriter(f, h), resp.Body)
		have += n
		if o.Progress != nil {
			o.Progress(Event{Status: "pulling", Digest: "sha256:" + want, Total: b.Size, Completed: have})
		}
		if err != nil {
			return fmt.Errorf("pull: %s: %w (%d bytes kept, the next pull resumes)", b.URL, err, have)
		}
	}
	if b.Size >= 0 && have != b.Size {
		return fmt.Errorf("pull: %s: got %d bytes, want %d", b.URL, have, b.Size)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want {
		f.Close()
		os.Remove(part)
		return fmt.Errorf("pull: %s: sha256 %s, want %s; the data was discarded", b.URL, got, want)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	if err := os.Rename(part, dest); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	return nil
}

// ErrNotFound is wrapped by resolvers when a name names nothing.
var ErrNotFound = errors.New("not found")
