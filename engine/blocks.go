// The paged KV block manager and its prefix cache.
//
// The KV cache is a device pool of numBlocks blocks of blockSize token
// positions. This file owns the host-side bookkeeping only: which block ids
// are free, who holds them (reference counts) and which full blocks hold
// content that a later prompt with the same prefix can reuse. It knows
// nothing of the model, tensors or sequences; block ids are int32s.
//
// Every block is in exactly one state:
//
//	free  on the free list; refcount 0; no registered content.
//	used  refcount > 0; held by one or more sequences; may be registered
//	      (its content hash is in the index) once the device has filled it.
//	idle  refcount 0 but registered: its content is still valid and Match can
//	      hand it out again. Idle blocks are reclaimable: Allocate takes them
//	      back (least recently released first) when the free list runs short,
//	      so Free() counts them.
//
// Invariants, checked under the mutex after every operation by the tests:
// free + used + idle == numBlocks; index[hash] == id iff block id is used or
// idle and registered under hash; every idle block is on the idle LRU list
// exactly once; every free block is on the free list exactly once.
//
// Prefix hashing. The hash of block i chains the hash of block i-1 with block
// i's tokens (maphash, one random seed per manager, so hashes never leave the
// process). A 64-bit hash can collide, so every registered block keeps a copy
// of its tokens and the registration id of the block it was chained to; a hit
// counts only when both match. By induction from the first block this proves
// that the whole prefix is equal, not just the last block, and a collision
// costs a cache miss, never a wrong KV. Register is first-writer-wins: a block
// whose hash is already registered under another id stays unregistered and is
// freed normally when released. The price of chaining to a registration (not
// just a hash): a block whose parent registration is dropped while it stays
// cached no longer matches, even if equal content is registered again
// (BlockStats.ParentMismatches). Release queues a sequence's blocks tail first
// so that reclaim usually takes children before their parents.
//
// Why ristretto is not the owner. The idle blocks are also kept in a
// ristretto cache (key = chain hash, value = block id and a generation, cost
// 1, MaxCost = numBlocks) whose OnEvict/OnReject return the block to the free
// list. But ristretto is asynchronous (Set is buffered and may be dropped at
// once or rejected later by its admission policy; callbacks run on its own
// goroutine, late), so it cannot be the record of anything: the Go index,
// the per-block states and the idle LRU list are authoritative, and a
// ristretto callback is only a hint, applied if the block is still idle under
// that same hash and generation. Two consequences of that design:
//
//   - Callbacks never take the manager's mutex. They queue the dropped item
//     and the next manager call applies it. Taking the mutex there would
//     deadlock: Del and Wait block on ristretto's set buffer, which only drains
//     while its goroutine is not stuck in a callback waiting for our mutex.
//     Every ristretto call is made under the mutex, so ristretto sees Set and
//     Del in exactly the order of the state changes.
//   - With MaxCost == numBlocks ristretto is never over capacity (at most
//     numBlocks blocks can be idle), so in practice it evicts nothing and the
//     idle blocks leave through Match (used again) or Allocate (reclaimed).
//     The callbacks matter only with a smaller idle budget (a test hook).
//
// Errors never corrupt the counts: a bad call changes nothing, returns an
// error wrapping ErrBadBlock (or a negative-count error) and is counted in
// BlockStats.Errors. A shortage returns the bare ErrNoBlocks, cheap enough
// for a scheduler that probes.

package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/dgraph-io/ristretto/v2"
)

// DefaultBlockSize is the number of token positions in a KV block.
const DefaultBlockSize = 16

var (
	// ErrNoBlocks: fewer blocks are allocatable (free + idle) than asked for.
	ErrNoBlocks = errors.New("engine: not enough free KV blocks")
	// ErrBadBlock: a block id that is out of range or not in use where the
	// call needs one in use (double release, release of a free block).
	ErrBadBlock = errors.New("engine: bad KV block")
)

// BlockStats is a snapshot of the manager. Free+Used+Idle == NumBlocks; the
// Free() method returns Free+Idle.
type BlockStats struct {
	Free       int // on the free list
	Used       int // refcount > 0
	Idle       int // refcount 0, content registered, reclaimable
	Registered int // blocks in the prefix index (used or idle)

	MatchCalls   int64 // calls to Match
	PrefixHits   int64 // blocks returned by Match
	PrefixMisses int64 // matchable full blocks that Match did not return
	PrefixTokens int64 // tokens covered by the blocks Match returned

	Reclaimed int64 // idle blocks taken back by Allocate
	Evicted   int64 // idle blocks freed by ristretto's OnEvict/OnReject

	// Hash hits treated as misses. Collisions: other tokens (a 64-bit
	// collision: expect 0). ParentMismatches: same tokens chained to another
	// registration of the parent: a collision of the parent's hash, or, in
	// practice, a block registered after a duplicate of its parent (first
	// writer wins) that outlived that parent's registration.
	Collisions       int64
	ParentMismatches int64

	DroppedSets int64 // ristretto Sets refused at once (the block stays idle)
	Errors      int64 // rejected calls (see ErrBadBlock), Allocate(n < 0)
}

