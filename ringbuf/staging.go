package ringbuf

// Staging is the arena's area for variable-size payloads: Words() u32
// words that the host hands out as a ring of contiguous runs.
//
// Host side (one goroutine): Alloc a run, fill it, Commit the runs
// allocated so far to the index of the submit record that references them
// (the last one if several do), publish that record, and Release with the
// submit ring's consumer index to reclaim every run whose record the device
// has released. Runs are reclaimed in allocation order, so a run is never
// split across the end of the area: one that does not fit before the end
// starts again at word 0, and the skipped tail is reclaimed with it.
//
// Device side (any goroutine): Words returns the run a record points at.
// The device must be done with a record's runs before it moves the submit
// consumer index past the record (Ring.Done).
type Staging struct {
	words []uint32 // the area, in the arena

	// Host allocator state. Positions are virtual word counts since the
	// start (word offset = position % n), so they only grow.
	n         uint64
	head      uint64    // next position to allocate
	tail      uint64    // oldest position still in use
	committed uint64    // head at the last Commit
	pend      []pendRun // a ring of len(pend) entries, a power of two
	pendHead  int       // first live entry
	pendLen   int
}

// pendRun: the runs up to position end are referenced by submit index tag.
type pendRun struct {
	tag, end uint64
}

func newStaging(words []uint32) *Staging {
	return &Staging{words: words, n: uint64(len(words)), pend: make([]pendRun, 64)}
}

// Cap is the size of the area in words: the largest run Alloc can ever
// return.
func (s *Staging) Cap() int { return len(s.words) }

// Used is the number of words allocated and not yet reclaimed, skipped
// tails included.
func (s *Staging) Used() int { return int(s.head - s.tail) }

// Alloc returns a run of nWords contiguous words at word offset off, or
// ok=false if it does not fit now. A run larger than Cap never fits; any
// other fits once Release has reclaimed every committed run. The words
// are not cleared.
func (s *Staging) Alloc(nWords int) (off uint32, buf []uint32, ok bool) {
	if nWords < 0 || uint64(nWords) > s.n {
		return 0, nil, false
	}
	n := uint64(nWords)
	start := s.head
	if s.head == s.tail {
		// Nothing in use: every word is free, start where the run fits.
		if s.head%s.n+n > s.n {
			start = s.head - s.head%s.n + s.n
			s.tail, s.committed = start, start
		}
	} else if start%s.n+n > s.n {
		start = start - start%s.n + s.n // skip the tail of this lap
	}
	if start+n-s.tail > s.n {
		return 0, nil, false
	}
	s.head = start + n
	o := start % s.n
	return uint32(o), s.words[o : o+n : o+n], true
}

// Commit records that the runs allocated since the last Commit are
// referenced by the submit record of index submitIndex (or by earlier
// records): they are reclaimed once the device has released that record.
// Indices must not decrease from one Commit to the next.
func (s *Staging) Commit(submitIndex uint64) {
	if s.head == s.committed {
		return
	}
	if s.pendLen > 0 {
		last := &s.pend[(s.pendHead+s.pendLen-1)&(len(s.pend)-1)]
		if submitIndex < last.tag {
			panic("ringbuf: Staging.Commit index went backwards")
		}
		if submitIndex == last.tag {
			last.end, s.committed = s.head, s.head
			return
		}
	}
	if s.pendLen == len(s.pend) {
		grown := make([]pendRun, 2*len(s.pend))
		for i := range s.pendLen {
			grown[i] = s.pend[(s.pendHead+i)&(len(s.pend)-1)]
		}
		s.pend, s.pendHead = grown, 0
	}
	s.pend[(s.pendHead+s.pendLen)&(len(s.pend)-1)] = pendRun{tag: submitIndex, end: s.head}
	s.pendLen++
	s.committed = s.head
}

// Release reclaims the runs committed to submit indices below
// uptoSubmitIndex: pass the submit ring's Consumed().
func (s *Staging) Release(uptoSubmitIndex uint64) {
	for s.pendLen > 0 {
		p := s.pend[s.pendHead]
		if p.tag >= uptoSubmitIndex {
			break
		}
		s.tail = p.end
		s.pendHead = (s.pendHead + 1) & (len(s.pend) - 1)
		s.pendLen--
	}
}

// Words returns the run of n words at word offset off, or nil if it does
// not lie inside the area (a zero-length run inside it is empty, not nil).
// Device side; it does not allocate.
func (s *Staging) Words(off, n uint32) []uint32 {
	if uint64(off)+uint64(n) > uint64(len(s.words)) {
		return nil
	}
	return s.words[off : off+n : off+n]
}
