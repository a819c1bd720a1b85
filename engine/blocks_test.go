package engine

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/dgraph-io/ristretto/v2"
)

func newTestManager(t testing.TB, numBlocks, blockSize int, prefix bool) *BlockManager {
	t.Helper()
	m, err := NewBlockManager(numBlocks, blockSize, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// checkBlocks fails the test if any invariant of the block manager is broken.
func checkBlocks(t testing.TB, m *BlockManager) {
	t.Helper()
	m.mu.Lock()
	err := m.checkLocked()
	m.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}

func refOf(m *BlockManager, id int32) (int32, blockState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drainLocked()
	return m.blocks[id].ref, m.blocks[id].state
}

func randTokens(r *rand.Rand, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = r.Int32N(50000)
	}
	return s
}

func cat(a, b []int32) []int32 { return append(slices.Clip(a), b...) }

func blocksFor(tokens, blockSize int) int { return (tokens + blockSize - 1) / blockSize }

func TestBlockManagerNew(t *testing.T) {
	for _, tc := range []struct{ n, bs int }{{0, 16}, {-1, 16}, {8, 0}, {8, -16}, {1 << 31, 16}} {
		if m, err := NewBlockManager(tc.n, tc.bs, true); err == nil {
			m.Close()
			t.Errorf("NewBlockManager(%d, %d): no error", tc.n, tc.bs)
		}
	}
	m := newTestManager(t, 10, DefaultBlockSize, true)
	if m.NumBlocks() != 10 || m.BlockSize() != 16 || m.Free() != 10 {
		t.Fatalf("NumBlocks %d BlockSize %d Free %d", m.NumBlocks(), m.BlockSize(), m.Free())
	}
}

func TestBlockAllocateRelease(t *testing.T) {
	for _, prefix := range []bool{true, false} {
		m := newTestManager(t, 10, 16, prefix)
		for cycle := range 3 {
			a, err := m.Allocate(4)
			if err != nil || len(a) != 4 {
				t.Fatalf("cycle %d: Allocate(4) = %v, %v", cycle, a, err)
			}
			b, err := m.Allocate(6)
			if err != nil || len(b) != 6 {
				t.Fatalf("cycle %d: Allocate(6) = %v, %v", cycle, b, err)
			}
			if all := slices.Sorted(slices.Values(cat(a, b))); !slices.Equal(all, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
				t.Fatalf("cycle %d: blocks %v", cycle, all)
			}
			if m.Free() != 0 {
				t.Fatalf("Free %d, want 0", m.Free())
			}
			if got, err := m.Allocate(1); !errors.Is(err, ErrNoBlocks) || got != nil {
				t.Fatalf("Allocate on an empty pool = %v, %v", got, err)
			}
			checkBlocks(t, m)
			if err := m.Release(a); err != nil {
				t.Fatal(err)
			}
			// All or nothing: 5 asked, 4 free.
			if got, err := m.Allocate(5); !errors.Is(err, ErrNoBlocks) || got != nil {
				t.Fatalf("Allocate(5) with 4 free = %v, %v", got, err)
			}
			if m.Free() != 4 {
				t.Fatalf("Free %d after a failed Allocate, want 4", m.Free())
			}
			if err := m.Release(b); err != nil {
				t.Fatal(err)
			}
			if m.Free() != 10 {
				t.Fatalf("cycle %d: Free %d after releasing all, want 10", cycle, m.Free())
			}
			checkBlocks(t, m)
		}
		if got, err := m.Allocate(0); err != nil || len(got) != 0 {
			t.Fatalf("Allocate(0) = %v, %v", got, err)
		}
		dst := make([]int32, 0, 4)
		dst, err := m.AllocateAppend(dst, 2)
		if err != nil || len(dst) != 2 {
			t.Fatalf("AllocateAppend = %v, %v", dst, err)
		}
		if err := m.Release(dst); err != nil {
			t.Fatal(err)
		}
		if st := m.Stats(); st.Free != 10 || st.Used != 0 || st.Idle != 0 || st.Errors != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
}

func TestBlockReleaseErrors(t *testing.T) {
	m := newTestManager(t, 8, 16, true)
	a, _ := m.Allocate(3)
	tests := []struct {
		name   string
		blocks []int32
	}{
		{"negative id", []int32{a[0], -1}},
		{"id out of range", []int32{a[0], 8}},
		{"free block", []int32{a[0], 7}},
		{"same block twice", []int32{a[1], a[2], a[1]}},
	}
	for i, tc := range tests {
		err := m.Release(tc.blocks)
		if !errors.Is(err, ErrBadBlock) {
			t.Errorf("%s: Release(%v) = %v, want ErrBadBlock", tc.name, tc.blocks, err)
		}
		// Nothing changed: the valid ids before the bad one were rolled back.
		if st := m.Stats(); st.Used != 3 || st.Free != 5 || st.Errors != int64(i+1) {
			t.Errorf("%s: stats after a bad Release: %+v", tc.name, st)
		}
		checkBlocks(t, m)
	}
	if err := m.Release(a); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(a[:1]); !errors.Is(err, ErrBadBlock) {
		t.Fatalf("double release = %v", err)
	}
	if _, err := m.Allocate(-1); err == nil {
		t.Fatal("Allocate(-1): no error")
	}
	if st := m.Stats(); st.Free != 8 || st.Errors != int64(len(tests)+2) {
		t.Fatalf("stats %+v", st)
	}
	checkBlocks(t, m)
}

// seqAlloc is what the scheduler does for a new prompt: match the cached
// prefix, allocate the rest, "prefill", register.
func seqAlloc(t *testing.T, m *BlockManager, prompt []int32) (blocks []int32, cached int) {
	t.Helper()
	blocks, cached = m.Match(prompt)
	blocks, err := m.AllocateAppend(blocks, blocksFor(len(prompt), m.BlockSize())-len(blocks))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Register(blocks, prompt); err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, m)
	return blocks, cached
}

func TestBlockPrefixShare(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	m := newTestManager(t, 64, 16, true)
	prefix := randTokens(r, 200)

	a, cached := seqAlloc(t, m, prefix)
	if cached != 0 || len(a) != 13 {
		t.Fatalf("first sequence: %d blocks, %d cached", len(a), cached)
	}
	if st := m.Stats(); st.Registered != 12 {
		t.Fatalf("registered %d full blocks, want 12", st.Registered)
	}

	promptB := cat(prefix, randTokens(r, 50))
	b, cached := seqAlloc(t, m, promptB)
	if cached != 192 || len(b) != 16 || !slices.Equal(b[:12], a[:12]) || slices.Contains(b[12:], a[12]) {
		t.Fatalf("second sequence: cached %d, blocks %v, first %v", cached, b, a)
	}
	for _, id := range a[:12] {
		if ref, state := refOf(m, id); ref != 2 || state != blockUsed {
			t.Fatalf("shared block %d: ref %d state %d", id, ref, state)
		}
	}
	if ref, _ := refOf(m, a[12]); ref != 1 {
		t.Fatalf("partial block %d: ref %d", a[12], ref)
	}

	if err := m.Release(a); err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, m)
	if err := m.Release(b); err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, m)
	// 12 shared + 3 more full blocks of B are idle; A's and B's partial
	// blocks are free.
	st := m.Stats()
	if st.Idle != 15 || st.Used != 0 || st.Free != 49 || m.Free() != 64 {
		t.Fatalf("after release: %+v", st)
	}
	for _, id := range a[:12] {
		if _, state := refOf(m, id); state != blockIdle {
			t.Fatalf("block %d state %d, want idle", id, state)
		}
	}

	c, cached := m.Match(cat(prefix, randTokens(r, 7)))
	if cached != 192 || !slices.Equal(c, a[:12]) {
		t.Fatalf("third sequence: cached %d, blocks %v", cached, c)
	}
	for _, id := range c {
		if ref, state := refOf(m, id); ref != 1 || state != blockUsed {
			t.Fatalf("rematched block %d: ref %d state %d", id, ref, state)
		}
	}
	// B's whole prompt: 250 tokens, 15 full blocks, all cacheable.
	d, cached := m.Match(promptB)
	if cached != 240 || !slices.Equal(d, b[:15]) {
		t.Fatalf("B again: cached %d, blocks %v", cached, d)
	}
	st = m.Stats()
	if st.MatchCalls != 4 || st.PrefixHits != 12+12+15 || st.PrefixTokens != 16*(12+12+15) || st.PrefixMisses != 12+3 {
		t.Fatalf("prefix counters: %+v", st)
	}
	checkBlocks(t, m)
	if err := m.Release(c); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(d); err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, m)
}

