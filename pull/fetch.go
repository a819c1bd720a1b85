package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Blob is one file to download.
type Blob struct {
	URL    string      // GET with redirects followed; Range must be honoured for resume
	Header http.Header // sent with every request (an Authorization bearer token, say); Authorization is dropped on a redirect to another host
	Size   int64       // bytes; -1 when the server did not say (one stream, no parallel parts, no disk check)
	SHA256 string      // lowercase hex; required: nothing unverified becomes a model
}

// Event reports progress, in the shape of `ollama pull`'s JSON lines.
type Event struct {
	Status    string `json:"status"`
	Digest    string `json:"digest,omitempty"`
	Total     int64  `json:"total,omitempty"`
	Completed int64  `json:"completed,omitempty"`
}

// Options tune a Fetch. The zero value is usable: every zero field takes
// the default named beside it.
type Options struct {
	Client *http.Client // nil: an HTTP/1.1 client, so that parts travel on connections of their own
	// Progress receives events from one goroutine at a time, about ten a
	// second while bytes arrive. nil: no progress.
	Progress func(Event)

	Parts        int           // ranged parts fetched at once for a large blob; 0: DefaultParts
	SplitAt      int64         // blobs of at least this many bytes are fetched in Parts parts; 0: DefaultSplitAt
	StallTimeout time.Duration // a part that receives no byte for this long is cut and tried again; 0: DefaultStallTimeout
	Attempts     int           // tries in a row without a byte before a part, and the Fetch, fails; 0: DefaultAttempts
	Backoff      time.Duration // the wait before a part's first retry, doubling for each after it; 0: DefaultBackoff

	// PartialSuffix names the file an unfinished download is kept in,
	// beside its final path; its progress is kept in PartialSuffix+".json".
	// "": the package's PartialSuffix.
	PartialSuffix string
	// LockPath is the file Fetch holds an exclusive flock on while it
	// works, so that two pulls of one blob take turns. "": dest+".lock",
	// removed when done. A path given here is left in place: it belongs to
	// a convention shared with another tool (huggingface_hub's
	// .locks/{repo}/{sha256}.lock).
	LockPath string
	// ForeignPartial is where another tool keeps an unfinished download of
	// the same blob as a contiguous prefix (huggingface_hub's
	// {blob}.incomplete). When Fetch has no partial file of its own it
	// resumes from that one, under the lock.
	ForeignPartial string
}

// The defaults of Options.
const (
	DefaultParts        = 8
	DefaultSplitAt      = 64 << 20
	DefaultStallTimeout = 30 * time.Second
	DefaultAttempts     = 5
	DefaultBackoff      = time.Second
)

// PartialSuffix names the file an unfinished download is kept in,
// beside its final path; Fetch resumes from it.
const PartialSuffix = ".partial"

const (
	maxBackoff  = 30 * time.Second
	reportEvery = 100 * time.Millisecond // progress events while bytes arrive
	saveEvery   = 500 * time.Millisecond // the sidecar, at most this stale when a process is killed
	copyBuf     = 256 << 10
)

var (
	errStalled      = errors.New("stalled")
	errRangeIgnored = errors.New("the server ignored Range")
	errBadAnswer    = errors.New("unexpected answer")
)

// diskError is a failure to write the partial file: no retry mends it.
type diskError struct{ err error }

func (e *diskError) Error() string { return "writing the partial file: " + e.err.Error() }
func (e *diskError) Unwrap() error { return e.err }

// defaultClient speaks HTTP/1.1 only: over HTTP/2 every part would share
// one TCP connection and its flow-control window, which is what parallel
// parts are meant to get around.
var defaultClient = sync.OnceValue(func() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP1(true)
	tr.MaxIdleConnsPerHost = DefaultParts
	return &http.Client{Transport: tr}
})

