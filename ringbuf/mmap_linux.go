package ringbuf

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// MmapAllocator allocates arenas for the CPU device: anonymous,
// page-aligned, pre-faulted mappings locked into RAM with mlock, so that
// the rings never page out. When mlock is refused (RLIMIT_MEMLOCK too low,
// no CAP_IPC_LOCK) the memory is used unlocked: Locked reports false and
// Warning says why, for the engine to log.
type MmapAllocator struct {
	mu       sync.Mutex
	unlocked int    // allocations that could not be locked
	warning  string // the last failure, for logs

	// mlock is syscall.Mlock; tests replace it.
	mlock func([]byte) error
}

// NewMmapAllocator returns an allocator that mmaps and mlocks.
func NewMmapAllocator() *MmapAllocator {
	return &MmapAllocator{mlock: syscall.Mlock}
}

// Alloc maps size bytes (rounded up to whole pages) of zeroed memory and
// tries to lock them. Only a failing mmap is an error.
func (a *MmapAllocator) Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("ringbuf: allocation of %d bytes", size)
	}
	page := os.Getpagesize()
	n := (size + page - 1) &^ (page - 1)
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("ringbuf: mmap %d bytes: %w", n, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.mlock(b); err != nil {
		a.unlocked++
		a.warning = fmt.Sprintf("could not lock %s of ring memory (RLIMIT_MEMLOCK=%s): %v; continuing unlocked",
			mib(uint64(n)), memlockLimit(), err)
	}
	return b[:size:size], nil
}

// Free unmaps (and so unlocks) memory returned by Alloc.
func (a *MmapAllocator) Free(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	page := os.Getpagesize()
	m := unsafe.Slice(&b[:1][0], (cap(b)+page-1)&^(page-1))
	if err := syscall.Munmap(m); err != nil {
		return fmt.Errorf("ringbuf: munmap: %w", err)
	}
	return nil
}

// Locked reports whether every allocation so far is locked in RAM.
func (a *MmapAllocator) Locked() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.unlocked == 0
}

// Warning is the last lock failure, ready to log ("could not lock 9 MiB of
// ring memory (RLIMIT_MEMLOCK=8 MiB): ...; continuing unlocked"), or "".
func (a *MmapAllocator) Warning() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.warning
}

// memlockLimit is the soft RLIMIT_MEMLOCK, read from /proc/self/limits
// (package syscall does not name the resource, and its number varies
// between architectures).
func memlockLimit() string {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return "unknown"
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		if f[0] == "unlimited" {
			return f[0]
		}
		if v, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			return mib(v)
		}
		break
	}
	return "unknown"
}

func mib(n uint64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
