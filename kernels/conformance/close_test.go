package conformance

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/kernels/cpu"
	"ringlm/ringbuf"
	"ringlm/sample"
)

// seqOfTokens builds a continuation whose alternatives at position i are
// tops[i] (nil: the token alone).
func seqOfTokens(toks []int32, tops map[int][]int32) Seq {
	s := make(Seq, len(toks))
	for i, tk := range toks {
		alt := tops[i]
		if alt == nil {
			alt = []int32{tk}
		}
		s[i] = Sampled{Token: tk, Logprob: -0.5}
		for j, a := range alt {
			s[i].Top = append(s[i].Top, sample.TokenLogprob{Token: a, Logprob: -0.5 - float32(j)})
		}
	}
	return s
}

// recordingTB keeps what CheckLogprobsClose reports instead of failing.
type recordingTB struct {
	testing.TB
	errs, logs []string
}

func (r *recordingTB) Helper()                        {}
func (r *recordingTB) Errorf(f string, args ...any)   { r.errs = append(r.errs, fmt.Sprintf(f, args...)) }
func (r *recordingTB) Logf(f string, args ...any)     { r.logs = append(r.logs, fmt.Sprintf(f, args...)) }
func (r *recordingTB) Fatalf(f string, args ...any)   { panic("Fatalf: " + fmt.Sprintf(f, args...)) }
func (r *recordingTB) failures() string               { return strings.Join(r.errs, "\n") }
func (r *recordingTB) contains(parts ...string) error { return containsAll(r.failures(), parts...) }

func containsAll(s string, parts ...string) error {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return fmt.Errorf("%q does not mention %q", s, p)
		}
	}
	return nil
}

func TestCompareLogprobs(t *testing.T) {
	ref := []Seq{
		seqOfTokens([]int32{1, 2, 3, 4}, nil),
		// Diverges at 2: the reference's 30 is the device's second choice and
		// the device's 31 the reference's fifth.
		seqOfTokens([]int32{10, 20, 30, 40}, map[int][]int32{2: {30, 9, 8, 7, 31, 6}}),
		// Diverges at 1: the device's 21 is sixth here, outside the top 5.
		seqOfTokens([]int32{11, 22, 33}, map[int][]int32{1: {22, 1, 2, 3, 4, 21}}),
		// Ends at EOS (99) where the device goes on: judged at position 2,
		// where the device has 5 and 99 among its alternatives.
		seqOfTokens([]int32{7, 8, 99}, map[int][]int32{2: {99, 5}}),
		// The device ends first, equal so far: nothing to judge.
		seqOfTokens([]int32{4, 4, 4, 4}, nil),
	}
	dut := []Seq{
		seqOfTokens([]int32{1, 2, 3, 4}, nil),
		seqOfTokens([]int32{10, 20, 31, 50}, map[int][]int32{2: {31, 30}}),
		seqOfTokens([]int32{11, 21, 33}, map[int][]int32{1: {21, 22}}),
		seqOfTokens([]int32{7, 8, 5, 6, 2}, map[int][]int32{2: {5, 99}}),
		seqOfTokens([]int32{4, 4}, nil),
	}
	c, err := CompareLogprobs(ref, dut, 5)
	if err != nil {
		t.Fatal(err)
	}
	if c.Seqs != 5 || c.Equal != 2 || c.Tokens != 4+2+1+2+2 || len(c.Divergences) != 3 {
		t.Fatalf("%+v", c)
	}
	want := []struct {
		seq, pos int
		ok       bool
	}{{1, 2, true}, {2, 1, false}, {3, 2, true}}
	for i, w := range want {
		d := c.Divergences[i]
		if d.Seq != w.seq || d.Pos != w.pos || d.OK != w.ok {
			t.Errorf("divergence %d: %v, want sequence %d position %d ok %v", i, d, w.seq, w.pos, w.ok)
		}
	}
	if f := c.Failed(); len(f) != 1 || f[0].Seq != 2 {
		t.Fatalf("failed %v", f)
	}
	// With k = 6 the device's 21 is in the reference's list.
	if c6, _ := CompareLogprobs(ref, dut, 6); len(c6.Failed()) != 0 {
		t.Fatalf("k=6: %v", c6.Failed())
	}
	// The rule is symmetric: the device's token must be in the
	// reference's list and the reference's in the device's.
	oneSided := []Seq{seqOfTokens([]int32{10, 20, 31}, map[int][]int32{2: {31, 1, 2, 3, 4}})}
	if c, _ := CompareLogprobs(ref[1:2], oneSided, 5); len(c.Failed()) != 1 {
		t.Fatalf("the reference's 30 is not in the device's list, yet %v", c.Divergences)
	}
	if _, err := CompareLogprobs(ref, dut[:4], 5); err == nil {
		t.Fatal("different numbers of sequences compared")
	}
	if _, err := CompareLogprobs(ref, dut, 0); err == nil {
		t.Fatal("k = 0 accepted")
	}
}

