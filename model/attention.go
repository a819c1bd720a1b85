package model

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"ringlm/internal/fma"
)

// Attention for a step: each sequence's queries of this step against
// every position they see, one head at a time, in chunks of queries
// (attnChunk) that share the keys and values while those are in cache.
//
// For a query at position p (keys windowStart(p)..p):
//
//   - score_i = dot(q, k_i) · scale, the dot product in the order of
//     tiles.go, then multiplied (rounded) by scale = 1/sqrt(head dim);
//   - the probabilities are softmax of the scores (softmax below);
//   - out[j] = Σ_i p_i · v_i[j] summed in order of i from +0, each term
//     fused into the sum (out = fma(p_i, v_i[j], out), rounded once).
//
// A chunk's queries see different key ranges (each one more than the
// last; with a sliding window, one fewer at the start too). The kernels
// sum the range every query of a tile sees; the keys only some of them
// see are summed per query, before (window starts) or after (causal
// ends), so that each output is its own key range's sum in order,
// whatever the tile: a sequence's outputs do not depend on how its
// prompt was chunked or what else ran in the step.

// attnChunk is the queries a unit of attention work takes: their scores
// against a few thousand keys stay in the L2 cache.
const attnChunk = 48

// attnItem is a unit of attention work: queries [t0, t1) of sequence seq
// (indices into its tokens of this step), head head.
type attnItem struct {
	seq, t0, t1, head int
}

// attnScratch is one worker's buffers.
type attnScratch struct {
	kp, vp []*byte    // rows of the chunk's keys and values
	scores []float32  // queries × keys, probabilities after softmax
	row    []float32  // a converted value row (Go path)
	ptrs   [4]*byte   // a short tile's rows
	edge   [4]float32 // its outputs
}

var attnScratchPool sync.Pool

// attention computes layer's attention output att (tokens × heads·hd)
// from the queries q of every token of the step; the step's keys and
// values are in kv already. first[s] is the index of sequence s's first
// token in the step.
func (m *Model) attention(kv *KVPool, layer int, seqs []Seq, first []int, q, att []float32) {
	c := &m.Config
	sc := &m.scratch
	items := sc.items[:0]
	cost := 0
	for s := range seqs {
		n := len(seqs[s].Tokens)
		for h := range c.Heads {
			for t0 := 0; t0 < n; t0 += attnChunk {
				items = append(items, attnItem{s, t0, min(n, t0+attnChunk), h})
			}
		}
		cost += n * (seqs[s].Pos + n)
	}
	sc.items = items
	var next atomic.Int64
	m.pool.run(cost*c.Heads*c.HeadDim, func() {
		as, _ := attnScratchPool.Get().(*attnScratch)
		if as == nil {
			as = new(attnScratch)
		}
		for {
			i := int(next.Add(1)) - 1
			if i >= len(items) {
				break
			}
			it := items[i]
			m.attendChunk(kv, layer, &seqs[it.seq], first[it.seq], it, q, att, as)
		}
		attnScratchPool.Put(as)
	})
}

