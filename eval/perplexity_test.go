package eval

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/model"
	"ringlm/synth"
	"ringlm/tokenizer"
)

// TestMain holds the directory of the models the tests share.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ringlm-eval-test")
	if err != nil {
		panic(err)
	}
	modelDir = dir
	code := m.Run()
	for _, l := range loaded {
		l.f.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

type tinyModel struct {
	f *gguf.File
	m *model.Model
	v *tokenizer.Vocab
}

var (
	modelDir string
	loaded   = map[string]tinyModel{}
)

// tiny writes the tiny synthetic model of arch (F32 weights) once and
// loads it with its vocabulary.
func tiny(t *testing.T, arch string) (*model.Model, *tokenizer.Vocab) {
	t.Helper()
	if l, ok := loaded[arch]; ok {
		return l.m, l.v
	}
	s, err := synth.Lookup("tiny", arch)
	if err != nil {
		t.Fatal(err)
	}
	w, err := synth.Build(synth.Options{Shape: s, Type: gguf.TypeF32, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, arch+".gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(f)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	v, err := tokenizer.FromGGUF(f)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	loaded[arch] = tinyModel{f, m, v}
	return m, v
}

func randomTokens(n, vocab int, seed uint64) []int32 {
	r := rand.New(rand.NewPCG(seed, 1))
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(r.IntN(vocab))
	}
	return toks
}

// handNLL is the test's own −log softmax: log-sum-exp in float64 around
// the float64 maximum.
func handNLL(row []float32, target int32) float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s) - float64(row[target])
}

// reference computes llama.cpp's perplexity by hand: each chunk in one
// Forward call with every position's logits from a fresh KV pool, BOS in
// place of its first token, NLL of token i+1 from row i for i in
// [n/2, n−2].
func reference(t *testing.T, m *model.Model, toks []int32, n, chunks int, bos int32, kvType gguf.Type) (nll []float64, running []float64) {
	t.Helper()
	var sum float64
	for c := 0; c < chunks; c++ {
		chunk := slices.Clone(toks[c*n : (c+1)*n])
		if bos >= 0 {
			chunk[0] = bos
		}
		blocks := (n + model.DefaultBlockSize - 1) / model.DefaultBlockSize
		kv, err := model.NewKVPool(&m.Config, kvType, blocks, model.DefaultBlockSize)
		if err != nil {
			t.Fatal(err)
		}
		table := make([]int32, blocks)
		for i := range table {
			table[i] = int32(i)
		}
		all := make([]float32, n*m.Vocab)
		if err := m.Forward(kv, []model.Seq{{Tokens: chunk, Blocks: table, Logits: all, AllLogits: true}}); err != nil {
			t.Fatal(err)
		}
		for i := n / 2; i <= n-2; i++ {
			v := handNLL(all[i*m.Vocab:(i+1)*m.Vocab], chunk[i+1])
			nll = append(nll, v)
			sum += v
		}
		running = append(running, math.Exp(sum/float64(len(nll))))
	}
	return nll, running
}

func relDiff(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-300) }

