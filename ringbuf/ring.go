package ringbuf

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Ring is a single-producer, single-consumer ring of fixed-size records in
// an arena. The shared state is two 64-bit indices in the arena, each on its
// own 128-byte line; they only grow (2^64 records never happen), and the
// record of index i lives in slot i & (Cap-1).
//
// One goroutine (or one device) produces with Reserve and Publish; one
// goroutine (or one device) consumes with Next and Done. The producer and
// consumer halves of a Ring may be used concurrently; each half must be used
// by one goroutine at a time. Produced and Consumed may be called from
// anywhere.
//
// Ordering: Publish stores the producer index with sync/atomic (a release,
// in fact sequentially consistent) after the records were written, and Next
// loads it with sync/atomic (an acquire) before returning records; Done and
// Reserve do the same with the consumer index, so a slot is never rewritten
// before its reader is done with it. A CUDA peer does the same with
// st.release.sys / ld.acquire.sys (see kernels/cuda/ring.h).
type Ring struct {
	prod *uint64 // in the arena
	cons *uint64 // in the arena
	recs []byte  // Cap*RecSize bytes, in the arena
	mask uint64
	rs   int

	_ [128]byte
	// Producer-owned: next index to reserve, last consumer index seen.
	reserved   uint64
	cachedCons uint64
	_          [128]byte
	// Consumer-owned: next index to read, last producer index seen.
	read       uint64
	cachedProd uint64
	_          [128]byte
}

// newRing makes the view of the ring placed at l in mem, picking up the
// indices already there (zero in a new arena).
func newRing(mem []byte, l RingLayout) *Ring {
	ctl := mem[l.Off : l.Off+RingOffRecords]
	r := &Ring{
		prod: (*uint64)(unsafe.Pointer(&ctl[RingOffProd])),
		cons: (*uint64)(unsafe.Pointer(&ctl[RingOffCons])),
		recs: mem[l.Off+RingOffRecords : l.Off+RingOffRecords+l.Cap*l.RecSize : l.Off+RingOffRecords+l.Cap*l.RecSize],
		mask: uint64(l.Cap - 1),
		rs:   l.RecSize,
	}
	r.reserved = atomic.LoadUint64(r.prod)
	r.cachedCons = atomic.LoadUint64(r.cons)
	r.read = r.cachedCons
	r.cachedProd = r.reserved
	return r
}

// Cap is the number of record slots.
func (r *Ring) Cap() int { return int(r.mask + 1) }

// RecSize is the size of one record in bytes.
func (r *Ring) RecSize() int { return r.rs }

// Reserve returns the next free record slot and its index, or ok=false if
// the ring is full (Cap records published or reserved and not yet released
// by the consumer). The caller fills rec and then calls Publish; several
// records may be reserved before one Publish. The slot's old contents are
// undefined: write every byte (the Put methods do).
func (r *Ring) Reserve() (index uint64, rec []byte, ok bool) {
	i := r.reserved
	if i-r.cachedCons > r.mask {
		r.cachedCons = atomic.LoadUint64(r.cons)
		if i-r.cachedCons > r.mask {
			return i, nil, false
		}
	}
	r.reserved = i + 1
	o := int(i&r.mask) * r.rs
	return i, r.recs[o : o+r.rs : o+r.rs], true
}

// Publish makes every reserved record visible to the consumer.
func (r *Ring) Publish() {
	atomic.StoreUint64(r.prod, r.reserved)
}

// Space is the number of records Reserve would accept now. Producer side.
func (r *Ring) Space() int {
	r.cachedCons = atomic.LoadUint64(r.cons)
	return int(r.mask + 1 - (r.reserved - r.cachedCons))
}

// Next returns the next published record that Next has not returned yet,
// or ok=false if there is none. The record stays valid, and its slot
// unused by the producer, until Done.
func (r *Ring) Next() (index uint64, rec []byte, ok bool) {
	i := r.read
	if i == r.cachedProd {
		r.cachedProd = atomic.LoadUint64(r.prod)
		if i == r.cachedProd {
			return i, nil, false
		}
	}
	r.read = i + 1
	o := int(i&r.mask) * r.rs
	return i, r.recs[o : o+r.rs : o+r.rs], true
}

// Done releases every record Next has returned, with any staging payload
// they reference, back to the producer.
func (r *Ring) Done() {
	atomic.StoreUint64(r.cons, r.read)
}

// Produced is the producer index: records [0, Produced) were published.
func (r *Ring) Produced() uint64 { return atomic.LoadUint64(r.prod) }

// Consumed is the consumer index: records [0, Consumed) were released.
func (r *Ring) Consumed() uint64 { return atomic.LoadUint64(r.cons) }

// Backoff paces a loop that waits on a ring: it yields the processor for
// the first waits, then sleeps for doubling intervals up to Max (default
// 50µs). The zero value is ready; Reset after progress.
type Backoff struct {
	Max time.Duration
	n   int
}

const backoffYields = 32

// Wait waits a little longer than the previous call.
func (b *Backoff) Wait() {
	b.n++
	if b.n <= backoffYields {
		runtime.Gosched()
		return
	}
	limit := b.Max
	if limit <= 0 {
		limit = 50 * time.Microsecond
	}
	d := time.Microsecond << min(b.n-backoffYields-1, 20)
	time.Sleep(min(d, limit))
}

// Reset starts the next wait from the shortest pause.
func (b *Backoff) Reset() { b.n = 0 }
