package conformance

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"ringlm/ringbuf"
)

// Tolerance says how far two devices' numbers may differ in Diff.
type Tolerance struct {
	// Logprob bounds the absolute difference of a greedy token's logprob
	// and of each of its alternatives'.
	Logprob float64
}

// DiffStats counts what Diff compared.
type DiffStats struct {
	Records       int // completions compared
	GreedyTokens  int // greedy TOKENs, equal on both devices
	SampledTokens int // TOKENs of sampling slots
	SampledDiffer int // of those, with another token on the second device (allowed: rounding at a draw's boundary)
	TieSwaps      int // alternatives in another order where their logprobs tie within the tolerance
	MaxLogprobErr float64
}

// Diff plays every scenario on ref, then on dut, and compares the two
// completion streams host by host and record by record: the same records
// in the same order (a step's records may come in any order, its
// STEP_DONE last), with the same kinds, slots, ids, error codes and
// details, positions, finish reasons and executed counts; greedy tokens
// equal, their logprobs and alternatives within tol. A scenario that
// fails on ref is not compared (its failure is reported).
func Diff(t *testing.T, ref, dut Factory, tol Tolerance) DiffStats {
	var st DiffStats
	for _, s := range Scenarios {
		t.Run(s.Name, func(t *testing.T) {
			var rh, dh []*Host
			r, d := ref, dut
			r.hosts, d.hosts = &rh, &dh
			if !t.Run(ref.Name, func(t *testing.T) { s.Run(t, r) }) {
				t.Fatalf("%s failed on %s: nothing to compare", s.Name, ref.Name)
			}
			t.Run(dut.Name, func(t *testing.T) { s.Run(t, d) })
			if len(rh) != len(dh) {
				t.Fatalf("%s opened %d devices, %s %d", ref.Name, len(rh), dut.Name, len(dh))
			}
			for i := range rh {
				if err := diffLogs(rh[i].Log, dh[i].Log, tol, &st); err != nil {
					t.Fatalf("device %d of the scenario: %v", i, err)
				}
			}
		})
	}
	t.Logf("diff: %d records; %d greedy tokens equal; %d sampled tokens, %d differ; %d alternatives swapped on a tie; max logprob difference %.3g",
		st.Records, st.GreedyTokens, st.SampledTokens, st.SampledDiffer, st.TieSwaps, st.MaxLogprobErr)
	return st
}

// unit is one answer in a stream: a record, or a TOKEN with its
// alternatives (TopNone pairs dropped: a device may pad).
type unit struct {
	Logged
	alts []ringbuf.TopLogprob
}

// units splits a stream into the answers to each submit record, each in a
// canonical order (by kind, then slot; a STEP_DONE last).
func units(log []Logged) ([][]unit, error) {
	var out [][]unit
	for i := 0; i < len(log); {
		j := i
		var g []unit
		for j < len(log) && log[j].Step == log[i].Step {
			c := log[j]
			if c.Kind == ringbuf.KindTopLogprobs {
				if len(g) == 0 || g[len(g)-1].Kind != ringbuf.KindToken || g[len(g)-1].Slot != c.Slot {
					return nil, fmt.Errorf("%s does not follow its TOKEN", Show(c.Completion))
				}
				u := &g[len(g)-1]
				for _, p := range c.Top {
					if p.Token != ringbuf.TopNone {
						u.alts = append(u.alts, p)
					}
				}
			} else {
				g = append(g, unit{Logged: c})
			}
			j++
		}
		slices.SortStableFunc(g, func(a, b unit) int {
			ka, kb := rank(a), rank(b)
			if ka != kb {
				return ka - kb
			}
			return int(a.Slot) - int(b.Slot)
		})
		out = append(out, g)
		i = j
	}
	return out, nil
}

func rank(u unit) int {
	if u.Kind == ringbuf.KindStepDone {
		return 1 << 20
	}
	return int(u.Kind)
}

