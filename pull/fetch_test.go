package pull_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ringlm/pull"
	"ringlm/pull/pulltest"
)

// opts are the engine's settings at test scale: parts from 64 KiB, and a
// stall timeout long enough that a loaded machine does not trip it.
func opts() pull.Options {
	return pull.Options{Parts: 4, SplitAt: 64 << 10, StallTimeout: 10 * time.Second, Attempts: 3, Backoff: time.Millisecond}
}

// serve puts b on a new server at /blob and returns the server and the Blob.
func serve(t *testing.T, b []byte) (*pulltest.Server, pull.Blob) {
	s := pulltest.NewServer(t)
	s.Add("/blob", b)
	return s, pull.Blob{URL: s.URL("/blob"), Size: int64(len(b)), SHA256: pulltest.Digest(b)}
}

// checkDone asserts that dest holds want and that nothing of the download
// is left beside it.
func checkDone(t *testing.T, dest string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the blob (%d bytes, want %d)", dest, len(got), len(want))
	}
	for _, leftover := range []string{dest + pull.PartialSuffix, dest + pull.PartialSuffix + ".json", dest + ".lock"} {
		if _, err := os.Stat(leftover); err == nil {
			t.Errorf("%s left behind", filepath.Base(leftover))
		}
	}
}

func missing(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v)", filepath.Base(p), err)
		}
	}
}

// doneBytes reads how many bytes a sidecar claims.
func doneBytes(t *testing.T, side string) int64 {
	t.Helper()
	raw, err := os.ReadFile(side)
	if err != nil {
		t.Fatal(err)
	}
	var sc struct{ Done [][2]int64 }
	if err := json.Unmarshal(raw, &sc); err != nil {
		t.Fatalf("%s: %v", side, err)
	}
	var n int64
	for _, d := range sc.Done {
		n += d[1] - d[0]
	}
	return n
}

func TestFetchSmallBlob(t *testing.T) {
	want := pulltest.Bytes(10<<10, 1)
	s, b := serve(t, want)
	dest := filepath.Join(t.TempDir(), "blob")
	var events []pull.Event
	o := opts()
	o.Progress = func(e pull.Event) { events = append(events, e) }
	if served := fetchOK(t, s, b, dest, o, want); served != int64(len(want)) {
		t.Errorf("served %d bytes, want %d", served, len(want))
	}
	if len(s.Requests()) != 1 {
		t.Errorf("%d requests for a blob below SplitAt, want 1", len(s.Requests()))
	}
	last := events[len(events)-1]
	pulling := events[len(events)-2]
	if last.Status != "verifying sha256 digest" || pulling.Status != "pulling "+b.SHA256[:12] ||
		pulling.Digest != "sha256:"+b.SHA256 || pulling.Completed != pulling.Total || pulling.Total != int64(len(want)) {
		t.Errorf("events end %+v, %+v", pulling, last)
	}
	// A second Fetch finds the blob done and asks nothing.
	if err := pull.Fetch(context.Background(), b, dest, o); err != nil || len(s.Requests()) != 1 {
		t.Errorf("second Fetch: %v, %d requests", err, len(s.Requests()))
	}
}

func TestFetchParallelParts(t *testing.T) {
	want := pulltest.Bytes(256<<10+123, 2)
	s, b := serve(t, want)
	dest := filepath.Join(t.TempDir(), "blob")
	if served := fetchOK(t, s, b, dest, opts(), want); served != int64(len(want)) {
		t.Errorf("served %d bytes, want %d", served, len(want))
	}
	chunk := (int64(len(want)) + 3) / 4
	ranges := map[string]bool{}
	for _, r := range s.Requests() {
		ranges[r.Range] = true
	}
	for i := range int64(4) {
		r := "bytes=" + strconv.FormatInt(i*chunk, 10) + "-" + strconv.FormatInt(min((i+1)*chunk, int64(len(want)))-1, 10)
		if !ranges[r] {
			t.Errorf("no request for part %d (%s); got %v", i, r, ranges)
		}
	}
}

