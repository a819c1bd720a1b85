package models

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"ringlm/eval"
	"ringlm/gguf"
	"ringlm/model"
	"ringlm/tokenizer"
)

type loaded struct {
	m   *model.Model
	tok *tokenizer.Tokenizer
}

func load(t *testing.T, f *gguf.File) loaded {
	t.Helper()
	m, tok, err := eval.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return loaded{m, tok}
}

func builtin(t *testing.T) loaded {
	f, err := gguf.Parse(Default())
	if err != nil {
		t.Fatal(err)
	}
	if typ, _ := f.Uint32("general.file_type"); typ != 7 {
		t.Fatalf("built-in model has file_type %d, want 7 (Q8_0)", typ)
	}
	return load(t, f)
}

func f16(t *testing.T) loaded {
	f, err := gguf.Open("../testdata/gocoder/gocoder-f16.gguf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return load(t, f)
}

func TestDefaultAligned(t *testing.T) {
	b := Default()
	if len(b) != len(gocoder) || string(b[:4]) != "GGUF" {
		t.Fatalf("%d bytes, magic %q", len(b), b[:4])
	}
}

// The Q8_0 file loses less than 1% of perplexity against the F16 file on
// Go source the model never saw in training (the held-out packages).
func TestQ8PerplexityWithinOnePercent(t *testing.T) {
	text, err := os.ReadFile("../testdata/gocoder/heldout.txt")
	if err != nil {
		t.Fatal(err)
	}
	ppl := func(l loaded) float64 {
		o := eval.Options{Ctx: 512, Chunks: 6}
		toks := eval.Tokenize(l.tok, string(text), &o)
		r, err := eval.Perplexity(context.Background(), l.m, toks, o)
		if err != nil {
			t.Fatal(err)
		}
		return r.PPL
	}
	p16, p8 := ppl(f16(t)), ppl(builtin(t))
	t.Logf("held-out perplexity (6 chunks of 512): F16 %.4f, Q8_0 %.4f (%+.3f%%)", p16, p8, 100*(p8/p16-1))
	if p16 < 1 || p16 > 20 {
		t.Errorf("F16 perplexity %.3f: not a trained model", p16)
	}
	if math.Abs(p8/p16-1) > 0.01 {
		t.Errorf("Q8_0 perplexity %.4f is %.2f%% from F16's %.4f", p8, 100*(p8/p16-1), p16)
	}
}

// The F16 file continues the training run's sample prompt with the same
// greedy tokens as PyTorch did at the end of training (float32 weights),
// so the export (names, Q/K permutation, tokenizer) is the model trained.
func TestF16MatchesTraining(t *testing.T) {
	var rec struct {
		Sample struct {
			Prompt    string  `json:"prompt"`
			PromptIDs []int32 `json:"prompt_ids"`
			Greedy    []int32 `json:"greedy_ids"`
		} `json:"sample"`
	}
	b, err := os.ReadFile("../tools/train/gocoder/train.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	l := f16(t)
	ids := l.tok.Encode(rec.Sample.Prompt)
	if !slices.Equal(ids, rec.Sample.PromptIDs) {
		t.Fatalf("prompt tokenizes to %v, HF tokenizers gave %v", ids, rec.Sample.PromptIDs)
	}
	const n = 32
	kv, err := model.NewKVPool(&l.m.Config, gguf.TypeF32, 8, model.DefaultBlockSize)
	if err != nil {
		t.Fatal(err)
	}
	blocks := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	logits := make([]float32, l.m.Vocab)
	var got []int32
	seq := ids
	pos := 0
	for len(got) < n {
		if err := l.m.Forward(kv, []model.Seq{{Tokens: seq, Pos: pos, Blocks: blocks, Logits: logits}}); err != nil {
			t.Fatal(err)
		}
		pos += len(seq)
		best := int32(0)
		for j, v := range logits {
			if v > logits[best] {
				best = int32(j)
			}
		}
		got = append(got, best)
		seq = []int32{best}
	}
	if !slices.Equal(got, rec.Sample.Greedy[:n]) {
		t.Fatalf("greedy %v, training run %v", got, rec.Sample.Greedy[:n])
	}
}
