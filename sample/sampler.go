package sample

import (
	"math"
	"slices"
)

// TokenLogprob is a token with its log probability.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// Result is one sampled token.
type Result struct {
	Token int32
	// Logprob is the token's log probability under the convention of the
	// package documentation; 0 unless Params.Logprobs.
	Logprob float32
	// Top holds the Params.TopLogprobs most likely tokens, most likely
	// first. It aliases the Sampler's memory and is overwritten by the next
	// Sample: copy it to keep it.
	Top []TokenLogprob
}

// Sampler samples the tokens of one sequence. It holds that sequence's
// penalty state (fed by Observe) and scratch memory reused by every Sample:
// 4 bytes per vocabulary entry, 2 more once a draw takes the histogram path
// (T > 0 without a top-k of at most 1024 or a lone min-p), 9 more with a
// repeat penalty, 4 more with a presence or frequency penalty, 25 KiB of
// histogram, and the sorted candidates (16 bytes each, as many as the
// largest call needed). A Sampler is not safe
// for concurrent use; distinct Samplers share nothing.
type Sampler struct {
	p     Params
	vocab int

	// Logit bias as parallel slices sorted by id: iterating a map would be
	// slower and its order random.
	biasIDs  []int32
	biasVals []float32

	// Repeat penalty window. ring holds the last RepeatLastN tokens (nil for
	// the whole context); winCount counts them; winList lists each token
	// with inWin set once. A token leaving the window keeps its place in
	// winList until the next Sample drops it, so Observe is O(1).
	rep      bool
	ring     []int32
	ringNext int
	winCount []int32
	inWin    []bool
	winList  []int32

	// Presence and frequency penalties: counts of generated tokens.
	gen      bool
	genCount []int32
	genList  []int32

	z    []float32 // the processed logits
	keys []uint64  // sorted candidates, see key
	w    []float64 // w[i] is the weight of keys[i]
	heap []uint64
	top  []TokenLogprob

	// State of one Sample call.
	zm     float64 // largest processed logit
	temp   float64 // temperature, and its reciprocal
	invT   float64
	prefix bool // keys is a prefix of the order (top-k path)
	hist        // the bucket path's state
}

var negInf = float32(math.Inf(-1))

// New returns a Sampler for a vocabulary of vocab tokens, or the errors of
// p.Validate(vocab).
func New(p Params, vocab int) (*Sampler, error) {
	if err := p.Validate(vocab); err != nil {
		return nil, err
	}
	s := &Sampler{
		p:     p,
		vocab: vocab,
		z:     make([]float32, vocab),
		top:   make([]TokenLogprob, 0, MaxTopLogprobs),
	}
	// Private copies: the caller may reuse its map and slices.
	s.p.LogitBias = nil
	s.p.StopTokens = slices.Clone(p.StopTokens)
	s.p.StopStrings = slices.Clone(p.StopStrings)
	for id, v := range p.LogitBias {
		if v != 0 {
			s.biasIDs = append(s.biasIDs, id)
		}
	}
	slices.Sort(s.biasIDs)
	for _, id := range s.biasIDs {
		s.biasVals = append(s.biasVals, p.LogitBias[id])
	}
	if p.RepeatPenalty != 1 && p.RepeatLastN != 0 {
		s.rep = true
		s.winCount = make([]int32, vocab)
		s.inWin = make([]bool, vocab)
	}
	if p.PresencePenalty != 0 || p.FrequencyPenalty != 0 {
		s.gen = true
		s.genCount = make([]int32, vocab)
	}
	return s, nil
}

// Params returns the parameters the Sampler was made with.
func (s *Sampler) Params() Params {
	p := s.p
	p.LogitBias = nil
	if len(s.biasIDs) > 0 {
		p.LogitBias = make(map[int32]float32, len(s.biasIDs))
		for i, id := range s.biasIDs {
			p.LogitBias[id] = s.biasVals[i]
		}
	}
	p.StopTokens = slices.Clone(s.p.StopTokens)
	p.StopStrings = slices.Clone(s.p.StopStrings)
	return p
}

