package ringbuf

import (
	"fmt"
	"unsafe"
)

// Allocator provides arena memory. The device chooses it: locked pages for
// the CPU device (MmapAllocator), mapped pinned pages (cudaHostAlloc) for
// CUDA, Go memory for tests (HeapAllocator). Alloc must return at least
// size bytes whose first byte is Align-aligned; Free takes back what Alloc
// returned.
type Allocator interface {
	Alloc(size int) ([]byte, error)
	Free([]byte) error
}

// HeapAllocator allocates arenas from the Go heap. The race detector sees
// accesses to Go memory only, so tests that want it to check the ring
// protocol use this allocator.
type HeapAllocator struct{}

// Alloc returns size zeroed bytes aligned to Align.
func (HeapAllocator) Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("ringbuf: allocation of %d bytes", size)
	}
	b := make([]byte, size+Align)
	o := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (Align - 1))
	return b[o : o+size : o+size], nil
}

// Free does nothing: the garbage collector reclaims the memory once the
// arena is unreachable.
func (HeapAllocator) Free([]byte) error { return nil }