type blockState uint8

const (
	blockFree blockState = iota
	blockUsed
	blockIdle
)

const noBlock int32 = -1

type kvBlock struct {
	tokens     []int32 // content of a registered block (capacity reused)
	hash       uint64  // chain hash, valid when reg != 0
	reg        uint64  // registration id, 0 = not registered
	parent     uint64  // reg of the block this one was chained to, 0 for the first
	ref        int32
	prev, next int32  // idle LRU links
	gen        uint32 // bumped each time the block turns idle; tags ristretto values
	state      blockState
}

// droppedItem is a ristretto eviction or rejection waiting to be applied.
type droppedItem struct{ key, val uint64 }

// BlockManager allocates KV blocks, counts references and keeps the prefix
// cache. It is safe for concurrent use.
type BlockManager struct {
	blockSize int
	prefix    bool
	seed      maphash.Seed
	hashFn    func(parent uint64, toks []int32) uint64 // a test hook may replace it

	mu       sync.Mutex
	blocks   []kvBlock
	free     []int32 // stack
	idleHead int32   // least recently released
	idleTail int32   // most recently released
	nUsed    int
	nIdle    int
	index    map[uint64]int32 // chain hash -> registered block (used or idle)
	nextReg  uint64
	stats    BlockStats
	cache    *ristretto.Cache[uint64, uint64]
	closed   bool
	spare    []droppedItem

	cbMu       sync.Mutex // guards pending only; never held across a call
	pending    []droppedItem
	hasPending atomic.Bool
}

// NewBlockManager returns a manager of numBlocks blocks of blockSize tokens.
// With prefixCache false, Match and Register do nothing and released blocks go
// straight back to the free list. Close it to stop ristretto's goroutine.
func NewBlockManager(numBlocks, blockSize int, prefixCache bool) (*BlockManager, error) {
	return newBlockManager(numBlocks, blockSize, prefixCache, numBlocks)
}

// newBlockManager lets tests give ristretto an idle budget below numBlocks so
// that its eviction and rejection callbacks actually fire.
func newBlockManager(numBlocks, blockSize int, prefixCache bool, idleBudget int) (*BlockManager, error) {
	if numBlocks <= 0 || numBlocks > 1<<30 {
		return nil, fmt.Errorf("engine: block manager: %d blocks: want 1..2^30", numBlocks)
	}
	if blockSize <= 0 || blockSize > 1<<16 {
		return nil, fmt.Errorf("engine: block manager: block size %d: want 1..65536", blockSize)
	}
	m := &BlockManager{
		blockSize: blockSize,
		prefix:    prefixCache,
		seed:      maphash.MakeSeed(),
		blocks:    make([]kvBlock, numBlocks),
		free:      make([]int32, numBlocks),
		idleHead:  noBlock,
		idleTail:  noBlock,
	}
	m.hashFn = m.chainHash
	for i := range m.blocks {
		m.blocks[i].prev, m.blocks[i].next = noBlock, noBlock
		m.free[i] = int32(numBlocks - 1 - i) // pop order 0, 1, 2, ...
	}
	if prefixCache {
		m.index = make(map[uint64]int32, numBlocks)
		cache, err := ristretto.NewCache(&ristretto.Config[uint64, uint64]{
			NumCounters:        10 * int64(max(idleBudget, 1)),
			MaxCost:            int64(max(idleBudget, 1)),
			BufferItems:        64,
			IgnoreInternalCost: true, // cost is blocks, not bytes
			OnEvict:            m.onDrop,
			OnReject:           m.onDrop,
		})
		if err != nil {
			return nil, fmt.Errorf("engine: block manager: prefix cache: %w", err)
		}
		m.cache = cache
	}
	return m, nil
}

// Close stops the prefix cache's goroutine. The manager stays usable (the Go
// index still works; ristretto calls become no-ops).
func (m *BlockManager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	if m.cache != nil {
		m.cache.Close() // its Clear calls onDrop, which never takes m.mu
	}
}

