package hf_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ringlm/pull"
	"ringlm/pull/hf"
	"ringlm/pull/pulltest"
)

// quietEnv keeps the developer's own Hugging Face settings out of a test.
func quietEnv(t *testing.T) {
	home := t.TempDir()
	for _, v := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"} {
		t.Setenv(v, "")
	}
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_TOKEN_PATH", filepath.Join(home, "no-token"))
}

// hub starts a fake Hub and options that pull from it into a new cache.
func hub(t *testing.T) (*pulltest.Hub, hf.Options) {
	quietEnv(t)
	h := pulltest.NewHub(t)
	return h, hf.Options{
		Endpoint: h.URL(),
		CacheDir: t.TempDir(),
		Transfer: pull.Options{Parts: 4, SplitAt: 64 << 10, StallTimeout: 10 * time.Second, Attempts: 3, Backoff: time.Millisecond},
	}
}

func name(t *testing.T, s string) hf.Name {
	t.Helper()
	n, err := hf.ParseName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	q4 = pulltest.Bytes(100<<10, 1)
	q8 = pulltest.Bytes(50<<10, 2)
)

func tiny() map[string][]byte {
	return map[string][]byte{"Tiny-Q4_K_M.gguf": q4, "Tiny-Q8_0.gguf": q8, "README.md": []byte("# Tiny\n")}
}

func TestPullWritesTheHuggingFaceLayout(t *testing.T) {
	h, o := hub(t)
	commit := h.Push("acme/Tiny-GGUF", tiny())
	var events []string
	o.Transfer.Progress = func(e pull.Event) { events = append(events, e.Status) }
	p, err := hf.Pull(context.Background(), name(t, "hf.co/acme/Tiny-GGUF"), o)
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(o.CacheDir, "models--acme--Tiny-GGUF")
	sha := pulltest.Digest(q4)
	if want := filepath.Join(repo, "snapshots", commit, "Tiny-Q4_K_M.gguf"); p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	if target, err := os.Readlink(p); err != nil || target != "../../blobs/"+sha {
		t.Errorf("the snapshot links to %q (%v), want ../../blobs/%s", target, err, sha)
	}
	if !bytes.Equal(read(t, filepath.Join(repo, "blobs", sha)), q4) {
		t.Error("the blob is not the file")
	}
	if ref := read(t, filepath.Join(repo, "refs", "main")); string(ref) != commit {
		t.Errorf("refs/main holds %q, want %s", ref, commit)
	}
	if _, err := os.Stat(filepath.Join(o.CacheDir, ".locks", "models--acme--Tiny-GGUF", sha+".lock")); err != nil {
		t.Errorf("no lock where huggingface_hub takes it: %v", err)
	}
	if h.CDN.Served() != int64(len(q4)) {
		t.Errorf("the CDN served %d bytes, want %d", h.CDN.Served(), len(q4))
	}
	if events[0] != "pulling manifest" || events[len(events)-2] != "verifying sha256 digest" || events[len(events)-1] != "success" {
		t.Errorf("events %q", events)
	}

	// Pulled again, and resolved offline: the same file, no byte more.
	again, err := hf.Pull(context.Background(), name(t, "hf.co/acme/Tiny-GGUF:q4_k_m"), o)
	if err != nil || again != p || h.CDN.Served() != int64(len(q4)) {
		t.Errorf("second Pull: %s, %v, CDN served %d", again, err, h.CDN.Served())
	}
	asked := len(h.Requests())
	o.Offline = true
	for _, s := range []string{"hf.co/acme/Tiny-GGUF", "hf.co/acme/Tiny-GGUF:Q4_K_M", "hf.co/acme/Tiny-GGUF/Tiny-Q4_K_M.gguf", "hf.co/acme/Tiny-GGUF@" + commit} {
		if got, err := hf.Pull(context.Background(), name(t, s), o); err != nil || got != p {
			t.Errorf("offline %s: %s, %v", s, got, err)
		}
	}
	if len(h.Requests()) != asked {
		t.Error("an offline pull asked the Hub")
	}
}