func TestFetchRedirectToAnotherHostDropsAuthorization(t *testing.T) {
	want := pulltest.Bytes(200<<10, 3)
	hub := pulltest.NewServer(t)
	cdn := pulltest.NewServer(t)
	cdn.Add("/signed/blob", want)
	hub.Redirect("/resolve/blob", cdn.URL("/signed/blob"))
	b := pull.Blob{URL: hub.URL("/resolve/blob"), Header: http.Header{"Authorization": {"Bearer secret"}}, Size: int64(len(want)), SHA256: pulltest.Digest(want)}
	dest := filepath.Join(t.TempDir(), "blob")
	fetchOK(t, cdn, b, dest, opts(), want)
	for _, r := range hub.Requests() {
		if r.Authorization != "Bearer secret" {
			t.Errorf("the first host got Authorization %q", r.Authorization)
		}
	}
	if len(cdn.Requests()) < 2 {
		t.Errorf("%d requests at the CDN; want the parts", len(cdn.Requests()))
	}
	for _, r := range cdn.Requests() {
		if r.Authorization != "" || r.Range == "" {
			t.Errorf("the CDN got Authorization %q, Range %q", r.Authorization, r.Range)
		}
	}
}

func TestFetchRedirectToAnotherPathKeepsAuthorization(t *testing.T) {
	want := pulltest.Bytes(5000, 4)
	s := pulltest.NewServer(t)
	s.Add("/new/blob", want)
	s.Redirect("/old/blob", "/new/blob")
	b := pull.Blob{URL: s.URL("/old/blob"), Header: http.Header{"Authorization": {"Bearer secret"}}, Size: int64(len(want)), SHA256: pulltest.Digest(want)}
	dest := filepath.Join(t.TempDir(), "blob")
	fetchOK(t, s, b, dest, opts(), want)
	got := s.Requests()
	if len(got) != 2 || got[1].Path != "/new/blob" || got[1].Authorization != "Bearer secret" {
		t.Errorf("requests %+v", got)
	}
}

