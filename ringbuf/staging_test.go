package ringbuf

import (
	"math/rand/v2"
	"testing"
)

func newTestStaging(n int) *Staging { return newStaging(make([]uint32, n)) }

func mustAlloc(t *testing.T, s *Staging, n int, wantOff uint32) []uint32 {
	t.Helper()
	off, buf, ok := s.Alloc(n)
	if !ok || off != wantOff || len(buf) != n {
		t.Fatalf("Alloc(%d) = %d, len %d, %v; want offset %d", n, off, len(buf), ok, wantOff)
	}
	return buf
}

func refuse(t *testing.T, s *Staging, n int) {
	t.Helper()
	if off, _, ok := s.Alloc(n); ok {
		t.Fatalf("Alloc(%d) succeeded at %d with %d of %d words used", n, off, s.Used(), s.Cap())
	}
}

func TestStagingWrap(t *testing.T) {
	s := newTestStaging(100)
	mustAlloc(t, s, 30, 0)
	s.Commit(0)
	mustAlloc(t, s, 30, 30)
	mustAlloc(t, s, 30, 60)
	s.Commit(1) // both runs belong to record 1
	refuse(t, s, 11)
	mustAlloc(t, s, 10, 90) // exactly to the end
	s.Commit(2)
	refuse(t, s, 1)
	if s.Used() != 100 {
		t.Fatalf("Used %d", s.Used())
	}

	s.Release(0) // nothing below index 0
	refuse(t, s, 1)
	s.Release(1) // record 0: words 0..29
	mustAlloc(t, s, 20, 0)
	refuse(t, s, 11)
	mustAlloc(t, s, 10, 20)
	s.Commit(3)
	s.Release(3) // records 1 and 2: words 30..99
	// 70 words free at 30..99: a 71-word run does not fit before the end,
	// and wrapping to 0 would hit record 3's words.
	refuse(t, s, 71)
	mustAlloc(t, s, 50, 30)
	// 20 words left at 80..99, 25 do not fit: skip to 0, still blocked by
	// record 3 (0..29).
	refuse(t, s, 25)
	s.Commit(4)
	s.Release(4)
	// Record 3 released: the skip to 0 is possible; the skipped tail
	// (80..99) counts as used until this run is released.
	mustAlloc(t, s, 25, 0)
	if s.Used() != 50+20+25 {
		t.Fatalf("Used %d, want 95", s.Used())
	}
	s.Commit(5)
	refuse(t, s, 6) // 25..29 free only (5 words), 30..79 held by record 4
	mustAlloc(t, s, 5, 25)
	s.Commit(5)
	s.Release(6)
	if s.Used() != 0 {
		t.Fatalf("Used %d after releasing everything", s.Used())
	}
	// Empty: a run of the whole area fits wherever the head was.
	mustAlloc(t, s, 100, 0)
	s.Commit(6)
	s.Release(7)
	mustAlloc(t, s, 0, 0)
	mustAlloc(t, s, 1, 0)
}

func TestStagingRefusesWhatCanNeverFit(t *testing.T) {
	s := newTestStaging(64)
	refuse(t, s, 65)
	refuse(t, s, -1)
	mustAlloc(t, s, 64, 0)
	s.Commit(0)
	refuse(t, s, 1)
	s.Release(1)
	refuse(t, s, 65) // still refused with everything free: no waiting for it
	mustAlloc(t, s, 64, 0)
}

func TestStagingUncommittedRunsStay(t *testing.T) {
	s := newTestStaging(64)
	mustAlloc(t, s, 40, 0)
	s.Release(1 << 40) // nothing committed: nothing released
	refuse(t, s, 30)
	s.Commit(5)
	s.Release(5)
	refuse(t, s, 30)
	s.Release(6)
	mustAlloc(t, s, 20, 40)
	s.Commit(6)
	s.Release(7)
	mustAlloc(t, s, 30, 0) // empty again: 60..63 is too short, start over at 0
}

func TestStagingCommitBackwardsPanics(t *testing.T) {
	s := newTestStaging(64)
	s.Alloc(1)
	s.Commit(5)
	s.Alloc(1)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	s.Commit(4)
}

func TestStagingWords(t *testing.T) {
	s := newTestStaging(64)
	if w := s.Words(60, 4); len(w) != 4 || cap(w) != 4 {
		t.Errorf("Words(60, 4) = len %d cap %d", len(w), cap(w))
	}
	if w := s.Words(64, 0); w == nil || len(w) != 0 {
		t.Errorf("Words(64, 0) = %v", w)
	}
	for _, c := range [][2]uint32{{61, 4}, {65, 0}, {0, 65}, {TokenOffFeedback, 1}, {1, 0xFFFFFFFF}} {
		if w := s.Words(c[0], c[1]); w != nil {
			t.Errorf("Words(%d, %d) = %v, want nil", c[0], c[1], w)
		}
	}
}

// TestStagingModel checks random use against the rule that matters: a run
// handed out never overlaps a run whose record the device may still read,
// and once everything is released any run up to Cap fits.
func TestStagingModel(t *testing.T) {
	type run struct {
		off, n    int
		tag       uint64
		committed bool
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{64, 97, 256} {
		s := newTestStaging(size)
		var live []run
		var next, released uint64 // next submit index; device's consumer index
		for step := 0; step < 200_000; step++ {
			switch r := rng.IntN(10); {
			case r < 5:
				n := rng.IntN(size/3 + 1)
				off, buf, ok := s.Alloc(n)
				if !ok {
					continue
				}
				if int(off)+n > size || len(buf) != n {
					t.Fatalf("run %d+%d outside %d", off, n, size)
				}
				for _, l := range live {
					if n > 0 && l.n > 0 && int(off) < l.off+l.n && l.off < int(off)+n {
						t.Fatalf("size %d step %d: run %d+%d overlaps live run %+v", size, step, off, n, l)
					}
				}
				live = append(live, run{off: int(off), n: n})
			case r < 8:
				s.Commit(next)
				for i := range live {
					if !live[i].committed {
						live[i].committed, live[i].tag = true, next
					}
				}
				next++
			default:
				released += uint64(rng.IntN(int(next-released) + 1))
				s.Release(released)
				keep := live[:0]
				for _, l := range live {
					if !l.committed || l.tag >= released {
						keep = append(keep, l)
					}
				}
				live = keep
			}
			if len(live) == 0 {
				s.Release(next) // nothing outstanding: every word is free
				if _, _, ok := s.Alloc(size); !ok {
					t.Fatalf("size %d step %d: empty staging refused a full run", size, step)
				}
				s.Commit(next)
				next++
				s.Release(next)
				released = next
			}
		}
	}
}

func TestStagingPendingGrows(t *testing.T) {
	s := newTestStaging(1024)
	for i := range 1000 {
		mustAlloc(t, s, 1, uint32(i))
		s.Commit(uint64(i))
	}
	for i := range 1000 {
		s.Release(uint64(i + 1))
		if s.Used() != 999-i {
			t.Fatalf("after releasing %d: Used %d", i+1, s.Used())
		}
	}
}