func TestBlockMatchLeavesLastToken(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := newTestManager(t, 16, 16, true)
	prompt := randTokens(r, 64) // exactly 4 full blocks
	a, _ := seqAlloc(t, m, prompt)
	for _, tc := range []struct{ n, want int }{{0, 0}, {1, 0}, {16, 0}, {17, 1}, {63, 3}, {64, 3}, {65, 4}} {
		p := prompt
		if tc.n > 64 {
			p = cat(prompt, []int32{1})
		}
		got, cached := m.Match(p[:tc.n])
		if len(got) != tc.want || cached != 16*tc.want {
			t.Errorf("Match(%d tokens) = %d blocks, %d tokens; want %d blocks", tc.n, len(got), cached, tc.want)
		}
		if err := m.Release(got); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Release(a); err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, m)
}

func TestBlockHashCollision(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	t.Run("every hash equal", func(t *testing.T) {
		m := newTestManager(t, 32, 16, true)
		m.hashFn = func(uint64, []int32) uint64 { return 42 }
		a, _ := seqAlloc(t, m, randTokens(r, 64))
		// B collides with A's first block: no false match, and B's block
		// stays unregistered (first writer wins) so it is freed, not cached.
		promptB := randTokens(r, 64)
		b, cached := seqAlloc(t, m, promptB)
		if cached != 0 {
			t.Fatalf("false match of %d tokens", cached)
		}
		st := m.Stats()
		// A's own block 1 already hit the hash of its block 0; B's block
		// 0 hit it in Match and again in Register.
		if st.Collisions != 3 || st.Registered != 1 {
			t.Fatalf("stats %+v", st)
		}
		if err := m.Release(b); err != nil {
			t.Fatal(err)
		}
		if err := m.Release(a); err != nil {
			t.Fatal(err)
		}
		if st := m.Stats(); st.Idle != 1 || st.Free != 31 {
			t.Fatalf("stats %+v", st)
		}
		if got, cached := m.Match(promptB); cached != 0 {
			t.Fatalf("false match after release: %v", got)
		}
		checkBlocks(t, m)
	})
	t.Run("hash ignores the parent", func(t *testing.T) {
		m := newTestManager(t, 32, 16, true)
		base := m.hashFn
		m.hashFn = func(_ uint64, toks []int32) uint64 { return base(0, toks) }
		x, y, z := randTokens(r, 16), randTokens(r, 16), randTokens(r, 16)
		a, _ := seqAlloc(t, m, cat(cat(x, y), []int32{7}))
		b, _ := seqAlloc(t, m, cat(z, []int32{7}))
		// Z then Y: block 1 hashes like A's Y block and has the same
		// tokens, but its KV was computed after X, not Z.
		got, cached := m.Match(cat(cat(z, y), []int32{7}))
		if cached != 16 || !slices.Equal(got, b[:1]) {
			t.Fatalf("Match = %v, %d tokens; want only %v", got, cached, b[:1])
		}
		if st := m.Stats(); st.ParentMismatches != 1 || st.Collisions != 0 {
			t.Fatalf("stats %+v", st)
		}
		for _, s := range [][]int32{a, b, got} {
			if err := m.Release(s); err != nil {
				t.Fatal(err)
			}
		}
		checkBlocks(t, m)
	})
}

func TestBlockRegisterErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	m := newTestManager(t, 8, 4, true)
	prompt := randTokens(r, 9)
	a, _ := seqAlloc(t, m, prompt)
	if err := m.Register([]int32{a[0], 7}, prompt); !errors.Is(err, ErrBadBlock) {
		t.Fatalf("Register of a free block = %v", err)
	}
	if err := m.Register([]int32{a[1]}, prompt); !errors.Is(err, ErrBadBlock) {
		t.Fatalf("Register of a block under other content = %v", err)
	}
	if err := m.Register(a, prompt); err != nil { // again, as the sequence grows
		t.Fatalf("Register again = %v", err)
	}
	if err := m.Register(a, prompt[:3]); err != nil { // no full block
		t.Fatal(err)
	}
	if st := m.Stats(); st.Errors != 2 || st.Registered != 2 {
		t.Fatalf("stats %+v", st)
	}
	checkBlocks(t, m)
}

func TestBlockReclaim(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	m := newTestManager(t, 32, 16, true)
	prompt := randTokens(r, 32*16)
	a, _ := seqAlloc(t, m, prompt)
	if err := m.Release(a); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.Idle != 32 || st.Free != 0 || m.Free() != 32 {
		t.Fatalf("pool of idle blocks: %+v", st)
	}
	if _, err := m.Allocate(33); !errors.Is(err, ErrNoBlocks) {
		t.Fatalf("Allocate(33) = %v", err)
	}
	if st := m.Stats(); st.Idle != 32 || st.Reclaimed != 0 {
		t.Fatalf("a failed Allocate reclaimed: %+v", st)
	}
	// Tail first: taking 4 blocks reclaims the last 4 of the prompt, so the
	// first 28 still match.
	b, err := m.Allocate(4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slices.Sorted(slices.Values(b)), slices.Sorted(slices.Values(a[28:]))) {
		t.Fatalf("reclaimed %v, want the tail %v", b, a[28:])
	}
	checkBlocks(t, m)
	got, cached := m.Match(prompt)
	if cached != 28*16 {
		t.Fatalf("after reclaiming the tail: %d tokens cached", cached)
	}
	if err := m.Release(got); err != nil {
		t.Fatal(err)
	}
	c, err := m.Allocate(28)
	if err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	if st.Reclaimed != 32 || st.Registered != 0 || st.Used != 32 || m.Free() != 0 {
		t.Fatalf("stats %+v", st)
	}
	checkBlocks(t, m)
	if _, cached := m.Match(prompt); cached != 0 {
		t.Fatalf("reclaimed blocks still match: %d tokens", cached)
	}
	if err := m.Release(cat(b, c)); err != nil {
		t.Fatal(err)
	}
	if m.Free() != 32 {
		t.Fatalf("Free %d", m.Free())
	}
	checkBlocks(t, m)
}

