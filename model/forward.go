package model

import (
	"fmt"
	"math"
	"sync"
)

// Seq is one sequence's share of a forward step: Tokens at positions
// Pos, Pos+1, …; Blocks must cover every position up to the last one.
type Seq struct {
	Tokens []int32
	Pos    int
	Blocks []int32
	// Logits receives the logits of the last token (len Vocab), or of
	// every token (len(Tokens)*Vocab) when AllLogits is set; nil skips the
	// output head for this sequence (a prefill chunk that is not the last).
	Logits    []float32
	AllLogits bool
}

// scratch holds Forward's buffers between calls, so a steady stream of
// steps does not allocate (the devices call Forward from one goroutine;
// the mutex keeps other callers correct).
type scratch struct {
	mu                                                     sync.Mutex
	x, xn, qkv, q, k, v, att, proj, up, gate, act, h, lgts []float32
	cos, sin                                               []float32
	pos                                                    []int
	rows                                                   []int
	dsts                                                   [][]float32
	inv                                                    []float32
	first                                                  []int
	items                                                  []attnItem
}

func buf(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	*b = (*b)[:n]
	return *b
}

// Forward runs one step for a batch of sequences: it appends their keys
// and values to the KV pool and writes the requested logits. Every
// per-token computation is independent of the batch's other members and
// uses fixed summation orders, so results are bitwise identical whether a
// sequence runs alone or beside others, in any chunking of its prompt.
func (m *Model) Forward(kv *KVPool, seqs []Seq) error {
	c := &m.Config
	T := 0
	for i := range seqs {
		s := &seqs[i]
		if len(s.Tokens) == 0 {
			return fmt.Errorf("model: sequence %d has no tokens", i)
		}
		last := s.Pos + len(s.Tokens) - 1
		if s.Pos < 0 || last/kv.BlockSize >= len(s.Blocks) {
			return fmt.Errorf("model: sequence %d: block table of %d blocks does not cover position %d", i, len(s.Blocks), last)
		}
		for _, b := range s.Blocks[:last/kv.BlockSize+1] {
			if b < 0 || int(b) >= kv.Blocks {
				return fmt.Errorf("model: sequence %d: block %d outside the pool of %d", i, b, kv.Blocks)
			}
		}
		for _, t := range s.Tokens {
			if t < 0 || int(t) >= c.Vocab {
				return fmt.Errorf("model: token %d outside the vocabulary of %d", t, c.Vocab)
			}
		}
		want := 0
		if s.Logits != nil {
			want = c.Vocab
			if s.AllLogits {
				want *= len(s.Tokens)
			}
		}
		if len(s.Logits) != want {
			return fmt.Errorf("model: sequence %d: logits buffer of %d, want %d", i, len(s.Logits), want)
		}
		T += len(s.Tokens)
	}
	if kv.Layers != c.Layers || kv.KVDim != c.KVDim() {
		return fmt.Errorf("model: KV pool shaped for %d layers × %d, model has %d × %d", kv.Layers, kv.KVDim, c.Layers, c.KVDim())
	}

	// Per-token bookkeeping: which sequence, which position.
	type tok struct {
		seq, pos int
	}
	toks := make([]tok, 0, T)
	first := make([]int, len(seqs))
	for i := range seqs {
		first[i] = len(toks)
		for j := range seqs[i].Tokens {
			toks = append(toks, tok{i, seqs[i].Pos + j})
		}
	}

	dim, qd, kvd := c.Dim, c.Heads*c.HeadDim, c.KVDim()
	sc := &m.scratch
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.first = first
	x := buf(&sc.x, T*dim)
	xn := buf(&sc.xn, T*dim)
	for t, tk := range toks {
		m.Embed.Row(int(seqs[tk.seq].Tokens[tk.pos-seqs[tk.seq].Pos]), x[t*dim:(t+1)*dim])
	}
	sc.pos = sc.pos[:0]
	for _, tk := range toks {
		sc.pos = append(sc.pos, tk.pos)
	}
	half := m.RopeDim / 2
	cos, sin := m.ropeTables(sc.pos, buf(&sc.cos, T*half), buf(&sc.sin, T*half), buf(&sc.inv, half))

	qkvW := qd + 2*kvd
	qkv := buf(&sc.qkv, T*qkvW)
	q := buf(&sc.q, T*qd)
	k := buf(&sc.k, T*kvd)
	v := buf(&sc.v, T*kvd)
	att := buf(&sc.att, T*qd)
	proj := buf(&sc.proj, T*dim)
	up := buf(&sc.up, T*2*c.FFN)
	gate := buf(&sc.gate, T*c.FFN)
	act := buf(&sc.act, T*c.FFN)

	for l := range m.Layers {
		L := &m.Layers[l]
		rmsNorm(xn, x, L.AttnNorm, T, c.NormEps)
		if m.arch.fusedQKV {
			m.pool.matmul(qkv, &L.Q, xn, T)
			for t := 0; t < T; t++ {
				r := qkv[t*qkvW:]
				copy(q[t*qd:(t+1)*qd], r[:qd])
				copy(k[t*kvd:(t+1)*kvd], r[qd:qd+kvd])
				copy(v[t*kvd:(t+1)*kvd], r[qd+kvd:qkvW])
			}
		} else {
			m.pool.matmuls(xn, T, product{q, &L.Q}, product{k, &L.K}, product{v, &L.V})
		}
		if L.QB != nil {
			addBias(q, L.QB, T)
			addBias(k, L.KB, T)
			addBias(v, L.VB, T)
		}
		for t := 0; t < T; t++ {
			ct, st := cos[t*half:(t+1)*half], sin[t*half:(t+1)*half]
			m.rope(q[t*qd:(t+1)*qd], c.Heads, ct, st)
			m.rope(k[t*kvd:(t+1)*kvd], c.KVHeads, ct, st)
			s := &seqs[toks[t].seq]
			kv.store(l, s.Blocks, toks[t].pos, k[t*kvd:(t+1)*kvd], v[t*kvd:(t+1)*kvd])
		}
		m.attention(kv, l, seqs, sc.first, q, att)
		m.pool.matmul(proj, &L.Out, att, T)
		addInto(x, proj)

		rmsNorm(xn, x, L.FFNNorm, T, c.NormEps)
		ff := c.FFN
		if m.arch.fusedUp {
			m.pool.matmul(up, &L.Up, xn, T)
			for t := 0; t < T; t++ {
				r := up[t*2*ff : (t+1)*2*ff]
				swiglu(act[t*ff:(t+1)*ff], r[:ff], r[ff:])
			}
		} else {
			m.pool.matmuls(xn, T, product{gate, &L.Gate}, product{up[:T*ff], &L.Up})
			swiglu(act, gate, up[:T*ff])
		}
		m.pool.matmul(proj, &L.Down, act, T)
		addInto(x, proj)
	}

	// Output head only for the tokens whose logits were asked for.
	rows, dsts := sc.rows[:0], sc.dsts[:0]
	defer func() { sc.rows, sc.dsts = rows[:0], clearDsts(dsts) }()
	t := 0
	for i := range seqs {
		s := &seqs[i]
		n := len(s.Tokens)
		if s.Logits != nil {
			if s.AllLogits {
				for j := 0; j < n; j++ {
					rows = append(rows, t+j)
					dsts = append(dsts, s.Logits[j*c.Vocab:(j+1)*c.Vocab])
				}
			} else {
				rows = append(rows, t+n-1)
				dsts = append(dsts, s.Logits)
			}
		}
		t += n
	}
	if len(rows) == 0 {
		return nil
	}
	h := buf(&sc.h, len(rows)*dim)
	for i, r := range rows {
		copy(h[i*dim:(i+1)*dim], x[r*dim:(r+1)*dim])
	}
	rmsNorm(h, h, m.OutNorm, len(rows), c.NormEps)
	logits := buf(&sc.lgts, len(rows)*c.Vocab)
	m.pool.matmul(logits, &m.Output, h, len(rows))
	for i, d := range dsts {
		copy(d, logits[i*c.Vocab:(i+1)*c.Vocab])
	}
	return nil
}

