package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/sample"
	"ringlm/synth"
)

// A model whose logits are NaN (NaN weights) ends every request with
// FinishError and ErrNonFinite naming the position, not with token 0 and
// a "stop": end to end on the CPU device. The slots and blocks come back,
// so the engine keeps serving (and failing) requests.
func TestNonFiniteLogitsFailRequests(t *testing.T) {
	s := synth.Shape{Arch: "llama", Name: "micro", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		FFN: 128, Context: 1024, RopeBase: 10000, NormEps: 1e-5}
	path := testmodel.Poison(t, testmodel.Write(t, s, gguf.TypeF32, 3), "output_norm.weight", float32(math.NaN()))
	e := newCPUEngine(t, testmodel.Open(t, path), Config{Slots: 2, NumBlocks: 64})
	for round := range 2 {
		var streams []*Stream
		prompts := [][]int32{{1, 2, 3}, {4, 5, 6, 7, 8}, {9, 10, 11, 12}}
		for i, prompt := range prompts {
			p := sample.Defaults()
			p.MaxTokens = 4
			if i == 2 {
				p.Logprobs, p.TopLogprobs = true, 3 // the path where a TOKEN waits for its alternatives
			}
			st, err := e.Submit(context.Background(), Request{Prompt: prompt, Params: p})
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, st)
		}
		for i, st := range streams {
			toks, err := collectErr(st)
			if err != nil {
				t.Fatal(err)
			}
			f, err := st.Finish()
			want := fmt.Sprintf("non-finite logits (NaN/Inf) at position %d", len(prompts[i]))
			if len(toks) != 0 || f != FinishError || !errors.Is(err, ErrNonFinite) || !strings.Contains(fmt.Sprint(err), want) {
				t.Errorf("round %d request %d: %d tokens, finish %v, %v; want the error %q", round, i, len(toks), f, err, want)
			}
		}
	}
	waitFor(t, func() bool { st := e.Stats(); return st.Running == 0 && st.Blocks.Used == 0 })
	if st := e.Stats(); st.Failed != 6 || st.GeneratedTokens != 0 {
		t.Errorf("stats: %d failed (want 6), %d tokens generated (want 0)", st.Failed, st.GeneratedTokens)
	}
}