func TestCheckLogprobsCloseMessages(t *testing.T) {
	ref := []Seq{seqOfTokens([]int32{1, 2}, nil), seqOfTokens([]int32{11, 22, 33}, map[int][]int32{1: {22, 1, 2, 3, 4, 21}})}
	dut := []Seq{seqOfTokens([]int32{1, 2}, nil), seqOfTokens([]int32{11, 21, 33}, map[int][]int32{1: {21, 22}})}
	var r recordingTB
	c := CheckLogprobsClose(&r, ref, dut, 5)
	if len(r.errs) != 1 || len(c.Failed()) != 1 {
		t.Fatalf("errors %q", r.errs)
	}
	// The sequence, the position, both tokens and both top lists, and
	// which side misses which token.
	if err := r.contains("sequence 1", "generated token 1", "reference 22", "device 21",
		"[22:-0.5 1:-1.5 2:-2.5 3:-3.5 4:-4.5]", "[21:-0.5 22:-1.5]", "21 is not in the reference's top 5"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.failures(), "is not in the device's") {
		t.Fatalf("22 is in the device's list: %s", r.failures())
	}

	// Identical sequences: nothing reported but the summary.
	var q recordingTB
	c = CheckLogprobsClose(&q, ref, ref, 5)
	if len(q.errs) != 0 || c.Equal != 2 || len(q.logs) != 1 {
		t.Fatalf("identical: errors %q, logs %q", q.errs, q.logs)
	}

	// An accepted divergence is logged, not failed.
	okDut := []Seq{dut[0], seqOfTokens([]int32{11, 1, 2}, map[int][]int32{1: {1, 22}})}
	var a recordingTB
	CheckLogprobsClose(&a, ref, okDut, 5)
	if len(a.errs) != 0 || len(a.logs) != 2 || containsAll(a.logs[0], "accepted", "sequence 1", "reference 22", "device 1") != nil {
		t.Fatalf("accepted divergence: errors %q, logs %q", a.errs, a.logs)
	}
}

func cpuEngine(t *testing.T, slots int) *engine.Engine {
	t.Helper()
	m := testmodel.Load(t, "llama", gguf.TypeF32)
	dev, err := cpu.New(m, gguf.TypeF32, 256, 16, slots)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Slots: slots, NumBlocks: 256, Vocab: m.Vocab, Context: m.Context, Allocator: ringbuf.HeapAllocator{}}, dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// Greedy on the CPU device: every token carries k alternatives, the first
// the token itself with its logprob; a second run (batched differently)
// is the same, so the check finds no divergence; a request's own
// sampling parameters are overridden.
func TestGreedy(t *testing.T) {
	e := cpuEngine(t, 4)
	var reqs []engine.Request
	for i := range 6 {
		p := sample.Defaults()
		p.Temperature, p.Seed, p.MaxTokens = 1.5, uint64(i), 12
		reqs = append(reqs, engine.Request{Prompt: []int32{int32(1 + i), 2, 3, int32(40 + i)}, Params: p, IgnoreEOS: true})
	}
	a, err := Greedy(e, reqs, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range a {
		if len(s) != 12 {
			t.Fatalf("request %d: %d tokens", i, len(s))
		}
		for j, x := range s {
			if len(x.Top) != 5 || x.Top[0] != (sample.TokenLogprob{Token: x.Token, Logprob: x.Logprob}) || x.Logprob > 0 {
				t.Fatalf("request %d token %d: %+v", i, j, x)
			}
		}
	}
	b, err := Greedy(e, reqs[2:3], 5)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b[0].Tokens(), a[2].Tokens()) {
		t.Fatalf("alone %v, batched %v", b[0].Tokens(), a[2].Tokens())
	}
	var r recordingTB
	if c := CheckLogprobsClose(&r, a, a, 5); len(r.errs) != 0 || c.Equal != 6 || c.Tokens != 72 {
		t.Fatalf("%+v %q", c, r.errs)
	}
	if reqs[0].Params.Temperature != 1.5 {
		t.Fatal("Greedy changed the caller's requests")
	}
	if _, err := Generate(e, []engine.Request{{Prompt: []int32{int32(e.Config().Vocab)}, Params: sample.Defaults()}}); err == nil ||
		!strings.Contains(err.Error(), "request 0") {
		t.Fatalf("a token outside the vocabulary: %v", err)
	}
}
