package hf

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Model is a GGUF file in the cache.
type Model struct {
	// Name resolves to this file offline: hf.co/{repo}:{quant} when the
	// tag picks it, else hf.co/{repo}/{file}; with @{revision} when the
	// snapshot is not main's. "" when no name can reach it.
	Name     string
	Repo     string   // "user/repo"
	File     string   // its path in the repository
	Commit   string   // the snapshot it is in
	Refs     []string // the branches and tags at that commit ("main"); none for an older snapshot
	Path     string   // the snapshot's link, which gguf.Open follows
	Size     int64
	Modified time.Time // the blob's, when it was downloaded
	Quant    string    // from the file name (QuantOf); the GGUF header is the authority
}

// List returns the GGUF files in the cache, by repository and file;
// among snapshots of one file those a branch or tag is at come first,
// then the newest. Links whose blob is missing
// are left out: they are no model.
func List(o Options) ([]Model, error) {
	o = o.withEnv()
	entries, err := os.ReadDir(o.CacheDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	var out []Model
	for _, e := range entries {
		user, repo, ok := strings.Cut(strings.TrimPrefix(e.Name(), "models--"), "--")
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "models--") || !ok || checkID(user) != "" || checkID(repo) != "" {
			continue
		}
		out = append(out, listRepo(cacheOf(o.CacheDir, user+"/"+repo), user+"/"+repo)...)
	}
	slices.SortFunc(out, func(a, b Model) int {
		return cmp.Or(cmp.Compare(a.Repo, b.Repo), cmp.Compare(a.File, b.File),
			cmp.Compare(len(b.Refs), len(a.Refs)), b.Modified.Compare(a.Modified), cmp.Compare(a.Commit, b.Commit))
	})
	return out, nil
}

func listRepo(rc repoCache, repo string) []Model {
	refs := refsByCommit(rc)
	snaps, _ := os.ReadDir(filepath.Join(rc.dir, "snapshots"))
	var out []Model
	for _, s := range snaps {
		commit := s.Name()
		if !s.IsDir() || !isCommit(commit) {
			continue
		}
		files := ggufFiles(rc.snapshot(commit))
		for _, f := range files {
			p := rc.pointer(commit, f)
			fi, err := os.Stat(p)
			if err != nil {
				continue
			}
			m := Model{Repo: repo, File: f, Commit: commit, Refs: refs[commit], Path: p, Size: fi.Size(), Modified: fi.ModTime(), Quant: QuantOf(f)}
			m.Name = nameFor(m, files)
			out = append(out, m)
		}
	}
	return out
}

// refsByCommit reads refs/ into commit → the revisions at it.
func refsByCommit(rc repoCache) map[string][]string {
	refs := map[string][]string{}
	root := filepath.Join(rc.dir, "refs")
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rev := filepath.ToSlash(rel)
		if c, err := rc.commit(rev); err == nil {
			refs[c] = append(refs[c], rev)
		}
		return nil
	})
	for _, r := range refs {
		slices.SortFunc(r, func(a, b string) int { // main first
			return cmp.Or(-cmp.Compare(boolInt(a == "main"), boolInt(b == "main")), cmp.Compare(a, b))
		})
	}
	return refs
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nameFor is the shortest name that resolves to m offline, among the
// files of its snapshot.
func nameFor(m Model, files []string) string {
	rev := m.Commit
	if len(m.Refs) > 0 {
		rev = m.Refs[0]
	}
	if rev == "main" {
		rev = ""
	}
	for _, n := range []Name{
		{Repo: m.Repo, Quant: m.Quant, Revision: rev},
		{Repo: m.Repo, File: m.File, Revision: rev},
	} {
		if n.File == "" && n.Quant == "" {
			continue
		}
		parsed, err := ParseName(n.String())
		if err != nil {
			continue
		}
		if f, err := Choose(parsed, files); err == nil && f == m.File {
			return n.String()
		}
	}
	return ""
}

// Remove deletes the file n resolves to in the cache (Resolve): its
// snapshot link, and its blob when no other snapshot links to it. A
// snapshot left empty goes, with the refs that pointed at it, and so do
// the repository's folders once they hold nothing. It returns the bytes
// freed.
func Remove(n Name, o Options) (int64, error) {
	o = o.withEnv()
	p, err := Resolve(n, o)
	if err != nil {
		return 0, err
	}
	rc := cacheOf(o.CacheDir, n.Repo)
	data, err := os.Stat(p)
	if err != nil {
		return 0, fmt.Errorf("hf: %w", err)
	}
	blob, err := filepath.EvalSymlinks(p)
	if err != nil {
		return 0, fmt.Errorf("hf: %w", err)
	}
	if err := os.Remove(p); err != nil {
		return 0, fmt.Errorf("hf: %w", err)
	}
	var freed int64
	if blob == p || !linked(rc, data) { // a snapshot file that was no link held the data itself
		if blob != p {
			if err := os.Remove(blob); err != nil {
				return 0, fmt.Errorf("hf: %w", err)
			}
		}
		freed = data.Size()
	}
	prune(rc, filepath.Dir(p))
	return freed, nil
}

// linked reports whether any snapshot of the repository still reaches
// the file data.
func linked(rc repoCache, data os.FileInfo) bool {
	found := false
	filepath.WalkDir(filepath.Join(rc.dir, "snapshots"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found {
			return nil
		}
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, data) {
			found = true
		}
		return nil
	})
	return found
}

// prune removes the empty folders from dir up to its snapshot, the refs
// to a snapshot that went, and the repository's folders once empty.
func prune(rc repoCache, dir string) {
	snaps := filepath.Join(rc.dir, "snapshots")
	for dir != snaps && strings.HasPrefix(dir, snaps) {
		if os.Remove(dir) != nil {
			return // not empty
		}
		if filepath.Dir(dir) == snaps {
			gone := filepath.Base(dir)
			for _, rev := range refsByCommit(rc)[gone] {
				os.Remove(filepath.Join(rc.dir, "refs", filepath.FromSlash(rev)))
			}
		}
		dir = filepath.Dir(dir)
	}
	if os.Remove(snaps) != nil {
		return
	}
	removeEmptyDirs(filepath.Join(rc.dir, "refs"))
	os.Remove(filepath.Join(rc.dir, "blobs"))
	os.Remove(rc.dir)
}

// removeEmptyDirs removes root and the folders under it that hold no file.
func removeEmptyDirs(root string) {
	var dirs []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for _, d := range slices.Backward(dirs) {
		os.Remove(d)
	}
}
