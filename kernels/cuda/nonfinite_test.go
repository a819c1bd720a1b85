//go:build cgo

package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/sample"
	"ringlm/synth"
)

// TestNonFiniteLogits: a model whose logits come out NaN ends every
// request with engine.ErrNonFinite naming the position, on the greedy fast
// path, the sampler's path and with alternatives asked for (whose reserved
// records the kernel pads), and the device serves on.
func TestNonFiniteLogits(t *testing.T) {
	needGPU(t)
	s, err := synth.Lookup("tiny", "llama")
	if err != nil {
		t.Fatal(err)
	}
	path := testmodel.Poison(t, testmodel.Write(t, s, gguf.TypeF32, 3), "output_norm.weight", float32(math.NaN()))
	m := testmodel.Open(t, path)
	e, _, _ := cudaEngine(t, m, engine.Config{Slots: 4})
	for round := range 2 {
		prompts := [][]int32{{1, 2, 3}, {4, 5, 6, 7, 8}, {9, 10, 11, 12}}
		var streams []*engine.Stream
		for i, prompt := range prompts {
			p := sample.Defaults()
			p.MaxTokens = 4
			switch i {
			case 0:
				p.Temperature = 0 // the head phase's greedy fast path
			case 2:
				p.Logprobs, p.TopLogprobs = true, 5
			}
			st, err := e.Submit(context.Background(), engine.Request{Prompt: prompt, Params: p})
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, st)
		}
		for i, st := range streams {
			toks, err := drain(st)
			want := fmt.Sprintf("non-finite logits (NaN/Inf) at position %d", len(prompts[i]))
			if len(toks) != 0 || !errors.Is(err, engine.ErrNonFinite) || !strings.Contains(fmt.Sprint(err), want) {
				t.Errorf("round %d request %d: %d tokens, %v; want the error %q", round, i, len(toks), err, want)
			}
		}
	}
}