// Observe feeds one token of the sequence, in order, into the penalty
// state: every prompt token with generated false, then every accepted
// output token with generated true. Sample does not observe its own result,
// because the engine may reject it (a stop token, a rejected speculative
// draft). An id outside the vocabulary is no token: it penalises nothing,
// but it takes its position in the repetition penalty's window, which
// counts positions (as the CUDA kernel's does).
func (s *Sampler) Observe(token int32, generated bool) {
	valid := token >= 0 && int64(token) < int64(s.vocab)
	if s.rep {
		if n := s.p.RepeatLastN; n > 0 {
			t := token
			if !valid {
				t = -1
			}
			// Grown on demand: a large window costs only what was observed.
			if len(s.ring) < n {
				s.ring = append(s.ring, t)
			} else {
				if old := s.ring[s.ringNext]; old >= 0 {
					s.winCount[old]--
				}
				s.ring[s.ringNext] = t
				s.ringNext = (s.ringNext + 1) % n
			}
		}
		if valid {
			s.winCount[token]++
			if !s.inWin[token] {
				s.inWin[token] = true
				s.winList = append(s.winList, token)
			}
		}
	}
	if valid && generated && s.gen {
		if s.genCount[token] == 0 {
			s.genList = append(s.genList, token)
		}
		s.genCount[token]++
	}
}

// Sample picks the next token from logits, the model's output for this
// sequence, as the package documentation specifies. pos is the absolute
// position of the token being sampled (the number of tokens before it in
// the sequence); it selects the random number, so the same seed, history
// and position give the same token. Only the first min(len(logits), vocab)
// logits are read, and never written. With no logits at all the result is
// token 0. Sample allocates nothing once its buffers have grown to the
// largest candidate set seen.
func (s *Sampler) Sample(logits []float32, pos int) Result {
	z, leader := s.prepare(logits)
	if z == nil {
		return Result{Token: leader}
	}
	res := Result{Token: leader}
	if s.p.Temperature > 0 {
		res.Token = s.draw(z, uint64(pos), leader)
	}
	if s.p.Logprobs {
		s.logprobs(&res, z)
	}
	return res
}

// prepare runs steps 1 to 5 and resets the per-call state. It returns the
// processed logits and their leader, or nil and the token to return when
// there is no candidate.
func (s *Sampler) prepare(logits []float32) ([]float32, int32) {
	n := min(len(logits), s.vocab)
	if n <= 0 {
		return nil, 0
	}
	z := s.z[:n]
	zmax, arg := s.process(logits[:n], z)
	if arg < 0 {
		return nil, rawArgmax(logits[:n])
	}
	s.keys, s.w, s.segs = s.keys[:0], s.w[:0], s.segs[:0]
	s.zm = float64(zmax)
	s.prefix, s.scanned = false, false
	s.temp, s.invT = float64(s.p.Temperature), 0
	if s.temp > 0 {
		s.invT = 1 / s.temp
	}
	return z, int32(arg)
}

// clean maps a logit to the value the sampler works with: NaN is treated
// as -Inf, +Inf as the largest float32 (several +Inf logits then tie
// rather than produce Inf-Inf), -0 as +0 (so that key order is the order of
// float comparison).
func clean(v float32) float32 {
	switch {
	case v != v:
		return negInf
	case v > math.MaxFloat32:
		return math.MaxFloat32
	case v == 0:
		return 0
	}
	return v
}

// rawArgmax is the answer when nothing is a candidate: the lowest id among
// the largest raw logits, NaN counting as -Inf, or 0 if none is larger
// than -Inf.
func rawArgmax(logits []float32) int32 {
	best, arg := negInf, 0
	for i, v := range logits {
		if v > best {
			best, arg = v, i
		}
	}
	return int32(arg)
}

// argmax tracks the first token of the order while sparse updates change
// the logits, so that a full rescan is needed only when the leader itself
// is lowered.
type argmax struct {
	v     float32
	i     int
	stale bool
}

func (a *argmax) set(z []float32, t int, v float32) {
	v = clean(v)
	z[t] = v
	switch {
	case t == a.i:
		if v >= a.v {
			a.v = v
		} else {
			a.stale = true
		}
	case v > a.v || (v == a.v && t < a.i):
		a.v, a.i = v, t
	}
}

