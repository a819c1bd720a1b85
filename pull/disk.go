package pull

import (
	"fmt"
	"syscall"
)

// checkSpace fails with ErrNoSpace when the file system holding dir has
// fewer than need bytes free for an unprivileged user, before a download
// starts rather than hours into it.
func checkSpace(dir string, need int64) error {
	if need <= 0 {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("checking free space in %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free < need {
		return fmt.Errorf("%w in %s: the download needs %s more, %s free", ErrNoSpace, dir, FormatBytes(need), FormatBytes(free))
	}
	return nil
}
