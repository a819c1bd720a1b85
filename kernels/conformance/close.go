package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"ringlm/engine"
	"ringlm/sample"
)

// The closeness rule for devices whose numerics differ from the float32
// reference (the GPU's BF16 matrix inputs), as vLLM judges its kernels
// (tests/models/utils.py, check_logprobs_close): two greedy continuations
// of a prompt agree token for token up to their first divergence; there
// each side's token must be among the other's top k alternatives (a near
// tie that rounding tipped); after it the continuations are not compared,
// since each goes on from another context. A continuation that ends
// earlier (EOS) is compared over its own length: its last token is judged
// like any other.

// Sampled is one generated token with the alternatives at its position.
type Sampled struct {
	Token   int32
	Logprob float32
	Top     []sample.TokenLogprob // most likely first
}

// Seq is one request's continuation, a Sampled per generated position.
type Seq []Sampled

// Tokens returns the sequence's token ids.
func (s Seq) Tokens() []int32 {
	out := make([]int32, len(s))
	for i, x := range s {
		out[i] = x.Token
	}
	return out
}

// Divergence is where two continuations of a prompt first differ.
type Divergence struct {
	Seq, Pos int     // the request's index and the generated position
	Ref, Dut Sampled // the reference's token and the device's, with their alternatives
	K        int     // alternatives compared
	// OK: each token is among the other side's first K alternatives.
	OK bool
}

func (d Divergence) String() string {
	verdict := "each token is in the other's top " + fmt.Sprint(d.K)
	if !d.OK {
		var miss []string
		if !inTop(d.Ref.Token, d.Dut.Top, d.K) {
			miss = append(miss, fmt.Sprintf("%d is not in the device's top %d", d.Ref.Token, d.K))
		}
		if !inTop(d.Dut.Token, d.Ref.Top, d.K) {
			miss = append(miss, fmt.Sprintf("%d is not in the reference's top %d", d.Dut.Token, d.K))
		}
		verdict = strings.Join(miss, ", and ")
	}
	return fmt.Sprintf("sequence %d diverges at generated token %d: reference %d (top %s), device %d (top %s): %s",
		d.Seq, d.Pos, d.Ref.Token, showTop(d.Ref.Top, d.K), d.Dut.Token, showTop(d.Dut.Top, d.K), verdict)
}

// Closeness is what CompareLogprobs found.
type Closeness struct {
	Seqs        int          // sequences compared
	Equal       int          // of those, equal over their common length
	Tokens      int          // tokens equal on both sides before any divergence
	Divergences []Divergence // one per diverging sequence, in order
}

// Failed returns the divergences that break the rule.
func (c Closeness) Failed() []Divergence {
	var out []Divergence
	for _, d := range c.Divergences {
		if !d.OK {
			out = append(out, d)
		}
	}
	return out
}

// CompareLogprobs applies the closeness rule with k alternatives to each
// pair ref[i], dut[i]. Only a different number of sequences is an error;
// a divergence that breaks the rule is reported in the result (OK false).
func CompareLogprobs(ref, dut []Seq, k int) (Closeness, error) {
	if len(ref) != len(dut) {
		return Closeness{}, fmt.Errorf("%d reference sequences, %d from the device", len(ref), len(dut))
	}
	if k < 1 {
		return Closeness{}, fmt.Errorf("top %d: at least one alternative must be compared", k)
	}
	c := Closeness{Seqs: len(ref)}
	for i := range ref {
		n := min(len(ref[i]), len(dut[i]))
		at := 0
		for at < n && ref[i][at].Token == dut[i][at].Token {
			at++
		}
		c.Tokens += at
		if at == n {
			c.Equal++
			continue
		}
		r, d := ref[i][at], dut[i][at]
		c.Divergences = append(c.Divergences, Divergence{Seq: i, Pos: at, Ref: r, Dut: d, K: k,
			OK: inTop(r.Token, d.Top, k) && inTop(d.Token, r.Top, k)})
	}
	return c, nil
}

// CheckLogprobsClose fails t for every sequence of dut that breaks the
// closeness rule against ref with k alternatives (the message names the
// sequence, the position, both tokens and both top lists), logs every
// divergence that keeps it, and returns what it compared.
func CheckLogprobsClose(t testing.TB, ref, dut []Seq, k int) Closeness {
	t.Helper()
	c, err := CompareLogprobs(ref, dut, k)
	if err != nil {
		t.Fatalf("closeness: %v", err)
	}
	for _, d := range c.Divergences {
		if d.OK {
			t.Logf("accepted: %v", d)
		} else {
			t.Errorf("%v", d)
		}
	}
	t.Logf("closeness (top %d): %d sequences, %d equal, %d diverge; %d tokens equal before any divergence",
		k, c.Seqs, c.Equal, len(c.Divergences), c.Tokens)
	return c
}

func inTop(tok int32, top []sample.TokenLogprob, k int) bool {
	return slices.ContainsFunc(top[:min(k, len(top))], func(x sample.TokenLogprob) bool { return x.Token == tok })
}

func showTop(top []sample.TokenLogprob, k int) string {
	parts := make([]string, 0, k)
	for _, x := range top[:min(k, len(top))] {
		parts = append(parts, fmt.Sprintf("%d:%.4g", x.Token, x.Logprob))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// GenerateTimeout bounds Generate's wait for the slowest request.
const GenerateTimeout = 10 * time.Minute

// Generate submits every request to e at once and collects each one's
// tokens, logprobs and alternatives (as many as its Params.TopLogprobs
// asked for) until it ends.
func Generate(e *engine.Engine, reqs []engine.Request) ([]Seq, error) {
	out, _, err := generate(e, reqs)
	return out, err
}

// generate is Generate that also returns the streams (their timelines).
// Its context cancels whatever still runs when it returns: the requests
// left on an error.
func generate(e *engine.Engine, reqs []engine.Request) ([]Seq, []*engine.Stream, error) {
	ctx, cancel := context.WithTimeout(context.Background(), GenerateTimeout)
	defer cancel()
	streams := make([]*engine.Stream, len(reqs))
	for i, r := range reqs {
		s, err := e.Submit(ctx, r)
		if err != nil {
			return nil, nil, fmt.Errorf("request %d: %w", i, err)
		}
		streams[i] = s
	}
	out := make([]Seq, len(reqs))
	var buf []engine.Token
	for i, s := range streams {
		for {
			var done bool
			var err error
			buf, done, err = s.Recv(ctx, buf[:0])
			if err != nil {
				return nil, nil, fmt.Errorf("request %d on %s: %w", i, e.DeviceName(), err)
			}
			for _, tk := range buf {
				out[i] = append(out[i], Sampled{Token: tk.ID, Logprob: tk.Logprob, Top: tk.Top()})
			}
			if done {
				break
			}
		}
		if _, err := s.Finish(); err != nil {
			return nil, nil, fmt.Errorf("request %d on %s: %w", i, e.DeviceName(), err)
		}
	}
	return out, streams, nil
}

// Greedy runs copies of reqs at temperature 0 with logprobs and k
// alternatives per token (Generate): the continuations CompareLogprobs
// takes.
func Greedy(e *engine.Engine, reqs []engine.Request, k int) ([]Seq, error) {
	g := make([]engine.Request, len(reqs))
	for i, r := range reqs {
		r.Params.Temperature, r.Params.Logprobs, r.Params.TopLogprobs = 0, true, k
		g[i] = r
	}
	return Generate(e, g)
}