func TestFetchServerIgnoringRange(t *testing.T) {
	want := pulltest.Bytes(200<<10, 5)
	s, b := serve(t, want)
	s.IgnoreRange(true)
	dir := t.TempDir()
	dest := filepath.Join(dir, "blob")
	// A prefix kept from before cannot be resumed from such a server.
	if err := os.WriteFile(dest+pull.PartialSuffix, want[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	fetchOK(t, s, b, dest, opts(), want)
	if n := len(s.Requests()); n != 2 {
		t.Errorf("%d requests; want the ranged one the server ignored, then one whole", n)
	}
}

func TestFetchDroppedConnectionResumes(t *testing.T) {
	want := pulltest.Bytes(100<<10, 6)
	s, b := serve(t, want)
	s.Inject(pulltest.Fault{Drop: true, After: 40 << 10, Times: 1})
	dest := filepath.Join(t.TempDir(), "blob")
	o := opts()
	o.SplitAt = 1 << 20 // one stream
	served := fetchOK(t, s, b, dest, o, want)
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[1].Range != "bytes=40960-102399" {
		t.Errorf("requests %+v; want a second one from the byte the first was cut at", reqs)
	}
	if served != int64(len(want)) {
		t.Errorf("served %d bytes, want %d: no byte twice", served, len(want))
	}
}

// stallHalf makes every part of a 4-part blob stop after its first
// 16 KiB, and returns how many bytes that lets through.
func stallHalf(s *pulltest.Server) int64 {
	s.Inject(pulltest.Fault{Stall: true, After: 16 << 10})
	return 4 * 16 << 10
}

// fetchOK fetches b to dest, checks the result and returns how many
// bytes s served for it.
func fetchOK(t *testing.T, s *pulltest.Server, b pull.Blob, dest string, o pull.Options, want []byte) int64 {
	t.Helper()
	before := s.Served()
	if err := pull.Fetch(context.Background(), b, dest, o); err != nil {
		t.Fatal(err)
	}
	checkDone(t, dest, want)
	return s.Served() - before
}

// resumeRest lets the server behave, fetches b again and checks that
// only the bytes an interrupted Fetch had not kept were served.
func resumeRest(t *testing.T, s *pulltest.Server, b pull.Blob, dest string, want []byte, kept int64) {
	t.Helper()
	s.Clear()
	if got := fetchOK(t, s, b, dest, opts(), want); got != int64(len(want))-kept {
		t.Errorf("the resumed Fetch was served %d bytes, want the %d not kept", got, int64(len(want))-kept)
	}
}

func TestFetchCancelledResumesWithTheRest(t *testing.T) {
	want := pulltest.Bytes(256<<10, 7)
	s, b := serve(t, want)
	through := stallHalf(s)
	dest := filepath.Join(t.TempDir(), "blob")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := opts()
	o.Progress = func(e pull.Event) {
		if e.Completed >= through {
			cancel()
		}
	}
	err := pull.Fetch(ctx, b, dest, o)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "kept, the next pull resumes") {
		t.Fatalf("cancelled Fetch: %v", err)
	}
	missing(t, dest)
	kept := doneBytes(t, dest+pull.PartialSuffix+".json")
	if kept != through {
		t.Fatalf("sidecar claims %d bytes, want %d", kept, through)
	}
	resumeRest(t, s, b, dest, want, kept)
}

// TestFetchKilledProcessResumes kills a process in the middle of a
// Fetch (SIGKILL: no deferred save runs) and checks that the next Fetch
// transfers only what the sidecar does not claim.
func TestFetchKilledProcessResumes(t *testing.T) {
	want := pulltest.Bytes(256<<10, 8)
	s, b := serve(t, want)
	through := stallHalf(s)
	dest := filepath.Join(t.TempDir(), "blob")
	side := dest + pull.PartialSuffix + ".json"
	cmd := exec.Command(os.Args[0], "-test.run=^TestFetchHelperProcess$")
	cmd.Env = append(os.Environ(), "PULL_HELPER="+strings.Join([]string{b.URL, b.SHA256, strconv.Itoa(len(want)), dest}, " "))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if raw, err := os.ReadFile(side); err == nil && bytes.Contains(raw, []byte("done")) && doneBytes(t, side) >= through {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the helper process saved no progress in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	kept := doneBytes(t, side)
	resumeRest(t, s, b, dest, want, kept)
}

// TestFetchHelperProcess is the process TestFetchKilledProcessResumes
// kills.
func TestFetchHelperProcess(t *testing.T) {
	args := strings.Fields(os.Getenv("PULL_HELPER"))
	if len(args) != 4 {
		t.Skip("the process TestFetchKilledProcessResumes starts and kills")
	}
	size, _ := strconv.ParseInt(args[2], 10, 64)
	pull.Fetch(context.Background(), pull.Blob{URL: args[0], SHA256: args[1], Size: size}, args[3], opts())
	t.Error("the helper's Fetch returned: the server should have stalled it until it was killed")
}

func TestFetchCorruptByte(t *testing.T) {
	want := pulltest.Bytes(100<<10, 9)
	s, b := serve(t, want)
	s.Corrupt("/blob", 70000)
	bad := append([]byte(nil), want...)
	bad[70000] ^= 0xff
	dest := filepath.Join(t.TempDir(), "blob")
	err := pull.Fetch(context.Background(), b, dest, opts())
	if !errors.Is(err, pull.ErrDigestMismatch) {
		t.Fatalf("Fetch of a corrupted blob: %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, pulltest.Digest(bad)) || !strings.Contains(msg, b.SHA256) || strings.Contains(msg, "\n") {
		t.Errorf("the error does not name both digests on one line: %s", msg)
	}
	missing(t, dest, dest+pull.PartialSuffix, dest+pull.PartialSuffix+".json")
	// The bad data is gone: the next Fetch starts from nothing.
	s.Clear()
	if got := fetchOK(t, s, b, dest, opts(), want); got != int64(len(want)) {
		t.Errorf("served %d after the mismatch, want all %d", got, len(want))
	}
}

func TestFetchStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		status   int
		kind     error
		requests int
	}{
		{http.StatusNotFound, pull.ErrNotFound, 1},
		{http.StatusUnauthorized, pull.ErrUnauthorized, 1},
		{http.StatusForbidden, pull.ErrUnauthorized, 1},
		{http.StatusServiceUnavailable, nil, 3}, // tried Attempts times
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			s, b := serve(t, pulltest.Bytes(1000, 10))
			s.Inject(pulltest.Fault{Status: tc.status})
			dest := filepath.Join(t.TempDir(), "blob")
			err := pull.Fetch(context.Background(), b, dest, opts())
			if err == nil || (tc.kind != nil && !errors.Is(err, tc.kind)) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Fetch: %v", err)
			}
			if !strings.Contains(err.Error(), strconv.Itoa(tc.status)) {
				t.Errorf("the error does not say the status: %v", err)
			}
			if n := len(s.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			missing(t, dest)
		})
	}
}

