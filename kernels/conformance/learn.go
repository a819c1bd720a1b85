package conformance

import (
	"testing"

	"ringlm/ringbuf"
)

// Job is one sequence run alone: its tokens fed as one prefill from
// position 0, then N sampled.
type Job struct {
	P      ringbuf.SlotParams
	Prompt []uint32
	N      int
}

// Learn runs each job alone in slot 0 of a fresh device, one after the
// other, and returns the tokens each sampled. Scenarios use it to know a
// device's continuation of a prompt before they check the protocol's
// rules around it: a device must give the same tokens for the same
// sequence and parameters whatever else runs beside it (batch
// invariance), so what a job samples alone is what it must sample in a
// scenario.
func Learn(t testing.TB, f Factory, c Config, jobs ...Job) [][]uint32 {
	t.Helper()
	c.Slots = max(c.Slots, 1)
	h := NewHost(t, f, c)
	out := make([][]uint32, len(jobs))
	for i, j := range jobs {
		need := (len(j.Prompt) + j.N - 1 + h.BS - 1) / h.BS // positions fed
		if need > c.Blocks {
			t.Fatalf("Learn: job %d needs %d blocks, the pool has %d", i, need, c.Blocks)
		}
		h.Open(0, j.P, nil, nil, nil)
		h.Grant(0, 0, seqOf(need, func(k int) uint32 { return uint32(k) })...)
		// The prompt in chunks the step budget takes.
		for lo := 0; lo < len(j.Prompt); lo += c.MaxStepTokens {
			hi := min(lo+c.MaxStepTokens, len(j.Prompt))
			h.Step(Pre(0, hi == len(j.Prompt), j.Prompt[lo:hi]...))
		}
		for range j.N - 1 {
			h.Step(FB(0))
		}
		h.Close(0)
		for _, c := range h.Sync() {
			switch c.Kind {
			case ringbuf.KindToken:
				if c.Finish != ringbuf.FinishNone && len(out[i]) < j.N-1 {
					t.Fatalf("Learn: job %d finished early: %s", i, Show(c))
				}
				out[i] = append(out[i], c.Token)
			case ringbuf.KindStepDone, ringbuf.KindSlotClosed, ringbuf.KindTopLogprobs:
			default:
				t.Fatalf("Learn: job %d: %s", i, Show(c))
			}
		}
		if len(out[i]) != j.N {
			t.Fatalf("Learn: job %d sampled %d tokens, want %d", i, len(out[i]), j.N)
		}
	}
	h.Finish()
	return out
}

func seqOf(n int, f func(i int) uint32) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}
