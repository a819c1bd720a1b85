package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"ringlm/ringbuf"
)

// HostAllocator is the ringbuf.Allocator of the CUDA device: pinned host
// memory mapped into the GPU's address space (rlm_host_alloc, i.e.
// cudaHostAlloc with Mapped | Portable), so the persistent kernel reads
// the rings over PCIe while Go reads and writes them as ordinary memory.
// The engine takes it as engine.Config.Allocator (Device.Allocator).
type HostAllocator struct {
	l    *library
	mu   sync.Mutex
	live map[unsafe.Pointer]int // base -> bytes
}

// NewHostAllocator returns an allocator over the CUDA library, or why the
// library cannot be used.
func NewHostAllocator() (*HostAllocator, error) {
	l, err := lib()
	if err != nil {
		return nil, err
	}
	return newHostAllocator(l), nil
}

func newHostAllocator(l *library) *HostAllocator {
	return &HostAllocator{l: l, live: map[unsafe.Pointer]int{}}
}

// Alloc returns size zeroed bytes of pinned, mapped memory aligned to
// ringbuf.Align.
func (a *HostAllocator) Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("cuda: allocation of %d bytes", size)
	}
	p, err := a.l.hostAlloc(uint64(size))
	if err != nil {
		return nil, err
	}
	if uintptr(p)%ringbuf.Align != 0 {
		_ = a.l.hostFree(p)
		return nil, fmt.Errorf("cuda: rlm_host_alloc returned %p, not aligned to %d", p, ringbuf.Align)
	}
	a.mu.Lock()
	a.live[p] = size
	a.mu.Unlock()
	return unsafe.Slice((*byte)(p), size), nil
}

// Free returns memory that Alloc gave.
func (a *HostAllocator) Free(b []byte) error {
	if len(b) == 0 {
		return errors.New("cuda: Free of an empty slice")
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	a.mu.Lock()
	_, ok := a.live[p]
	delete(a.live, p)
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("cuda: Free(%p): not allocated by this HostAllocator", p)
	}
	return a.l.hostFree(p)
}

// owns reports whether b lies within memory Alloc gave and not yet freed.
func (a *HostAllocator) owns(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	a.mu.Lock()
	n, ok := a.live[p]
	a.mu.Unlock()
	return ok && len(b) <= n
}