// Perplexity's arithmetic equals the hand computation to 1e-9 relative,
// for two architectures, both KV cache types, with and without BOS, and
// whatever the split of a chunk into Forward calls.
func TestPerplexityMatchesHandComputation(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2"} {
		m, _ := tiny(t, arch)
		const n = 32
		toks := randomTokens(3*n+7, m.Vocab, 3)
		orig := slices.Clone(toks)
		for _, kvType := range []gguf.Type{gguf.TypeF32, gguf.TypeF16} {
			if arch != "llama" && kvType == gguf.TypeF16 {
				continue // the KV type is the model package's business; one arch suffices
			}
			for _, bos := range []int32{-1, 1} {
				o := Options{Ctx: n, KVType: kvType, AddBOS: bos >= 0, BOS: bos}
				var progress []float64
				o.Progress = func(c int, r float64) {
					if c != len(progress)+1 {
						t.Errorf("progress for chunk %d after %d", c, len(progress))
					}
					progress = append(progress, r)
				}
				res, err := Perplexity(context.Background(), m, toks, o)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(toks, orig) {
					t.Fatal("Perplexity modified its input")
				}
				wantNLL, wantRun := reference(t, m, toks, n, 3, bos, kvType)
				if len(res.NLL) != len(wantNLL) || res.Scored != len(wantNLL) {
					t.Fatalf("%d NLLs (Scored %d), want %d", len(res.NLL), res.Scored, len(wantNLL))
				}
				var sum, sum2 float64
				for i, w := range wantNLL {
					if relDiff(res.NLL[i], w) > 1e-12 {
						t.Fatalf("%s kv %s bos %d: NLL %d = %.17g, hand %.17g", arch, kvType, bos, i, res.NLL[i], w)
					}
					sum += w
					sum2 += w * w
				}
				mean := sum / float64(len(wantNLL))
				ppl := math.Exp(mean)
				unc := ppl * math.Sqrt((sum2/float64(len(wantNLL))-mean*mean)/float64(len(wantNLL)-1))
				if relDiff(res.PPL, ppl) > 1e-9 || relDiff(res.Uncertainty, unc) > 1e-9 || relDiff(res.MeanNLL, mean) > 1e-9 {
					t.Fatalf("PPL %.12g ± %.12g (mean %.12g), hand %.12g ± %.12g (mean %.12g)", res.PPL, res.Uncertainty, res.MeanNLL, ppl, unc, mean)
				}
				for i := range wantRun {
					if relDiff(res.Running[i], wantRun[i]) > 1e-9 || progress[i] != res.Running[i] {
						t.Fatalf("running %v, progress %v, hand %v", res.Running, progress, wantRun)
					}
				}
				if res.Running[2] != res.PPL {
					t.Fatalf("last running value %v, PPL %v", res.Running[2], res.PPL)
				}
				// A synthetic model on random tokens: near the vocabulary
				// size, never below 1.
				if !(res.PPL > 1) || math.IsInf(res.PPL, 0) {
					t.Fatalf("PPL %v", res.PPL)
				}
				t.Logf("%s kv %s bos %d: PPL = %.4f +/- %.5f over %d tokens", arch, kvType, bos, res.PPL, res.Uncertainty, res.Scored)

				// Other splits into Forward calls: bitwise the same NLLs.
				if kvType != gguf.TypeF32 || bos >= 0 {
					continue
				}
				for _, b := range []int{1, 5} {
					o2 := o
					o2.Progress, o2.Batch = nil, b
					r2, err := Perplexity(context.Background(), m, toks, o2)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(r2.NLL, res.NLL) {
						t.Fatalf("batch %d: NLLs differ from batch 512", b)
					}
				}
			}
		}
	}
}

