package hf

import (
	"context"
	"fmt"
	"os"

	"ringlm/pull"
)

// Pull brings the file n names into the cache and returns its snapshot
// path. It asks the Hub which commit the revision is at and which files
// it has, chooses the file (Choose), asks the file's sha256 and size, and
// downloads it only when no blob of that sha256 is there: files that
// huggingface_hub already downloaded cost no byte (a blob of the wrong
// size is pull.ErrCorrupt), and the cache is left as huggingface_hub
// would leave it. Events go to
// o.Transfer.Progress: "pulling manifest", the download's, then
// "success". With o.Offline, Pull is Resolve.
func Pull(ctx context.Context, n Name, o Options) (string, error) {
	o = o.withEnv()
	if o.Offline {
		return Resolve(n, o)
	}
	emit := func(status string) {
		if o.Transfer.Progress != nil {
			o.Transfer.Progress(pull.Event{Status: status})
		}
	}
	rc := cacheOf(o.CacheDir, n.Repo)
	// A commit names fixed content: when it is here, the Hub has nothing
	// to add.
	if isCommit(n.Revision) {
		if p, err := Resolve(n, o); err == nil {
			emit("success")
			return p, nil
		}
	}
	c := newClient(o)
	emit("pulling manifest")
	info, err := c.repo(ctx, n)
	if err != nil {
		return "", err
	}
	file, err := Choose(n, info.Files)
	if err != nil {
		return "", err
	}
	meta, err := c.stat(ctx, n, info.Commit, file)
	if err != nil {
		return "", err
	}
	// Fetch finds a blob already there by its name and checks its size
	// without reading it; a snapshot that holds the data itself (a cache
	// made without symlinks) is checked the same way.
	p := rc.pointer(info.Commit, file)
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
		if meta.Size >= 0 && fi.Size() != meta.Size {
			return "", fmt.Errorf("hf: %s: %s is %w: %d bytes where the Hub has %d; remove it (rm) and pull again", n, p, pull.ErrCorrupt, fi.Size(), meta.Size)
		}
	} else {
		blob := rc.blob(meta.SHA256)
		t := o.Transfer
		t.LockPath = rc.lock(meta.SHA256)
		t.ForeignPartial = blob + ".incomplete"
		if err := pull.Fetch(ctx, pull.Blob{URL: meta.URL, Header: c.header(), Size: meta.Size, SHA256: meta.SHA256}, blob, t); err != nil {
			return "", fmt.Errorf("hf: %s: %w", n, err)
		}
		if err := rc.link(info.Commit, file, meta.SHA256); err != nil {
			return "", fmt.Errorf("hf: %s: %w", n, err)
		}
	}
	if err := rc.setRef(n.rev(), info.Commit); err != nil {
		return "", fmt.Errorf("hf: %s: %w", n, err)
	}
	emit("success")
	return p, nil
}
