package sample

import (
	"math"
	"slices"
)

// Steps 6 to 10 keep a prefix of the candidate order and draw from it. The
// order is defined by a sort, but sorting a 150k vocabulary costs
// milliseconds and a kept prefix can hold most of it (top_p 0.95 at
// temperature 1.5), so the sampler sorts only what it must:
//
//   - Top-k with k <= heapTopK: a bounded heap selects the k first
//     candidates, which are then sorted and walked directly.
//   - Min-p alone: one comparison per token finds the kept set, which is
//     sorted and walked.
//   - Otherwise one pass (scan) computes every weight, their sum, and a
//     histogram of the candidates by scaled logit x = (z-zmax)/T, in buckets
//     of 1/32 unit. Buckets partition the order into contiguous runs, and the
//     histogram gives each run's count and weight, so every cut (top-k by
//     count, top-p by weight, min-p by x) and the draw fall in a known
//     bucket. Only those buckets are collected (one more pass, usually) and
//     sorted; the running sum in the order is the bucket sums before them
//     plus the sorted walk inside.
//
// The running sums of the bucket path add bucket totals rather than every
// weight in sequence, which is why the package documentation leaves the
// summation order unspecified: the two differ only in rounding.

const (
	heapTopK = 1024

	nBuckets       = 1024
	bucketsPerUnit = 32
	// noBucket marks -Inf logits, which are never candidates.
	noBucket = nBuckets
)

// hist is the bucket path's state for one Sample call.
type hist struct {
	scanned bool
	bidx    []uint16 // bucket of every token
	finite  int      // number of candidates
	tailN   int      // candidates in the tail bucket
	mass    [nBuckets]float64
	cumMass [nBuckets + 1]float64 // weight of the buckets before b, summed bucket by bucket

	// Counting in scan would slow the loop that matters, for top-k alone,
	// so counts are taken from bidx when top-k needs them.
	cnt    [nBuckets]int32
	cumCnt [nBuckets + 1]int32 // candidates in the buckets before b

	segs   []segment // collected buckets, sorted, in keys and w
	want   [nBuckets + 1]bool
	wanted []int
}

type segment struct{ b, lo, hi int }

// draw performs steps 6 to 10 for T > 0; leader is the first candidate.
func (s *Sampler) draw(z []float32, pos uint64, leader int32) int32 {
	u := float64(Uniform(s.p.Seed, pos, 0))
	if s.heapPath(z) || s.minPPath(z) {
		var kept int
		if s.heapPath(z) {
			kept = s.cutTopK(z)
		} else {
			kept = s.cutMinP(z)
		}
		var total float64
		for _, w := range s.w[:kept] {
			total += w
		}
		return walk(s.keys[:kept], s.w[:kept], 0, u*total, leader)
	}
	cb, cj := s.cutBuckets(z, u)
	target := u * s.massBefore(z, cb, cj)
	b := s.massBucket(target, cb, true)
	if b >= nBuckets {
		return leader
	}
	keys, w := s.segment(z, b)
	if b == cb {
		keys, w = keys[:min(cj, len(keys))], w[:min(cj, len(w))]
	}
	return walk(keys, w, s.cumMass[b], target, leader)
}

func (s *Sampler) heapPath(z []float32) bool {
	k := s.p.TopK
	return k > 0 && k <= heapTopK && k < len(z)
}

// minPPath: min-p alone needs no total weight, only the set it keeps,
// which one comparison per token finds.
func (s *Sampler) minPPath(z []float32) bool {
	p := &s.p
	return p.MinP > 0 && p.TopP == 1 && !(p.TopK > 0 && p.TopK < len(z))
}

// x is a candidate's scaled logit, computed the same way everywhere.
func (s *Sampler) x(z []float32, k uint64) float64 {
	return (float64(z[uint32(k)]) - s.zm) * s.invT
}