func (o Options) withDefaults() Options {
	o.Client = dropAuthOffHost(o.Client)
	if o.Parts <= 0 {
		o.Parts = DefaultParts
	}
	if o.SplitAt <= 0 {
		o.SplitAt = DefaultSplitAt
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.PartialSuffix == "" {
		o.PartialSuffix = PartialSuffix
	}
	return o
}

func (o Options) emit(e Event) {
	if o.Progress != nil {
		o.Progress(e)
	}
}

// dropAuthOffHost returns c (nil: the default client) made to drop the
// Authorization header on a redirect to any host but the first. Go keeps
// it for subdomains, but a token for huggingface.co is not the CDN's
// business, and the CDN's signed URL needs none.
func dropAuthOffHost(c *http.Client) *http.Client {
	if c == nil {
		c = defaultClient()
	}
	cc := *c
	next := c.CheckRedirect
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != via[0].URL.Host {
			req.Header.Del("Authorization")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &cc
}

// Fetch downloads b to dest. The data is written to dest+PartialSuffix,
// in parallel ranged parts when b is large, and renamed to dest only after
// its sha256 matched b.SHA256; a mismatch removes the partial data and
// names both digests. A dest that already exists is taken as done without
// reading it (a model already pulled starts without being hashed again),
// unless its size says it is not the blob.
//
// An interrupted Fetch, even a killed process, leaves the partial file
// and a sidecar saying which byte ranges it holds; the next Fetch of the
// same blob transfers only the rest. Fetch emits "pulling {digest}" and
// "verifying sha256 digest" events; "success" is the caller's to say,
// once it has made the blob a model.
func Fetch(ctx context.Context, b Blob, dest string, o Options) error {
	want := strings.ToLower(b.SHA256)
	if !isSHA256(want) {
		return fmt.Errorf("pull: %s: no sha256 to verify the download against", b.URL)
	}
	b.SHA256 = want
	if u, err := url.Parse(b.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("pull: %q is not an http(s) URL", b.URL)
	}
	if done, err := present(dest, b.Size); done || err != nil {
		if done && b.Size >= 0 {
			o.emit(Event{Status: "pulling " + short(want), Digest: "sha256:" + want, Total: b.Size, Completed: b.Size})
		}
		return err
	}
	o = o.withDefaults()
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	lockPath, removeLock := o.LockPath, false
	if lockPath == "" {
		lockPath, removeLock = dest+".lock", true
	}
	unlock, err := lockFile(ctx, lockPath, removeLock, func() {
		o.emit(Event{Status: "waiting for another pull of " + short(want), Digest: "sha256:" + want})
	})
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	defer unlock()
	// Whoever held the lock may have finished the blob meanwhile.
	if done, err := present(dest, b.Size); done || err != nil {
		return err
	}
	t, err := openTransfer(b, dest, o)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	defer t.f.Close()
	if err := checkSpace(filepath.Dir(dest), t.need()); err != nil {
		if t.completed() == 0 {
			os.Remove(t.part) // nothing to resume: leave nothing behind
			os.Remove(t.side)
		}
		return fmt.Errorf("pull: %w", err)
	}
	err = t.download(ctx)
	if serr := t.save(); err == nil && serr != nil {
		err = fmt.Errorf("saving progress: %w", serr)
	}
	if err != nil {
		return t.failed(err)
	}
	return t.finish(dest)
}

// present reports whether dest already holds the blob: it exists, and
// has the blob's size when that is known.
func present(dest string, size int64) (bool, error) {
	fi, err := os.Stat(dest)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pull: %w", err)
	}
	if !fi.Mode().IsRegular() || (size >= 0 && fi.Size() != size) {
		return false, fmt.Errorf("pull: %s is %w: %d bytes where the blob has %d; remove it and pull again", dest, ErrCorrupt, fi.Size(), size)
	}
	return true, nil
}

// transfer is one Fetch's state: the partial file and which of its byte
// ranges hold data.
type transfer struct {
	b      Blob
	o      Options
	part   string // the partial file
	side   string // its sidecar
	f      *os.File
	digest string // "sha256:…", for events

	mu    sync.Mutex
	done  spans
	dirty bool // done changed since the sidecar was last written
	saved time.Time

	rangeOK   chan struct{} // closed once the server answered a Range with 206
	rangeOnce sync.Once
}

// openTransfer opens (or creates) the partial file and reads what it
// holds from its sidecar. A sidecar that does not describe this blob and
// file means the data cannot be trusted to be where it says: start over.
// The sidecar is written before any data, so that a partial file without
// one is always a plain prefix.
func openTransfer(b Blob, dest string, o Options) (*transfer, error) {
	part := dest + o.PartialSuffix
	t := &transfer{b: b, o: o, part: part, side: part + ".json", digest: "sha256:" + b.SHA256, rangeOK: make(chan struct{})}
	if o.ForeignPartial != "" {
		if _, err := os.Lstat(part); errors.Is(err, os.ErrNotExist) {
			if err := os.Rename(o.ForeignPartial, part); err == nil {
				os.Remove(t.side) // a stale claim about a file that was not there
			}
		}
	}
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	t.f = f
	t.done, err = loadSidecar(t.side, b.SHA256, b.Size, fi.Size())
	if err != nil {
		t.done = nil
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := writeSidecar(t.side, b.SHA256, b.Size, t.done); err != nil {
		f.Close()
		return nil, err
	}
	t.saved = time.Now()
	return t, nil
}

// need is how many more bytes the disk must hold for this blob.
func (t *transfer) need() int64 {
	if t.b.Size < 0 {
		return 0
	}
	return t.b.Size - t.done.total()
}

func (t *transfer) completed() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done.total()
}

func (t *transfer) mark(s span) {
	t.mu.Lock()
	t.done = t.done.add(s)
	t.dirty = true
	t.mu.Unlock()
}

// save writes the sidecar if it is behind.
func (t *transfer) save() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dirty {
		return nil
	}
	if err := writeSidecar(t.side, t.b.SHA256, t.b.Size, t.done); err != nil {
		return err
	}
	t.dirty, t.saved = false, time.Now()
	return nil
}

