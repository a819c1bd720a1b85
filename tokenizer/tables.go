package tokenizer

import (
	"hash/maphash"
	"runtime"
	"sync"
)

// The two hash tables New builds: pieces (text → id) and merges ((id, id)
// → rank and result). Both are open addressing with linear probing, and
// both are filled in parallel: a table's slots are cut into one range per
// worker, each worker inserts the keys whose home slot is in its range and
// never writes outside it, and the few keys whose probe runs past their
// range end are inserted afterwards. Keys with equal home slots go to the
// same worker in input order, so "the first of duplicates wins" holds as in
// a sequential build.

// parallelism is how many workers New uses for n items.
func parallelism(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), n/(1<<14)))
}

// forChunks runs f over [0,n) cut into w contiguous chunks.
func forChunks(n, w int, f func(lo, hi int)) {
	if w <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + w - 1) / w
	for lo := 0; lo < n; lo += chunk {
		wg.Go(func() { f(lo, min(n, lo+chunk)) })
	}
	wg.Wait()
}

// fillRanges runs the partitioned insert: insert(i, lo, hi) places item i
// (taken in increasing order) if its home slot lies in [lo,hi), reporting
// false when its probe would leave the range; those items are then placed
// by insertAny.
func fillRanges(items, slots, w int, insert func(i, lo, hi int) (spill bool), insertAny func(i int)) {
	if w <= 1 {
		for i := 0; i < items; i++ {
			insertAny(i)
		}
		return
	}
	spills := make([][]int32, w)
	var wg sync.WaitGroup
	for k := range w {
		lo, hi := slots*k/w, slots*(k+1)/w
		wg.Go(func() {
			for i := 0; i < items; i++ {
				if insert(i, lo, hi) {
					spills[k] = append(spills[k], int32(i))
				}
			}
		})
	}
	wg.Wait()
	for _, s := range spills {
		for _, i := range s {
			insertAny(int(i))
		}
	}
}

func tableBits(n int) uint {
	bits := uint(4)
	for 1<<bits < n+n/2 {
		bits++
	}
	return bits
}

// pairTable maps an adjacent pair of token ids to the merge joining them.
type pairTable struct {
	slots []pairSlot
	shift uint8
}

type pairSlot struct {
	key  uint64 // 0: empty
	rank uint32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a)+1)<<32 | uint64(uint32(b)+1) }

func (p *pairTable) home(k uint64) int { return int((k * 0x9E3779B97F4A7C15) >> p.shift) }

// build fills the table with merge i joining left[i] and right[i] into
// result[i] at rank i; the lowest rank of a repeated pair is kept, as
// llama.cpp keeps it.
func (p *pairTable) build(left, right, result []int32) {
	n := len(left)
	bits := tableBits(n)
	p.slots = make([]pairSlot, 1<<bits)
	p.shift = uint8(64 - bits)
	mask := len(p.slots) - 1
	insert := func(i, lo, hi int) bool {
		k := pairKey(left[i], right[i])
		j := p.home(k)
		if j < lo || j >= hi {
			return false
		}
		for ; j < hi; j++ {
			s := &p.slots[j]
			if s.key == k {
				return false
			}
			if s.key == 0 {
				*s = pairSlot{key: k, rank: uint32(i), id: result[i]}
				return false
			}
		}
		return true
	}
	insertAny := func(i int) {
		k := pairKey(left[i], right[i])
		for j := p.home(k); ; j = (j + 1) & mask {
			s := &p.slots[j]
			if s.key == k {
				return
			}
			if s.key == 0 {
				*s = pairSlot{key: k, rank: uint32(i), id: result[i]}
				return
			}
		}
	}
	fillRanges(n, len(p.slots), parallelism(n), insert, insertAny)
}

func (p *pairTable) get(a, b int32) (rank uint32, id int32, ok bool) {
	if len(p.slots) == 0 {
		return 0, 0, false
	}
	k := pairKey(a, b)
	mask := len(p.slots) - 1
	for j := p.home(k); ; j = (j + 1) & mask {
		s := &p.slots[j]
		if s.key == k {
			return s.rank, s.id, true
		}
		if s.key == 0 {
			return 0, 0, false
		}
	}
}