func TestFetchServerErrorRetried(t *testing.T) {
	want := pulltest.Bytes(1000, 11)
	s, b := serve(t, want)
	s.Inject(pulltest.Fault{Status: http.StatusBadGateway, Times: 2})
	dest := filepath.Join(t.TempDir(), "blob")
	fetchOK(t, s, b, dest, opts(), want)
}

func TestFetchStalledPartRetried(t *testing.T) {
	want := pulltest.Bytes(256<<10, 12)
	s, b := serve(t, want)
	chunk := int64(64 << 10)
	s.Inject(pulltest.Fault{Match: pulltest.RangeFrom(2 * chunk), Stall: true, After: 1 << 10, Times: 1})
	dest := filepath.Join(t.TempDir(), "blob")
	o := opts()
	o.StallTimeout = 100 * time.Millisecond
	fetchOK(t, s, b, dest, o, want)
	resumed := false
	for _, r := range s.Requests() {
		resumed = resumed || r.Range == "bytes="+strconv.FormatInt(2*chunk+1<<10, 10)+"-"+strconv.FormatInt(3*chunk-1, 10)
	}
	if !resumed {
		t.Errorf("the stalled part was not asked again from where it stopped: %+v", s.Requests())
	}
}

func TestFetchStallGivesUp(t *testing.T) {
	want := pulltest.Bytes(10<<10, 13)
	s, b := serve(t, want)
	s.Inject(pulltest.Fault{Stall: true, After: 0})
	dest := filepath.Join(t.TempDir(), "blob")
	o := opts()
	o.StallTimeout = 50 * time.Millisecond
	o.Attempts = 2
	err := pull.Fetch(context.Background(), b, dest, o)
	if err == nil || !strings.Contains(err.Error(), "stalled: no data for 50ms (2 tries)") {
		t.Fatalf("Fetch from a server that sends nothing: %v", err)
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("%d requests, want Attempts=2", n)
	}
	missing(t, dest)
}

func TestFetchSlowPartIsNotStalled(t *testing.T) {
	want := pulltest.Bytes(20<<10, 14)
	s, b := serve(t, want)
	s.Inject(pulltest.Fault{Slow: 2 * time.Millisecond})
	dest := filepath.Join(t.TempDir(), "blob")
	o := opts()
	o.StallTimeout = time.Second
	fetchOK(t, s, b, dest, o, want)
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests for a slow but steady server, want 1", n)
	}
}

func TestFetchNotEnoughDisk(t *testing.T) {
	s := pulltest.NewServer(t)
	b := pull.Blob{URL: s.URL("/blob"), Size: 1 << 60, SHA256: strings.Repeat("ab", 32)}
	dest := filepath.Join(t.TempDir(), "blob")
	err := pull.Fetch(context.Background(), b, dest, opts())
	if !errors.Is(err, pull.ErrNoSpace) || !strings.Contains(err.Error(), "needs 1.2 EB more") || !strings.Contains(err.Error(), "free") {
		t.Fatalf("Fetch of an exabyte: %v", err)
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests before the disk check failed", n)
	}
}

