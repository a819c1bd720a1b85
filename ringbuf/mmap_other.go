//go:build !linux

package ringbuf

import (
	"runtime"
	"sync"
)

// MmapAllocator locks pages on Linux only; elsewhere it hands out Go
// memory, reports Locked false and says so in Warning.
type MmapAllocator struct {
	HeapAllocator
	mu  sync.Mutex
	any bool
}

// NewMmapAllocator returns an allocator of unlocked Go memory.
func NewMmapAllocator() *MmapAllocator { return &MmapAllocator{} }

// Alloc returns size zeroed bytes aligned to Align.
func (a *MmapAllocator) Alloc(size int) ([]byte, error) {
	b, err := a.HeapAllocator.Alloc(size)
	if err == nil {
		a.mu.Lock()
		a.any = true
		a.mu.Unlock()
	}
	return b, err
}

// Locked reports whether every allocation so far is locked in RAM.
func (a *MmapAllocator) Locked() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.any
}

// Warning says that ring memory is not locked on this system.
func (a *MmapAllocator) Warning() string {
	if a.Locked() {
		return ""
	}
	return "ring memory is not locked on " + runtime.GOOS + "; continuing unlocked"
}