// attendChunk computes item it's outputs into att.
func (m *Model) attendChunk(kv *KVPool, layer int, s *Seq, first int, it attnItem, q, att []float32, as *attnScratch) {
	c := &m.Config
	hd, qd := c.HeadDim, c.Heads*c.HeadDim
	g := it.head / (c.Heads / c.KVHeads)
	kmin := c.windowStart(s.Pos + it.t0)
	kmax := s.Pos + it.t1 - 1
	nk, nq := kmax-kmin+1, it.t1-it.t0
	as.kp = kv.rows(layer, 0, s.Blocks, kmin, kmax+1, g*hd, as.kp[:0])
	as.vp = kv.rows(layer, 1, s.Blocks, kmin, kmax+1, g*hd, as.vp[:0])
	ld := nk + 3 // a short tile of keys writes up to 3 columns past the last
	scores := buf(&as.scores, nq*ld)
	qs := q[(first+it.t0)*qd+it.head*hd:]
	m.scores(kv, as, qs, qd, nq, scores, ld)
	scale := float32(1 / math.Sqrt(float64(hd)))
	for t := range nq {
		p := s.Pos + it.t0 + t
		softmax(scores[t*ld+c.windowStart(p)-kmin:t*ld+p-kmin+1], scale)
	}
	out := att[(first+it.t0)*qd+it.head*hd:]
	for t := range nq {
		clear(out[t*qd : t*qd+hd])
	}
	// Key range of query t, relative to kmin: [lo(t), hi(t)).
	lo := func(t int) int { return c.windowStart(s.Pos+it.t0+t) - kmin }
	hi := func(t int) int { return s.Pos + it.t0 + t - kmin + 1 }
	maxN := pvWidth(kv, hd)
	for t := 0; t < nq; t += maxN {
		n := min(maxN, nq-t)
		a, b := lo(t+n-1), hi(t)
		if a >= b { // no key every query sees (a window shorter than the tile)
			for j := t; j < t+n; j++ {
				m.pv(kv, as, lo(j), hi(j), scores[j*ld:], ld, out[j*qd:], qd, 1)
			}
			continue
		}
		for j := t; j < t+n; j++ {
			m.pv(kv, as, lo(j), a, scores[j*ld:], ld, out[j*qd:], qd, 1)
		}
		m.pv(kv, as, a, b, scores[t*ld:], ld, out[t*qd:], qd, n)
		for j := t; j < t+n; j++ {
			m.pv(kv, as, b, hi(j), scores[j*ld:], ld, out[j*qd:], qd, 1)
		}
	}
}

// pvKernel is a kernel of the weighted sum of value rows (tiles_amd64.s).
type pvKernel func(v **byte, voff uintptr, n int, p *float32, ldp uintptr, out *float32, ldo uintptr, w int)

// scores sets scores[t*ld + i] to the dot product of key i (as.kp) with
// query t (qs[t*qd:], head dim long), for nq queries and every key.
func (m *Model) scores(kv *KVPool, as *attnScratch, qs []float32, qd, nq int, scores []float32, ld int) {
	hd, nk := m.HeadDim, len(as.kp)
	ks, rows := kvTileKernels(kv, hd)
	if ks == nil {
		row := buf(&as.row, hd)
		for i, k := range as.kp {
			kv.convert(row, k)
			for t := range nq {
				scores[t*ld+i] = dotGo(row, qs[t*qd:t*qd+hd])
			}
		}
		return
	}
	maxN := len(ks)
	_ = qs[(nq-1)*qd+hd-1]
	_ = scores[(nq-1)*ld+ld-1]
	for i := 0; i < nk; i += rows {
		w := &as.ptrs
		if nk-i >= 4 {
			w = (*[4]*byte)(unsafe.Pointer(&as.kp[i]))
		} else { // pad a short tile with its last key (ld has room)
			for r := range as.ptrs {
				as.ptrs[r] = as.kp[min(i+r, nk-1)]
			}
		}
		for t := 0; t < nq; t += maxN {
			n := min(maxN, nq-t)
			ks[n-1](w, &qs[t*qd], uintptr(4*qd), &scores[t*ld+i], uintptr(4*ld), 4, hd)
		}
	}
}

