package engine

import (
	"context"
	"errors"
	"slices"
	"testing"

	"ringlm/kernels"
	"ringlm/kernels/null"
	"ringlm/ringbuf"
	"ringlm/sample"
)

// faultyDevice is the null device whose forward pass fails for any batch
// holding the poison token: the executor answers each entry of the batch
// with ERROR (CodeDevice).
type faultyDevice struct {
	*kernels.Device
	vocab  int
	poison int32
}

func newFaultyDevice(vocab, blocks, slots int, poison int32) *faultyDevice {
	d := &faultyDevice{vocab: vocab, poison: poison}
	d.Device = kernels.NewDevice("faulty-null", d, slots, blocks)
	return d
}

func (d *faultyDevice) Vocab() int     { return d.vocab }
func (d *faultyDevice) BlockSize() int { return DefaultBlockSize }
func (d *faultyDevice) Pick(_ int, seed uint64, pos int) int32 {
	return null.Token(seed, pos, d.vocab)
}
func (d *faultyDevice) Forward(batch []kernels.Entry) error {
	for _, e := range batch {
		if slices.Contains(e.Tokens, d.poison) {
			return errors.New("simulated fault")
		}
	}
	return nil
}

// A step the device fails ends its request with ErrDevice and closes its
// slot on the device, so the slot serves the next request. (The ERROR of
// step n once matched the OPEN_SLOT with host sequence number n, and the
// slot was freed on the host while still open on the device: the next
// OPEN failed with SLOT_STATE.)
func TestFailedStepClosesSlot(t *testing.T) {
	const vocab, poison = 1000, 999
	dev := newFaultyDevice(vocab, 64, 1, poison)
	e, err := New(Config{Slots: 1, NumBlocks: 64, Vocab: vocab, Context: 1024, Allocator: ringbuf.HeapAllocator{}}, dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	run := func(prompt []int32, top int) ([]Token, Finish, error) {
		p := sample.Defaults()
		p.MaxTokens, p.Logprobs, p.TopLogprobs = 5, top > 0, top
		s, err := e.Submit(context.Background(), Request{Prompt: prompt, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		toks := collect(t, s)
		f, err := s.Finish()
		return toks, f, err
	}
	for i := range 3 {
		if _, f, err := run([]int32{1, poison, 3}, i); f != FinishError || !errors.Is(err, ErrDevice) {
			t.Fatalf("poisoned request %d: finish %v %v", i, f, err)
		}
		if toks, f, err := run([]int32{1, 2, 3}, i); f != FinishLength || err != nil || len(toks) != 5 {
			t.Fatalf("request %d after a device error: %d tokens, finish %v %v", i, len(toks), f, err)
		}
	}
	if st := e.Stats(); st.Failed != 3 {
		t.Errorf("%d failed requests counted, want 3", st.Failed)
	}
	waitFor(t, func() bool { return e.Stats().Running == 0 && e.Stats().Blocks.Used == 0 })
}