// strTable maps token texts to ids. A slot holds part of the key's hash,
// its length and id+1, and the key itself when it fits in 8 bytes (most
// tokens do) or else where it lies in slab: a probe touches one slot and,
// only for long keys, the text of a likely match.
type strTable struct {
	slots []strSlot
	slab  string
	seed  maphash.Seed
}

type strSlot struct {
	meta uint64 // hash>>40 <<40 | min(len, 255)<<32 | id+1; 0: empty
	data uint64 // the key's bytes, little-endian, when len <= 8; else off<<32 | len
}

const tagMask = uint64(0xFFFFFF) << 40

// keyMeta is the part of a slot's meta that a key of length n with hash h
// must match.
func keyMeta(h uint64, n int) uint64 { return h&tagMask | uint64(min(n, 255))<<32 }

// pack8 is the little-endian value of a key of at most 8 bytes.
func pack8[S string | []byte](k S) uint64 {
	var x uint64
	for i := len(k) - 1; i >= 0; i-- {
		x = x<<8 | uint64(k[i])
	}
	return x
}

func (t *strTable) slotData(k string, off uint32) uint64 {
	if len(k) <= 8 {
		return pack8(k)
	}
	return uint64(off)<<32 | uint64(len(k))
}

// matches reports whether slot s holds key k, whose meta and (for short
// keys) packed bytes are given.
func (t *strTable) matches(s *strSlot, meta, packed uint64, k string) bool {
	if s.meta&^0xFFFFFFFF != meta {
		return false
	}
	if len(k) <= 8 {
		return s.data == packed
	}
	off, n := uint32(s.data>>32), uint32(s.data)
	return int(n) == len(k) && t.slab[off:off+n] == k
}

// build indexes keys[i] for every i whose bit in skip is clear; the
// lowest id of a repeated text is kept. Each keys[i] must be
// slab[offs[i]:offs[i+1]].
func (t *strTable) build(seed maphash.Seed, keys []string, slab string, offs []uint32, skip []uint64) {
	n := len(keys)
	t.slab = slab
	t.seed = seed
	t.slots = make([]strSlot, 1<<tableBits(n))
	mask := uint64(len(t.slots) - 1)
	hashes := make([]uint64, n)
	w := parallelism(n)
	forChunks(n, w, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if skip[i/64]&(1<<(i%64)) == 0 {
				hashes[i] = maphash.String(t.seed, keys[i])
			}
		}
	})
	// place probes from slot j; a range-limited probe (wrap false) gives
	// up at hi instead of entering another worker's range.
	place := func(i int, j, hi uint64, wrap bool) (spill bool) {
		k := keys[i]
		meta := keyMeta(hashes[i], len(k))
		e := strSlot{meta: meta | uint64(i+1), data: t.slotData(k, offs[i])}
		for {
			if !wrap && j >= hi {
				return true
			}
			s := &t.slots[j]
			if s.meta == 0 {
				*s = e
				return false
			}
			if t.matches(s, meta, e.data, k) {
				return false
			}
			j++
			if wrap {
				j &= mask
			}
		}
	}
	insert := func(i, lo, hi int) bool {
		if skip[i/64]&(1<<(i%64)) != 0 {
			return false
		}
		j := hashes[i] & mask
		if j < uint64(lo) || j >= uint64(hi) {
			return false
		}
		return place(i, j, uint64(hi), false)
	}
	insertAny := func(i int) {
		if skip[i/64]&(1<<(i%64)) == 0 {
			place(i, hashes[i]&mask, 0, true)
		}
	}
	fillRanges(n, len(t.slots), w, insert, insertAny)
}

func (t *strTable) get(k string) (int32, bool) {
	if len(t.slots) == 0 {
		return -1, false
	}
	return t.probe(maphash.String(t.seed, k), k)
}

func (t *strTable) getBytes(k []byte) (int32, bool) {
	if len(t.slots) == 0 {
		return -1, false
	}
	// The conversions below do not allocate: the compiler sees the string
	// does not escape.
	return t.probe(maphash.Bytes(t.seed, k), string(k))
}

func (t *strTable) probe(h uint64, k string) (int32, bool) {
	meta := keyMeta(h, len(k))
	var packed uint64
	if len(k) <= 8 {
		packed = pack8(k)
	}
	mask := uint64(len(t.slots) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		s := &t.slots[j]
		if s.meta == 0 {
			return -1, false
		}
		if t.matches(s, meta, packed, k) {
			return int32(uint32(s.meta) - 1), true
		}
	}
}