// BlockSize returns the number of token positions in a block.
func (m *BlockManager) BlockSize() int { return m.blockSize }

// NumBlocks returns the size of the pool.
func (m *BlockManager) NumBlocks() int { return len(m.blocks) }

// Free returns how many blocks Allocate can hand out right now: the free list
// plus the idle cached blocks it would reclaim.
func (m *BlockManager) Free() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drainLocked()
	return len(m.free) + m.nIdle
}

// Stats returns a snapshot of the counts and counters.
func (m *BlockManager) Stats() BlockStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drainLocked()
	s := m.stats
	s.Free, s.Used, s.Idle, s.Registered = len(m.free), m.nUsed, m.nIdle, len(m.index)
	return s
}

// Allocate returns n blocks with refcount 1, or none and ErrNoBlocks.
func (m *BlockManager) Allocate(n int) ([]int32, error) {
	return m.AllocateAppend(nil, n)
}

// AllocateAppend is Allocate appending to dst (a sequence's block table), so
// that the decode path need not allocate. On error dst is returned unchanged.
// Idle cached blocks are reclaimed, least recently released first, when the
// free list is short.
func (m *BlockManager) AllocateAppend(dst []int32, n int) ([]int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drainLocked()
	if n < 0 {
		m.stats.Errors++
		return dst, fmt.Errorf("engine: allocate %d KV blocks: negative count", n)
	}
	if n > len(m.free)+m.nIdle {
		return dst, ErrNoBlocks
	}
	for len(m.free) < n {
		id := m.idleHead
		if m.cache != nil {
			m.cache.Del(m.blocks[id].hash)
		}
		m.dropIdleLocked(id)
		m.stats.Reclaimed++
	}
	for range n {
		k := len(m.free) - 1
		id := m.free[k]
		m.free = m.free[:k]
		b := &m.blocks[id]
		b.state, b.ref = blockUsed, 1
		m.nUsed++
		dst = append(dst, id)
	}
	return dst, nil
}

// Release drops one reference to each block. A block whose count reaches 0
// turns idle if its content is registered (Match can still find it), else it
// goes back to the free list. Pass a sequence's block table in order: the
// blocks are queued for reclaim tail first, so a prefix outlives its
// continuations. A bad id, or more releases of a block than it has
// references, rejects the whole call and changes nothing.
func (m *BlockManager) Release(blocks []int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drainLocked()
	for i, id := range blocks {
		if id < 0 || int(id) >= len(m.blocks) || m.blocks[id].ref <= 0 {
			for _, done := range blocks[:i] {
				m.blocks[done].ref++
			}
			m.stats.Errors++
			if id < 0 || int(id) >= len(m.blocks) {
				return fmt.Errorf("engine: release KV block %d of %d: %w", id, len(m.blocks), ErrBadBlock)
			}
			return fmt.Errorf("engine: release KV block %d: not in use (double release?): %w", id, ErrBadBlock)
		}
		m.blocks[id].ref--
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		id := blocks[i]
		b := &m.blocks[id]
		if b.state != blockUsed || b.ref != 0 {
			continue // still shared, or listed twice and already handled
		}
		m.nUsed--
		if b.reg != 0 {
			m.makeIdleLocked(id)
		} else {
			b.state = blockFree
			m.free = append(m.free, id)
		}
	}
	return nil
}

// Match returns the longest chain of registered full blocks that prefixes
// tokens, each with one more reference (idle ones turn used), and the number
// of tokens they cover. It never covers the whole prompt: at least the last
// token is left for the model to compute, so at most (len(tokens)-1)/blockSize
// blocks match.
func (m *BlockManager) Match(tokens []int32) (blocks []int32, cachedTokens int) {
	if !m.prefix || len(tokens) == 0 {
		return nil, 0
	}
	bs := m.blockSize
	limit := (len(tokens) - 1) / bs
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drainLocked()
	m.stats.MatchCalls++
	var parentHash, parentReg uint64
	for i := range limit {
		toks := tokens[i*bs : (i+1)*bs]
		h := m.hashFn(parentHash, toks)
		id, ok := m.index[h]
		if !ok {
			break
		}
		b := &m.blocks[id]
		if !m.sameContentLocked(b, toks, parentReg) {
			break
		}
		if blocks == nil {
			blocks = make([]int32, 0, limit-i)
		}
		blocks = append(blocks, id)
		if b.state == blockIdle {
			m.unlinkIdleLocked(id)
			if m.cache != nil {
				m.cache.Del(h)
			}
			b.state = blockUsed
			m.nIdle--
			m.nUsed++
		}
		b.ref++
		parentHash, parentReg = h, b.reg
	}
	m.stats.PrefixHits += int64(len(blocks))
	m.stats.PrefixMisses += int64(limit - len(blocks))
	m.stats.PrefixTokens += int64(len(blocks) * bs)
	return blocks, len(blocks) * bs
}

