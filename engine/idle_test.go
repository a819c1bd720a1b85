package engine

import (
	"context"
	"testing"
	"time"

	"ringlm/sample"
)

// An idle engine parks its loop on its channels alone: no timer wakes it.
// The test waits (with the generous deadline of waitFor) until the loop
// has parked, then watches it for 200 ms: any wake-up, however late,
// would park it again and count. No duration is asserted, so a slow
// machine cannot fail it; a loop that polled would wake 100 times.
func TestIdleLoopParks(t *testing.T) {
	e := newNullEngine(t, Config{})
	stillParked := func(when string) {
		t.Helper()
		waitFor(t, e.parked.Load)
		n := e.parks.Load()
		time.Sleep(200 * time.Millisecond)
		if got := e.parks.Load(); got != n || !e.parked.Load() {
			t.Errorf("%s: the idle loop woke %d times in 200 ms (parked now: %v)", when, got-n, e.parked.Load())
		}
	}
	stillParked("after start")

	p := sample.Defaults()
	p.MaxTokens = 8
	run := func() {
		s, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2, 3}, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		if toks := collect(t, s); len(toks) != 8 {
			t.Fatalf("%d tokens, want 8", len(toks))
		}
	}
	// A parked loop wakes for Submit (no timer would ever do it).
	run()
	stillParked("after a request")
	run()

	// A cancelled request (or, on this quick device, one that finished
	// first): its CLOSE_SLOT is answered, then nothing is owed.
	p.MaxTokens = 4000
	ctx, cancel := context.WithCancel(context.Background())
	s, err := e.Submit(ctx, Request{Prompt: []int32{4, 5, 6}, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	toks, _, err := s.Recv(context.Background(), nil)
	if err != nil || len(toks) == 0 {
		t.Fatalf("first tokens: %d, %v", len(toks), err)
	}
	cancel()
	collectErr(s)
	// The null device is quick: the request may have finished first.
	if f, _ := s.Finish(); f != FinishCancelled && f != FinishLength {
		t.Fatalf("finish %v after a cancel", f)
	}
	waitFor(t, func() bool { return e.Stats().Running == 0 })
	stillParked("after a cancel")
	if st := e.Stats(); st.Blocks.Used != 0 {
		t.Errorf("%d KV blocks still used", st.Blocks.Used)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
