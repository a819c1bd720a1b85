package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/kernels/cpu"
	"ringlm/ringbuf"
	"ringlm/sample"
	"ringlm/synth"
)

// stepClock measures steps on the device's own clock (StepHook), so the
// figure does not depend on when a test goroutine gets to look.
//
// At step pauseAt the hook holds the engine loop (only a benchmark may
// block a StepHook) until the benchmark calls resume, so no step runs,
// and no request uses up tokens, while the benchmark collects garbage or
// reads the allocation counters. Once armed, the window opens at the
// first step that holds the whole batch and closes want such steps
// later, or early at a step that does not (a request ran out of tokens):
// only steady state is timed.
type stepClock struct {
	mu       sync.Mutex
	steps    int // steps completed
	full     int // entries of a full-batch step
	maxSeen  int // most entries in one step
	want     int // full-batch steps to measure
	pauseAt  int // the step after which the hook waits for resume
	paused   chan struct{}
	resumed  chan struct{}
	armed    bool
	open     bool
	t0, t1   uint64
	measured int           // full-batch steps in the window, ending at t1
	done     chan struct{} // closed when the window closes
	closed   bool
	early    int // entries of the step that closed the window early, if one did
}

func newStepClock(full, want, pauseAt int) *stepClock {
	return &stepClock{full: full, want: want, pauseAt: max(1, pauseAt), paused: make(chan struct{}),
		resumed: make(chan struct{}), done: make(chan struct{})}
}

func (c *stepClock) hook(_ uint64, entries int, _, end uint64) {
	c.mu.Lock()
	c.steps++
	c.maxSeen = max(c.maxSeen, entries)
	if c.steps == c.pauseAt {
		paused, resumed := c.paused, c.resumed
		c.mu.Unlock()
		close(paused)
		<-resumed
		return
	}
	defer c.mu.Unlock()
	if !c.armed || c.closed {
		return
	}
	full := entries >= c.full
	switch {
	case !c.open:
		if full {
			c.open, c.t0, c.t1 = true, end, end
		}
	case !full:
		c.early = entries
		c.close()
	default:
		c.t1 = end
		c.measured++
		if c.measured >= c.want {
			c.close()
		}
	}
}

// resume lets the engine loop go on, to pause again after step next
// (0: never), and arms the window if arm.
func (c *stepClock) resume(next int, arm bool) {
	c.mu.Lock()
	resumed := c.resumed
	c.pauseAt, c.armed = next, arm
	c.paused, c.resumed = nil, nil
	if next > 0 { // none is made for the window: it would count
		c.paused, c.resumed = make(chan struct{}), make(chan struct{})
	}
	c.mu.Unlock()
	close(resumed)
}

func (c *stepClock) close() {
	c.closed = true
	close(c.done)
}

func (c *stepClock) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.steps
}

// decodeBench says how benchDecode runs.
type decodeBench struct {
	batch, vocab int
	readers      bool // a reader goroutine per request, else one drainer
	// warm is how many steps run before the benchmark collects garbage
	// (64 more run before it arms the window): admission and the first
	// growth of every buffer are over by then.
	warm int
	// slack is how many more tokens than warm + 64 + b.N each request
	// may generate: room for admissions that straggle (a submitter that
	// the Go scheduler holds back), so that the batch stays complete for
	// b.N steps even then.
	slack int
}

