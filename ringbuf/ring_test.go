package ringbuf

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func newTestArena(t testing.TB, subCap, comCap, words int) *Arena {
	t.Helper()
	l, err := NewLayout(subCap, comCap, words)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewArena(HeapAllocator{}, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func TestRingFullEmpty(t *testing.T) {
	a := newTestArena(t, 4, 4, 64)
	r := a.Submit
	if _, _, ok := r.Next(); ok {
		t.Fatal("Next on an empty ring")
	}
	if r.Space() != 4 {
		t.Fatalf("Space %d", r.Space())
	}
	for i := range 4 {
		idx, b, ok := r.Reserve()
		if !ok || idx != uint64(i) || len(b) != SubmitSize {
			t.Fatalf("Reserve %d: %d %d %v", i, idx, len(b), ok)
		}
		(&SubmitRecord{Op: OpStep, ID: uint64(i)}).Put(b)
	}
	if _, _, ok := r.Reserve(); ok {
		t.Fatal("Reserve on a full ring")
	}
	if r.Space() != 0 || r.Produced() != 0 {
		t.Fatalf("Space %d Produced %d before Publish", r.Space(), r.Produced())
	}
	if _, _, ok := r.Next(); ok {
		t.Fatal("unpublished records are visible")
	}
	r.Publish()
	if r.Produced() != 4 {
		t.Fatalf("Produced %d", r.Produced())
	}
	var rec SubmitRecord
	for i := range 2 {
		idx, b, ok := r.Next()
		if rec.Get(b); !ok || idx != uint64(i) || rec.ID != uint64(i) {
			t.Fatalf("Next %d: %d %v %+v", i, idx, ok, rec)
		}
	}
	if _, _, ok := r.Reserve(); ok {
		t.Fatal("slots were reused before Done")
	}
	r.Done()
	if r.Consumed() != 2 || r.Space() != 2 {
		t.Fatalf("Consumed %d Space %d", r.Consumed(), r.Space())
	}
	// Wrap: indices 4 and 5 land in slots 0 and 1.
	for i := 4; i < 6; i++ {
		idx, b, ok := r.Reserve()
		if !ok || idx != uint64(i) || &b[0] != &r.recs[(i%4)*SubmitSize] {
			t.Fatalf("Reserve %d: %d %v", i, idx, ok)
		}
		(&SubmitRecord{Op: OpStep, ID: uint64(i)}).Put(b)
		r.Publish()
	}
	for i := 2; i < 6; i++ {
		idx, b, ok := r.Next()
		if rec.Get(b); !ok || idx != uint64(i) || rec.ID != uint64(i) {
			t.Fatalf("Next %d: %d %v %+v", i, idx, ok, rec)
		}
	}
	if _, _, ok := r.Next(); ok {
		t.Fatal("Next past the producer")
	}
	r.Done()
	if r.Consumed() != 6 || r.Space() != 4 {
		t.Fatalf("Consumed %d Space %d", r.Consumed(), r.Space())
	}
}

// payloadWord is what word j of record i's staging run holds.
func payloadWord(i uint64, j int) uint32 {
	x := i*0x9E3779B97F4A7C15 + uint64(j)*0xBF58476D1CE4E5B9
	x ^= x >> 31
	return uint32(x) ^ uint32(x>>32)
}

// stress passes n records from a producer goroutine to a consumer through
// the submit ring, each with a staging run of random size and a checksum.
// Both sides batch at random: the producer reserves several records before
// publishing, the consumer reads several before releasing.
func stress(t *testing.T, subCap, words, maxRun, n int) {
	a := newTestArena(t, subCap, MinCap, words)
	var wg sync.WaitGroup
	stopProducer := make(chan struct{})
	var fullWaits int
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(uint64(subCap), uint64(words)))
		var bo Backoff
		var rec SubmitRecord
		for i := 0; i < n; i++ {
			nw := rng.IntN(maxRun + 1)
			var off uint32
			var buf []uint32
			for {
				var ok bool
				if off, buf, ok = a.AllocStaging(nw); ok {
					break
				}
				// Never wait while holding unpublished records: the
				// consumer could be waiting for them.
				a.Submit.Publish()
				select {
				case <-stopProducer:
					return
				default:
				}
				bo.Wait()
			}
			bo.Reset()
			var sum uint32
			for j := range buf {
				buf[j] = payloadWord(uint64(i), j)
				sum = sum*31 + buf[j]
			}
			rec = SubmitRecord{Op: OpStep, Slot: uint32(i), ID: uint64(i), PayloadOff: off, PayloadLen: uint32(nw),
				StepTokens: sum, StepSample: uint32(rng.Uint64())}
			for {
				idx, b, ok := a.Submit.Reserve()
				if ok {
					if idx != uint64(i) {
						t.Errorf("reserved index %d for record %d", idx, i)
					}
					rec.Put(b)
					a.Staging.Commit(idx)
					break
				}
				fullWaits++
				a.Submit.Publish()
				select {
				case <-stopProducer:
					return
				default:
				}
				bo.Wait()
			}
			bo.Reset()
			if rng.IntN(4) != 0 {
				a.Submit.Publish()
			}
		}
		a.Submit.Publish()
	})
	defer wg.Wait()
	defer close(stopProducer)

	rng := rand.New(rand.NewPCG(7, uint64(n)))
	var bo Backoff
	var rec SubmitRecord
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < n; {
		idx, b, ok := a.Submit.Next()
		if !ok {
			a.Submit.Done()
			if time.Now().After(deadline) {
				t.Fatalf("stuck at record %d of %d", i, n)
			}
			bo.Wait()
			continue
		}
		bo.Reset()
		rec.Get(b)
		if idx != uint64(i) || rec.ID != uint64(i) || rec.Slot != uint32(i) || rec.Op != OpStep {
			t.Fatalf("record %d: index %d, %+v", i, idx, rec)
		}
		w := a.Staging.Words(rec.PayloadOff, rec.PayloadLen)
		if w == nil {
			t.Fatalf("record %d: payload %d+%d outside staging", i, rec.PayloadOff, rec.PayloadLen)
		}
		var sum uint32
		for j, x := range w {
			if x != payloadWord(uint64(i), j) {
				t.Fatalf("record %d: payload word %d is %#x, want %#x", i, j, x, payloadWord(uint64(i), j))
			}
			sum = sum*31 + x
		}
		if sum != rec.StepTokens {
			t.Fatalf("record %d: checksum %#x, want %#x", i, sum, rec.StepTokens)
		}
		i++
		if rng.IntN(3) == 0 {
			a.Submit.Done()
		}
	}
	a.Submit.Done()
	wg.Wait()
	if _, _, ok := a.Submit.Next(); ok {
		t.Fatal("records after the last")
	}
	t.Logf("cap %d: %d records, producer found the ring full %d times", subCap, n, fullWaits)
}

func stressCount() int {
	if testing.Short() {
		return 100_000
	}
	if raceEnabled {
		return 1_000_000
	}
	return 1_000_000
}

func TestRingStress(t *testing.T) {
	for _, c := range []struct{ cap, words, maxRun int }{
		{8, 97, 24},  // staging smaller than the ring's worth of runs: waits on staging
		{64, 256, 9}, // waits on the ring
	} {
		t.Run(fmt.Sprintf("cap%d", c.cap), func(t *testing.T) {
			stress(t, c.cap, c.words, c.maxRun, stressCount())
		})
	}
}
