package ringbuf

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Arena header. The header is the first HeaderSize bytes of the arena and
// tells a device where everything else is; HdrOff* are byte offsets inside
// it. Bytes 72..127 are reserved and zero.
const (
	// Magic is "RLMRING1" read as a little-endian uint64.
	Magic uint64 = 0x31474E49524D4C52
	// Version is bumped whenever any offset, size, op, kind or payload
	// word changes meaning.
	Version uint32 = 1
	// Align is the alignment of the arena base and of every region in it:
	// the larger of a CPU cache-line pair and a GPU L2 line.
	Align = 128
	// HeaderSize is the size of the header region.
	HeaderSize = 128

	HdrOffMagic         = 0  // u64 Magic
	HdrOffVersion       = 8  // u32 Version
	HdrOffHeaderSize    = 12 // u32 HeaderSize
	HdrOffSubmitOff     = 16 // u64 byte offset of the submit ring's control block
	HdrOffSubmitCap     = 24 // u32 submit ring capacity (records, power of two)
	HdrOffSubmitRecSize = 28 // u32 SubmitSize
	HdrOffComplOff      = 32 // u64 byte offset of the completion ring's control block
	HdrOffComplCap      = 40 // u32 completion ring capacity (records, power of two)
	HdrOffComplRecSize  = 44 // u32 CompletionSize
	HdrOffStagingOff    = 48 // u64 byte offset of the staging area
	HdrOffStagingWords  = 56 // u32 staging area size in u32 words
	HdrOffTotalSize     = 64 // u64 arena size in bytes
)

// Ring control block: the producer index and the consumer index each own a
// 128-byte line, so the producer's stores never invalidate the line the
// consumer polls and vice versa. Records start at RingOffRecords.
const (
	RingOffProd    = 0   // u64 producer index: records [0, prod) have been published
	RingOffCons    = 128 // u64 consumer index: records [0, cons) have been released
	RingOffRecords = 256 // first record (slot 0); slot of index i is i & (Cap-1)
)