// benchDecode keeps batch requests decoding, times b.N full-batch steps
// on the device clock after the warm-up and counts the allocations of the
// steps run meanwhile; then it cancels the requests. newEngine gets the
// step hook and the tokens each request generates at most.
func benchDecode(b *testing.B, newEngine func(hook func(uint64, int, uint64, uint64), maxTokens int) *Engine, d decodeBench) {
	const settle = 64
	clock := newStepClock(d.batch, b.N, d.warm)
	maxTokens := d.warm + settle + b.N + d.slack
	e := newEngine(clock.hook, maxTokens)
	defer e.Close()
	p := sample.Defaults()
	p.Temperature = 0
	p.MaxTokens = maxTokens
	var done sync.WaitGroup
	streams := make([]*Stream, d.batch)
	for i := range streams {
		prompt := []int32{int32(i % d.vocab), 1, 2, 3}
		s, err := e.Submit(context.Background(), Request{Prompt: prompt, Params: p, IgnoreEOS: true})
		if err != nil {
			b.Fatal(err)
		}
		streams[i] = s
	}
	if d.readers {
		for _, s := range streams {
			done.Add(1)
			go func() { // a reader per request, as a server has
				defer done.Done()
				buf := make([]Token, 0, streamBuffer)
				for {
					var fin bool
					buf, fin, _ = s.Recv(context.Background(), buf[:0])
					if fin {
						return
					}
				}
			}()
		}
	} else {
		// One goroutine drains every stream without blocking every 200 µs:
		// what the engine costs without a wake-up per token.
		done.Add(1)
		go func() {
			defer done.Done()
			expired, cancel := context.WithCancel(context.Background())
			cancel()
			buf := make([]Token, 0, 256)
			for {
				open := 0
				for _, s := range streams {
					var fin bool
					buf, fin, _ = s.Recv(expired, buf[:0])
					if !fin {
						open++
					}
				}
				if open == 0 {
					return
				}
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}
	// All requests ended on their own: the window can close no later.
	allEnded := make(chan struct{})
	go func() {
		for _, s := range streams {
			<-s.Done()
		}
		close(allEnded)
	}()
	pause := func() bool { // false: every request ended instead
		clock.mu.Lock()
		paused := clock.paused
		clock.mu.Unlock()
		select {
		case <-paused:
			return true
		case <-allEnded:
			return false
		}
	}
	var m0, m1 runtime.MemStats
	steps0 := 0
	if pause() {
		// Collect the garbage of the set-up (and of the previous run) now
		// rather than during the window, then let the runtime's caches
		// that a collection empties (sudogs for select) fill again before
		// allocations are counted.
		runtime.GC()
		clock.resume(d.warm+settle, false)
		if pause() {
			runtime.ReadMemStats(&m0)
			steps0 = clock.count()
			clock.resume(0, true)
		}
	}
	b.ResetTimer()
	select {
	case <-clock.done:
	case <-allEnded:
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	steps1 := clock.count()
	for _, s := range streams {
		s.Cancel()
	}
	done.Wait()
	<-allEnded
	clock.mu.Lock()
	steps, ns, maxSeen, early := clock.measured, float64(clock.t1-clock.t0), clock.maxSeen, clock.early
	clock.mu.Unlock()
	if steps == 0 {
		b.Fatalf("no full-batch step measured: %d steps, at most %d of %d entries in one", steps1, maxSeen, d.batch)
	}
	if steps < b.N {
		b.Logf("only %d of %d full-batch steps measured: the window closed at a step of %d entries", steps, b.N, early)
	}
	if gcs := m1.NumGC - m0.NumGC; gcs > 0 {
		b.Logf("%d GC cycles ran in the window", gcs)
	}
	b.ReportMetric(ns/1e3/float64(steps), "µs/step")
	b.ReportMetric(float64(d.batch)*float64(steps)/(ns/1e9), "tok/s")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(max(1, steps1-steps0)), "allocs/step")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkNullStep measures the scheduler and both rings alone: the null
// device completes every step at once.
func BenchmarkNullStep(b *testing.B) {
	for _, readers := range []bool{false, true} {
		for _, batch := range []int{1, 64, 256} {
			name := fmt.Sprintf("batch%d/drainer", batch)
			if readers {
				name = fmt.Sprintf("batch%d/readers", batch)
			}
			b.Run(name, func(b *testing.B) {
				benchDecode(b, func(hook func(uint64, int, uint64, uint64), maxTokens int) *Engine {
					// The rings in pre-faulted memory, as the engine maps them by
					// default (HeapAllocator's fresh pages would fault during the
					// first lap around the staging area).
					return newNullEngine(b, Config{Slots: batch, NumBlocks: batch * ((maxTokens+4)/16 + 2), Vocab: 32000,
						Context: maxTokens + 4, TokenBudget: 2 * batch, StepHook: hook, Allocator: ringbuf.NewMmapAllocator()})
				}, decodeBench{batch: batch, vocab: 32000, readers: readers, warm: 16 + 256, slack: 2048})
			})
		}
	}
}

// BenchmarkCPUDecode measures CPU-device decode throughput on the tiny
// preset (3.4M parameters, F16) through the whole engine.
func BenchmarkCPUDecode(b *testing.B) {
	s, _ := synth.Lookup("tiny", "llama")
	m := testmodel.Open(b, testmodel.Write(b, s, gguf.TypeF16, 1))
	for _, batch := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			benchDecode(b, func(hook func(uint64, int, uint64, uint64), maxTokens int) *Engine {
				blocks := batch * ((maxTokens+4)/16 + 2)
				dev, err := cpu.New(m, gguf.TypeF16, blocks, 16, batch)
				if err != nil {
					b.Fatal(err)
				}
				e, err := New(Config{Slots: batch, NumBlocks: blocks, Vocab: m.Vocab, Context: m.Context,
					Allocator: ringbuf.HeapAllocator{}, StepHook: hook}, dev)
				if err != nil {
					b.Fatal(err)
				}
				return e
			}, decodeBench{batch: batch, vocab: m.Vocab, readers: true, warm: 16, slack: 64})
		})
	}
}