// reset forgets every byte kept: for a server that cannot resume.
func (t *transfer) reset() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = nil
	if err := writeSidecar(t.side, t.b.SHA256, t.b.Size, nil); err != nil {
		return &diskError{err}
	}
	t.dirty, t.saved = false, time.Now()
	if err := t.f.Truncate(0); err != nil {
		return &diskError{err}
	}
	return nil
}

func (t *transfer) report() {
	t.o.emit(Event{Status: "pulling " + short(t.b.SHA256), Digest: t.digest, Total: max(t.b.Size, 0), Completed: t.completed()})
}

// download fetches every byte range the partial file lacks, reporting
// progress and saving the sidecar on a ticker as it goes.
func (t *transfer) download(ctx context.Context) error {
	t.report()
	todo := t.plan()
	if len(todo) == 0 {
		return nil
	}
	stop := make(chan struct{})
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		tick := time.NewTicker(reportEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				t.report()
				t.mu.Lock()
				due := t.dirty && now.Sub(t.saved) >= saveEvery
				t.mu.Unlock()
				if due {
					t.save() // a failed save only loses progress; the final one reports
				}
			}
		}
	}()
	err := t.parts(ctx, todo)
	if errors.Is(err, errRangeIgnored) {
		err = t.fetch(ctx, span{0, t.b.Size}, true)
	}
	close(stop)
	<-ticking
	t.report()
	return err
}

// plan cuts what is missing into the ranges to request: at the
// boundaries of Parts equal parts for a large blob, so that a resumed
// download has one range per part that was cut short.
func (t *transfer) plan() []span {
	size := t.b.Size
	if size < 0 {
		var at int64
		if len(t.done) > 0 && t.done[0].Start == 0 {
			at = t.done[0].End
		}
		return []span{{at, -1}}
	}
	miss := t.done.missing(size)
	if size < t.o.SplitAt || t.o.Parts == 1 {
		return miss
	}
	chunk := (size + int64(t.o.Parts) - 1) / int64(t.o.Parts)
	var out []span
	for _, m := range miss {
		for s := m.Start; s < m.End; {
			e := min((s/chunk+1)*chunk, m.End)
			out = append(out, span{s, e})
			s = e
		}
	}
	return out
}

