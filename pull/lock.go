package pull

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockPoll is how often a Fetch waiting on another's lock tries again.
const lockPoll = 100 * time.Millisecond

// lockFile takes an exclusive flock(2) on path, creating it, and waits
// for it (calling waiting once) while another process or goroutine holds
// it: two pulls of one blob would otherwise write one partial file at
// once. flock is what Python's filelock takes too, so a lock file shared
// with huggingface_hub excludes its downloads as well.
//
// With remove, unlock deletes the file while still holding it. A waiter
// may by then hold the deleted file's lock, so after locking, the file
// must still be the one at path; if not, it locks again.
func lockFile(ctx context.Context, path string, remove bool, waiting func()) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	told := false
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			held, herr := f.Stat()
			now, nerr := os.Stat(path)
			if herr == nil && nerr == nil && os.SameFile(held, now) {
				return func() {
					if remove {
						os.Remove(path)
					}
					f.Close()
				}, nil
			}
			f.Close() // the holder before us removed it: lock the new one
			continue
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !told && waiting != nil {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(lockPoll):
		}
	}
}