// chunks = floor(tokens / ctx), limited by Chunks; every chunk scores
// ctx − 1 − ctx/2 tokens; tokens past the last chunk and (with BOS) each
// chunk's first token do not matter.
func TestChunksAndScoredTokens(t *testing.T) {
	m, _ := tiny(t, "llama")
	bg := context.Background()
	for _, c := range []struct{ n, toks, limit, chunks int }{
		{32, 64, 0, 2}, {32, 95, 0, 2}, {32, 96, 0, 3}, {32, 127, 0, 3}, {32, 127, 2, 2}, {32, 127, 1, 1},
		{32, 127, 9, 3}, {33, 99, 0, 3}, {16, 100, 0, 6}, {4, 9, 0, 2}, {5, 10, 0, 2},
	} {
		toks := randomTokens(c.toks, m.Vocab, uint64(c.toks))
		res, err := Perplexity(bg, m, toks, Options{Ctx: c.n, Chunks: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		per := c.n - 1 - c.n/2
		if res.Chunks != c.chunks || res.Scored != c.chunks*per || len(res.NLL) != res.Scored || len(res.Running) != c.chunks ||
			res.Tokens != c.toks || res.Ctx != c.n || ScoredPerChunk(c.n) != per {
			t.Fatalf("%+v: chunks %d, scored %d (%d NLLs), running %d, tokens %d", c, res.Chunks, res.Scored, len(res.NLL), len(res.Running), res.Tokens)
		}
	}

	const n = 32
	toks := randomTokens(3*n+20, m.Vocab, 9)
	o := Options{Ctx: n, AddBOS: true, BOS: 1}
	base, err := Perplexity(bg, m, toks, o)
	if err != nil {
		t.Fatal(err)
	}
	// A limit keeps a prefix of the same computation.
	two, err := Perplexity(bg, m, toks, Options{Ctx: n, AddBOS: true, BOS: 1, Chunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(two.NLL, base.NLL[:2*ScoredPerChunk(n)]) || two.Running[1] != base.Running[1] {
		t.Fatal("--chunks 2 is not the first two chunks of the full run")
	}
	alt := slices.Clone(toks)
	for i := 3 * n; i < len(alt); i++ { // the tail
		alt[i] = (alt[i] + 1) % int32(m.Vocab)
	}
	for c := 0; c < 3; c++ { // each chunk's first token, replaced by BOS
		alt[c*n] = (alt[c*n] + 7) % int32(m.Vocab)
	}
	r, err := Perplexity(bg, m, alt, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.NLL, base.NLL) {
		t.Fatal("the tail or a chunk's first token changed the result")
	}
	// A chunk's last token is a target of the second chunk only.
	alt = slices.Clone(toks)
	alt[2*n-1] = (alt[2*n-1] + 1) % int32(m.Vocab)
	if r, err = Perplexity(bg, m, alt, o); err != nil {
		t.Fatal(err)
	}
	per := ScoredPerChunk(n)
	for i := range r.NLL {
		if changed := r.NLL[i] != base.NLL[i]; changed != (i == 2*per-1) {
			t.Fatalf("changing the last token of chunk 2 changed NLL %d: %v", i, changed)
		}
	}
}

// llama.cpp's uncertainty on a hand-made list of NLLs.
func TestSummarize(t *testing.T) {
	nll := []float64{1, 2, 3, 4}
	var sum, sum2 float64
	for _, v := range nll {
		sum += v
		sum2 += v * v
	}
	mean, ppl, unc := summarize(sum, sum2, len(nll))
	// mean 2.5; population variance 1.25; SE = sqrt(1.25/3).
	wantPPL := math.Exp(2.5)
	wantUnc := wantPPL * math.Sqrt(1.25/3)
	if mean != 2.5 || relDiff(ppl, wantPPL) > 1e-15 || relDiff(unc, wantUnc) > 1e-15 {
		t.Fatalf("mean %v, ppl %v ± %v; want 2.5, %v ± %v", mean, ppl, unc, wantPPL, wantUnc)
	}
	// The same as the sample standard deviation over sqrt(count), two-pass.
	var ss float64
	for _, v := range nll {
		ss += (v - 2.5) * (v - 2.5)
	}
	if se := math.Sqrt(ss/3) / math.Sqrt(4); relDiff(unc, wantPPL*se) > 1e-14 {
		t.Fatalf("unc %v, two-pass %v", unc, wantPPL*se)
	}
	if relDiff(unc, 7.8638) > 1e-4 { // 12.1825 × 0.6455
		t.Fatalf("unc %v", unc)
	}
	if _, p, u := summarize(3, 9, 1); p != math.Exp(3) || !math.IsNaN(u) {
		t.Fatalf("one token: %v ± %v", p, u)
	}
	if _, p, u := summarize(6, 12, 3); p != math.Exp(2) || !math.IsNaN(u) {
		t.Fatalf("no spread: %v ± %v", p, u)
	}
	if m, p, u := summarize(0, 0, 0); !math.IsNaN(m) || !math.IsNaN(p) || !math.IsNaN(u) {
		t.Fatal("no tokens: want NaN")
	}
	// NLL is −log softmax.
	row := []float32{1, 2, 3}
	z := math.Exp(1) + math.Exp(2) + math.Exp(3)
	for i := range row {
		if want := -math.Log(math.Exp(float64(row[i])) / z); relDiff(NLL(row, int32(i)), want) > 1e-14 {
			t.Fatalf("NLL(%d) = %v, want %v", i, NLL(row, int32(i)), want)
		}
	}
	if v := NLL([]float32{1e4, 0, -1e4}, 0); v < 0 || v > 1e-300 {
		t.Fatalf("NLL of a certain token: %v", v)
	}
}

func TestPerplexityErrors(t *testing.T) {
	m, _ := tiny(t, "llama")
	bg := context.Background()
	toks := randomTokens(100, m.Vocab, 1)
	for _, c := range []struct {
		toks []int32
		o    Options
		want string
	}{
		{toks, Options{Ctx: 3}, "at least 4"},
		{toks, Options{Ctx: 0}, "at least 4"},
		{randomTokens(2*m.Context+2, m.Vocab, 1), Options{Ctx: m.Context + 1}, "exceeds the model's context length of 2048"},
		{toks, Options{Ctx: 51}, "you need at least 102 tokens to evaluate perplexity with a context of 51; the text tokenizes to only 100 tokens"},
		{slices.Concat(toks[:40], []int32{int32(m.Vocab)}, toks[:30]), Options{Ctx: 32}, "outside the model's vocabulary"},
		{slices.Concat(toks[:40], []int32{-1}, toks[:30]), Options{Ctx: 32}, "outside the model's vocabulary"},
		{toks, Options{Ctx: 32, AddBOS: true, BOS: int32(m.Vocab)}, "BOS token"},
	} {
		_, err := Perplexity(bg, m, c.toks, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("ctx %d: %v, want %q", c.o.Ctx, err, c.want)
		}
	}
	if _, err := Perplexity(bg, m, toks[:63], Options{Ctx: 32}); !errors.Is(err, ErrTooShort) {
		t.Fatalf("%v, want ErrTooShort", err)
	}
	// A bad token past the last chunk is never read.
	if _, err := Perplexity(bg, m, append(slices.Clone(toks[:64]), -5), Options{Ctx: 32}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := Perplexity(ctx, m, toks, Options{Ctx: 32}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// Tokenize adds BOS (and only BOS) as the vocabulary says, and sets the
// options to put BOS at each chunk's start; invalid UTF-8 does not panic.
func TestTokenize(t *testing.T) {
	_, v := tiny(t, "llama")
	for _, add := range []bool{false, true} {
		vv := *v
		vv.AddBOS, vv.AddEOS = add, true
		if vv.BOS < 0 {
			vv.BOS = 0
		}
		tok, err := tokenizer.New(&vv)
		if err != nil {
			t.Fatal(err)
		}
		var o Options
		ids := Tokenize(tok, "hello world <|im_start|>\xff\xfe", &o)
		plain := tok.EncodeWith("hello world <|im_start|>\xff\xfe", tokenizer.EncodeOptions{})
		want := plain
		if add {
			want = append([]int32{vv.BOS}, plain...)
		}
		if !slices.Equal(ids, want) || o.AddBOS != add || o.BOS != vv.BOS {
			t.Fatalf("add_bos %v: %v (AddBOS %v, BOS %d), want %v", add, ids, o.AddBOS, o.BOS, want)
		}
	}
}

// PerplexityWith over logits that are model.Forward's of each prefix run
// from position 0 gives Perplexity's result bitwise (the forward pass is
// chunking-invariant), with and without BOS; an error of the logits
// source names the chunk and position, and bad input is refused as
// Perplexity refuses it.
func TestPerplexityWith(t *testing.T) {
	m, _ := tiny(t, "llama")
	const n = 24
	toks := randomTokens(2*n+5, m.Vocab, 11)
	calls := 0
	next := func(_ context.Context, prefix []int32, dst []float32) error {
		calls++
		nb := (len(prefix) + 15) / 16
		kv, err := model.NewKVPool(&m.Config, gguf.TypeF32, nb, 16)
		if err != nil {
			return err
		}
		table := make([]int32, nb)
		for i := range table {
			table[i] = int32(i)
		}
		return m.Forward(kv, []model.Seq{{Tokens: prefix, Pos: 0, Blocks: table, Logits: dst}})
	}
	for _, bos := range []int32{-1, 2} {
		o := Options{Ctx: n, AddBOS: bos >= 0, BOS: bos}
		want, err := Perplexity(context.Background(), m, toks, o)
		if err != nil {
			t.Fatal(err)
		}
		calls = 0
		got, err := PerplexityWith(context.Background(), next, m.Vocab, m.Context, toks, o)
		if err != nil {
			t.Fatal(err)
		}
		if calls != 2*ScoredPerChunk(n) || !slices.Equal(got.NLL, want.NLL) || got.PPL != want.PPL ||
			!slices.Equal(got.Running, want.Running) || got.Scored != want.Scored || got.Chunks != 2 {
			t.Fatalf("bos %d: %d calls; PPL %v (%d scored), Perplexity's %v (%d)", bos, calls, got.PPL, got.Scored, want.PPL, want.Scored)
		}
	}
	boom := errors.New("device lost")
	_, err := PerplexityWith(context.Background(), func(context.Context, []int32, []float32) error { return boom }, m.Vocab, m.Context, toks, Options{Ctx: n})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "chunk 1, position 12") {
		t.Fatalf("err = %v", err)
	}
	if _, err := PerplexityWith(context.Background(), next, m.Vocab, m.Context, toks[:n], Options{Ctx: n}); !errors.Is(err, ErrTooShort) {
		t.Fatalf("short input: %v", err)
	}
}
