package hf

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"ringlm/pull"
)

// ErrNotCached: the name resolves to nothing in the cache. It is
// pull.ErrNotFound too.
var ErrNotCached = fmt.Errorf("%w in the cache", pull.ErrNotFound)

// The cache's layout, huggingface_hub's:
//
//	{cache}/models--{user}--{repo}/
//	    blobs/{sha256}                      the files' bytes, by content
//	    snapshots/{commit}/{path}           relative symlinks to ../../blobs/{sha256}
//	    refs/{revision}                     the commit a branch or tag was at when last asked
//	{cache}/.locks/models--{user}--{repo}/{sha256}.lock
type repoCache struct {
	cache string // the hub cache
	dir   string // the repository's folder in it
}

func cacheOf(cacheDir, repo string) repoCache {
	return repoCache{cacheDir, filepath.Join(cacheDir, folderOf(repo))}
}

func folderOf(repo string) string { return "models--" + strings.ReplaceAll(repo, "/", "--") }

func (r repoCache) blob(sha string) string { return filepath.Join(r.dir, "blobs", sha) }
func (r repoCache) snapshot(commit string) string {
	return filepath.Join(r.dir, "snapshots", commit)
}
func (r repoCache) pointer(commit, file string) string {
	return filepath.Join(r.snapshot(commit), filepath.FromSlash(file))
}
func (r repoCache) lock(sha string) string {
	return filepath.Join(r.cache, ".locks", filepath.Base(r.dir), sha+".lock")
}

// commit is the commit rev means in the cache: rev itself when it is a
// commit hash, else what refs/{rev} holds.
func (r repoCache) commit(rev string) (string, error) {
	if isCommit(rev) {
		return rev, nil
	}
	b, err := os.ReadFile(filepath.Join(r.dir, "refs", filepath.FromSlash(rev)))
	if err != nil {
		return "", err
	}
	c := strings.TrimSpace(string(b))
	if !isCommit(c) {
		return "", fmt.Errorf("refs/%s holds %q, not a commit", rev, c)
	}
	return c, nil
}

// setRef records that rev is at commit, unless rev is that commit.
func (r repoCache) setRef(rev, commit string) error {
	if rev == commit {
		return nil
	}
	path := filepath.Join(r.dir, "refs", filepath.FromSlash(rev))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := tempName(path)
	if err := os.WriteFile(tmp, []byte(commit), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// link makes snapshots/{commit}/{file} a relative symlink to the blob,
// in one rename so no reader sees a half-made link.
func (r repoCache) link(commit, file, sha string) error {
	p := r.pointer(commit, file)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	target, err := filepath.Rel(filepath.Dir(p), r.blob(sha))
	if err != nil {
		return err
	}
	tmp := tempName(p)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// tempName is a name beside path that no concurrent pull also uses.
func tempName(path string) string {
	return fmt.Sprintf("%s.%d-%x.tmp", path, os.Getpid(), rand.Uint64())
}

// ggufFiles lists the .gguf files of a snapshot whose data is there (a
// link to a missing blob is no file), as '/'-separated paths.
func ggufFiles(snapshot string) []string {
	var files []string
	filepath.WalkDir(snapshot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isGGUF(p) {
			return nil
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(snapshot, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files
}

// Resolve finds n in the cache alone, without the network: the commit
// refs/{revision} holds (main by default; a commit hash stands for
// itself), then among that snapshot's .gguf files the one Choose picks.
// The path is the snapshot's link, which gguf.Open follows; nothing is
// read or hashed. A name with nothing in the cache is ErrNotCached.
func Resolve(n Name, o Options) (string, error) {
	o = o.withEnv()
	rc := cacheOf(o.CacheDir, n.Repo)
	notCached := func() error {
		return fail(ErrNotCached, "%s is not in the cache (%s): pull it first", n, o.CacheDir)
	}
	commit, err := rc.commit(n.rev())
	if err != nil {
		return "", notCached()
	}
	file, err := Choose(n, ggufFiles(rc.snapshot(commit)))
	if errors.Is(err, pull.ErrNotFound) || errors.Is(err, ErrNoGGUF) {
		return "", notCached()
	}
	if err != nil {
		return "", err
	}
	return rc.pointer(commit, file), nil
}

// isFile reports whether p is, or links to, a regular file.
func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
