package kernels_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"ringlm/kernels"
	"ringlm/kernels/conformance"
	"ringlm/kernels/null"
	"ringlm/ringbuf"
	"ringlm/sample"
)

// These tests run the protocol suite (package conformance) on the Go
// executor over test backends, with the arena in Go heap memory so the
// race detector sees both sides, and check what only a Go backend can
// show: the batches the executor hands it, a failing forward pass, and
// its sampling against sample.Sampler. kernels/cpu runs the suite on the
// CPU device; kernels/cuda runs it on the GPU and diffs it against the
// CPU device.

// --- backends ---

// recorder keeps a copy of every batch a backend was given and fails
// Forward when an entry's tokens start with the poison sequence.
type recorder struct {
	poison []int32 // nil: never fail
	mu     sync.Mutex
	calls  [][]kernels.Entry
	bad    []string // inconsistencies the backend saw
}

func (r *recorder) forward(batch []kernels.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cp := make([]kernels.Entry, len(batch))
	for i, e := range batch {
		cp[i] = kernels.Entry{Slot: e.Slot, Tokens: slices.Clone(e.Tokens), Pos: e.Pos, Blocks: slices.Clone(e.Blocks)}
		if e.Logits != nil {
			cp[i].Logits = []float32{} // non-nil: logits were asked for
		}
	}
	r.calls = append(r.calls, cp)
	for _, e := range batch {
		if r.poison != nil && len(e.Tokens) >= len(r.poison) && slices.Equal(e.Tokens[:len(r.poison)], r.poison) {
			return errors.New("poisoned batch")
		}
	}
	return nil
}