// Limits checked by NewLayout and ParseHeader.
const (
	MinCap          = 2
	MaxCap          = 1 << 20
	MinStagingWords = 64
	// MaxStagingWords keeps every staging word offset far below the
	// TokenOffFeedback sentinel and the arena below 1.1 GiB.
	MaxStagingWords = 1 << 28
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrLayout: sizes that NewLayout refuses (capacity not a power of
	// two, out of range).
	ErrLayout = errors.New("ringbuf: invalid layout")
	// ErrHeader: an arena header that is not a valid layout of this
	// version (bad magic, version, record size, overlapping regions, ...).
	ErrHeader = errors.New("ringbuf: invalid arena header")
)

// RingLayout places one ring: its control block at Off, then Cap records of
// RecSize bytes from Off+RingOffRecords.
type RingLayout struct {
	Off     int
	Cap     int
	RecSize int
}

// Size is the bytes the ring occupies, rounded up to Align.
func (r RingLayout) Size() int { return alignUp(RingOffRecords + r.Cap*r.RecSize) }

// Layout places the regions of an arena. Offsets are bytes from the arena
// base; every one is a multiple of Align.
type Layout struct {
	Submit       RingLayout
	Completion   RingLayout
	StagingOff   int
	StagingWords int
	Size         int // total bytes
}

// NewLayout lays out an arena: header, submit ring (submitCap records of
// SubmitSize), completion ring (complCap records of CompletionSize), staging
// area (stagingWords u32 words), in that order. Capacities must be powers of
// two in [MinCap, MaxCap]; stagingWords in [MinStagingWords,
// MaxStagingWords].
func NewLayout(submitCap, complCap, stagingWords int) (Layout, error) {
	for _, c := range []struct {
		name string
		v    int
	}{{"submit", submitCap}, {"completion", complCap}} {
		if c.v < MinCap || c.v > MaxCap || c.v&(c.v-1) != 0 {
			return Layout{}, fmt.Errorf("%w: %s capacity %d is not a power of two in [%d, %d]",
				ErrLayout, c.name, c.v, MinCap, MaxCap)
		}
	}
	if stagingWords < MinStagingWords || stagingWords > MaxStagingWords {
		return Layout{}, fmt.Errorf("%w: staging words %d not in [%d, %d]",
			ErrLayout, stagingWords, MinStagingWords, MaxStagingWords)
	}
	var l Layout
	off := HeaderSize
	l.Submit = RingLayout{Off: off, Cap: submitCap, RecSize: SubmitSize}
	off += l.Submit.Size()
	l.Completion = RingLayout{Off: off, Cap: complCap, RecSize: CompletionSize}
	off += l.Completion.Size()
	l.StagingOff, l.StagingWords = off, stagingWords
	off += alignUp(4 * stagingWords)
	l.Size = off
	return l, nil
}

// PutHeader writes the header describing l into b[:HeaderSize], reserved
// bytes zeroed.
func (l Layout) PutHeader(b []byte) {
	h := b[:HeaderSize:HeaderSize]
	clear(h)
	le := binary.LittleEndian
	le.PutUint64(h[HdrOffMagic:], Magic)
	le.PutUint32(h[HdrOffVersion:], Version)
	le.PutUint32(h[HdrOffHeaderSize:], HeaderSize)
	le.PutUint64(h[HdrOffSubmitOff:], uint64(l.Submit.Off))
	le.PutUint32(h[HdrOffSubmitCap:], uint32(l.Submit.Cap))
	le.PutUint32(h[HdrOffSubmitRecSize:], uint32(l.Submit.RecSize))
	le.PutUint64(h[HdrOffComplOff:], uint64(l.Completion.Off))
	le.PutUint32(h[HdrOffComplCap:], uint32(l.Completion.Cap))
	le.PutUint32(h[HdrOffComplRecSize:], uint32(l.Completion.RecSize))
	le.PutUint64(h[HdrOffStagingOff:], uint64(l.StagingOff))
	le.PutUint32(h[HdrOffStagingWords:], uint32(l.StagingWords))
	le.PutUint64(h[HdrOffTotalSize:], uint64(l.Size))
}

// ParseHeader reads and validates the header at the start of an arena of
// len(b) bytes, as a device does before it touches anything else. It
// accepts exactly the layouts NewLayout produces for this Version.
func ParseHeader(b []byte) (Layout, error) {
	if len(b) < HeaderSize {
		return Layout{}, fmt.Errorf("%w: %d bytes, need at least %d", ErrHeader, len(b), HeaderSize)
	}
	le := binary.LittleEndian
	if m := le.Uint64(b[HdrOffMagic:]); m != Magic {
		return Layout{}, fmt.Errorf("%w: magic %#016x, want %#016x (\"RLMRING1\")", ErrHeader, m, Magic)
	}
	if v := le.Uint32(b[HdrOffVersion:]); v != Version {
		return Layout{}, fmt.Errorf("%w: version %d, want %d", ErrHeader, v, Version)
	}
	if hs := le.Uint32(b[HdrOffHeaderSize:]); hs != HeaderSize {
		return Layout{}, fmt.Errorf("%w: header size %d, want %d", ErrHeader, hs, HeaderSize)
	}
	for o := HdrOffTotalSize + 8; o < HeaderSize; o++ {
		if b[o] != 0 {
			return Layout{}, fmt.Errorf("%w: reserved header byte %d is %#x", ErrHeader, o, b[o])
		}
	}
	if r := le.Uint32(b[HdrOffStagingWords+4:]); r != 0 {
		return Layout{}, fmt.Errorf("%w: reserved header word at %d is %#x", ErrHeader, HdrOffStagingWords+4, r)
	}
	if rs := le.Uint32(b[HdrOffSubmitRecSize:]); rs != SubmitSize {
		return Layout{}, fmt.Errorf("%w: submit record size %d, want %d", ErrHeader, rs, SubmitSize)
	}
	if rs := le.Uint32(b[HdrOffComplRecSize:]); rs != CompletionSize {
		return Layout{}, fmt.Errorf("%w: completion record size %d, want %d", ErrHeader, rs, CompletionSize)
	}
	// The sizes determine the whole layout; rebuild it and require every
	// recorded offset to agree, so that no two regions can overlap.
	want, err := NewLayout(int(le.Uint32(b[HdrOffSubmitCap:])), int(le.Uint32(b[HdrOffComplCap:])),
		int(le.Uint32(b[HdrOffStagingWords:])))
	if err != nil {
		return Layout{}, fmt.Errorf("%w: %w", ErrHeader, err)
	}
	for _, f := range []struct {
		name      string
		off       int
		got, want uint64
	}{
		{"submit offset", HdrOffSubmitOff, le.Uint64(b[HdrOffSubmitOff:]), uint64(want.Submit.Off)},
		{"completion offset", HdrOffComplOff, le.Uint64(b[HdrOffComplOff:]), uint64(want.Completion.Off)},
		{"staging offset", HdrOffStagingOff, le.Uint64(b[HdrOffStagingOff:]), uint64(want.StagingOff)},
		{"total size", HdrOffTotalSize, le.Uint64(b[HdrOffTotalSize:]), uint64(want.Size)},
	} {
		if f.got != f.want {
			return Layout{}, fmt.Errorf("%w: %s (byte %d) is %d, want %d", ErrHeader, f.name, f.off, f.got, f.want)
		}
	}
	if len(b) < want.Size {
		return Layout{}, fmt.Errorf("%w: arena is %d bytes, header says %d", ErrHeader, len(b), want.Size)
	}
	return want, nil
}

func alignUp(n int) int { return (n + Align - 1) &^ (Align - 1) }