func TestBlockNoPrefixCache(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	m := newTestManager(t, 16, 16, false)
	prompt := randTokens(r, 100)
	a, cached := seqAlloc(t, m, prompt)
	if cached != 0 || len(a) != 7 {
		t.Fatalf("%d blocks, %d cached", len(a), cached)
	}
	if err := m.Release(a); err != nil {
		t.Fatal(err)
	}
	if got, cached := m.Match(prompt); got != nil || cached != 0 {
		t.Fatalf("Match without a prefix cache = %v, %d", got, cached)
	}
	if st := m.Stats(); st.Free != 16 || st.Idle != 0 || st.Registered != 0 || st.MatchCalls != 0 {
		t.Fatalf("stats %+v", st)
	}
	checkBlocks(t, m)
}

// TestBlockStaleCallback feeds ristretto callbacks for a block that has been
// matched again, or released again under a newer generation: only the drop
// of the current idle generation may free the block.
func TestBlockStaleCallback(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	m := newTestManager(t, 8, 4, true)
	prompt := randTokens(r, 5)
	a, _ := seqAlloc(t, m, prompt)
	if err := m.Release(a); err != nil {
		t.Fatal(err)
	}
	id := a[0]
	m.mu.Lock()
	hash, gen := m.blocks[id].hash, m.blocks[id].gen
	m.mu.Unlock()
	drop := func(gen uint32) {
		m.onDrop(&ristretto.Item[uint64]{Key: hash, Value: uint64(id)<<32 | uint64(gen)})
	}
	got, _ := m.Match(prompt)
	drop(gen) // the block is used now
	if ref, state := refOf(m, id); ref != 1 || state != blockUsed {
		t.Fatalf("stale drop of a used block: ref %d state %d", ref, state)
	}
	if err := m.Release(got); err != nil {
		t.Fatal(err)
	}
	drop(gen) // idle again, but under gen+1
	drop(0)   // ristretto's value-less items
	m.onDrop(&ristretto.Item[uint64]{Key: hash + 1, Value: uint64(id)<<32 | uint64(gen+1)})
	if _, state := refOf(m, id); state != blockIdle {
		t.Fatalf("stale drop freed an idle block: state %d", state)
	}
	drop(gen + 1)
	if _, state := refOf(m, id); state != blockFree {
		t.Fatalf("current drop: state %d, want free", state)
	}
	if st := m.Stats(); st.Evicted != 1 || st.Registered != 0 || st.Free != 8 {
		t.Fatalf("stats %+v", st)
	}
	checkBlocks(t, m)
}

