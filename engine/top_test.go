package engine

import (
	"context"
	"slices"
	"sync"
	"testing"

	"ringlm/kernels"
	"ringlm/kernels/null"
	"ringlm/ringbuf"
	"ringlm/sample"
)

// Tokens of a request that asked for alternatives carry them, complete,
// even when the device publishes a token and its TOP_LOGPROBS records in
// different batches (the smallest completion ring two slots allow, with
// four steps queued ahead, forces that) and when the
// token finishes the request; tokens of other requests carry none.
func TestTopLogprobsNull(t *testing.T) {
	const vocab, promptLen = 1000, 7
	const seedA = 77
	eos := null.Token(seedA, promptLen+5, vocab) // request A's sixth token
	e := newNullEngine(t, Config{Vocab: vocab, Slots: 2, PipelineDepth: 4, CompletionCap: ringbuf.MinCompletionCap(2), EOS: []int32{eos}})
	type spec struct {
		seed uint64
		nTop int
	}
	specs := []spec{{seedA, 4}, {1, 0}, {2, 1}, {3, sample.MaxTopLogprobs}, {4, 3}, {5, 0}, {6, 20}, {7, 2}}
	var wg sync.WaitGroup
	for _, sp := range specs {
		wg.Go(func() {
			p := sample.Defaults()
			p.Seed, p.MaxTokens = sp.seed, 40
			p.Logprobs, p.TopLogprobs = sp.nTop > 0, sp.nTop
			prompt := make([]int32, promptLen)
			for i := range prompt {
				prompt[i] = int32(i + 1)
			}
			s, err := e.Submit(context.Background(), Request{Prompt: prompt, Params: p})
			if err != nil {
				t.Error(err)
				return
			}
			toks := collect(t, s)
			f, err := s.Finish()
			if err != nil {
				t.Errorf("seed %d: %v", sp.seed, err)
				return
			}
			for i, tk := range toks {
				if want := null.Token(sp.seed, promptLen+i, vocab); tk.ID != want {
					t.Errorf("seed %d token %d: %d, want %d", sp.seed, i, tk.ID, want)
					return
				}
				if sp.nTop == 0 {
					if tk.Top() != nil {
						t.Errorf("seed %d token %d: alternatives %v, none asked for", sp.seed, i, tk.Top())
					}
					continue
				}
				if want := kernels.PickerTop(nil, tk.ID, sp.nTop, vocab); !slices.Equal(tk.Top(), want) {
					t.Errorf("seed %d token %d: alternatives %v, want %v", sp.seed, i, tk.Top(), want)
				}
			}
			wantN, wantF := 40, FinishLength
			if i := slices.IndexFunc(toks, func(tk Token) bool { return tk.ID == eos }); i >= 0 {
				wantN, wantF = i+1, FinishStop
			}
			if len(toks) != wantN || f != wantF {
				t.Errorf("seed %d: %d tokens, finish %v; want %d, %v", sp.seed, len(toks), f, wantN, wantF)
			}
			if sp.seed == seedA && (f != FinishStop || len(toks) != 6) {
				t.Errorf("request A: %d tokens, finish %v; want 6, stop at EOS", len(toks), f)
			}
		})
	}
	wg.Wait()
	waitFor(t, func() bool { return e.Stats().Blocks.Used == 0 && e.Stats().Running == 0 })
}

// On the CPU device the alternatives are the sampler's: at temperature 0
// the chosen token leads them with its own logprob; sampled or not they
// are distinct and sorted, most likely first.
func TestTopLogprobsCPU(t *testing.T) {
	m := microModel(t)
	e := newCPUEngine(t, m, Config{Slots: 4})
	for _, temp := range []float32{0, 1} {
		p := sample.Defaults()
		p.Temperature, p.Seed, p.MaxTokens = temp, 5, 16
		p.Logprobs, p.TopLogprobs = true, 5
		s, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2, 3, 4, 5}, Params: p, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		toks := collect(t, s)
		if len(toks) != 16 {
			t.Fatalf("T=%v: %d tokens", temp, len(toks))
		}
		for i, tk := range toks {
			if len(tk.Top()) != 5 {
				t.Fatalf("T=%v token %d: %d alternatives", temp, i, len(tk.Top()))
			}
			seen := map[int32]bool{}
			for j, a := range tk.Top() {
				if seen[a.Token] || a.Logprob > 0 || (j > 0 && a.Logprob > tk.Top()[j-1].Logprob) {
					t.Fatalf("T=%v token %d: alternatives %v not distinct and descending", temp, i, tk.Top())
				}
				seen[a.Token] = true
				if a.Token == tk.ID && a.Logprob != tk.Logprob {
					t.Fatalf("T=%v token %d: logprob %v, as an alternative %v", temp, i, tk.Logprob, a.Logprob)
				}
			}
			if temp == 0 && (tk.Top()[0] != sample.TokenLogprob{Token: tk.ID, Logprob: tk.Logprob}) {
				t.Fatalf("greedy token %d (%d, %v) does not lead its alternatives %v", i, tk.ID, tk.Logprob, tk.Top())
			}
		}
	}
}
