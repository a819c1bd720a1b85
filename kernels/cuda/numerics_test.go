//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"ringlm/engine"
	"ringlm/eval"
	"ringlm/gguf"
	"ringlm/kernels/conformance"
	"ringlm/sample"
)

// TestChunkingInvariance: a prompt prefilled whole or in chunks of 7, 64
// or 512 tokens a step, alone or beside 255 other sequences, gives
// bitwise the same greedy and seeded sampled tokens, logprobs and
// alternatives on the GPU (conformance.CheckChunking; the CPU device
// passes the same check in kernels/conformance). A tiny llama in BF16 and
// a tiny qwen2 (tied head, QKV bias) in Q8_0. On a grid of 8 blocks too:
// there the products of a few hundred rows take their whole-K units
// (mma.cuh), so a token's rows meet both modes across the chunkings. And a
// tiny llama in Q4_K (the block types' three product shapes).
func TestChunkingInvariance(t *testing.T) {
	needGPU(t)
	for _, c := range []struct {
		arch string
		typ  gguf.Type
		grid int
	}{{"llama", gguf.TypeBF16, 0}, {"qwen2", gguf.TypeQ8_0, 0}, {"llama", gguf.TypeBF16, 8}, {"qwen2", gguf.TypeQ8_0, 8},
		{"llama", gguf.TypeQ4_K, 0}} {
		name := fmt.Sprintf("tiny-%s-%s", c.arch, c.typ)
		if c.grid > 0 {
			name += fmt.Sprintf("-grid%d", c.grid)
		}
		t.Run(name, func(t *testing.T) {
			m := tiny(t, c.arch, c.typ)
			conformance.CheckChunking(t, m.Vocab, m.Context, func(t *testing.T, cfg engine.Config) (*engine.Engine, func()) {
				e, _, closeGPU := cudaEngineGrid(t, m, cfg, c.grid)
				return e, closeGPU
			})
		})
	}
}

// gpuNextLogits gives eval.PerplexityWith the GPU's logits after a
// prefix: the prefix runs as a one-token request on an idle engine with
// PipelineDepth 1 and the logits of its sampling step are read back
// (rlm_read_logits, as gpuLogits). With the prefix cache on, each request
// recomputes only the positions past the last whole block the previous
// prefix left (batch invariance across chunkings makes those blocks the
// same as a full prefill's).
func gpuNextLogits(e *engine.Engine, dev *Device) eval.NextLogits {
	p := sample.Defaults()
	p.Temperature, p.MaxTokens = 0, 1
	return func(ctx context.Context, prefix []int32, dst []float32) error {
		if _, err := conformance.Generate(e, []engine.Request{{Prompt: prefix, Params: p}}); err != nil {
			return err
		}
		return dev.Logits(0, dst)
	}
}

// TestBuiltinPerplexity: the built-in model's perplexity on the held-out
// text (6 chunks of 512 tokens, as models' TestQ8PerplexityWithinOnePercent)
// computed through the CUDA device is within 0.5% of the CPU reference's
// (F32 KV), the bound issue 15 sets for BF16 matrix inputs.
func TestBuiltinPerplexity(t *testing.T) {
	needGPU(t)
	m, tok := builtinModel(t)
	o := eval.Options{Ctx: 512, Chunks: 6}
	toks := eval.Tokenize(tok, heldout(t), &o)
	ctx := context.Background()
	t0 := time.Now()
	cpuRes, err := eval.Perplexity(ctx, m, toks, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CPU: PPL %.4f ± %.4f over %d tokens in %v", cpuRes.PPL, cpuRes.Uncertainty, cpuRes.Scored, time.Since(t0).Round(time.Millisecond))
	e, dev, closeGPU := cudaEngine(t, m, engine.Config{Slots: 4, PipelineDepth: 1, PrefixCache: true})
	defer closeGPU()
	t0 = time.Now()
	gpuRes, err := eval.PerplexityWith(ctx, gpuNextLogits(e, dev), m.Vocab, m.Context, toks, o)
	if err != nil {
		t.Fatal(err)
	}
	rel := gpuRes.PPL/cpuRes.PPL - 1
	st := e.Stats()
	t.Logf("GPU: PPL %.4f ± %.4f (%+.3f%% from the CPU) in %v: %d requests, %d prompt tokens computed, %d from the prefix cache",
		gpuRes.PPL, gpuRes.Uncertainty, 100*rel, time.Since(t0).Round(time.Millisecond), st.RequestsDone, st.PromptTokens, st.CachedTokens)
	var worst float64
	for i := range cpuRes.NLL {
		worst = max(worst, math.Abs(gpuRes.NLL[i]-cpuRes.NLL[i]))
	}
	t.Logf("largest difference of one token's NLL: %.4g", worst)
	if !(math.Abs(rel) <= 0.005) {
		t.Errorf("GPU perplexity %.4f is %+.3f%% from the CPU's %.4f (bound 0.5%%)", gpuRes.PPL, 100*rel, cpuRes.PPL)
	}
}