// cutTopK selects, sorts and weighs the top-k candidates into keys and w,
// and returns how many of them top-p and min-p keep.
func (s *Sampler) cutTopK(z []float32) int {
	s.keys = selectTop(z, s.p.TopK, s.keys)
	s.prefix = true
	s.w = s.w[:0]
	var sum float64
	for _, k := range s.keys {
		w := expNeg(s.x(z, k))
		s.w = append(s.w, w)
		sum += w
	}
	kept := len(s.keys)
	if s.p.TopP < 1 {
		target := float64(s.p.TopP) * sum
		var cum float64
		for j, w := range s.w {
			cum += w
			if cum >= target {
				kept = j + 1
				break
			}
		}
	}
	if s.p.MinP > 0 {
		l := math.Log(float64(s.p.MinP))
		for j, k := range s.keys[:kept] {
			if s.x(z, k) < l {
				kept = j
				break
			}
		}
	}
	return kept
}

// cutMinP puts in keys, sorted, every token with z above a threshold, and
// in w the weights of the first of them, those with x >= ln(MinP); it
// returns how many those are. x >= l implies
// z >= zmax + l·T up to rounding, so a float32 threshold a little below
// that finds them all without computing x for every token; x decides.
func (s *Sampler) cutMinP(z []float32) int {
	l := math.Log(float64(s.p.MinP))
	zt := s.zm + l*s.temp*(1+1e-9) - 1e-9*math.Abs(s.zm)
	thr := float32(-math.MaxFloat32)
	if zt > -math.MaxFloat32 {
		thr = float32(zt)
		if float64(thr) > zt {
			thr = math.Nextafter32(thr, negInf)
		}
	}
	s.keys = s.keys[:0]
	for i, v := range z {
		if v >= thr {
			s.keys = append(s.keys, key(v, i))
		}
	}
	slices.Sort(s.keys)
	s.prefix = true // every token with z >= thr, a prefix of the order
	s.w = s.w[:0]
	kept := 0
	for _, k := range s.keys {
		x := s.x(z, k)
		if x < l {
			break
		}
		s.w = append(s.w, expNeg(x))
		kept++
	}
	return kept
}

// walk returns the first candidate at which the running sum, starting at
// cum, exceeds target; if rounding leaves it short, the last candidate of
// positive weight, or fallback if there is none.
func walk(keys []uint64, w []float64, cum, target float64, fallback int32) int32 {
	last := -1
	for j, wj := range w {
		cum += wj
		if wj > 0 {
			last = j
		}
		if cum > target {
			return int32(uint32(keys[j]))
		}
	}
	if last >= 0 {
		return int32(uint32(keys[last]))
	}
	return fallback
}

// A cut (b, j) keeps every candidate in buckets before b and the first j of
// bucket b, in order; (nBuckets, 0) keeps everything. Cuts compare
// lexicographically.
func minCut(b1, j1, b2, j2 int) (int, int) {
	if b2 < b1 || (b2 == b1 && j2 < j1) {
		return b2, j2
	}
	return b1, j1
}

// cutBuckets runs scan and returns the cut of steps 7 to 9. u only serves
// to collect the bucket of the draw along with those of the cuts.
func (s *Sampler) cutBuckets(z []float32, u float64) (cb, cj int) {
	total := s.scan(z)
	p := &s.p
	topK := p.TopK > 0 && p.TopK < s.finite
	topP := p.TopP < 1
	minP := p.MinP > 0
	l := math.Inf(-1)
	if minP {
		l = math.Log(float64(p.MinP))
	}

	// Prefetch: the buckets of the cuts and of the draw, as far as the
	// histogram alone tells, collected in one pass. Anything missed is
	// collected when needed.
	bk, bm, c := nBuckets, nBuckets, nBuckets
	if topK {
		s.count(z)
		bk = s.countBucket(p.TopK)
		s.wantBucket(bk)
		c = bk
	}
	if minP {
		bm = bucketOf(l)
		s.wantBucket(bm)
		c = min(c, bm)
	}
	if topP {
		zk := total // an upper bound of top-k's weight, good enough here
		if topK {
			zk = s.cumMass[bk+1]
		}
		bp := s.massBucket(float64(p.TopP)*zk, c, false)
		s.wantBucket(bp)
		c = min(c, bp)
	}
	if c < nBuckets {
		lo := s.massBucket(u*s.cumMass[c], c, true)
		hi := s.massBucket(u*s.cumMass[c+1], c, true)
		for b := lo; b <= min(hi, lo+3); b++ {
			s.wantBucket(b)
		}
	} else {
		s.wantBucket(s.massBucket(u*total, nBuckets, true))
	}
	s.fetch(z)

	// Step 7, top-k: a cut by count.
	cb, cj = nBuckets, 0
	if topK {
		cb, cj = bk, p.TopK-int(s.cumCnt[bk])
	}
	// Step 8, top-p: a cut by running weight, against the weight of what
	// top-k kept.
	if topP {
		target := float64(p.TopP) * s.massBefore(z, cb, cj)
		b := s.massBucket(target, cb, false)
		_, w := s.segment(z, b)
		lim := len(w)
		if b == cb {
			lim = min(cj, lim)
		}
		cum, j := s.cumMass[b], 0
		for j < lim {
			cum += w[j]
			j++
			if cum >= target {
				break
			}
		}
		cb, cj = minCut(cb, cj, b, j)
	}
	// Step 9, min-p: a cut by scaled logit, x >= ln(MinP).
	if minP && bm <= cb {
		keys, _ := s.segment(z, bm)
		lim := len(keys)
		if bm == cb {
			lim = min(cj, lim)
		}
		j := 0
		for j < lim && s.x(z, keys[j]) >= l {
			j++
		}
		cb, cj = minCut(cb, cj, bm, j)
	}
	return cb, cj
}