// parts fetches todo with up to Parts ranges in flight. Only the first
// starts until a server has answered a Range with 206: one that ignores
// Range would otherwise send the whole blob to every part. It returns
// errRangeIgnored when that is what the server did.
func (t *transfer) parts(ctx context.Context, todo []span) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workers := 1
	if t.b.Size >= t.o.SplitAt {
		workers = min(t.o.Parts, len(todo))
	}
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	take := func() (span, bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(todo) {
			return span{}, false, false
		}
		next++
		return todo[next-1], next == 1, true
	}
	for range workers {
		wg.Go(func() {
			for {
				p, first, ok := take()
				if !ok {
					return
				}
				if !first {
					select {
					case <-t.rangeOK:
					case <-ctx.Done():
						return
					}
				}
				if err := t.fetch(ctx, p, false); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// fetch brings the bytes of p into the partial file, trying again after a
// stall, a dropped connection or a server error, with a doubling wait,
// until Attempts tries in a row have brought nothing. fromZero starts
// every try at byte 0 again, for a server that cannot resume.
func (t *transfer) fetch(ctx context.Context, p span, fromZero bool) error {
	fails := 0
	for {
		if fromZero {
			if err := t.reset(); err != nil {
				return err
			}
		}
		n, err := t.attempt(ctx, p)
		if !fromZero {
			p.Start += n
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if !retryable(err) {
			return err
		}
		if n > 0 {
			fails = 0
		}
		fails++
		if fails >= t.o.Attempts {
			return fmt.Errorf("%s: %w (%d tries)", p.describe(), err, fails)
		}
		wait := min(t.o.Backoff<<(fails-1), maxBackoff)
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(wait):
		}
	}
}

func (p span) describe() string {
	if p.End < 0 {
		return fmt.Sprintf("bytes %d-", p.Start)
	}
	return fmt.Sprintf("bytes %d-%d", p.Start, p.End-1)
}

func retryable(err error) bool {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.temporary()
	}
	var de *diskError
	return !errors.As(err, &de) && !errors.Is(err, errRangeIgnored) && !errors.Is(err, errBadAnswer)
}

// attempt makes one ranged request for p and writes what arrives, until
// p is complete, the body ends, or no byte has come for StallTimeout. It
// returns how many bytes it wrote, from p.Start on.
func (t *transfer) attempt(ctx context.Context, p span) (int64, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(t.o.StallTimeout, func() { cancel(errStalled) })
	defer stall.Stop()
	why := func(err error) error {
		if errors.Is(context.Cause(actx), errStalled) {
			return fmt.Errorf("%w: no data for %s", errStalled, t.o.StallTimeout)
		}
		return err
	}

	req, err := http.NewRequestWithContext(actx, http.MethodGet, t.b.URL, nil)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errBadAnswer, err)
	}
	for k, v := range t.b.Header {
		req.Header[k] = v
	}
	switch {
	case p.End >= 0:
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", p.Start, p.End-1))
	case p.Start > 0:
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", p.Start))
	}
	resp, err := t.o.Client.Do(req)
	if err != nil {
		return 0, why(err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if err := checkContentRange(resp.Header.Get("Content-Range"), p.Start, t.b.Size); err != nil {
			return 0, err
		}
		t.rangeOnce.Do(func() { close(t.rangeOK) })
	case http.StatusOK:
		if p.Start != 0 || (p.End >= 0 && p.End != t.b.Size) {
			return 0, errRangeIgnored
		}
		if t.b.Size >= 0 && resp.ContentLength >= 0 && resp.ContentLength != t.b.Size {
			return 0, fmt.Errorf("%w: the server sends %d bytes, the blob has %d", errBadAnswer, resp.ContentLength, t.b.Size)
		}
	default:
		return 0, &HTTPError{URL: t.b.URL, StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header}
	}

	buf := make([]byte, copyBuf)
	off := p.Start
	for {
		n := len(buf)
		if p.End >= 0 {
			n = int(min(int64(n), p.End-off))
			if n == 0 {
				return off - p.Start, nil
			}
		}
		n, rerr := resp.Body.Read(buf[:n])
		if n > 0 {
			stall.Reset(t.o.StallTimeout)
			if _, err := t.f.WriteAt(buf[:n], off); err != nil {
				return off - p.Start, &diskError{err}
			}
			t.mark(span{off, off + int64(n)})
			off += int64(n)
		}
		if rerr == io.EOF {
			if p.End >= 0 && off < p.End {
				return off - p.Start, io.ErrUnexpectedEOF
			}
			return off - p.Start, nil
		}
		if rerr != nil {
			return off - p.Start, why(rerr)
		}
	}
}

// checkContentRange checks a 206's "bytes first-last/total" against the
// range asked for (from start on) and the blob's size.
func checkContentRange(h string, start, size int64) error {
	first, last, total, err := parseContentRange(h)
	if err != nil {
		return fmt.Errorf("%w: Content-Range %q: %v", errBadAnswer, h, err)
	}
	if first != start {
		return fmt.Errorf("%w: asked for bytes from %d, the server sends from %d", errBadAnswer, start, first)
	}
	if size >= 0 && (total >= 0 && total != size || last >= size) {
		return fmt.Errorf("%w: Content-Range %q does not fit a blob of %d bytes", errBadAnswer, h, size)
	}
	return nil
}

// parseContentRange reads "bytes first-last/total"; total is -1 for "*".
func parseContentRange(h string) (first, last, total int64, err error) {
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, 0, 0, errors.New("not a byte range")
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, errors.New("no total")
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, errors.New("no range")
	}
	if first, err = parseCount(a); err != nil {
		return
	}
	if last, err = parseCount(b); err != nil {
		return
	}
	if last < first {
		return 0, 0, 0, errors.New("last before first")
	}
	total = -1
	if tot != "*" {
		if total, err = parseCount(tot); err != nil {
			return
		}
		if last >= total {
			return 0, 0, 0, errors.New("past the total")
		}
	}
	return first, last, total, nil
}

// parseCount reads a byte count: decimal digits only, below 2^62.
func parseCount(s string) (int64, error) {
	if s == "" || len(s) > 18 {
		return 0, fmt.Errorf("%q is not a byte count", s)
	}
	var n int64
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a byte count", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// failed wraps a download's error with what was kept for the next pull.
func (t *transfer) failed(err error) error {
	var he *HTTPError
	if !errors.As(err, &he) {
		err = fmt.Errorf("%s: %w", t.b.URL, err)
	}
	kept := t.completed()
	if kept == 0 {
		return fmt.Errorf("pull: %w", err)
	}
	of := ""
	if t.b.Size >= 0 {
		of = " of " + FormatBytes(t.b.Size)
	}
	return fmt.Errorf("pull: %w (%s%s kept, the next pull resumes)", err, FormatBytes(kept), of)
}

// finish verifies the partial file and, when its sha256 is the blob's,
// renames it to dest; otherwise it discards it.
func (t *transfer) finish(dest string) error {
	t.o.emit(Event{Status: "verifying sha256 digest", Digest: t.digest})
	if t.b.Size >= 0 {
		if got := t.completed(); got != t.b.Size {
			return fmt.Errorf("pull: %s: got %d bytes, want %d", t.b.URL, got, t.b.Size)
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(t.f, 0, 1<<62)); err != nil {
		return fmt.Errorf("pull: reading %s: %w", t.part, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != t.b.SHA256 {
		t.f.Close()
		os.Remove(t.part)
		os.Remove(t.side)
		return fmt.Errorf("pull: %s: %w: got %s, want %s; the data was discarded", t.b.URL, ErrDigestMismatch, got, t.b.SHA256)
	}
	// On disk before it has its final name: a crash must not leave a
	// name that promises data the disk never got.
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	if err := t.f.Close(); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	if err := os.Rename(t.part, dest); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	os.Remove(t.side)
	return nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// short is the digest's first 12 hex digits, as `ollama pull` shows them.
func short(sha string) string { return sha[:12] }