// rmsNorm: dst = x / sqrt(mean(x²) + eps) * w, row by row (the mean
// accumulated in float64, then applied in float32 as HF does).
func rmsNorm(dst, x, w []float32, rows int, eps float32) {
	n := len(w)
	for r := 0; r < rows; r++ {
		xr, dr := x[r*n:(r+1)*n], dst[r*n:(r+1)*n]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(float64(float32(ss/float64(n))+eps)))
		for i, v := range xr {
			dr[i] = w[i] * (v * inv)
		}
	}
}

func addBias(x, b []float32, rows int) {
	n := len(b)
	for r := 0; r < rows; r++ {
		xr := x[r*n : (r+1)*n]
		for i := range xr {
			xr[i] += b[i]
		}
	}
}

func addInto(x, y []float32) {
	for i := range x {
		x[i] += y[i]
	}
}

// ropeTables computes cos and sin of every rotated frequency at each
// token's position (row t of cos/sin, RopeDim/2 wide), in float32 as HF
// does: inv_freq = 1/base^(2i/d), divided by rope_freqs' factor where
// present; angle = pos·inv_freq.
func (m *Model) ropeTables(pos []int, cos, sin, inv []float32) ([]float32, []float32) {
	half := m.RopeDim / 2
	for i := range inv {
		inv[i] = float32(1 / math.Pow(float64(m.RopeBase), float64(float32(2*i)/float32(m.RopeDim))))
		if m.RopeFactor != nil {
			inv[i] /= m.RopeFactor[i]
		}
	}
	for t, p := range pos {
		c, s := cos[t*half:(t+1)*half], sin[t*half:(t+1)*half]
		fp := float32(p) * m.RopeScale
		for i := range inv {
			a := fp * inv[i]
			c[i] = float32(math.Cos(float64(a)))
			s[i] = float32(math.Sin(float64(a)))
		}
	}
	return cos, sin
}

func clearDsts(d [][]float32) [][]float32 {
	clear(d)
	return d[:0]
}

// rope rotates each head of x in place: adjacent pairs for RopeNormal,
// halves for RopeNeox (only the first RopeDim dimensions of a head).
func (m *Model) rope(x []float32, heads int, cos, sin []float32) {
	hd, half := m.HeadDim, m.RopeDim/2
	for h := 0; h < heads; h++ {
		v := x[h*hd : (h+1)*hd]
		for i := 0; i < half; i++ {
			var a, b *float32
			if m.Rope == RopeNormal {
				a, b = &v[2*i], &v[2*i+1]
			} else {
				a, b = &v[i], &v[i+half]
			}
			x0, x1 := *a, *b
			*a = x0*cos[i] - x1*sin[i]
			*b = x0*sin[i] + x1*cos[i]
		}
	}
}