func TestFetchExistingFile(t *testing.T) {
	want := pulltest.Bytes(1000, 15)
	s, b := serve(t, want)
	dest := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(dest, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pull.Fetch(context.Background(), b, dest, opts()); err != nil || len(s.Requests()) != 0 {
		t.Fatalf("Fetch of a present blob: %v, %d requests", err, len(s.Requests()))
	}
	if err := os.WriteFile(dest, want[:999], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pull.Fetch(context.Background(), b, dest, opts()); !errors.Is(err, pull.ErrCorrupt) {
		t.Fatalf("Fetch over a truncated blob: %v", err)
	}
}

func TestFetchSameBlobConcurrently(t *testing.T) {
	want := pulltest.Bytes(100<<10, 16)
	s, b := serve(t, want)
	s.Inject(pulltest.Fault{Slow: 100 * time.Microsecond})
	dest := filepath.Join(t.TempDir(), "blob")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = pull.Fetch(context.Background(), b, dest, opts()) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkDone(t, dest, want)
	if s.Served() != int64(len(want)) {
		t.Errorf("served %d bytes for three Fetches of one blob, want %d", s.Served(), len(want))
	}
}

func TestFetchResumesForeignPartial(t *testing.T) {
	want := pulltest.Bytes(100<<10, 17)
	s, b := serve(t, want)
	dest := filepath.Join(t.TempDir(), "blob")
	foreign := dest + ".incomplete"
	if err := os.WriteFile(foreign, want[:30000], 0o644); err != nil {
		t.Fatal(err)
	}
	o := opts()
	o.ForeignPartial = foreign
	served := fetchOK(t, s, b, dest, o, want)
	missing(t, foreign)
	if served != int64(len(want))-30000 {
		t.Errorf("served %d bytes, want the %d after the foreign prefix", served, int64(len(want))-30000)
	}
}

func TestFetchDistrustsAStaleSidecar(t *testing.T) {
	want := pulltest.Bytes(100<<10, 18)
	for name, sidecar := range map[string]string{
		"another blob": `{"sha256":"` + strings.Repeat("0", 64) + `","size":102400,"done":[[0,50000]]}`,
		"past the end": `{"sha256":"` + pulltest.Digest(want) + `","size":102400,"done":[[0,90000]]}`,
		"not json":     `{"done":`,
	} {
		t.Run(name, func(t *testing.T) {
			s, b := serve(t, want)
			dest := filepath.Join(t.TempDir(), "blob")
			os.WriteFile(dest+pull.PartialSuffix, make([]byte, 50000), 0o644)
			os.WriteFile(dest+pull.PartialSuffix+".json", []byte(sidecar), 0o644)
			if served := fetchOK(t, s, b, dest, opts(), want); served != int64(len(want)) {
				t.Errorf("served %d, want all %d: the kept bytes were not to be trusted", served, len(want))
			}
		})
	}
}

func TestFetchUnknownSize(t *testing.T) {
	want := pulltest.Bytes(100<<10, 19)
	s, b := serve(t, want)
	b.Size = -1
	s.Inject(pulltest.Fault{Drop: true, After: 10000, Times: 1})
	dest := filepath.Join(t.TempDir(), "blob")
	fetchOK(t, s, b, dest, opts(), want)
}

func TestFetchRefusesWhatItCannotVerify(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "blob")
	for _, b := range []pull.Blob{
		{URL: "http://127.0.0.1:1/blob", Size: 1},
		{URL: "http://127.0.0.1:1/blob", Size: 1, SHA256: "sha256:" + strings.Repeat("0", 64)},
		{URL: "ftp://example/blob", Size: 1, SHA256: strings.Repeat("0", 64)},
	} {
		if err := pull.Fetch(context.Background(), b, dest, opts()); err == nil {
			t.Errorf("Fetch(%+v) succeeded", b)
		}
	}
}