func TestPullSubfolderFile(t *testing.T) {
	h, o := hub(t)
	h.Push("acme/Tiny-GGUF", map[string][]byte{"Q8_0/Tiny-Q8_0.gguf": q8})
	p, err := hf.Pull(context.Background(), name(t, "hf.co/acme/Tiny-GGUF:Q8_0"), o)
	if err != nil {
		t.Fatal(err)
	}
	if target, _ := os.Readlink(p); target != "../../../blobs/"+pulltest.Digest(q8) {
		t.Errorf("link %q", target)
	}
	if !bytes.Equal(read(t, p), q8) {
		t.Error("the file differs")
	}
}

// handMade lays out a repository as huggingface_hub leaves it, without
// this package's help.
func handMade(t *testing.T, cache, repo, commit string, files map[string][]byte) {
	dir := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	for f, b := range files {
		blob := filepath.Join(dir, "blobs", pulltest.Digest(b))
		link := filepath.Join(dir, "snapshots", commit, f)
		for _, err := range []error{
			os.MkdirAll(filepath.Dir(blob), 0o755),
			os.WriteFile(blob, b, 0o644),
			os.MkdirAll(filepath.Dir(link), 0o755),
			os.Symlink(strings.Repeat("../", strings.Count(f, "/")+2)+"blobs/"+pulltest.Digest(b), link),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	os.MkdirAll(filepath.Join(dir, "refs"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPullUsesWhatHuggingFaceToolsDownloaded(t *testing.T) {
	h, o := hub(t)
	commit := h.Push("acme/Tiny-GGUF", tiny())
	handMade(t, o.CacheDir, "acme/Tiny-GGUF", commit, map[string][]byte{"Tiny-Q4_K_M.gguf": q4})
	p, err := hf.Pull(context.Background(), name(t, "hf.co/acme/Tiny-GGUF"), o)
	if err != nil {
		t.Fatal(err)
	}
	if h.CDN.Served() != 0 || !bytes.Equal(read(t, p), q4) {
		t.Errorf("Pull over a huggingface_hub snapshot: CDN served %d bytes", h.CDN.Served())
	}
	// A new commit with the same bytes: a new link to the blob there, no download.
	next := h.Push("acme/Tiny-GGUF", tiny())
	p2, err := hf.Pull(context.Background(), name(t, "hf.co/acme/Tiny-GGUF"), o)
	if err != nil || !strings.Contains(p2, next) || h.CDN.Served() != 0 {
		t.Errorf("Pull of a new commit with a blob present: %s, %v, CDN served %d", p2, err, h.CDN.Served())
	}

	models, err := hf.List(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 2 {
		t.Fatalf("List: %+v", models)
	}
	for _, m := range models {
		if m.Repo != "acme/Tiny-GGUF" || m.File != "Tiny-Q4_K_M.gguf" || m.Size != int64(len(q4)) || m.Quant != "Q4_K_M" {
			t.Errorf("List: %+v", m)
		}
		// Every name List gives resolves offline to its file.
		if got, err := hf.Resolve(name(t, m.Name), o); err != nil || got != m.Path {
			t.Errorf("Resolve(%s) = %s, %v; want %s", m.Name, got, err, m.Path)
		}
	}
	if m := models[0]; m.Commit != next || !slices.Equal(m.Refs, []string{"main"}) || m.Name != "hf.co/acme/Tiny-GGUF:Q4_K_M" {
		t.Errorf("the newest: %+v", m)
	}
	if m := models[1]; m.Commit != commit || len(m.Refs) != 0 || m.Name != "hf.co/acme/Tiny-GGUF:Q4_K_M@"+commit {
		t.Errorf("the older: %+v", m)
	}
}

func TestPullResumesHuggingFaceIncomplete(t *testing.T) {
	h, o := hub(t)
	h.Push("acme/Tiny-GGUF", tiny())
	blobs := filepath.Join(o.CacheDir, "models--acme--Tiny-GGUF", "blobs")
	os.MkdirAll(blobs, 0o755)
	if err := os.WriteFile(filepath.Join(blobs, pulltest.Digest(q4)+".incomplete"), q4[:30000], 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := hf.Pull(context.Background(), name(t, "hf.co/acme/Tiny-GGUF"), o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, p), q4) || h.CDN.Served() != int64(len(q4))-30000 {
		t.Errorf("CDN served %d bytes, want the %d after huggingface_hub's prefix", h.CDN.Served(), len(q4)-30000)
	}
}

func TestPullCancelledKeepsPartialInBlobs(t *testing.T) {
	h, o := hub(t)
	h.Push("acme/Tiny-GGUF", tiny())
	h.CDN.Inject(pulltest.Fault{Stall: true, After: 8 << 10})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Transfer.Progress = func(e pull.Event) {
		if e.Completed >= 4*8<<10 {
			cancel()
		}
	}
	n := name(t, "hf.co/acme/Tiny-GGUF")
	if _, err := hf.Pull(ctx, n, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Pull: %v", err)
	}
	partial := filepath.Join(o.CacheDir, "models--acme--Tiny-GGUF", "blobs", pulltest.Digest(q4)+pull.PartialSuffix)
	if _, err := os.Stat(partial); err != nil {
		t.Errorf("no partial file in blobs: %v", err)
	}
	if _, err := hf.Resolve(n, o); !errors.Is(err, hf.ErrNotCached) {
		t.Errorf("a partial download resolves: %v", err)
	}
	h.CDN.Clear()
	before := h.CDN.Served()
	o.Transfer.Progress = nil
	p, err := hf.Pull(context.Background(), n, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, p), q4) || h.CDN.Served()-before != int64(len(q4))-4*8<<10 {
		t.Errorf("resumed Pull: CDN served %d, want %d", h.CDN.Served()-before, len(q4)-4*8<<10)
	}
}

func TestPullToken(t *testing.T) {
	h, o := hub(t)
	h.Push("acme/Gated-GGUF", tiny())
	h.RequireToken("hf_secret")
	n := name(t, "hf.co/acme/Gated-GGUF:Q8_0")
	_, err := hf.Pull(context.Background(), n, o)
	if !errors.Is(err, pull.ErrUnauthorized) || !strings.Contains(err.Error(), "set HF_TOKEN") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Pull without a token: %v", err)
	}
	o.Token = "hf_wrong"
	if _, err := hf.Pull(context.Background(), n, o); !errors.Is(err, pull.ErrUnauthorized) || !strings.Contains(err.Error(), "refused the token") {
		t.Fatalf("Pull with a wrong token: %v", err)
	}
	o.Token = ""
	t.Setenv("HF_TOKEN", "hf_secret")
	p, err := hf.Pull(context.Background(), n, o)
	if err != nil || !bytes.Equal(read(t, p), q8) {
		t.Fatalf("Pull with HF_TOKEN: %v", err)
	}
	for _, r := range h.Requests()[len(h.Requests())-2:] {
		if r.Authorization != "Bearer hf_secret" {
			t.Errorf("the Hub got %s %s without the token", r.Method, r.Path)
		}
	}
	for _, r := range h.CDN.Requests() {
		if r.Authorization != "" {
			t.Errorf("the CDN got the token")
		}
	}
}

func TestPullTokenFromLoginFile(t *testing.T) {
	h, o := hub(t)
	h.Push("acme/Gated-GGUF", tiny())
	h.RequireToken("hf_file")
	t.Setenv("HF_TOKEN_PATH", "")
	if err := os.WriteFile(filepath.Join(os.Getenv("HF_HOME"), "token"), []byte("hf_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := hf.Pull(context.Background(), name(t, "hf.co/acme/Gated-GGUF"), o); err != nil {
		t.Fatalf("Pull with $HF_HOME/token: %v", err)
	}
}

func TestPullRefusals(t *testing.T) {
	h, o := hub(t)
	h.Push("acme/Tiny-GGUF", tiny())
	h.Push("acme/Tiny", map[string][]byte{"model.safetensors": q8, "config.json": []byte("{}")})
	h.Push("acme/Mixed-GGUF", map[string][]byte{"m-Q4_K_M.gguf": q4, "m-Q4_K_S.gguf": q8})
	for _, tc := range []struct {
		name, token string
		kind        error
		says        string
	}{
		{"hf.co/acme/Nope-GGUF", "", pull.ErrUnauthorized, "no such repository, or it is private or gated and needs a token: set HF_TOKEN"},
		{"hf.co/acme/Nope-GGUF", "hf_any", pull.ErrNotFound, "no such repository on"},
		{"hf.co/acme/Tiny-GGUF@v9", "", pull.ErrNotFound, `has no revision "v9"`},
		{"hf.co/acme/Tiny-GGUF/Nope.gguf", "", pull.ErrNotFound, "no such file in acme/Tiny-GGUF"},
		{"hf.co/acme/Tiny-GGUF:Q2_K", "", pull.ErrNotFound, "matches no file; its GGUF files: Tiny-Q4_K_M.gguf, Tiny-Q8_0.gguf"},
		{"hf.co/acme/Tiny", "", hf.ErrNoGGUF, "has no GGUF files"},
		{"hf.co/acme/Mixed-GGUF:Q4_K", "", hf.ErrAmbiguous, "m-Q4_K_M.gguf, m-Q4_K_S.gguf"},
	} {
		o.Token = tc.token
		_, err := hf.Pull(context.Background(), name(t, tc.name), o)
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Pull(%s): %v; want %v saying %q", tc.name, err, tc.kind, tc.says)
		}
	}
	if h.CDN.Served() != 0 {
		t.Error("a refused pull downloaded")
	}
	if entries, _ := os.ReadDir(filepath.Join(o.CacheDir, "models--acme--Tiny-GGUF")); len(entries) != 0 {
		t.Errorf("refused pulls left %v in the cache", entries)
	}
}

func TestPullCorruptDownloadLeavesNoModel(t *testing.T) {
	h, o := hub(t)
	h.Push("acme/Tiny-GGUF", tiny())
	h.CDN.Corrupt("/"+pulltest.Digest(q4), 4321)
	n := name(t, "hf.co/acme/Tiny-GGUF")
	_, err := hf.Pull(context.Background(), n, o)
	if !errors.Is(err, pull.ErrDigestMismatch) || !strings.Contains(err.Error(), pulltest.Digest(q4)) {
		t.Fatalf("Pull of a corrupted download: %v", err)
	}
	blobs, _ := os.ReadDir(filepath.Join(o.CacheDir, "models--acme--Tiny-GGUF", "blobs"))
	snaps, _ := os.ReadDir(filepath.Join(o.CacheDir, "models--acme--Tiny-GGUF", "snapshots"))
	if len(blobs) != 0 || len(snaps) != 0 {
		t.Errorf("left blobs %v, snapshots %v", blobs, snaps)
	}
	if _, err := hf.Resolve(n, o); !errors.Is(err, hf.ErrNotCached) {
		t.Errorf("Resolve after a failed pull: %v", err)
	}
}

func TestPullRenamedRepository(t *testing.T) {
	h, o := hub(t)
	h.Push("acme/Old-GGUF", tiny())
	h.Rename("acme/Old-GGUF", "acme/New-GGUF")
	p, err := hf.Pull(context.Background(), name(t, "hf.co/acme/Old-GGUF:Q8_0"), o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, p), q8) {
		t.Error("the file differs")
	}
	moved := 0
	for _, r := range h.Requests() {
		if r.Status == 307 {
			moved++
		}
	}
	if moved != 2 {
		t.Errorf("%d redirects followed, want the listing's and the HEAD's: %+v", moved, h.Requests())
	}
}

func TestPullRevisions(t *testing.T) {
	h, o := hub(t)
	old := h.Push("acme/Tiny-GGUF", map[string][]byte{"Tiny-Q4_K_M.gguf": q8})
	cur := h.Push("acme/Tiny-GGUF", tiny())
	h.Branch("acme/Tiny-GGUF", "refs/pr/1", old)
	ctx := context.Background()
	pOld, err := hf.Pull(ctx, name(t, "hf.co/acme/Tiny-GGUF@"+old), o)
	if err != nil || !strings.Contains(pOld, old) || !bytes.Equal(read(t, pOld), q8) {
		t.Fatalf("Pull @%s: %s, %v", old, pOld, err)
	}
	served := h.CDN.Served()
	asked := len(h.Requests())
	if p, err := hf.Pull(ctx, name(t, "hf.co/acme/Tiny-GGUF@"+old), o); err != nil || p != pOld || len(h.Requests()) != asked {
		t.Errorf("a cached commit asked the Hub again: %v", err)
	}
	pPR, err := hf.Pull(ctx, name(t, "hf.co/acme/Tiny-GGUF@refs/pr/1"), o)
	if err != nil || pPR != pOld || h.CDN.Served() != served {
		t.Errorf("Pull @refs/pr/1: %s, %v", pPR, err)
	}
	ref := filepath.Join(o.CacheDir, "models--acme--Tiny-GGUF", "refs", "refs", "pr", "1")
	if b := read(t, ref); string(b) != old {
		t.Errorf("refs/refs/pr/1 holds %q", b)
	}
	pCur, err := hf.Pull(ctx, name(t, "hf.co/acme/Tiny-GGUF"), o)
	if err != nil || !strings.Contains(pCur, cur) || !bytes.Equal(read(t, pCur), q4) {
		t.Fatalf("Pull of main: %s, %v", pCur, err)
	}
	models, _ := hf.List(o)
	names := map[string]string{}
	for _, m := range models {
		names[m.Name] = m.Path
	}
	if names["hf.co/acme/Tiny-GGUF:Q4_K_M"] != pCur || names["hf.co/acme/Tiny-GGUF:Q4_K_M@refs/pr/1"] != pOld {
		t.Errorf("List names %v", names)
	}
}

func TestPullWithoutNetwork(t *testing.T) {
	h, o := hub(t)
	h.Push("acme/Tiny-GGUF", tiny())
	n := name(t, "hf.co/acme/Tiny-GGUF")
	want, err := hf.Pull(context.Background(), n, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Endpoint = "http://127.0.0.1:1" // nothing listens there
	_, err = hf.Pull(context.Background(), name(t, "hf.co/acme/Other-GGUF"), o)
	if err == nil || !strings.Contains(err.Error(), "cannot reach http://127.0.0.1:1") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Pull without a Hub: %v", err)
	}
	if got, err := hf.Resolve(n, o); err != nil || got != want {
		t.Errorf("Resolve without a Hub: %s, %v", got, err)
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	if got, err := hf.Pull(context.Background(), n, o); err != nil || got != want {
		t.Errorf("Pull with HF_HUB_OFFLINE=1: %s, %v", got, err)
	}
	_, err = hf.Pull(context.Background(), name(t, "hf.co/acme/Other-GGUF"), o)
	if !errors.Is(err, hf.ErrNotCached) || !errors.Is(err, pull.ErrNotFound) || !strings.Contains(err.Error(), "is not in the cache") {
		t.Errorf("offline Pull of an uncached name: %v", err)
	}
}

func TestRemove(t *testing.T) {
	h, o := hub(t)
	first := h.Push("acme/Tiny-GGUF", tiny())
	h.Push("acme/Tiny-GGUF", tiny()) // the same bytes in a new commit
	ctx := context.Background()
	pFirst, err := hf.Pull(ctx, name(t, "hf.co/acme/Tiny-GGUF@"+first), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hf.Pull(ctx, name(t, "hf.co/acme/Tiny-GGUF"), o); err != nil {
		t.Fatal(err)
	}
	if _, err := hf.Pull(ctx, name(t, "hf.co/acme/Tiny-GGUF:Q8_0"), o); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(o.CacheDir, "models--acme--Tiny-GGUF")
	blob := filepath.Join(repo, "blobs", pulltest.Digest(q4))

	// main's Q4_K_M goes; the older snapshot still links the blob.
	freed, err := hf.Remove(name(t, "hf.co/acme/Tiny-GGUF"), o)
	if err != nil || freed != 0 {
		t.Fatalf("Remove: %d, %v", freed, err)
	}
	if !bytes.Equal(read(t, pFirst), q4) {
		t.Fatal("removing one snapshot's link broke another's")
	}
	freed, err = hf.Remove(name(t, "hf.co/acme/Tiny-GGUF@"+first), o)
	if err != nil || freed != int64(len(q4)) {
		t.Fatalf("Remove of the last link: %d, %v", freed, err)
	}
	if _, err := os.Stat(blob); !errors.Is(err, os.ErrNotExist) {
		t.Error("the blob outlived its last link")
	}
	if _, err := os.Stat(filepath.Join(repo, "snapshots", first)); !errors.Is(err, os.ErrNotExist) {
		t.Error("an empty snapshot stayed")
	}
	if _, err := hf.Remove(name(t, "hf.co/acme/Tiny-GGUF:Q4_K_M"), o); !errors.Is(err, hf.ErrNotCached) {
		t.Errorf("Remove of a removed file: %v", err)
	}
	// The last file goes, and the repository with it.
	if freed, err := hf.Remove(name(t, "hf.co/acme/Tiny-GGUF:Q8_0"), o); err != nil || freed != int64(len(q8)) {
		t.Fatalf("Remove Q8_0: %d, %v", freed, err)
	}
	if _, err := os.Stat(repo); !errors.Is(err, os.ErrNotExist) {
		entries, _ := filepath.Glob(filepath.Join(repo, "*", "*"))
		t.Errorf("the repository's folder stayed: %v", entries)
	}
	if models, err := hf.List(o); err != nil || len(models) != 0 {
		t.Errorf("List after removing everything: %+v, %v", models, err)
	}
}

func TestCacheDirFromEnvironment(t *testing.T) {
	quietEnv(t)
	home, _ := os.UserHomeDir()
	t.Setenv("HF_HOME", "")
	if got, want := hf.CacheDir(), filepath.Join(home, ".cache", "huggingface", "hub"); got != want {
		t.Errorf("default: %s, want %s", got, want)
	}
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if got := hf.CacheDir(); got != "/xdg/huggingface/hub" {
		t.Errorf("XDG_CACHE_HOME: %s", got)
	}
	t.Setenv("HF_HOME", "~/hf")
	if got := hf.CacheDir(); got != filepath.Join(home, "hf", "hub") {
		t.Errorf("HF_HOME: %s", got)
	}
	t.Setenv("HF_HUB_CACHE", "/cache/hub")
	if got := hf.CacheDir(); got != "/cache/hub" {
		t.Errorf("HF_HUB_CACHE: %s", got)
	}
}

func TestPullFindsATruncatedBlob(t *testing.T) {
	h, o := hub(t)
	commit := h.Push("acme/Tiny-GGUF", tiny())
	handMade(t, o.CacheDir, "acme/Tiny-GGUF", commit, map[string][]byte{"Tiny-Q4_K_M.gguf": q4})
	blob := filepath.Join(o.CacheDir, "models--acme--Tiny-GGUF", "blobs", pulltest.Digest(q4))
	if err := os.Truncate(blob, 1000); err != nil {
		t.Fatal(err)
	}
	_, err := hf.Pull(context.Background(), name(t, "hf.co/acme/Tiny-GGUF"), o)
	if !errors.Is(err, pull.ErrCorrupt) || !strings.Contains(err.Error(), "1000 bytes where the blob has 102400") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Pull over a truncated blob: %v", err)
	}
}

func TestPullSameNameConcurrently(t *testing.T) {
	h, o := hub(t)
	h.Push("acme/Tiny-GGUF", tiny())
	h.CDN.Inject(pulltest.Fault{Slow: 50 * time.Microsecond})
	paths := make([]string, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = hf.Pull(context.Background(), name(t, "hf.co/acme/Tiny-GGUF"), o) })
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil || paths[i] != paths[0] {
			t.Fatalf("Pull %d: %s, %v", i, paths[i], errs[i])
		}
	}
	if !bytes.Equal(read(t, paths[0]), q4) || h.CDN.Served() != int64(len(q4)) {
		t.Errorf("three Pulls of one name: CDN served %d, want %d once", h.CDN.Served(), len(q4))
	}
}
