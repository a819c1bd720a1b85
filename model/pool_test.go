package model

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPool: a region's work is done once, whoever joins; regions from
// several goroutines and nested regions run (alone, inline); rows are
// covered once each; idle helpers exit.
func TestPool(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newPool(3)
	for round := range 2000 {
		const items = 37
		var next, done atomic.Int32
		var hits [items]atomic.Int32
		p.do(func() {
			for {
				i := next.Add(1) - 1
				if i >= items {
					return
				}
				hits[i].Add(1)
				done.Add(1)
			}
		})
		if done.Load() != items {
			t.Fatalf("region %d returned with %d of %d items done", round, done.Load(), items)
		}
		for i := range hits {
			if hits[i].Load() != 1 {
				t.Fatalf("region %d: item %d done %d times", round, i, hits[i].Load())
			}
		}
		if round%500 == 0 {
			time.Sleep(2 * helperIdle) // helpers exit; the next region starts them
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				var outer, inner atomic.Int32
				p.do(func() {
					if outer.Add(1) == 1 {
						p.do(func() { inner.Add(1) })
					}
				})
				if n := inner.Load(); n != 1 {
					t.Errorf("a nested region ran %d times, want 1 (inline)", n)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, rows := range []int{1, 5, 12, 13, 100, 4864} {
		hits := make([]atomic.Int32, rows)
		p.parallelRows(rows, parallelMin, 12, func(lo, hi int) {
			if lo%12 != 0 {
				t.Errorf("chunk at %d not aligned to 12", lo)
			}
			for r := lo; r < hi; r++ {
				hits[r].Add(1)
			}
		})
		for r := range hits {
			if n := hits[r].Load(); n != 1 {
				t.Fatalf("%d rows: row %d ran %d times", rows, r, n)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d helpers still running after %v idle", n-before, 5*time.Second)
	}
}

// TestPoolStaleSignal: a signal on done that a helper of an earlier
// region sent late (it was off its core between its last decrement and
// its look at waiting) does not end the wait of a caller whose region
// still has a helper in it. The interleaving is forced, not timed: the
// stale signal goes in once the caller has blocked, and the helper only
// leaves after the caller has looked at active again.
func TestPoolStaleSignal(t *testing.T) {
	p := newPool(2)
	p.active.Store(1) // a helper still writing its chunk
	returned := make(chan int32, 1)
	go func() {
		p.awaitHelpers()
		returned <- p.active.Load()
	}()
	for p.blocks.Load() < 1 {
		runtime.Gosched()
	}
	p.done <- struct{}{} // the earlier region's helper
	for p.blocks.Load() < 2 {
		select {
		case n := <-returned:
			t.Fatalf("the caller stopped waiting on a stale signal, %d helper(s) still in the region", n)
		default:
			runtime.Gosched()
		}
	}
	// The helper finishes its chunk and leaves as help does.
	if p.active.Add(-1) == 0 && p.waiting.Load() {
		select {
		case p.done <- struct{}{}:
		default:
		}
	}
	if n := <-returned; n != 0 {
		t.Fatalf("the caller returned with %d helper(s) in the region", n)
	}
	if p.waiting.Load() {
		t.Fatal("waiting still set after the wait")
	}
}

// BenchmarkPoolRegion is the cost of an empty region on every core.
func BenchmarkPoolRegion(b *testing.B) {
	p := newPool(runtime.GOMAXPROCS(0))
	for b.Loop() {
		p.do(func() {})
	}
}