// Register records the content of a sequence's full blocks once the device has
// filled them: blocks[i] holds tokens[i*bs:(i+1)*bs]; a trailing partial block
// is skipped. It may be called again as the sequence grows. A block whose
// chain hash is already registered under another id stays unregistered (first
// writer wins). A hash hit with other content (a collision) stops the
// registration there; it is counted, not an error. The blocks must be in use.
func (m *BlockManager) Register(blocks []int32, tokens []int32) error {
	if !m.prefix {
		return nil
	}
	bs := m.blockSize
	n := min(len(blocks), len(tokens)/bs)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drainLocked()
	var parentHash, parentReg uint64
	for i := range n {
		id := blocks[i]
		if id < 0 || int(id) >= len(m.blocks) || m.blocks[id].state != blockUsed {
			m.stats.Errors++
			return fmt.Errorf("engine: register KV block %d (position %d): not in use: %w", id, i, ErrBadBlock)
		}
		toks := tokens[i*bs : (i+1)*bs]
		h := m.hashFn(parentHash, toks)
		b := &m.blocks[id]
		switch e, hit := m.index[h]; {
		case b.reg != 0:
			// Registered before (matched, or an earlier Register of this
			// sequence). Its content must be these tokens.
			if b.hash != h || !slices.Equal(b.tokens, toks) {
				m.stats.Errors++
				return fmt.Errorf("engine: register KV block %d (position %d): registered with other content: %w", id, i, ErrBadBlock)
			}
			// The caller vouches for the prefix, so the block may be
			// re-chained to the current entry for its parent (which differs
			// when that parent was reclaimed and registered again).
			b.parent = parentReg
		case hit:
			eb := &m.blocks[e]
			if !m.sameContentLocked(eb, toks, parentReg) {
				return nil
			}
			b = eb // same content under another id: first writer wins
		default:
			m.nextReg++
			b.hash, b.reg, b.parent = h, m.nextReg, parentReg
			b.tokens = append(b.tokens[:0], toks...)
			m.index[h] = id
		}
		parentHash, parentReg = h, b.reg
	}
	return nil
}

// sameContentLocked reports whether registered block b, found under the
// chain hash of toks, holds toks chained to the registration parentReg, and
// counts why not.
func (m *BlockManager) sameContentLocked(b *kvBlock, toks []int32, parentReg uint64) bool {
	switch {
	case !slices.Equal(b.tokens, toks):
		m.stats.Collisions++
		return false
	case b.parent != parentReg:
		m.stats.ParentMismatches++
		return false
	}
	return true
}

// chainHash hashes a block's tokens chained to its parent's hash.
func (m *BlockManager) chainHash(parent uint64, toks []int32) uint64 {
	var h maphash.Hash
	h.SetSeed(m.seed)
	var p [8]byte
	binary.LittleEndian.PutUint64(p[:], parent)
	h.Write(p[:])
	// The token bytes in host order: the hash never leaves the process.
	h.Write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(toks))), 4*len(toks)))
	return h.Sum64()
}

// makeIdleLocked turns a registered block whose refcount reached 0 idle.
func (m *BlockManager) makeIdleLocked(id int32) {
	b := &m.blocks[id]
	b.state = blockIdle
	b.gen++
	if b.gen == 0 {
		b.gen = 1 // 0 is the zero value of ristretto items that carry no value
	}
	m.nIdle++
	b.prev, b.next = m.idleTail, noBlock
	if m.idleTail != noBlock {
		m.blocks[m.idleTail].next = id
	} else {
		m.idleHead = id
	}
	m.idleTail = id
	if m.cache != nil && !m.cache.Set(b.hash, uint64(id)<<32|uint64(b.gen), 1) {
		m.stats.DroppedSets++ // still idle and reclaimable: we keep the record
	}
}

// dropIdleLocked unregisters an idle block and puts it on the free list. The
// caller deals with ristretto.
func (m *BlockManager) dropIdleLocked(id int32) {
	b := &m.blocks[id]
	m.unlinkIdleLocked(id)
	delete(m.index, b.hash)
	b.reg, b.parent, b.hash = 0, 0, 0
	b.state = blockFree
	m.nIdle--
	m.free = append(m.free, id)
}

