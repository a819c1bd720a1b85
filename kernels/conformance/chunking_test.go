package conformance

import (
	"testing"

	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/kernels/cpu"
	"ringlm/ringbuf"
	"ringlm/synth"
)

// The CPU device is batch invariant by construction (each sequence's
// rows are computed alone, in a fixed order), so it passes the chunking
// check the GPU is held to; a model this small (dim 64, 2 layers, the
// built-in 512-token vocabulary) keeps 256 sequences cheap under -race.
func TestChunkingCPU(t *testing.T) {
	s := synth.Shape{Arch: "llama", Name: "micro", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		FFN: 128, Context: 1024, RopeBase: 10000, NormEps: 1e-5}
	m := testmodel.Open(t, testmodel.Write(t, s, gguf.TypeF32, 3))
	CheckChunking(t, m.Vocab, m.Context, func(t *testing.T, cfg engine.Config) (*engine.Engine, func()) {
		dev, err := cpu.New(m, gguf.TypeF16, ChunkingBlocks, 16, cfg.Slots)
		if err != nil {
			t.Fatal(err)
		}
		cfg.NumBlocks, cfg.Vocab, cfg.Context, cfg.Allocator = ChunkingBlocks, m.Vocab, m.Context, ringbuf.HeapAllocator{}
		e, err := engine.New(cfg, dev)
		if err != nil {
			t.Fatal(err)
		}
		return e, func() {
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		}
	})
}
