package pull

import (
	"errors"
	"fmt"
	"net/http"
)

// The kinds of failure callers branch on; Fetch's errors wrap them.
var (
	// ErrNotFound: the name or the file names nothing (HTTP 404, or a
	// name that resolves to nothing in a cache).
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized: the server wants credentials it was not given, or
	// refused those it was (HTTP 401 and 403).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrDigestMismatch: the downloaded bytes do not have the sha256 they
	// were promised; they were discarded.
	ErrDigestMismatch = errors.New("sha256 mismatch")
	// ErrNoSpace: the disk cannot hold what the download still needs.
	ErrNoSpace = errors.New("not enough disk space")
	// ErrCorrupt: a file already under its final name is not what it
	// should be (its size differs from the blob's).
	ErrCorrupt = errors.New("corrupt")
)

// HTTPError is an answer other than the one a request wanted. It is
// ErrNotFound for 404 and ErrUnauthorized for 401 and 403, so callers can
// say what to do about it without reading status codes.
type HTTPError struct {
	URL        string
	StatusCode int
	Status     string      // "404 Not Found"
	Header     http.Header // the answer's headers (the Hub explains itself in X-Error-Code and X-Error-Message)
}

func (e *HTTPError) Error() string { return fmt.Sprintf("%s: %s", e.URL, e.Status) }

// Is makes errors.Is(err, ErrNotFound) and errors.Is(err, ErrUnauthorized)
// true for the statuses that mean them.
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden
	}
	return false
}

// temporary reports whether a later try of the same request may succeed.
func (e *HTTPError) temporary() bool {
	return e.StatusCode >= 500 || e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusRequestTimeout
}