// bucketOf is the bucket of scaled logit x <= 0 (the tail bucket for
// everything deeper than the histogram).
func bucketOf(x float64) int {
	if f := max(-x*bucketsPerUnit, 0); f < nBuckets-1 {
		return int(f)
	}
	return nBuckets - 1
}

// count fills cnt and cumCnt.
func (s *Sampler) count(z []float32) {
	s.cnt = [nBuckets]int32{}
	for _, b := range s.bidx[:len(z)] {
		if b < nBuckets {
			s.cnt[b]++
		}
	}
	for b := range nBuckets {
		s.cumCnt[b+1] = s.cumCnt[b] + s.cnt[b]
	}
}

// nonEmpty reports whether bucket b holds a candidate: every bucket but the
// tail has weight if it has candidates, since its weights exceed e^-32.
func (s *Sampler) nonEmpty(b int) bool {
	if b < 0 || b >= nBuckets {
		return false
	}
	return s.mass[b] > 0 || (b == nBuckets-1 && s.tailN > 0)
}

// countBucket is the bucket holding the k-th candidate (k >= 1).
func (s *Sampler) countBucket(k int) int {
	b, _ := slices.BinarySearch(s.cumCnt[1:], int32(k))
	return min(b, nBuckets-1)
}

// massBucket is the first bucket before limit through which the bucket sums
// reach target (exceed it, if strict), or limit if none does.
func (s *Sampler) massBucket(target float64, limit int, strict bool) int {
	for b := 0; b < limit; b++ {
		if m := s.cumMass[b+1]; m > target || (!strict && m >= target) {
			return b
		}
	}
	return limit
}

// massBefore is the weight of the candidates before cut (b, j).
func (s *Sampler) massBefore(z []float32, b, j int) float64 {
	if b >= nBuckets {
		return s.cumMass[nBuckets]
	}
	m := s.cumMass[b]
	if j > 0 {
		_, w := s.segment(z, b)
		for _, x := range w[:min(j, len(w))] {
			m += x
		}
	}
	return m
}

// wantBucket marks bucket b for the next fetch.
func (s *Sampler) wantBucket(b int) {
	if !s.nonEmpty(b) || s.want[b] {
		return
	}
	for _, g := range s.segs {
		if g.b == b {
			return
		}
	}
	s.want[b] = true
	s.wanted = append(s.wanted, b)
}