// simSeq is a sequence in the randomized tests.
type simSeq struct {
	tokens []int32
	blocks []int32
}

// blockSim drives a manager with random scheduler-like operations and keeps a
// shadow of what each block's KV holds, so that a wrong prefix match (wrong
// content, however it came about) is caught, not just a broken count.
type blockSim struct {
	t       testing.TB
	m       *BlockManager
	bases   [][]int32
	content [][]int32 // per block: the tokens whose KV it holds (shared)
	alone   bool      // one goroutine: Free() predicts Allocate exactly
}

func newBlockSim(t testing.TB, m *BlockManager, r *rand.Rand) *blockSim {
	s := &blockSim{t: t, m: m, content: make([][]int32, m.NumBlocks())}
	for range 4 {
		s.bases = append(s.bases, randTokens(r, 16*m.BlockSize()))
	}
	return s
}

func (s *blockSim) prompt(r *rand.Rand) []int32 {
	base := s.bases[r.IntN(len(s.bases))]
	p := slices.Clone(base[:r.IntN(len(base))])
	return append(p, randTokens(r, r.IntN(3*s.m.BlockSize()))...)
}

// fill writes the KV of tokens[from:] into the sequence's blocks; each block
// written to must be exclusively owned and unregistered.
func (s *blockSim) fill(q *simSeq, from int) {
	bs := s.m.BlockSize()
	for i := from / bs; i*bs < len(q.tokens); i++ {
		id := q.blocks[i]
		s.m.mu.Lock()
		b := s.m.blocks[id]
		s.m.mu.Unlock()
		if b.ref != 1 || b.reg != 0 {
			s.t.Errorf("writing block %d: ref %d registered %v", id, b.ref, b.reg != 0)
		}
		s.content[id] = slices.Clone(q.tokens[i*bs : min((i+1)*bs, len(q.tokens))])
	}
}