func (r *recorder) complain(format string, args ...any) {
	r.mu.Lock()
	r.bad = append(r.bad, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// takeCalls returns the batches recorded since the last call.
func (r *recorder) takeCalls() [][]kernels.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bad {
		t.Error("backend: " + b)
	}
}

// nullBackend is the null device (a Picker: tokens are null.Token(seed,
// pos, vocab)) with a recorder.
type nullBackend struct {
	*null.Device
	recorder
}

func newNull(vocab, numBlocks, blockSize int) *nullBackend {
	return &nullBackend{Device: null.New(vocab, numBlocks, blockSize, 0)}
}

// Name names the backend (it embeds a whole null device, whose Name
// would do too).
func (b *nullBackend) Name() string { return "null+recorder" }

func (b *nullBackend) Forward(batch []kernels.Entry) error {
	if err := b.forward(batch); err != nil {
		return err
	}
	return b.Device.Forward(batch)
}

// logitsBackend is a model in miniature: it keeps a paged KV pool of token
// ids, writes each entry's tokens through the entry's block table and makes
// the logits after position p a hash of the tokens at positions 0..p, read
// back through the block table. So the logits depend only on the
// sequence, whatever the batching, chunking, slot or blocks, as a real
// model's do; a token never written (a wrong block table or position)
// is reported.
type logitsBackend struct {
	recorder
	vocab, bs int
	kv        []int32
	// finite > 0: only tokens below it get a finite logit, the others
	// -Inf (fewer candidates than a slot may ask alternatives for).
	finite int
	lim    kernels.Limits
	// skew, when set, changes the logits as another device's numerics
	// would (a function of the sequence, so batch invariance holds).
	skew func(logits []float32, h uint64)
}

func newLogits(vocab, numBlocks, blockSize int) *logitsBackend {
	b := &logitsBackend{vocab: vocab, bs: blockSize, kv: make([]int32, numBlocks*blockSize)}
	for i := range b.kv {
		b.kv[i] = -1
	}
	return b
}

func (b *logitsBackend) Vocab() int             { return b.vocab }
func (b *logitsBackend) BlockSize() int         { return b.bs }
func (b *logitsBackend) Limits() kernels.Limits { return b.lim }

func (b *logitsBackend) cell(e *kernels.Entry, p int) (int, bool) {
	if p/b.bs >= len(e.Blocks) {
		b.complain("slot %d: position %d beyond its %d blocks", e.Slot, p, len(e.Blocks))
		return 0, false
	}
	return int(e.Blocks[p/b.bs])*b.bs + p%b.bs, true
}

func (b *logitsBackend) Forward(batch []kernels.Entry) error {
	if err := b.forward(batch); err != nil {
		return err
	}
	for i := range batch {
		e := &batch[i]
		for j, t := range e.Tokens {
			c, ok := b.cell(e, e.Pos+j)
			if !ok {
				return errors.New("bad block table")
			}
			b.kv[c] = t
		}
	}
	for i := range batch {
		e := &batch[i]
		if e.Logits == nil {
			continue
		}
		if len(e.Logits) != b.vocab {
			b.complain("slot %d: %d logits, vocab %d", e.Slot, len(e.Logits), b.vocab)
			continue
		}
		h := uint64(0x243F6A8885A308D3)
		last := e.Pos + len(e.Tokens) - 1
		for p := 0; p <= last; p++ {
			c, ok := b.cell(e, p)
			if !ok {
				return errors.New("bad block table")
			}
			if b.kv[c] < 0 {
				b.complain("slot %d: position %d was never written", e.Slot, p)
			}
			h = logitsHash(h, b.kv[c], p)
		}
		fillLogits(e.Logits, h, b.finite)
		if b.skew != nil {
			b.skew(e.Logits, h)
		}
	}
	return nil
}

// logitsHash and fillLogits are logitsBackend's model: the logits after
// the tokens seq[0..p] are fillLogits of the hash chained over them, so
// a test can compute them from the sequence alone (logitsOf).
func logitsHash(h uint64, tok int32, pos int) uint64 {
	return mix(h ^ uint64(uint32(tok)) ^ uint64(pos)<<32)
}

func fillLogits(logits []float32, h uint64, finite int) {
	for j := range logits {
		logits[j] = float32(mix(h^uint64(j)*0x9E3779B97F4A7C15)>>40) / (1 << 24) * 3
		if finite > 0 && j >= finite {
			logits[j] = float32(math.Inf(-1))
		}
	}
}

func logitsOf(seq []int32, vocab, finite int) []float32 {
	h := uint64(0x243F6A8885A308D3)
	for p, t := range seq {
		h = logitsHash(h, t, p)
	}
	l := make([]float32, vocab)
	fillLogits(l, h, finite)
	return l
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// --- devices for the suite ---

// backendDevice is a test backend as a device the suite can open.
type backendDevice struct {
	*kernels.Device
	kernels.Backend
	bs int
}

func (d *backendDevice) BlockSize() int { return d.bs }

// nullFactory opens null devices (with a recorder) for the suite.
func nullFactory(t *testing.T) conformance.Factory {
	return conformance.Factory{Name: "null", NoLogits: true, New: func(tb testing.TB, c conformance.Config) (conformance.Device, ringbuf.Allocator, func() error) {
		be := newNull(1000, c.Blocks, c.BlockSize)
		be.SetLimits(kernels.Limits{Context: c.Context, MaxStepTokens: c.MaxStepTokens})
		tb.Cleanup(func() { be.check(t) })
		return &backendDevice{Device: kernels.NewDevice("null", be, c.Slots, c.Blocks), Backend: be, bs: c.BlockSize}, ringbuf.HeapAllocator{}, nil
	}}
}

// logitsFactory opens logits devices for the suite: a model in miniature
// that reports any position read before it was written.
func logitsFactory(t *testing.T, vocab int) conformance.Factory {
	return skewedFactory(t, vocab, "logits", nil)
}

// skewedFactory opens logits devices whose logits skew changes.
func skewedFactory(t *testing.T, vocab int, name string, skew func([]float32, uint64)) conformance.Factory {
	return conformance.Factory{Name: name, New: func(tb testing.TB, c conformance.Config) (conformance.Device, ringbuf.Allocator, func() error) {
		be := newLogits(vocab, c.Blocks, c.BlockSize)
		be.skew = skew
		be.lim = kernels.Limits{Context: c.Context, MaxStepTokens: c.MaxStepTokens}
		tb.Cleanup(func() { be.check(t) })
		return &backendDevice{Device: kernels.NewDevice("logits", be, c.Slots, c.Blocks), Backend: be, bs: c.BlockSize}, ringbuf.HeapAllocator{}, nil
	}}
}

// TestConformance runs the protocol suite on the executor over the null
// device's tokens and over the logits backend.
func TestConformance(t *testing.T) {
	t.Run("null", func(t *testing.T) { conformance.Run(t, nullFactory(t)) })
	t.Run("logits", func(t *testing.T) { conformance.Run(t, logitsFactory(t, 97)) })
}

// TestDiffSelf: Diff of a device against itself finds nothing, and Diff
// of two devices that sample differently fails (checked through the
// scenario logs, not by failing this test).
func TestDiffSelf(t *testing.T) {
	st := conformance.Diff(t, logitsFactory(t, 97), logitsFactory(t, 97), conformance.Tolerance{})
	if st.GreedyTokens < 100 || st.SampledDiffer != 0 || st.MaxLogprobErr != 0 {
		t.Fatalf("diff of a device with itself: %+v", st)
	}
}

// jitter adds up to ±amp to every logit, as rounding in another device's
// arithmetic would: near ties (the logits are uniform in [0, 3), so the
// best two of 97 are some 0.03 apart) tip the other way.
func jitter(amp float32) func([]float32, uint64) {
	return func(l []float32, h uint64) {
		for j := range l {
			u := float32(mix(h^uint64(j)*0xD1B54A32D192ED03)>>40) / (1 << 24)
			l[j] += amp * (2*u - 1)
		}
	}
}

// demote is jitter that also, at one sequence in four, sinks the best
// token to the bottom: a device that is wrong, not rounding differently.
func demote(l []float32, h uint64) {
	jitter(0.01)(l, h)
	if mix(h^0x5EED)%4 != 0 {
		return
	}
	best := 0
	for j, v := range l {
		if v > l[best] {
			best = j
		}
	}
	l[best] = -10
}

// TestDiffTopK: Diff under the vLLM rule (Tolerance.TopK) holds a device
// whose logits differ by rounding-sized jitter to the logits device:
// greedy divergences happen and are accepted as near ties (judged from
// replays where a slot asked for no alternatives), everything else
// matches record by record. The same device fails a Diff that requires
// equal greedy tokens, and a device that sinks the best token fails the
// rule; both are checked in a child process, since Diff fails its test.
func TestDiffTopK(t *testing.T) {
	switch os.Getenv("RINGLM_DIFF_CASE") {
	case "strict":
		conformance.Diff(t, logitsFactory(t, 97), skewedFactory(t, 97, "jitter", jitter(0.01)), conformance.Tolerance{Logprob: 0.05})
		return
	case "demote":
		conformance.Diff(t, logitsFactory(t, 97), skewedFactory(t, 97, "demote", demote), conformance.Tolerance{Logprob: 0.05, TopK: 5})
		return
	}
	st := conformance.Diff(t, logitsFactory(t, 97), skewedFactory(t, 97, "jitter", jitter(0.01)), conformance.Tolerance{Logprob: 0.05, TopK: 5})
	if st.Divergences == 0 || st.Probes == 0 || st.Uncompared == 0 || st.GreedyTokens < 100 {
		t.Errorf("the jitter made no divergence to judge: %+v", st)
	}
	for c, want := range map[string]string{"strict": "greedy tokens", "demote": "beyond a near tie"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDiffTopK$", "-test.count=1")
		cmd.Env = append(os.Environ(), "RINGLM_DIFF_CASE="+c)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: %v, output lacks %q:\n%s", c, err, want, out)
		}
	}
}

// host opens a host over be for the executor-only tests.
func host(t *testing.T, be kernels.Backend, bs int, c conformance.Config) *conformance.Host {
	f := conformance.Factory{Name: "backend", New: func(tb testing.TB, c conformance.Config) (conformance.Device, ringbuf.Allocator, func() error) {
		return &backendDevice{Device: kernels.NewDevice("backend", be, c.Slots, c.Blocks), Backend: be, bs: bs}, ringbuf.HeapAllocator{}, nil
	}}
	if c.ComplCap == 0 {
		c.ComplCap = ringbuf.MinCompletionCap(c.Slots)
	}
	return conformance.NewHost(t, f, c)
}

var (
	tok     = conformance.Tok
	done    = conformance.Done
	errc    = conformance.Err
	skipped = conformance.Skipped
	closed  = conformance.Closed
	pre     = conformance.Pre
	fb      = conformance.FB
	match   = conformance.Match
)

// nullTok is the null device's token at pos.
func nullTok(seed uint64, pos, vocab int) uint32 { return uint32(null.Token(seed, pos, vocab)) }

func params(seed uint64) ringbuf.SlotParams {
	return ringbuf.SlotParams{Temperature: 0.8, TopP: 1, RepeatPenalty: 1, Seed: seed}
}

// TestBackendBatches: what the executor hands its backend for a prompt in
// three chunks (SAMPLE on the last only) and decode steps: each entry's
// tokens, position, block table, and logits only where it samples.
func TestBackendBatches(t *testing.T) {
	const vocab, bs = 1000, 4
	be := newNull(vocab, 16, bs)
	h := host(t, be, bs, conformance.Config{Slots: 4, Blocks: 16, SubmitCap: 4, Staging: 64})
	const seed = 0xABCDEF0123
	h.Open(1, params(seed), nil, nil, nil)
	h.Grant(1, 0, 5, 3) // positions 0..7
	match(t, h.Sync(), nil)
	if c := be.takeCalls(); len(c) != 0 {
		t.Fatalf("Forward called for OPEN/GRANT: %v", c)
	}

	prompt := []uint32{11, 22, 33, 44, 55, 66, 77}
	s1 := h.Step(pre(1, false, prompt[:3]...))
	s2 := h.Step(pre(1, false, prompt[3:5]...))
	s3 := h.Step(pre(1, true, prompt[5:]...))
	t7 := nullTok(seed, 7, vocab)
	match(t, h.Sync(), []ringbuf.Completion{done(s1, 1), done(s2, 1), tok(s3, 1, t7, 7, 0), done(s3, 1)})
	blocks := []int32{5, 3}
	want := [][]kernels.Entry{
		{{Slot: 1, Tokens: []int32{11, 22, 33}, Pos: 0, Blocks: blocks}},
		{{Slot: 1, Tokens: []int32{44, 55}, Pos: 3, Blocks: blocks}},
		{{Slot: 1, Tokens: []int32{66, 77}, Pos: 5, Blocks: blocks}}, // a Picker: no logits
	}
	checkCalls(t, be.takeCalls(), want)

	// Decode: feedback entries queued ahead, blocks granted ahead.
	h.Grant(1, 2, 9, 0)
	var wantC []ringbuf.Completion
	last := t7
	want = nil
	for pos := 8; pos <= 14; pos++ {
		id := h.Step(fb(1))
		tk := nullTok(seed, pos, vocab)
		wantC = append(wantC, tok(id, 1, tk, uint32(pos), 0), done(id, 1))
		want = append(want, []kernels.Entry{{Slot: 1, Tokens: []int32{int32(last)}, Pos: pos - 1, Blocks: []int32{5, 3, 9, 0}}})
		last = tk
	}
	match(t, h.Sync(), wantC)
	checkCalls(t, be.takeCalls(), want)

	// An entry that fails never reaches the backend.
	h.Grant(1, 4, 1)
	h.Open(2, params(1), nil, nil, nil)
	h.Grant(2, 0, 2)
	a := h.Step(pre(2, true, 1, vocab, 2), fb(1))
	match(t, h.Sync(), []ringbuf.Completion{errc(a, 2, ringbuf.CodeBadToken, vocab), tok(a, 1, nullTok(seed, 15, vocab), 15, 0), done(a, 1)})
	for _, batch := range be.takeCalls() {
		for _, e := range batch {
			if e.Slot == 2 {
				t.Fatalf("slot 2 reached the backend: %+v", e)
			}
		}
	}
	c := h.Close(1)
	match(t, h.Stop(), []ringbuf.Completion{closed(c, 1)})
	be.check(t)
}

// checkCalls compares the batches a backend saw. Logits: nil means none
// were asked for, non-nil that they were.
func checkCalls(t *testing.T, got, want [][]kernels.Entry) {
	t.Helper()
	f := func(bs [][]kernels.Entry) string {
		var b strings.Builder
		for _, batch := range bs {
			b.WriteString("\t[")
			for _, e := range batch {
				fmt.Fprintf(&b, " {slot %d pos %d tokens %v blocks %v logits %v}", e.Slot, e.Pos, e.Tokens, e.Blocks, e.Logits != nil)
			}
			b.WriteString(" ]\n")
		}
		return b.String()
	}
	if g, w := f(got), f(want); g != w {
		t.Fatalf("backend batches:\n%s\nwant:\n%s", g, w)
	}
}

// TestForwardFails: when Forward fails, every entry of the batch gets an
// ERROR DEVICE, none counts as executed, and the slots are finished; the
// executor goes on serving.
func TestForwardFails(t *testing.T) {
	const vocab, bs, pool = 100, 4, 32
	be := newNull(vocab, pool, bs)
	be.poison = []int32{42, 43}
	h := host(t, be, bs, conformance.Config{Slots: 4, Blocks: pool, SubmitCap: 4, Staging: 256})
	h.Open(0, params(11), nil, nil, nil)
	h.Grant(0, 0, 0, 1)
	h.Open(3, params(12), nil, nil, nil)
	h.Grant(3, 0, 2)
	a := h.Step(pre(0, true, 1, 2))
	match(t, h.Sync(), []ringbuf.Completion{tok(a, 0, nullTok(11, 2, vocab), 2, 0), done(a, 1)})
	a = h.Step(pre(3, true, 42, 43), fb(0))
	b := h.Step(fb(3), fb(0))
	c := h.Close(0)
	d := h.Close(3)
	match(t, h.Sync(), []ringbuf.Completion{
		errc(a, 3, ringbuf.CodeDevice, 0), errc(a, 0, ringbuf.CodeDevice, 0), done(a, 0),
		skipped(b, 3), skipped(b, 0), done(b, 0), closed(c, 0), closed(d, 3)})
	h.Open(3, params(12), nil, nil, nil)
	h.Grant(3, 0, 0, 1)
	h.Open(1, params(5), nil, nil, nil)
	h.Grant(1, 0, 4, 5)
	a = h.Step(pre(3, true, 1, 2, 3), pre(1, true, 1))
	b = h.Step(fb(3), fb(1))
	match(t, h.Sync(), []ringbuf.Completion{
		tok(a, 3, nullTok(12, 3, vocab), 3, 0), tok(a, 1, nullTok(5, 1, vocab), 1, 0), done(a, 2),
		tok(b, 3, nullTok(12, 4, vocab), 4, 0), tok(b, 1, nullTok(5, 2, vocab), 2, 0), done(b, 2)})
	h.Stop()
	be.check(t)
}

// TestSmallCompletionRing: a device refuses to start on a completion ring
// that cannot hold one step's records.
func TestSmallCompletionRing(t *testing.T) {
	l, err := ringbuf.NewLayout(4, ringbuf.MinCompletionCap(6)/2, 64)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ringbuf.NewArena(ringbuf.HeapAllocator{}, l)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	d := null.New(10, 4, 4, 6)
	if err := d.Start(a); err == nil || !strings.Contains(err.Error(), "completion ring") {
		t.Fatalf("Start on a ring of %d records for 6 slots: %v", l.Completion.Cap, err)
	}
}

// TestSamplerAlternatives: over the logits backend, every TOKEN, logprob
// and list of alternatives is what sample.Sampler gives for the same
// logits, history and position; n_top is capped by the candidates with a
// finite logit; the null device's alternatives are PickerTop's.
func TestSamplerAlternatives(t *testing.T) {
	const vocab, bs, pool = 32, 4, 64
	for _, c := range []struct {
		name   string
		p      ringbuf.SlotParams
		finite int
	}{
		{"sampled, odd n_top", ringbuf.SlotParams{Temperature: 0.9, TopP: 0.9, RepeatPenalty: 1.2, RepeatLastN: -1,
			Presence: 0.3, Seed: 77, Flags: ringbuf.SlotLogprobs, NTop: 5}, 0},
		{"greedy, n_top 20", ringbuf.SlotParams{Temperature: 0, TopP: 1, RepeatPenalty: 1, Seed: 1, Flags: ringbuf.SlotLogprobs,
			NTop: ringbuf.MaxTop}, 0},
		{"top-k path, even n_top", ringbuf.SlotParams{Temperature: 1.3, TopP: 1, TopK: 4, RepeatPenalty: 1, Seed: 9,
			Flags: ringbuf.SlotLogprobs, NTop: 6}, 0},
		{"three candidates", ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: 3, Flags: ringbuf.SlotLogprobs,
			NTop: 5}, 3},
		{"no n_top", ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: 3, Flags: ringbuf.SlotLogprobs}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := newLogits(vocab, pool, bs)
			be.finite = c.finite
			h := host(t, be, bs, conformance.Config{Slots: 2, Blocks: pool, SubmitCap: 4, Staging: 128})
			prompt := []uint32{3, 1, 4, 1, 5, 9}
			out := conformance.Drive(t, h, conformance.SeqSpec{Slot: 1, P: c.p, Prompt: prompt, Blocks: []uint32{0, 1, 2, 3, 4, 5, 6, 7}, Gen: 10})[0]
			h.Stop()
			be.check(t)

			// The same sampling on the CPU, token by token.
			sp := sample.Defaults()
			sp.Temperature, sp.TopP, sp.TopK, sp.RepeatPenalty, sp.RepeatLastN = c.p.Temperature, c.p.TopP, int(c.p.TopK), c.p.RepeatPenalty, int(c.p.RepeatLastN)
			sp.PresencePenalty, sp.Seed, sp.Logprobs, sp.TopLogprobs = c.p.Presence, c.p.Seed, true, int(c.p.NTop)
			sm, err := sample.New(sp, vocab)
			if err != nil {
				t.Fatal(err)
			}
			var seq []int32
			for _, tk := range prompt {
				seq = append(seq, int32(tk))
				sm.Observe(int32(tk), false)
			}
			alts := 0
			for i := range out.Tokens {
				res := sm.Sample(logitsOf(seq, vocab, c.finite), len(seq))
				if uint32(res.Token) != out.Tokens[i] || res.Logprob != out.Logprobs[i] || !slices.Equal(res.Top, out.Top[i]) {
					t.Fatalf("token %d: device %d %v %v, sampler %d %v %v", i, out.Tokens[i], out.Logprobs[i], out.Top[i], res.Token, res.Logprob, res.Top)
				}
				want := int(c.p.NTop)
				if c.finite > 0 {
					want = min(want, c.finite)
				}
				if len(out.Top[i]) != want {
					t.Fatalf("token %d: %d alternatives, want %d", i, len(out.Top[i]), want)
				}
				alts += len(out.Top[i])
				seq = append(seq, res.Token)
				sm.Observe(res.Token, true)
			}
			if c.p.NTop > 0 && alts == 0 {
				t.Fatal("no alternatives at all")
			}
		})
	}

	t.Run("null device", func(t *testing.T) {
		be := newNull(1000, 16, bs)
		h := host(t, be, bs, conformance.Config{Slots: 2, Blocks: 16, SubmitCap: 4, Staging: 128})
		p := params(42)
		p.Flags, p.NTop = ringbuf.SlotLogprobs, 3
		out := conformance.Drive(t, h, conformance.SeqSpec{Slot: 0, P: p, Prompt: []uint32{1, 2}, Blocks: []uint32{0, 1, 2, 3}, Gen: 6})[0]
		h.Stop()
		for i, tk := range out.Tokens {
			want := kernels.PickerTop(nil, int32(tk), 3, 1000)
			if !slices.Equal(out.Top[i], want) || want[0].Token != int32(tk) || want[2].Logprob != -2 {
				t.Fatalf("token %d (%d): alternatives %v, want %v", i, tk, out.Top[i], want)
			}
		}
	})
}