// process writes the cleaned, biased and penalized logits into z (steps 1
// to 3) and returns the largest and its lowest id, or -1 if every z is -Inf.
func (s *Sampler) process(logits, z []float32) (float32, int) {
	a := argmax{v: negInf, i: -1}
	z = z[:len(logits)]
	for i, v := range logits {
		v = clean(v)
		z[i] = v
		if v > a.v {
			a.v, a.i = v, i
		}
	}
	n := len(z)
	for j, t := range s.biasIDs {
		if int(t) < n {
			a.set(z, int(t), z[t]+s.biasVals[j])
		}
	}
	if s.rep {
		rp := s.p.RepeatPenalty
		list := s.winList
		for j := 0; j < len(list); {
			t := list[j]
			if s.winCount[t] == 0 {
				s.inWin[t] = false
				list[j] = list[len(list)-1]
				list = list[:len(list)-1]
				continue
			}
			if int(t) < n {
				v := z[t]
				if v > 0 {
					v /= rp
				} else {
					v *= rp
				}
				a.set(z, int(t), v)
			}
			j++
		}
		s.winList = list
	}
	if s.gen {
		pres, freq := s.p.PresencePenalty, s.p.FrequencyPenalty
		for _, t := range s.genList {
			if int(t) < n {
				// The conversion forbids fusing the multiply into the add, which
				// some architectures would otherwise do.
				f := float32(float32(s.genCount[t]) * freq)
				a.set(z, int(t), z[t]-(f+pres))
			}
		}
	}
	if a.stale {
		a = argmax{v: negInf, i: -1}
		for i, v := range z {
			if v > a.v {
				a.v, a.i = v, i
			}
		}
	}
	return a.v, a.i
}

// logprobs fills Logprob and Top: log-softmax at temperature 1 of z.
func (s *Sampler) logprobs(res *Result, z []float32) {
	var sum float64
	if s.scanned && s.temp == 1 {
		sum = s.cumMass[nBuckets] // scan summed exactly these weights
	} else {
		sum = sumExp1(z, s.zm)
	}
	lse := s.zm + math.Log(sum)
	res.Logprob = float32(float64(z[res.Token]) - lse)
	n := s.p.TopLogprobs
	if n <= 0 {
		return
	}
	keys := s.keys
	if !s.prefix || len(keys) < n {
		s.heap = selectTop(z, n, s.heap)
		keys = s.heap
	}
	top := s.top[:0]
	for _, k := range keys[:min(n, len(keys))] {
		t := int32(uint32(k))
		top = append(top, TokenLogprob{Token: t, Logprob: float32(float64(z[t]) - lse)})
	}
	s.top = top
	res.Top = top
}

// key packs a candidate so that ascending keys are the candidate order:
// descending z, then ascending id. The float bits are mapped to an unsigned
// integer that increases with z, then inverted.
func key(v float32, i int) uint64 {
	b := math.Float32bits(v)
	if b>>31 != 0 {
		b = ^b
	} else {
		b |= 1 << 31
	}
	return uint64(^b)<<32 | uint64(uint32(i))
}

// selectTop returns, sorted, the keys of the m first finite candidates of
// the order, using h as memory. A max-heap of the m best so far rejects most
// tokens with one float comparison: ids come in increasing order, so a
// token equal to the worst kept one loses the tie.
func selectTop(z []float32, m int, h []uint64) []uint64 {
	h = h[:0]
	if m <= 0 {
		return h
	}
	worst := negInf
	for i, v := range z {
		if len(h) == m {
			if v <= worst {
				continue
			}
			h[0] = key(v, i)
			siftDown(h)
			worst = z[uint32(h[0])]
			continue
		}
		if v == negInf {
			continue
		}
		h = append(h, key(v, i))
		for c := len(h) - 1; c > 0; {
			p := (c - 1) / 2
			if h[p] >= h[c] {
				break
			}
			h[p], h[c] = h[c], h[p]
			c = p
		}
		if len(h) == m {
			worst = z[uint32(h[0])]
		}
	}
	slices.Sort(h)
	return h
}

func siftDown(h []uint64) {
	for p := 0; ; {
		c := 2*p + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1] > h[c] {
			c++
		}
		if h[p] >= h[c] {
			return
		}
		h[p], h[c] = h[c], h[p]
		p = c
	}
}

// Order is the candidates of logits (tokens whose adjusted logit is not
// -Inf) under the sampler's adjustments at its current history (bias,
// penalties), in the order the filters and the draw walk: descending
// adjusted logit, then ascending id. Tests across devices use it to tell
// a rounding difference between adjacent candidates, which the package
// documentation allows, from a real difference. The sampler's state is
// not changed beyond what Sample's preparation does.
func (s *Sampler) Order(logits []float32) []int32 {
	n := min(len(logits), s.vocab)
	z := make([]float32, n)
	s.process(logits[:n], z)
	keys := make([]uint64, 0, n)
	for i, v := range z {
		if v != negInf {
			keys = append(keys, key(v, i))
		}
	}
	slices.Sort(keys)
	out := make([]int32, len(keys))
	for i, k := range keys {
		out[i] = int32(uint32(k))
	}
	return out
}
