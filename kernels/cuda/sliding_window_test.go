//go:build cgo

package cuda

import (
	"math/rand/v2"
	"testing"

	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/synth"
)

// phi3Window is tiny phi3's sliding window here: not a multiple of the
// kernel's 32-position chunks, so a token's first chunk is cut inside,
// and far shorter than the prompts below.
const phi3Window = 40

// TestSlidingWindowMatchesCPU: with a window shorter than the prompt, the
// GPU's logits of a prompt's last token are within 2e-2 of the CPU
// forward pass with the same window (prompts of 17 to 600 tokens, the
// longest prefilled over two steps), where dropping the window would move
// them by far more; greedy continuations of 64 tokens, which decode past
// the window, are close to the CPU's by vLLM's rule at batch 1 and 7.
func TestSlidingWindowMatchesCPU(t *testing.T) {
	needGPU(t)
	s, err := synth.Lookup("tiny", "phi3")
	if err != nil {
		t.Fatal(err)
	}
	s.SlidingWindow = phi3Window
	m := loadSynth(t, s, gguf.TypeBF16, 13)
	if m.SlidingWindow != phi3Window {
		t.Fatalf("loaded window %d, wrote %d", m.SlidingWindow, phi3Window)
	}
	func() {
		e, dev, closeGPU := cudaEngine(t, m, engine.Config{Slots: 4, PipelineDepth: 1})
		defer closeGPU()
		for _, n := range []int{17, 40, 41, 100, 250, 600} {
			r := rand.New(rand.NewPCG(uint64(n), 5))
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = int32(r.IntN(m.Vocab))
			}
			gl, _ := gpuLogits(t, e, dev, toks)
			cl := cpuLogits(t, m, toks)
			m.SlidingWindow = 0
			plain := cpuLogits(t, m, toks)
			m.SlidingWindow = phi3Window
			rel, maxAbs := relErr(gl, cl)
			effect, _ := relErr(plain, cl)
			t.Logf("prompt %3d tokens: relative error %.3g (max abs %.3g); the window moves the CPU's logits by %.3g", n, rel, maxAbs, effect)
			if !(rel <= 2e-2) {
				t.Errorf("prompt of %d tokens: relative error %.3g > 2e-2", n, rel)
			}
			// Past the window the GPU must sit clearly nearer the windowed
			// reference than the window's own effect; one position past it
			// (41 tokens) the effect is small but still tells them apart.
			if n > phi3Window && !(rel < effect/2) {
				t.Errorf("prompt of %d tokens: GPU error %.3g against a window effect of %.3g: not clearly windowed", n, rel, effect)
			}
			if n >= 2*phi3Window && effect < 0.1 {
				t.Errorf("prompt of %d tokens: the window moves the logits by only %.3g; the test does not exercise it", n, effect)
			}
		}
	}()
	checkGreedyClose(t, m, greedyReqs(prompts(7, m.Vocab, 300, 21), 64), []int{1, 7})
}