// fetch collects, sorts and weighs the wanted buckets in one pass. Sorted
// keys of several buckets come out bucket by bucket, since bucket index
// never decreases along the order.
func (s *Sampler) fetch(z []float32) {
	if len(s.wanted) == 0 {
		return
	}
	start := len(s.keys)
	for i, b := range s.bidx[:len(z)] {
		if s.want[b] {
			s.keys = append(s.keys, key(z[i], i))
		}
	}
	for _, b := range s.wanted {
		s.want[b] = false
	}
	s.wanted = s.wanted[:0]
	slices.Sort(s.keys[start:])
	s.w = s.w[:start]
	for _, k := range s.keys[start:] {
		s.w = append(s.w, expNeg(s.x(z, k)))
	}
	for j := start; j < len(s.keys); {
		b := s.bidx[uint32(s.keys[j])]
		e := j + 1
		for e < len(s.keys) && s.bidx[uint32(s.keys[e])] == b {
			e++
		}
		s.segs = append(s.segs, segment{b: int(b), lo: j, hi: e})
		j = e
	}
}

// segment returns bucket b's candidates in order with their weights,
// collecting the bucket if no fetch did.
func (s *Sampler) segment(z []float32, b int) ([]uint64, []float64) {
	if !s.nonEmpty(b) {
		return nil, nil
	}
	for pass := 0; pass < 2; pass++ {
		for _, g := range s.segs {
			if g.b == b {
				return s.keys[g.lo:g.hi], s.w[g.lo:g.hi]
			}
		}
		s.wantBucket(b)
		s.fetch(z)
	}
	return nil, nil
}

// scan computes every candidate's weight, their sum and the histogram. It
// is the one loop that runs exp over the whole vocabulary, so expNeg is
// inlined by hand. Most tokens of a real distribution land in the tail
// bucket; its sums stay in registers because accumulating them in memory
// would serialize the loop on store-to-load latency.
func (s *Sampler) scan(z []float32) float64 {
	if len(s.bidx) < len(z) {
		s.bidx = make([]uint16, s.vocab)
	}
	bidx := s.bidx[:len(z)]
	s.mass = [nBuckets]float64{}
	zm, invT := s.zm, s.invT
	var ninf, tailN int
	var tail0, tail1 float64
	for i, v := range z {
		if v == negInf {
			bidx[i] = noBucket
			ninf++
			continue
		}
		x := (float64(v) - zm) * invT
		var w float64
		if x > expUnderflow { // w = expNeg(x)
			t := float64(x*expInvL) + expShifter
			k := math.Float64bits(t) - math.Float64bits(expShifter)
			kf := t - expShifter
			r := float64(x-float64(kf*expL1)) - float64(kf*expL2)
			p := math.FMA(math.FMA(math.FMA(math.FMA(1.0/24, r, 1.0/6), r, 0.5), r, 1), r, 1)
			w = math.Float64frombits(exp2Tab[k&127]+(k>>7)<<52) * p
		}
		if f := max(-x*bucketsPerUnit, 0); f < nBuckets-1 { // b = bucketOf(x)
			b := int(f) & (nBuckets - 1) // a no-op that drops the bounds check
			bidx[i] = uint16(b)
			s.mass[b] += w
		} else {
			bidx[i] = nBuckets - 1
			tailN++
			if tailN&1 == 0 {
				tail0 += w
			} else {
				tail1 += w
			}
		}
	}
	s.mass[nBuckets-1] = tail0 + tail1
	for b := range nBuckets {
		s.cumMass[b+1] = s.cumMass[b] + s.mass[b]
	}
	s.finite, s.tailN = len(z)-ninf, tailN
	s.scanned = true
	return s.cumMass[nBuckets]
}

// sumExp1 is the sum of e^(z-zmax) over the finite z: the softmax
// denominator at temperature 1. expNeg is inlined as in scan.
func sumExp1(z []float32, zm float64) float64 {
	var s0, s1 float64
	for i, v := range z {
		if v == negInf {
			continue
		}
		x := float64(v) - zm
		var w float64
		if x > expUnderflow { // w = expNeg(x)
			t := float64(x*expInvL) + expShifter
			k := math.Float64bits(t) - math.Float64bits(expShifter)
			kf := t - expShifter
			r := float64(x-float64(kf*expL1)) - float64(kf*expL2)
			p := math.FMA(math.FMA(math.FMA(math.FMA(1.0/24, r, 1.0/6), r, 0.5), r, 1), r, 1)
			w = math.Float64frombits(exp2Tab[k&127]+(k>>7)<<52) * p
		}
		if i&1 == 0 {
			s0 += w
		} else {
			s1 += w
		}
	}
	return s0 + s1
}
