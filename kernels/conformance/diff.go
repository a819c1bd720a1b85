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
	// TopK > 0 judges greedy tokens by vLLM's rule (CompareLogprobs)
	// instead of requiring them equal: where a slot's greedy tokens first
	// differ, each must be among the other device's TopK alternatives
	// (the slot's own TOP_LOGPROBS records when it asked for that many,
	// else a replay of the slot alone on a fresh device of each factory
	// that asks for them). From there until the slot is opened again,
	// and wherever a scenario fed the two devices different inputs
	// because of an earlier divergence, TOKENs are compared as protocol
	// records only: kind, slot, step, position and finish reason, with
	// the records' order and counts, but not the token, its logprob or
	// its alternatives. A sampled token that differs is such a
	// divergence too.
	TopK int
}

// DiffStats counts what Diff compared.
type DiffStats struct {
	Records       int // completions compared
	GreedyTokens  int // greedy TOKENs, equal on both devices
	SampledTokens int // TOKENs of sampling slots
	SampledDiffer int // of those, with another token on the second device (allowed: rounding at a draw's boundary)
	TieSwaps      int // alternatives in another order where their logprobs tie within the tolerance
	MaxLogprobErr float64
	// Under Tolerance.TopK: greedy divergences accepted (each side's token
	// in the other's top TopK), the replays run to judge divergences, and
	// TOKENs compared as protocol records only.
	Divergences, Probes, Uncompared int
	// Unjudged: divergences no replay could judge (the slot's entries
	// cannot be replayed alone, e.g. behind an entry the scenario had
	// refused); accepted, counted and logged. A caller bounds them.
	Unjudged int
}

// Diff plays every scenario on ref, then on dut, and compares the two
// completion streams host by host and record by record: the same records
// in the same order (a step's records may come in any order, its
// STEP_DONE last), with the same kinds, slots, ids, error codes and
// details, positions, finish reasons and executed counts; greedy tokens
// equal (or close by tol.TopK), their logprobs and alternatives within
// tol. A scenario that fails on ref is not compared (its failure is
// reported).
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
			df := &differ{tol: tol, st: &st, diverged: map[*session]bool{}, logf: t.Logf}
			for i := range rh {
				df.replay = func(side int, u unit) ([]ringbuf.TopLogprob, error) {
					f, h := ref, rh[i]
					if side == 1 {
						f, h = dut, dh[i]
					}
					top, err := probe(t, f, h.Cfg, u.at, h.refused, tol.TopK, u.Token)
					if err != nil {
						return nil, fmt.Errorf("%s, slot %d, %s: cannot judge the divergence: %v", f.Name, u.Slot, Show(u.Completion), err)
					}
					return top, nil
				}
				if err := df.logs(rh[i].Log, dh[i].Log); err != nil {
					t.Fatalf("device %d of the scenario: %v", i, err)
				}
			}
		})
	}
	t.Logf("diff: %d records; %d greedy tokens equal; %d sampled tokens, %d differ; %d alternatives swapped on a tie; max logprob difference %.3g",
		st.Records, st.GreedyTokens, st.SampledTokens, st.SampledDiffer, st.TieSwaps, st.MaxLogprobErr)
	if tol.TopK > 0 {
		t.Logf("diff (top %d): %d greedy divergences accepted (%d judged by a replay), %d unjudged; %d TOKENs after a divergence compared as records only",
			tol.TopK, st.Divergences, st.Probes, st.Unjudged, st.Uncompared)
	}
	return st
}

// differ compares the hosts of one scenario, in order.
type differ struct {
	tol Tolerance
	st  *DiffStats
	// replay returns the alternatives of a diverging TOKEN of side 0 (the
	// reference) or 1 from a replay of its slot (probe).
	replay func(side int, u unit) ([]ringbuf.TopLogprob, error)
	// diverged holds the sessions past a divergence (both sides'); any
	// says one happened in the scenario, so inputs may differ from there.
	diverged map[*session]bool
	any      bool
	logf     func(format string, args ...any)
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

func (d *differ) logs(a, b []Logged) error {
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
			if err := d.unit(ga[k], gb[k]); err != nil {
				return fmt.Errorf("answer %d: %v:\n%s\nand\n%s", i, err, showUnits(ga), showUnits(gb))
			}
		}
	}
	return nil
}

func (d *differ) unit(x, y unit) error {
	tol, st := d.tol, d.st
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
	if tol.TopK > 0 {
		past := d.diverged[x.at.sess] || d.diverged[y.at.sess]
		if !past && x.at.inputs() != y.at.inputs() {
			if !d.any {
				return fmt.Errorf("slot %d was fed different inputs with no divergence before: the scenario is not deterministic", cx.Slot)
			}
			past = true
		}
		if past {
			st.Uncompared++
			d.mark(x, y)
			return nil
		}
	}
	if !x.Greedy {
		st.SampledTokens++
		if cx.Token != cy.Token {
			st.SampledDiffer++
			d.mark(x, y)
			return nil // a draw at a boundary; its logprobs are of other tokens
		}
	} else {
		if cx.Token != cy.Token {
			if tol.TopK == 0 {
				return fmt.Errorf("greedy tokens %d and %d differ", cx.Token, cy.Token)
			}
			return d.divergence(x, y)
		}
		st.GreedyTokens++
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

// divergence judges greedy tokens that differ by the vLLM rule.
func (d *differ) divergence(x, y unit) error {
	st := d.st
	xTop, err := d.alternatives(0, x)
	if err == nil {
		var yTop []ringbuf.TopLogprob
		if yTop, err = d.alternatives(1, y); err == nil {
			return d.judge(x, y, xTop, yTop)
		}
	}
	if d.logf != nil {
		d.logf("unjudged divergence: %v", err)
	}
	st.Unjudged++
	d.mark(x, y)
	return nil
}

// judge applies the vLLM rule to a divergence with both sides' alternatives.
func (d *differ) judge(x, y unit, xTop, yTop []ringbuf.TopLogprob) error {
	st := d.st
	k := d.tol.TopK
	in := func(tok uint32, top []ringbuf.TopLogprob) bool {
		return slices.ContainsFunc(top[:min(k, len(top))], func(p ringbuf.TopLogprob) bool { return p.Token == tok })
	}
	if !in(x.Token, yTop) || !in(y.Token, xTop) {
		return fmt.Errorf("slot %d position %d: greedy tokens %d and %d differ beyond a near tie: top %d %s and %s",
			x.Slot, x.Position, x.Token, y.Token, k, showTopRecords(xTop, k), showTopRecords(yTop, k))
	}
	st.Divergences++
	d.mark(x, y)
	return nil
}

// alternatives returns a diverging TOKEN's alternatives: its own when its
// slot asked for at least TopK, else a replay's.
func (d *differ) alternatives(side int, u unit) ([]ringbuf.TopLogprob, error) {
	if s := u.at.sess; s != nil && s.open != nil && int(s.open.p.NTop) >= d.tol.TopK {
		return u.alts, nil
	}
	d.st.Probes++
	return d.replay(side, u)
}

// mark notes that the slots' sessions diverged here.
func (d *differ) mark(x, y unit) {
	d.any = true
	for _, s := range []*session{x.at.sess, y.at.sess} {
		if s != nil {
			d.diverged[s] = true
		}
	}
}

func showTopRecords(top []ringbuf.TopLogprob, k int) string {
	s := "["
	for i, p := range top[:min(k, len(top))] {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d:%.4g", p.Token, p.Logprob)
	}
	return s + "]"
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
