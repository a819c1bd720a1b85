package model

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// pool runs the parallel regions of a step (a product's row ranges,
// attention's work items) on p.workers goroutines: the caller and helpers
// that stay between regions. A region's function takes its work from a
// shared counter until none is left, so the caller alone can do all of
// it: helpers that join in time share it, and one that a neighbour's job
// keeps off its core is not waited for. A decode step is a few hundred
// short regions back to back, so a helper waits for the next one spinning
// (yielding to other goroutines) for helperSpin, then parks; one parked
// for helperIdle exits, and the next region starts it again, so an idle
// process keeps no goroutines of it. Work is split by output rows or
// items only, so the arithmetic of each output is the same whatever the
// split.
type pool struct {
	workers int
	// mu makes regions one at a time; a caller that finds it held (another
	// model's step, on another goroutine) runs its region alone.
	mu     sync.Mutex
	gen    atomic.Uint64 // regions started
	fn     func()
	open   atomic.Bool  // helpers may join the current region
	active atomic.Int32 // helpers in the current region
	// waiting says the caller has stopped spinning for the helpers and
	// waits on done, which the last one out signals. A signal says only
	// that active reached 0 once: it may come from a helper of an earlier
	// region that read waiting late, so the caller looks at active again.
	waiting atomic.Bool
	done    chan struct{}
	blocks  atomic.Uint64 // times a caller blocked on done (tests)
	// helpers are the workers but the caller.
	helpers []helper
}

type helper struct {
	alive atomic.Bool // a goroutine runs this helper
	wake  chan struct{}
}

const (
	helperSpin = 100 * time.Microsecond
	helperIdle = 100 * time.Millisecond
)

var defaultPool = newPool(runtime.GOMAXPROCS(0))

func newPool(workers int) *pool {
	p := &pool{workers: workers, helpers: make([]helper, max(0, workers-1)), done: make(chan struct{}, 1)}
	for i := range p.helpers {
		p.helpers[i].wake = make(chan struct{}, 1)
	}
	return p
}

// do calls fn on the caller and on the helpers that join the region in
// time, and returns when every call has; fn must take its work from a
// shared counter until none is left.
func (p *pool) do(fn func()) {
	if len(p.helpers) == 0 || !p.mu.TryLock() {
		fn()
		return
	}
	defer p.mu.Unlock()
	p.fn = fn
	p.open.Store(true)
	g := p.gen.Add(1)
	for i := range p.helpers {
		h := &p.helpers[i]
		if h.alive.Load() || !h.alive.CompareAndSwap(false, true) {
			select {
			case h.wake <- struct{}{}:
			default: // a wake is pending: the helper looks at gen after it
			}
			continue
		}
		go p.help(h, g-1)
	}
	fn()
	p.open.Store(false)
	p.awaitHelpers()
	p.fn = nil
}

// awaitHelpers waits for the helpers still in the region: spinning a
// little (they are usually finishing a chunk), then blocked, so that a
// helper the OS has taken off its core for a time slice gets the core
// back instead of the caller spinning through it. It returns only once
// it has seen active at 0 (the region's outputs are all written): a
// signal on done can be stale, sent by a helper of an earlier region
// that was taken off its core between its last decrement and its look
// at waiting, and returning on it would let the step read outputs a
// helper is still writing.
func (p *pool) awaitHelpers() {
	select {
	case <-p.done: // a signal left from a region that finished unwaited
	default:
	}
	for i := range 256 {
		if p.active.Load() == 0 {
			return
		}
		if i%64 == 63 {
			yield()
		}
	}
	p.waiting.Store(true)
	// The helper whose decrement brings active to 0 after this load sees
	// waiting set and signals (or finds a stale signal pending, which
	// wakes this loop as well): no wake-up is lost.
	for p.active.Load() != 0 {
		p.blocks.Add(1)
		<-p.done
	}
	p.waiting.Store(false)
}

// help is a helper's goroutine: it joins every region after generation
// last it sees open, spinning between them for helperSpin, then parked,
// until it has been idle for helperIdle.
func (p *pool) help(h *helper, last uint64) {
	for {
		if g := p.spin(last); g != last {
			last = g
			p.active.Add(1)
			if p.open.Load() {
				p.fn()
			}
			if p.active.Add(-1) == 0 && p.waiting.Load() {
				select {
				case p.done <- struct{}{}:
				default:
				}
			}
			continue
		}
		t := time.NewTimer(helperIdle)
		select {
		case <-h.wake: // then spin, which looks at gen
			t.Stop()
		case <-t.C:
			h.alive.Store(false)
			// A region may have started while alive was still true, sure
			// of this goroutine: stay for it unless do started another.
			if p.gen.Load() == last || !h.alive.CompareAndSwap(false, true) {
				return
			}
		}
	}
}

// spin waits up to helperSpin for a region after generation last and
// returns the current generation.
func (p *pool) spin(last uint64) uint64 {
	deadline := time.Now().Add(helperSpin)
	for i := 0; ; i++ {
		if g := p.gen.Load(); g != last {
			return g
		}
		if i%64 == 63 {
			if time.Now().After(deadline) {
				return last
			}
			yield()
		}
	}
}

// parallelRows calls fn(lo, hi) over [0, rows) in chunks, on up to
// p.workers goroutines; small products (rows × costPerRow multiply-adds)
// run inline. Chunks are whole multiples of align rows (a kernel's tile)
// but for the last. A worker that is free takes 1/(2·workers) of the
// rows left (guided scheduling): the chunks shrink towards the end of the
// region, so that the workers finish together although a helper joins a
// few microseconds late, or a neighbour's job holds one core for a while.
func (p *pool) parallelRows(rows, costPerRow, align int, fn func(lo, hi int)) {
	p.parallelParts([]int{rows}, costPerRow, align, func(_, lo, hi int) { fn(lo, hi) })
}

// parallelParts is parallelRows over several parts at once (the products
// of one input, matmuls): fn(i, lo, hi) for rows [lo, hi) of part i, of
// rows[i]; a chunk never spans two parts, and each part's chunks are
// aligned from its first row.
func (p *pool) parallelParts(rows []int, costPerRow, align int, fn func(i, lo, hi int)) {
	total := 0
	for _, r := range rows {
		total += r
	}
	w := p.workers
	if w <= 1 || total*costPerRow < parallelMin {
		for i, r := range rows {
			fn(i, 0, r)
		}
		return
	}
	var next atomic.Int64 // rows taken, counting the parts in order
	p.do(func() {
		for {
			g := int(next.Load())
			if g >= total {
				return
			}
			i, base := 0, 0
			for g >= base+rows[i] {
				base += rows[i]
				i++
			}
			n := max(align, (total-g)/(2*w)/align*align)
			end := min(g+n, base+rows[i])
			if next.CompareAndSwap(int64(g), int64(end)) {
				fn(i, g-base, end-base)
			}
		}
	})
}

// run calls fn on the workers at once (inline when the work, in
// multiply-adds, is too small to share); fn takes its work from a shared
// counter until none is left.
func (p *pool) run(cost int, fn func()) {
	if p.workers <= 1 || cost < parallelMin {
		fn()
		return
	}
	p.do(fn)
}

// parallelMin is the multiply-adds below which a region runs inline:
// about the work of 10 µs, against the region's few µs of overhead.
const parallelMin = 1 << 16
