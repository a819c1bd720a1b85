package pull

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
)

// span is the half-open byte range [Start, End) of a blob.
type span struct{ Start, End int64 }

func (s span) len() int64 { return s.End - s.Start }

// spans is a set of byte ranges kept sorted, disjoint and with no two
// touching, so that its length is the number of ranges a resumed download
// must fetch.
type spans []span

// add returns s with a merged in.
func (s spans) add(a span) spans {
	if a.len() <= 0 {
		return s
	}
	// The first range that overlaps or touches a, then every one after
	// it that does: they all become one.
	i := sort.Search(len(s), func(i int) bool { return s[i].End >= a.Start })
	j := i
	for j < len(s) && s[j].Start <= a.End {
		a.Start = min(a.Start, s[j].Start)
		a.End = max(a.End, s[j].End)
		j++
	}
	return slices.Replace(s, i, j, a)
}

func (s spans) total() int64 {
	var n int64
	for _, x := range s {
		n += x.len()
	}
	return n
}

// missing returns the ranges of [0, size) that s does not cover.
func (s spans) missing(size int64) []span {
	var out []span
	at := int64(0)
	for _, x := range s {
		if x.Start > at {
			out = append(out, span{at, x.Start})
		}
		at = max(at, x.End)
	}
	if at < size {
		out = append(out, span{at, size})
	}
	return out
}

// sidecar is the progress of a partial file, kept beside it as JSON
// (partial + ".json"): which byte ranges hold data already written. It
// is written before the data it describes exists and only ever claims
// bytes already handed to the kernel, so a killed process leaves a claim
// no larger than the truth.
type sidecar struct {
	SHA256 string     `json:"sha256"`
	Size   int64      `json:"size"` // -1: unknown
	Done   [][2]int64 `json:"done"` // [start, end) pairs
}

// maxSidecar bounds what loadSidecar reads: a sidecar holds a few ranges
// per part, never megabytes.
const maxSidecar = 1 << 20

// parseSidecar decodes a sidecar and checks it against the blob it must
// describe and the partial file's length: ranges inside [0, size) and
// inside the file, in order and disjoint. Anything else is an error and
// the caller starts over.
func parseSidecar(data []byte, sha string, size, fileLen int64) (spans, error) {
	var sc sidecar
	if err := json.Unmarshal(data, &sc); err != nil {
		return nil, err
	}
	if sc.SHA256 != sha || sc.Size != size {
		return nil, fmt.Errorf("describes sha256 %.12s… of %d bytes, not %.12s… of %d", sc.SHA256, sc.Size, sha, size)
	}
	var s spans
	prev := int64(-1)
	for _, d := range sc.Done {
		x := span{d[0], d[1]}
		if x.Start < 0 || x.Start >= x.End || x.Start <= prev || x.End > fileLen || (size >= 0 && x.End > size) {
			return nil, fmt.Errorf("range [%d, %d) does not fit a file of %d bytes", x.Start, x.End, fileLen)
		}
		prev = x.End
		s = s.add(x)
	}
	return s, nil
}

// loadSidecar reads the sidecar at path. A partial file without one is a
// contiguous prefix (what an earlier single-stream download, or another
// tool such as huggingface_hub, leaves), returned as such.
func loadSidecar(path, sha string, size, fileLen int64) (spans, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		if fileLen > 0 && (size < 0 || fileLen <= size) {
			return spans{{0, fileLen}}, nil
		}
		if fileLen == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%d bytes kept for a blob of %d", fileLen, size)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSidecar+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSidecar {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxSidecar)
	}
	return parseSidecar(data, sha, size, fileLen)
}

// writeSidecar replaces the sidecar at path in one rename, so a reader
// (a later Fetch after a kill) sees the old claim or the new, never half.
func writeSidecar(path, sha string, size int64, done spans) error {
	sc := sidecar{SHA256: sha, Size: size, Done: make([][2]int64, len(done))}
	for i, x := range done {
		sc.Done[i] = [2]int64{x.Start, x.End}
	}
	data, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