func (s *blockSim) start(r *rand.Rand) *simSeq {
	bs := s.m.BlockSize()
	q := &simSeq{tokens: s.prompt(r)}
	if len(q.tokens) == 0 {
		return nil
	}
	blocks, cached := s.m.Match(q.tokens)
	for i, id := range blocks {
		if !slices.Equal(s.content[id], q.tokens[i*bs:(i+1)*bs]) {
			s.t.Errorf("matched block %d holds %v, prompt block %d is %v", id, s.content[id], i, q.tokens[i*bs:(i+1)*bs])
		}
	}
	free := s.m.Free()
	need := blocksFor(len(q.tokens), bs) - len(blocks)
	blocks, err := s.m.AllocateAppend(blocks, need)
	if err == nil && s.alone && free < need {
		s.t.Errorf("Allocate(%d) succeeded with %d free", need, free)
	}
	if err != nil {
		if !errors.Is(err, ErrNoBlocks) || len(blocks) != cached/bs {
			s.t.Errorf("Allocate(%d) = %v with %d blocks", need, err, len(blocks))
		}
		if s.alone && free >= need {
			s.t.Errorf("Allocate(%d) failed with %d free", need, free)
		}
		if err := s.m.Release(blocks); err != nil {
			s.t.Error(err)
		}
		return nil
	}
	q.blocks = blocks
	s.fill(q, cached)
	if r.IntN(4) != 0 {
		s.register(q)
	}
	return q
}

func (s *blockSim) register(q *simSeq) {
	if err := s.m.Register(q.blocks, q.tokens); err != nil {
		s.t.Error(err)
	}
}

func (s *blockSim) grow(r *rand.Rand, q *simSeq) {
	from := len(q.tokens)
	q.tokens = append(q.tokens, randTokens(r, 1+r.IntN(2*s.m.BlockSize()))...)
	need := blocksFor(len(q.tokens), s.m.BlockSize()) - len(q.blocks)
	blocks, err := s.m.AllocateAppend(q.blocks, need)
	if err != nil {
		q.tokens = q.tokens[:from] // preempted, in a real scheduler
		return
	}
	q.blocks = blocks
	s.fill(q, from)
	if r.IntN(2) == 0 {
		s.register(q)
	}
}

func (s *blockSim) release(q *simSeq) {
	if err := s.m.Release(q.blocks); err != nil {
		s.t.Error(err)
	}
}

// run does ops random operations on its own sequences; check runs after each.
func (s *blockSim) run(r *rand.Rand, ops int, check func()) {
	var live []*simSeq
	for range ops {
		switch op := r.IntN(10); {
		case op < 4 || len(live) == 0:
			if q := s.start(r); q != nil {
				live = append(live, q)
			}
		case op < 6:
			s.grow(r, live[r.IntN(len(live))])
		case op < 7:
			s.register(live[r.IntN(len(live))])
		case op < 9:
			i := r.IntN(len(live))
			s.release(live[i])
			live = slices.Delete(live, i, i+1)
		default:
			// A bad call must change nothing.
			if err := s.m.Release([]int32{int32(s.m.NumBlocks())}); !errors.Is(err, ErrBadBlock) {
				s.t.Errorf("Release of an unknown block = %v", err)
			}
		}
		check()
		if s.t.Failed() {
			return
		}
	}
	for _, q := range live {
		s.release(q)
	}
}

func TestBlockRandomized(t *testing.T) {
	for _, tc := range []struct {
		name       string
		blocks     int
		idleBudget int
		weakHash   bool
	}{
		{"default", 48, 48, false},
		{"ristretto evicts", 48, 6, false},
		{"weak hash", 48, 48, true},
		{"weak hash, ristretto evicts", 48, 6, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(15, uint64(tc.blocks*tc.idleBudget)))
			m, err := newBlockManager(tc.blocks, 4, true, tc.idleBudget)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if tc.weakHash {
				// 5 bits for up to 48 registered blocks: most hash hits
				// are collisions.
				base := m.hashFn
				m.hashFn = func(p uint64, toks []int32) uint64 { return base(p, toks) & 31 }
			}
			s := newBlockSim(t, m, r)
			s.alone = true
			n := 0
			s.run(r, 10000, func() {
				if n++; n%64 == 0 {
					m.syncCache() // let ristretto's callbacks land mid-run
				}
				checkBlocks(t, m)
			})
			m.syncCache()
			checkBlocks(t, m)
			st := m.Stats()
			if st.Used != 0 || m.Free() != tc.blocks {
				t.Fatalf("after releasing everything: %+v", st)
			}
			if st.PrefixHits == 0 || st.Reclaimed == 0 {
				t.Errorf("the workload did not exercise hits and reclaim: %+v", st)
			}
			if tc.idleBudget < tc.blocks && st.Evicted == 0 {
				t.Errorf("ristretto evicted nothing: %+v", st)
			}
			if tc.weakHash && st.Collisions == 0 {
				t.Errorf("no collisions with a 3-bit hash: %+v", st)
			}
			t.Logf("%+v", st)
		})
	}
}

