// Package pulltest has loopback servers for the tests of package pull and
// of the registry clients built on it: Server, a blob server whose
// misbehaviours a test switches on (redirects, Range ignored, dropped and
// stalled connections, slow parts, corrupted bytes, error statuses) and
// which counts the bytes it serves; Hub, a fake Hugging Face Hub (the
// api/models and resolve endpoints); and Registry, a fake Ollama registry
// (manifests and blobs). The Hub's and the Registry's downloads come from
// a Server of their own, their CDN.
// Nothing here reaches beyond the loopback interface.
package pulltest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Request is what a server was asked, in the order it was asked.
type Request struct {
	Method        string
	Path          string
	Range         string // the Range header, "" when none
	Authorization string // the Authorization header, "" when none
	Accept        string // the Accept header, "" when none
	Status        int    // the status answered
}

// logged is r as a Request answered with status.
func logged(r *http.Request, status int) Request {
	return Request{Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"), Authorization: r.Header.Get("Authorization"),
		Accept: r.Header.Get("Accept"), Status: status}
}

// Fault is a misbehaviour of a Server, for the requests Match selects.
type Fault struct {
	Match  func(*http.Request) bool // nil: every request
	Times  int                      // how many requests it spoils; 0: all of them
	Status int                      // non-zero: answer with this status and no body
	Drop   bool                     // close the connection after After bytes of the body
	Stall  bool                     // send After bytes of the body, then nothing until the client gives up
	After  int64
	Slow   time.Duration // pause before each KiB of the body
}

type fault struct {
	Fault
	left int // -1: no limit
}

// RangeFrom selects the requests whose Range starts at byte off.
func RangeFrom(off int64) func(*http.Request) bool {
	prefix := "bytes=" + strconv.FormatInt(off, 10) + "-"
	return func(r *http.Request) bool { return strings.HasPrefix(r.Header.Get("Range"), prefix) }
}

// Path selects the requests for one path.
func Path(p string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.URL.Path == p }
}

// Bytes is n reproducible random bytes: a blob to serve.
func Bytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x70756c6c))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Digest is data's sha256 in lowercase hex.
func Digest(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// Server serves files by path over loopback HTTP/1.1, honouring single
// byte ranges unless told otherwise.
type Server struct {
	srv  *httptest.Server
	quit chan struct{}

	mu          sync.Mutex
	files       map[string][]byte
	redirects   map[string]string
	corrupt     map[string]int64
	ignoreRange bool
	faults      []*fault
	log         []Request

	served atomic.Int64
}

// NewServer starts a Server, closed when the test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{
		quit:      make(chan struct{}),
		files:     map[string][]byte{},
		redirects: map[string]string{},
		corrupt:   map[string]int64{},
	}
	s.srv = httptest.NewServer(s)
	t.Cleanup(func() {
		close(s.quit) // stalled handlers return, so that Close does not wait for them
		s.srv.Close()
	})
	return s
}

// URL is the address of path on the server.
func (s *Server) URL(path string) string { return s.srv.URL + path }

// Add serves data at path.
func (s *Server) Add(path string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = data
}

// Redirect answers requests for from with a 302 to to: a path on this
// server, or a URL on another.
func (s *Server) Redirect(from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redirects[from] = to
}

// IgnoreRange makes the server answer every GET with the whole file and
// 200, as servers without range support do.
func (s *Server) IgnoreRange(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignoreRange = on
}

// Corrupt flips the bits of the byte at offset of path in every answer
// that covers it.
func (s *Server) Corrupt(path string, offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.corrupt[path] = offset
}

// Inject adds a fault; the first that matches a request applies.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	left := f.Times
	if left == 0 {
		left = -1
	}
	s.faults = append(s.faults, &fault{f, left})
}

// Clear removes every fault and corruption and honours Range again.
func (s *Server) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	s.corrupt = map[string]int64{}
	s.ignoreRange = false
}

// Served is how many body bytes the server has sent. A byte is counted
// before it is written, so once a client has read a byte it is counted.
func (s *Server) Served() int64 { return s.served.Load() }

// Requests is every request so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

func (s *Server) record(r *http.Request, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logLocked(r, status)
}

func (s *Server) logLocked(r *http.Request, status int) {
	s.log = append(s.log, logged(r, status))
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if to, ok := s.redirects[r.URL.Path]; ok {
		s.logLocked(r, http.StatusFound)
		s.mu.Unlock()
		http.Redirect(w, r, to, http.StatusFound)
		return
	}
	var f *fault
	for _, x := range s.faults {
		if x.left != 0 && (x.Match == nil || x.Match(r)) {
			f = x
			if x.left > 0 {
				x.left--
			}
			break
		}
	}
	data, found := s.files[r.URL.Path]
	bad, corrupt := s.corrupt[r.URL.Path]
	ignoreRange := s.ignoreRange
	s.mu.Unlock()

	if f != nil && f.Status != 0 {
		s.record(r, f.Status)
		w.WriteHeader(f.Status)
		return
	}
	if !found {
		s.record(r, http.StatusNotFound)
		http.NotFound(w, r)
		return
	}
	size := int64(len(data))
	start, end, status := int64(0), size, http.StatusOK
	if rh := r.Header.Get("Range"); rh != "" && !ignoreRange {
		a, b, ok := parseRange(rh, size)
		if !ok {
			s.record(r, http.StatusRequestedRangeNotSatisfiable)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start, end, status = a, b+1, http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, size))
	}
	s.record(r, status)
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Length", strconv.FormatInt(end-start, 10))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	body := data[start:end]
	if corrupt && bad >= start && bad < end {
		body = append([]byte(nil), body...)
		body[bad-start] ^= 0xff
	}
	s.send(w, r, body, f)
}

// send writes body as f says: whole, slowly, or cut short by a drop or a
// stall.
func (s *Server) send(w http.ResponseWriter, r *http.Request, body []byte, f *fault) {
	cut := int64(len(body))
	chunk := int64(32 << 10)
	var slow time.Duration
	if f != nil {
		if (f.Drop || f.Stall) && f.After < cut {
			cut = f.After
		}
		if f.Slow > 0 {
			chunk, slow = 1<<10, f.Slow
		}
	}
	for off := int64(0); off < cut; {
		if slow > 0 {
			select {
			case <-time.After(slow):
			case <-r.Context().Done():
				return
			case <-s.quit:
				return
			}
		}
		n := min(chunk, cut-off)
		s.served.Add(n)
		if _, err := w.Write(body[off : off+n]); err != nil {
			return
		}
		off += n
	}
	if cut == int64(len(body)) {
		return
	}
	http.NewResponseController(w).Flush()
	if f.Drop {
		panic(http.ErrAbortHandler) // the server closes the connection mid-body
	}
	select {
	case <-r.Context().Done():
	case <-s.quit:
	}
}

// parseRange reads a single range, "bytes=a-b", "bytes=a-" or
// "bytes=-n", and returns its first and last byte within size.
func parseRange(h string, size int64) (first, last int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(spec, "-")
	if !found {
		return 0, 0, false
	}
	if a == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, size > 0
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 || first >= size {
		return 0, 0, false
	}
	last = size - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
			return 0, 0, false
		}
		last = min(last, size-1)
	}
	return first, last, true
}
