package conformance

import (
	"fmt"
	"slices"
	"testing"

	"ringlm/ringbuf"
)

// A Diff under the vLLM rule (Tolerance.TopK) must know each side's top
// alternatives where greedy tokens diverge, and most scenario slots ask
// for none. So the host keeps what each OPEN of a slot was given (a
// session: its parameters and the entries fed to it) and Diff replays a
// diverging slot's session alone on a fresh device, asking for the
// alternatives; batch invariance makes the replay sample the same token
// (checked). The hash of a session's inputs up to an entry tells Diff
// whether the two devices' slots were fed the same so far: when a
// scenario builds its input from what a device sampled (Learn), an
// accepted divergence changes later inputs, and what follows from them is
// not compared.

// sessionOpen is what Open sent: enough to open the slot again.
type sessionOpen struct {
	p    ringbuf.SlotParams
	stop []uint32
	bias []ringbuf.TokenBias
	hist []uint32
}

// session is one OPEN of a slot and the entries fed to it since.
type session struct {
	open *sessionOpen // nil: opened from raw words, not replayable
	hash uint64       // of the OPEN payload
	ents []sessEnt
}

type sessEnt struct {
	step   uint64
	toks   []uint32 // nil: feedback
	sample bool
	raw    bool   // malformed on purpose (Ent.SetN, SetOff)
	hash   uint64 // the session's inputs up to and with this entry
}

type stepSlot struct {
	step uint64
	slot uint32
}

// entryRef names an entry of a session.
type entryRef struct {
	sess *session
	ent  int
}

func newSession(payload []uint32, o *sessionOpen) *session {
	return &session{open: o, hash: hashWords(fnvOffset, payload...)}
}

func (s *session) add(step uint64, e Ent) entryRef {
	h := s.hash
	if n := len(s.ents); n > 0 {
		h = s.ents[n-1].hash
	}
	flags := uint32(0)
	if e.Sample {
		flags |= 1
	}
	if e.Toks == nil {
		flags |= 2
	}
	h = hashWords(h, flags, e.N, e.Off, boolWord(e.SetN), boolWord(e.SetOff), uint32(len(e.Toks)))
	h = hashWords(h, e.Toks...)
	s.ents = append(s.ents, sessEnt{step: step, toks: slices.Clone(e.Toks), sample: e.Sample, raw: e.SetN || e.SetOff, hash: h})
	return entryRef{s, len(s.ents) - 1}
}

// inputs is the hash of what the session was fed up to the entry; 0 for
// no entry.
func (r entryRef) inputs() uint64 {
	if r.sess == nil {
		return 0
	}
	return r.sess.ents[r.ent].hash
}

const fnvOffset, fnvPrime = 0xcbf29ce484222325, 0x100000001b3

// hashWords is FNV-1a over 32-bit words.
func hashWords(h uint64, w ...uint32) uint64 {
	for _, x := range w {
		h = (h ^ uint64(x)) * fnvPrime
	}
	return h
}

func boolWord(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// probe replays the session behind at alone in slot 0 of a fresh device
// from f (sized as c), asking for k alternatives, up to the entry that
// sampled the token judged (steps the device refused whole are left out,
// as they ran nothing), and returns that token's alternatives. The replay
// must sample want, the token the scenario got.
func probe(t *testing.T, f Factory, c Config, at entryRef, refused map[uint64]bool, k int, want uint32) ([]ringbuf.TopLogprob, error) {
	s := at.sess
	switch {
	case s == nil:
		return nil, fmt.Errorf("its STEP was pushed raw, not through Host.Step: no session to replay")
	case s.open == nil:
		return nil, fmt.Errorf("the slot was opened from raw words: no session to replay")
	case s.open.p.StartPos != 0:
		return nil, fmt.Errorf("the slot starts at position %d over blocks another slot wrote: not replayable alone", s.open.p.StartPos)
	}
	var ents []sessEnt
	positions := 0
	for _, e := range s.ents[:at.ent+1] {
		if refused[e.step] {
			continue
		}
		if e.raw {
			return nil, fmt.Errorf("a malformed entry (step #%d) precedes it", e.step)
		}
		ents = append(ents, e)
		positions += max(1, len(e.toks))
	}
	f.hosts = nil // a probe is not one of the scenario's hosts
	h := NewHost(t, f, c)
	p := s.open.p
	p.Flags |= ringbuf.SlotLogprobs
	p.NTop = max(p.NTop, uint32(k))
	h.Open(0, p, s.open.stop, s.open.bias, s.open.hist)
	// Blocks for every position fed and the sampled one's, within the
	// table.
	n := min((positions+1+h.BS-1)/h.BS, (c.Context+h.BS-1)/h.BS, c.Blocks)
	h.Grant(0, 0, seqOf(n, func(i int) uint32 { return uint32(i) })...)
	for _, e := range ents {
		ent := FB(0)
		if e.toks != nil {
			ent = Pre(0, e.sample, e.toks...)
		}
		ent.Sample = e.sample
		h.Step(ent)
	}
	got := h.Finish()
	var tok *ringbuf.Completion
	var top []ringbuf.TopLogprob
	for i := range got {
		switch c := got[i]; c.Kind {
		case ringbuf.KindToken:
			tok, top = &got[i], nil
		case ringbuf.KindTopLogprobs:
			for _, x := range c.Top {
				if x.Token != ringbuf.TopNone {
					top = append(top, x)
				}
			}
		case ringbuf.KindStepDone:
		case ringbuf.KindError:
			// An entry the scenario itself had refused (a feed with no
			// feedback, say) is refused again: the replay plays the
			// session's entries as they were.
		default:
			return nil, fmt.Errorf("the replay answered %s", Show(c))
		}
	}
	switch {
	case tok == nil:
		return nil, fmt.Errorf("the replay sampled nothing")
	case tok.Token != want:
		return nil, fmt.Errorf("the replay alone sampled %d where the scenario sampled %d: the device is not batch invariant", tok.Token, want)
	}
	return top, nil
}