// TestBlockConcurrent runs the randomized workload from several goroutines
// on one manager whose small ristretto budget makes its callbacks fire, with
// a checker goroutine verifying the invariants throughout (go test -race).
func TestBlockConcurrent(t *testing.T) {
	const workers, ops, numBlocks = 4, 2500, 96
	m, err := newBlockManager(numBlocks, 4, true, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := newBlockSim(t, m, rand.New(rand.NewPCG(16, 17)))
	done := make(chan struct{})
	var checker sync.WaitGroup
	checker.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			m.mu.Lock()
			err := m.checkLocked()
			m.mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			if st := m.Stats(); st.Free+st.Used+st.Idle != numBlocks {
				t.Errorf("stats do not add up: %+v", st)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s.run(rand.New(rand.NewPCG(18, uint64(w))), ops, func() {})
		})
	}
	wg.Wait()
	close(done)
	checker.Wait()
	m.syncCache()
	checkBlocks(t, m)
	st := m.Stats()
	if st.Used != 0 || m.Free() != numBlocks || st.Evicted == 0 || st.PrefixHits == 0 {
		t.Fatalf("after the run: %+v", st)
	}
	t.Logf("%+v", st)
}

func TestBlockClose(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	m := newTestManager(t, 8, 4, true)
	prompt := randTokens(r, 13)
	a, _ := seqAlloc(t, m, prompt)
	if err := m.Release(a); err != nil {
		t.Fatal(err)
	}
	m.Close()
	m.Close()
	// Still consistent and usable; ristretto's Clear may have dropped the
	// idle blocks, which is a miss, not an error.
	b, _ := seqAlloc(t, m, prompt)
	if err := m.Release(b); err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, m)
	if m.Free() != 8 {
		t.Fatalf("Free %d", m.Free())
	}
}

func BenchmarkBlockAllocRelease(b *testing.B) {
	m := newTestManager(b, 1024, 16, true)
	b.Run("Allocate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			blocks, err := m.Allocate(1)
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Release(blocks); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AllocateAppend", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]int32, 0, 1)
		for b.Loop() {
			blocks, err := m.AllocateAppend(buf[:0], 1)
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Release(blocks); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkBlockMatch matches a 2000-token prompt (124 cached blocks) against
// a warm cache and releases the blocks again: "shared" while another sequence
// holds them (refcounts only), "idle" when nobody does (each Match and
// Release moves 124 blocks between idle and used, through ristretto).
func BenchmarkBlockMatch(b *testing.B) {
	r := rand.New(rand.NewPCG(21, 22))
	prompt := randTokens(r, 2000)
	for _, name := range []string{"shared", "idle"} {
		b.Run(name, func(b *testing.B) {
			m := newTestManager(b, 256, 16, true)
			owner, err := m.Allocate(blocksFor(len(prompt), 16))
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Register(owner, prompt); err != nil {
				b.Fatal(err)
			}
			if name == "idle" {
				if err := m.Release(owner); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				blocks, cached := m.Match(prompt)
				if cached != 1984 {
					b.Fatalf("cached %d tokens", cached)
				}
				if err := m.Release(blocks); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/124, "ns/block")
		})
	}
}