func (m *BlockManager) unlinkIdleLocked(id int32) {
	b := &m.blocks[id]
	if b.prev != noBlock {
		m.blocks[b.prev].next = b.next
	} else {
		m.idleHead = b.next
	}
	if b.next != noBlock {
		m.blocks[b.next].prev = b.prev
	} else {
		m.idleTail = b.prev
	}
	b.prev, b.next = noBlock, noBlock
}

// onDrop is ristretto's OnEvict and OnReject. It runs on ristretto's
// goroutine and must not take m.mu (see the file comment): it queues.
func (m *BlockManager) onDrop(item *ristretto.Item[uint64]) {
	m.cbMu.Lock()
	m.pending = append(m.pending, droppedItem{key: item.Key, val: item.Value})
	m.hasPending.Store(true)
	m.cbMu.Unlock()
}

// drainLocked applies the queued ristretto drops whose block is still idle
// under the same hash and generation; the rest are stale and ignored.
func (m *BlockManager) drainLocked() {
	if !m.hasPending.Load() {
		return
	}
	m.cbMu.Lock()
	batch := m.pending
	m.pending = m.spare[:0]
	m.hasPending.Store(false)
	m.cbMu.Unlock()
	for _, d := range batch {
		id, gen := int64(d.val>>32), uint32(d.val)
		if id >= int64(len(m.blocks)) {
			continue
		}
		b := &m.blocks[id]
		if b.state != blockIdle || b.gen != gen || b.hash != d.key {
			continue
		}
		m.dropIdleLocked(int32(id))
		m.stats.Evicted++
	}
	m.spare = batch[:0]
}

// syncCache waits until ristretto has applied every buffered Set and Del and
// applies the drops that caused. Tests use it; the manager never needs to.
func (m *BlockManager) syncCache() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cache != nil && !m.closed {
		m.cache.Wait() // safe under m.mu: callbacks never take it
	}
	m.drainLocked()
}

// checkLocked verifies every invariant in the file comment. Tests call it
// through check; it is O(numBlocks).
func (m *BlockManager) checkLocked() error {
	n := len(m.blocks)
	if got := len(m.free) + m.nUsed + m.nIdle; got != n {
		return fmt.Errorf("free %d + used %d + idle %d = %d, want %d", len(m.free), m.nUsed, m.nIdle, got, n)
	}
	seen := make([]bool, n)
	for _, id := range m.free {
		if seen[id] {
			return fmt.Errorf("block %d twice on the free list", id)
		}
		seen[id] = true
		if b := &m.blocks[id]; b.state != blockFree || b.ref != 0 || b.reg != 0 {
			return fmt.Errorf("block %d on the free list: state %d ref %d reg %d", id, b.state, b.ref, b.reg)
		}
	}
	idle := 0
	for id, prev := m.idleHead, noBlock; id != noBlock; id = m.blocks[id].next {
		if seen[id] {
			return fmt.Errorf("block %d on the idle list and elsewhere (or twice)", id)
		}
		seen[id] = true
		b := &m.blocks[id]
		if b.state != blockIdle || b.ref != 0 || b.reg == 0 || b.prev != prev {
			return fmt.Errorf("block %d on the idle list: state %d ref %d reg %d", id, b.state, b.ref, b.reg)
		}
		prev = id
		idle++
	}
	if idle != m.nIdle {
		return fmt.Errorf("idle list holds %d blocks, count says %d", idle, m.nIdle)
	}
	used := 0
	for id := range m.blocks {
		b := &m.blocks[id]
		switch b.state {
		case blockUsed:
			used++
			if b.ref <= 0 || seen[id] {
				return fmt.Errorf("used block %d: ref %d, on a list %v", id, b.ref, seen[id])
			}
		case blockFree, blockIdle:
			if !seen[id] {
				return fmt.Errorf("block %d in state %d is on no list", id, b.state)
			}
		}
		if b.reg != 0 {
			if e, ok := m.index[b.hash]; !ok || e != int32(id) {
				return fmt.Errorf("registered block %d not indexed under its hash", id)
			}
		}
	}
	if used != m.nUsed {
		return fmt.Errorf("%d used blocks, count says %d", used, m.nUsed)
	}
	for h, id := range m.index {
		if b := &m.blocks[id]; b.reg == 0 || b.hash != h {
			return fmt.Errorf("index entry %#x -> block %d, which is not registered under it", h, id)
		}
	}
	return nil
}