func diffLogs(a, b []Logged, tol Tolerance, st *DiffStats) error {
	ua, err := units(a)
	if err != nil {
		return err
	}
	ub, err := units(b)
	if err != nil {
		return err
	}
	for i := range max(len(ua), len(ub)) {
		if i >= len(ua) || i >= len(ub) {
			return fmt.Errorf("answer %d: one stream ends first (%d and %d answers)", i, len(ua), len(ub))
		}
		ga, gb := ua[i], ub[i]
		if len(ga) != len(gb) {
			return fmt.Errorf("answer %d (record #%d): %d and %d records:\n%s\nand\n%s", i, ga[0].Step, len(ga), len(gb), showUnits(ga), showUnits(gb))
		}
		for k := range ga {
			if err := diffUnit(ga[k], gb[k], tol, st); err != nil {
				return fmt.Errorf("answer %d: %v:\n%s\nand\n%s", i, err, showUnits(ga), showUnits(gb))
			}
		}
	}
	return nil
}

func diffUnit(x, y unit, tol Tolerance, st *DiffStats) error {
	st.Records++
	cx, cy := x.Completion, y.Completion
	if x.Greedy != y.Greedy {
		return fmt.Errorf("slot %d greedy on one device only", cx.Slot)
	}
	if cx.Kind != ringbuf.KindToken {
		if cx != cy {
			return fmt.Errorf("%s and %s differ", Show(cx), Show(cy))
		}
		return nil
	}
	if cx.Kind != cy.Kind || cx.Slot != cy.Slot || cx.Step != cy.Step || cx.Position != cy.Position || cx.Finish != cy.Finish {
		return fmt.Errorf("%s and %s differ", Show(cx), Show(cy))
	}
	if !x.Greedy {
		st.SampledTokens++
		if cx.Token != cy.Token {
			st.SampledDiffer++
			return nil // a draw at a boundary; its logprobs are of other tokens
		}
	} else {
		st.GreedyTokens++
		if cx.Token != cy.Token {
			return fmt.Errorf("greedy tokens %d and %d differ", cx.Token, cy.Token)
		}
	}
	if err := closeLogprob(cx.Logprob, cy.Logprob, tol, st); err != nil {
		return fmt.Errorf("token %d: %v", cx.Token, err)
	}
	if len(x.alts) != len(y.alts) {
		return fmt.Errorf("token %d: %d and %d alternatives", cx.Token, len(x.alts), len(y.alts))
	}
	for k := range x.alts {
		if err := closeLogprob(x.alts[k].Logprob, y.alts[k].Logprob, tol, st); err != nil {
			return fmt.Errorf("token %d, alternative %d: %v", cx.Token, k, err)
		}
		if x.alts[k].Token == y.alts[k].Token {
			continue
		}
		// Another order is allowed among alternatives that tie within the
		// tolerance: the token must sit nearby with a close logprob.
		if !tied(x.alts, y.alts, k, tol) {
			return fmt.Errorf("token %d: alternative %d is %d on one device, %d on the other", cx.Token, k, x.alts[k].Token, y.alts[k].Token)
		}
		st.TieSwaps++
	}
	return nil
}

func tied(x, y []ringbuf.TopLogprob, k int, tol Tolerance) bool {
	for _, pair := range [][2][]ringbuf.TopLogprob{{x, y}, {y, x}} {
		p, q := pair[0], pair[1]
		found := false
		for j := range q {
			if q[j].Token == p[k].Token && math.Abs(float64(q[j].Logprob)-float64(p[k].Logprob)) <= 2*tol.Logprob {
				found = true
			}
		}
		// An alternative at the end of the list may have been displaced by
		// a tie with one just past it.
		if !found && !(k == len(p)-1 || math.Abs(float64(p[len(p)-1].Logprob)-float64(p[k].Logprob)) <= 2*tol.Logprob) {
			return false
		}
	}
	return true
}

func closeLogprob(a, b float32, tol Tolerance, st *DiffStats) error {
	d := math.Abs(float64(a) - float64(b))
	if math.IsInf(float64(a), -1) && math.IsInf(float64(b), -1) {
		d = 0
	}
	st.MaxLogprobErr = max(st.MaxLogprobErr, d)
	if !(d <= tol.Logprob) {
		return fmt.Errorf("logprobs %v and %v differ by %.3g (tolerance %.3g)", a, b, d, tol.Logprob)
	}
	return nil
}

func showUnits(us []unit) string {
	s := ""
	for _, u := range us {
		s += "\t" + Show(u.Completion)
		if len(u.alts) > 0 {
			s += fmt.Sprintf(" alternatives %v", u.alts)
		}
		s += "\n"
	}
	return s
}
