package ringbuf

import (
	"errors"
	"fmt"
	"unsafe"
)

// Arena is the memory the host and a device share, with typed views of its
// regions. The host creates it with NewArena; a device in another address
// space, or one that receives only the bytes, uses Attach.
type Arena struct {
	Layout     Layout
	Mem        []byte // the whole arena, Layout.Size bytes
	Submit     *Ring  // host -> device, SubmitSize records
	Completion *Ring  // device -> host, CompletionSize records
	Staging    *Staging

	alloc Allocator
}

// ErrBigEndian: the arena is little-endian and Go reads staging words in
// native order.
var ErrBigEndian = errors.New("ringbuf: big-endian hosts are not supported")

// NewArena allocates an arena for l from a, writes its header and zeroes
// both rings' indices.
func NewArena(a Allocator, l Layout) (*Arena, error) {
	if !littleEndian() {
		return nil, ErrBigEndian
	}
	if l.Size <= 0 {
		return nil, fmt.Errorf("%w: empty layout (use NewLayout)", ErrLayout)
	}
	mem, err := a.Alloc(l.Size)
	if err != nil {
		return nil, err
	}
	if len(mem) < l.Size || uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%Align != 0 {
		_ = a.Free(mem)
		return nil, fmt.Errorf("ringbuf: allocator returned %d bytes at %p, want %d bytes aligned to %d",
			len(mem), unsafe.SliceData(mem), l.Size, Align)
	}
	mem = mem[:l.Size:l.Size]
	// Device memory need not come zeroed; records and staging words are
	// written before they are published, so only the header and the
	// control blocks need it.
	l.PutHeader(mem)
	clear(mem[l.Submit.Off : l.Submit.Off+RingOffRecords])
	clear(mem[l.Completion.Off : l.Completion.Off+RingOffRecords])
	ar, err := Attach(mem)
	if err != nil {
		_ = a.Free(mem)
		return nil, err
	}
	ar.alloc = a
	return ar, nil
}

// Attach validates the header of an existing arena and returns views of
// it; the rings resume from the indices stored in mem. Close does not free
// an attached arena.
func Attach(mem []byte) (*Arena, error) {
	if !littleEndian() {
		return nil, ErrBigEndian
	}
	l, err := ParseHeader(mem)
	if err != nil {
		return nil, err
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%Align != 0 {
		return nil, fmt.Errorf("ringbuf: arena at %p is not aligned to %d", unsafe.SliceData(mem), Align)
	}
	mem = mem[:l.Size:l.Size]
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&mem[l.StagingOff])), l.StagingWords)
	return &Arena{
		Layout:     l,
		Mem:        mem,
		Submit:     newRing(mem, l.Submit),
		Completion: newRing(mem, l.Completion),
		Staging:    newStaging(words),
	}, nil
}

// Close frees the arena's memory if NewArena allocated it. Neither side
// may touch the arena afterwards.
func (a *Arena) Close() error {
	if a.alloc == nil || a.Mem == nil {
		return nil
	}
	err := a.alloc.Free(a.Mem)
	a.Mem, a.alloc = nil, nil
	return err
}

// AllocStaging allocates a staging run (see Staging.Alloc), first
// reclaiming the runs of every submit record the device has released.
// Host side.
func (a *Arena) AllocStaging(nWords int) (off uint32, buf []uint32, ok bool) {
	if off, buf, ok = a.Staging.Alloc(nWords); ok {
		return off, buf, ok
	}
	a.Staging.Release(a.Submit.Consumed())
	return a.Staging.Alloc(nWords)
}

// PushSubmit publishes r on the submit ring, committing the staging runs
// allocated since the last push to it. It returns the record's index, or
// ok=false if the ring is full (drain completions, then retry). Host side.
func (a *Arena) PushSubmit(r *SubmitRecord) (index uint64, ok bool) {
	i, ok := a.StageSubmit(r)
	if ok {
		a.Submit.Publish()
	}
	return i, ok
}

// StageSubmit is PushSubmit without the publish: the record becomes
// visible to the device at the next a.Submit.Publish (or PushSubmit), so
// several records cost one release store. Host side.
func (a *Arena) StageSubmit(r *SubmitRecord) (index uint64, ok bool) {
	i, b, ok := a.Submit.Reserve()
	if !ok {
		return i, false
	}
	r.Put(b)
	a.Staging.Commit(i)
	return i, true
}

// PopCompletion reads and releases the next completion record into c, or
// returns false if there is none. Host side.
func (a *Arena) PopCompletion(c *Completion) bool {
	_, b, ok := a.Completion.Next()
	if !ok {
		return false
	}
	c.Get(b)
	a.Completion.Done()
	return true
}

// NextSubmit reads the next submit record into r without releasing it:
// call a.Submit.Done once the record and its payload are no longer needed.
// Device side.
func (a *Arena) NextSubmit(r *SubmitRecord) (index uint64, ok bool) {
	i, b, ok := a.Submit.Next()
	if ok {
		r.Get(b)
	}
	return i, ok
}

// PushCompletion publishes c on the completion ring, or returns false if
// the ring is full. Device side.
func (a *Arena) PushCompletion(c *Completion) bool {
	_, b, ok := a.Completion.Reserve()
	if !ok {
		return false
	}
	c.Put(b)
	a.Completion.Publish()
	return true
}

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}
