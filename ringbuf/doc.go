// Package ringbuf owns the arena that the engine (host) and a device share,
// and the ring protocol's byte formats inside it: the header, two
// single-producer/single-consumer rings of fixed-size records (submit:
// host -> device; completion: device -> host) and a staging area for
// variable-size payloads; the mapping between a request's sampling
// parameters and an OPEN_SLOT payload (SlotOpen); and the capacity rules
// and device limits every device shares (StepRecords, MinCompletionCap,
// MaxStop, MaxBias, MaxEOS, MaxTop, MaxHeadDim). PROTOCOL.md beside this
// file specifies every byte, the ordering rules, the capacity rules and
// what a device does with each record; kernels/cuda/ring.h is the same
// specification in C, generated from this package (go generate ./ringbuf)
// and checked against it by the tests.
//
// Go reads and writes the arena directly through unsafe pointers: records
// are encoded in place (SubmitRecord.Put, Completion.Get, ...) and ring
// indices are published with sync/atomic, so there is no cgo call and no
// allocation per record. Publishing stores the index with release
// semantics after the record is written; consuming loads it with acquire
// semantics before the record is read. A CUDA kernel does the same through
// mapped pinned memory with st.release.sys / ld.acquire.sys.
//
// The memory comes from an Allocator that the device supplies:
// MmapAllocator (locked pages) for the CPU device, mapped pinned pages for
// CUDA, HeapAllocator in tests (the race detector sees only Go memory).
//
// The package does not schedule, sample or run models: which records to
// send, and what a device does with them, belong to package engine and to
// the devices in kernels.
package ringbuf

//go:generate go run ./internal/genheader -o ../kernels/cuda/ring.h
