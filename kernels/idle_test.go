package kernels_test

import (
	"testing"
	"time"

	"ringlm/kernels"
	"ringlm/kernels/conformance"
	"ringlm/ringbuf"
)

// An idle executor parks on Notify with no timer. The test waits until it
// has parked, then watches it for 200 ms: any wake-up (a polling timer
// would give 20 at the old 10 ms) parks it again and counts. No duration
// is asserted, so a slow machine cannot fail it. A parked executor still
// answers what is pushed next: Notify alone wakes it.
func TestIdleExecutorParks(t *testing.T) {
	const vocab, bs, pool = 100, 4, 16
	be := newNull(vocab, pool, bs)
	var dev *kernels.Device
	f := conformance.Factory{Name: "backend", New: func(tb testing.TB, c conformance.Config) (conformance.Device, ringbuf.Allocator, func() error) {
		dev = kernels.NewDevice("backend", be, c.Slots, c.Blocks)
		return &backendDevice{Device: dev, Backend: be, bs: bs}, ringbuf.HeapAllocator{}, nil
	}}
	h := conformance.NewHost(t, f, conformance.Config{Slots: 2, Blocks: pool, SubmitCap: 8, Staging: 256,
		ComplCap: ringbuf.MinCompletionCap(2)})
	stillParked := func(when string) {
		t.Helper()
		h.WaitUntil("the executor to park", func() bool { p, _ := dev.ParkState(); return p })
		_, n := dev.ParkState()
		time.Sleep(200 * time.Millisecond)
		if p, got := dev.ParkState(); got != n || !p {
			t.Errorf("%s: the idle executor woke %d times in 200 ms (parked now: %v)", when, got-n, p)
		}
	}
	stillParked("after start")
	h.Open(0, params(7), nil, nil, nil)
	h.Grant(0, 0, 0, 1)
	a := h.Step(pre(0, true, 1, 2, 3))
	b := h.Step(fb(0))
	match(t, h.Sync(), []ringbuf.Completion{tok(a, 0, nullTok(7, 3, vocab), 3, 0), done(a, 1),
		tok(b, 0, nullTok(7, 4, vocab), 4, 0), done(b, 1)})
	stillParked("after steps")
	c := h.Close(0)
	match(t, h.Sync(), []ringbuf.Completion{closed(c, 0)})
	stillParked("after a close")
	h.Stop()
	be.check(t)
}