// pv adds Σ_{i in [a, b)} p[t*ldp+i] · value i to out[t*ldo:][:hd] for
// the n queries t, in order of i (the kernels' n is at most pvWidth).
func (m *Model) pv(kv *KVPool, as *attnScratch, a, b int, p []float32, ldp int, out []float32, ldo, n int) {
	if a >= b {
		return
	}
	hd := m.HeadDim
	ks, cols, unit := kvPVKernels(kv, hd)
	if ks == nil {
		row := buf(&as.row, hd)
		for i := a; i < b; i++ {
			kv.convert(row, as.vp[i])
			for t := range n {
				o, w := out[t*ldo:t*ldo+hd], p[t*ldp+i]
				for j, v := range row {
					o[j] = fma.F32(w, v, o[j])
				}
			}
		}
		return
	}
	_ = p[(n-1)*ldp+b-1]
	_ = out[(n-1)*ldo+hd-1]
	_ = as.vp[b-1]
	eb := kv.elemBytes()
	for c0 := 0; c0 < hd; c0 += cols {
		ks[n-1](&as.vp[a], uintptr(c0*eb), b-a, &p[a], uintptr(4*ldp), &out[c0], uintptr(4*ldo), min(cols, hd-c0)/unit)
	}
}

// softmaxGo replaces x by softmax(scale·x): y_i = x_i·scale (rounded),
// m = max y_i, e_i = exp32(y_i - m), and p_i = e_i · float32(1/Σ e_i),
// the sum taken in float64 in sixteen lanes (e_i into lane i mod 16,
// folded as sum16 folds). Every implementation computes these bits
// (NaNs as NaN).
func softmaxGo(x []float32, scale float32) {
	if len(x) == 0 {
		return
	}
	for i := range x {
		x[i] *= scale
	}
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var s [16]float64
	for i, v := range x {
		e := exp32(v - mx)
		x[i] = e
		s[i%16] += float64(e)
	}
	inv := float32(1 / sum16(&s))
	for i := range x {
		x[i] *= inv
	}
}

// exp32's constants: log2(e), ln 2 in two parts (hi, and the rest), and
// 1/i! for the polynomial, each rounded to float32 (softmax_amd64.s has
// their bits).
const (
	expLog2e = float32(1.44269504088896340736)
	expLn2Hi = float32(0.693145751953125)
	expLn2Lo = float32(0.693147180559945309417232121458 - 0.693145751953125)
)

var expPoly = [8]float32{1, 1, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040}

// exp32 is e^x within 1 ulp for x ≤ 0 (softmax's arguments; swiglu's for
// x up to about 88), in float32 operations each rounded once, so that
// vector kernels give its bits: x' = min(max(x, -126), 89); k = x'·log2e
// rounded to an integer (ties to even);
// r = fma(k, -ln2Lo, fma(k, -ln2Hi, x')); p = Horner's polynomial of
// degree 7 in r with fused steps; e = p · 2^k, with 2^k as 0 for k <
// -126 (results below the normal range go to 0 there, as softmax's
// terms that small cannot matter) and +Inf for k = 128 (from x ≈ 88.4,
// a little before e^x overflows: swiglu divides by it).
func exp32(x float32) float32 {
	x = min(max(x, -126), 89) // NaN stays NaN
	k := float32(math.RoundToEven(float64(x * expLog2e)))
	r := fma.F32(k, -expLn2Hi, x)
	r = fma.F32(k, -expLn2Lo, r)
	p := expPoly[7]
	for i := 6; i >= 0; i-- {
		p = fma.F32(p, r, expPoly[i])
	}
	var s float32
	if k >= -126 {
		s = math.Float32frombits(uint32(int32(k)+127) << 23)
	}
	return p * s
}

// swigluGo sets out[i] = silu(gate[i])·up[i], silu(g) = g / (1 +
// exp32(-g)), each operation rounded to float32: the bits of every
// implementation.
func swigluGo(out, gate, up []float32) {
	up = up[:len(gate)]
	out = out[:len(gate)]
	for i, g := range gate {
		out[i] = g / (1 + exp32(-g)) * up[i]
	}
}

// windowStart is the first position a token at pos attends to: 0, or
// with a sliding window of w positions pos-w+1 (HF's mask keeps
// kv > q - w; llama.cpp masks p1 - p0 >= n_swa: the same w positions).
func (c *Config) windowStart(pos int) int {
	if c.SlidingWindow > 0 {
		return max(0, pos-c.SlidingWindow+1)
	}
	return 0
}
