// Package eval measures models on text. Perplexity follows llama.cpp's
// llama-perplexity: non-overlapping chunks of n_ctx tokens, each run from
// an empty KV cache (BOS in place of its first token when the vocabulary
// adds one), only the second half of each chunk scored.
//
// The token stream (Tokenize: special-token text literal, BOS first when
// the vocabulary's add_bos says so, never EOS) is cut into floor(len/n_ctx)
// chunks (Options.Chunks limits them; fewer than 2·n_ctx tokens is
// ErrTooShort). The score is the NLL of token i+1 under the float64
// log-softmax of logits row i, for i in [n_ctx/2, n_ctx−2]; positions
// before n_ctx/2 run without the output head and the chunk's last token
// is not run (the forward pass is chunking-invariant, so the logits are
// the same). PPL = exp(mean NLL), and its ± is llama.cpp's
// PPL·sqrt((E[nll²]−E[nll]²)/(count−1)). `ringlm perplexity` prints it as
// llama.cpp does ([1]x,[2]y,… and "Final estimate: PPL = X +/- Y").
// PerplexityWith computes the same from any source of next-token logits
// (the GPU through the engine, in kernels/cuda's tests).
package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"ringlm/gguf"
	"ringlm/model"
	"ringlm/tokenizer"
)

// ErrTooShort is wrapped by Perplexity's error when the text has fewer
// than 2 × n_ctx tokens (llama.cpp's rule).
var ErrTooShort = errors.New("text too short")

// MinCtx is the smallest chunk length: it scores at least one token.
const MinCtx = 4

// Options configures Perplexity.
type Options struct {
	// Ctx is the chunk length n_ctx (required, MinCtx ≤ Ctx ≤ the model's
	// context length).
	Ctx int
	// Chunks limits the number of chunks; ≤ 0 means all of them
	// (floor(len(toks) / Ctx)).
	Chunks int
	// AddBOS puts BOS in place of each chunk's first token, as llama.cpp
	// does when the vocabulary's add_bos_token is set (the caller should
	// then also have put BOS at the start of toks, as tokenizing with
	// special tokens does).
	AddBOS bool
	BOS    int32
	// KVType is the KV cache type, gguf.TypeF16 or gguf.TypeF32; the zero
	// value (TypeF32) is F32.
	KVType gguf.Type
	// Batch bounds the tokens of one Forward call (default 512); calls
	// that return logits are further bounded to about 256 MiB of logits.
	// The forward pass gives bitwise the same logits for any split.
	Batch int
	// Progress, if set, is called after each chunk with its 1-based index
	// and the running perplexity over every chunk so far.
	Progress func(chunk int, running float64)
}

// Result is a perplexity estimate.
type Result struct {
	PPL float64 // exp(mean NLL)
	// Uncertainty is llama.cpp's "+/-": PPL × the standard error of the
	// mean NLL, sqrt((E[nll²] − E[nll]²) / (count − 1)). NaN when undefined
	// (fewer than 2 scored tokens, or no spread).
	Uncertainty float64
	MeanNLL     float64
	Ctx         int
	Chunks      int
	Tokens      int       // tokens in the input
	Scored      int       // tokens scored: Chunks × (Ctx − 1 − Ctx/2)
	Running     []float64 // the running perplexity after each chunk
	NLL         []float64 // each scored token's NLL, in order
}

// ScoredPerChunk is the number of tokens scored in a chunk of n tokens:
// the targets at positions n/2+1 … n−1, each predicted from the logits of
// the position before.
func ScoredPerChunk(n int) int { return n - 1 - n/2 }

// logitBudget bounds the floats of logits one Forward call returns.
const logitBudget = 64 << 20

// Perplexity computes the perplexity of m on toks the way llama.cpp's
// llama-perplexity does: chunk i is toks[i·Ctx : (i+1)·Ctx], run from an
// empty cache at positions 0…Ctx−1; the NLL of token j+1 under the
// log-softmax (float64) of the logits at position j is summed for j in
// [Ctx/2, Ctx−2]. Chunks run one after another: Forward already uses
// every core for its products and attention (and serialises concurrent
// calls on its scratch buffers), and the log-softmax of a chunk's rows is
// split over the cores. toks is not modified.
func Perplexity(ctx context.Context, m *model.Model, toks []int32, o Options) (*Result, error) {
	n := o.Ctx
	chunks, err := plan(m.Vocab, m.Context, toks, o)
	if err != nil {
		return nil, err
	}
	kvType := o.KVType
	if kvType != gguf.TypeF16 {
		kvType = gguf.TypeF32
	}
	bs := model.DefaultBlockSize
	nBlocks := (n + bs - 1) / bs
	// One pool serves every chunk: a chunk writes positions 0…p before
	// position p reads them, so nothing of the previous chunk is seen.
	kv, err := model.NewKVPool(&m.Config, kvType, nBlocks, bs)
	if err != nil {
		return nil, err
	}
	table := make([]int32, nBlocks)
	for i := range table {
		table[i] = int32(i)
	}
	batch := o.Batch
	if batch <= 0 {
		batch = 512
	}
	outBatch := max(1, min(batch, logitBudget/m.Vocab))

	first := n / 2
	per := ScoredPerChunk(n)
	sc := newScore(len(toks), chunks, o)
	chunk := make([]int32, n)
	logits := make([]float32, min(outBatch, per)*m.Vocab)
	for c := 0; c < chunks; c++ {
		sc.chunk(chunk, toks, c)
		// Positions before first need no logits; the last position is
		// only a target.
		for p := 0; p < first; p += batch {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			e := min(p+batch, first)
			if err := m.Forward(kv, []model.Seq{{Tokens: chunk[p:e], Pos: p, Blocks: table}}); err != nil {
				return nil, err
			}
		}
		for p := first; p < n-1; p += outBatch {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			e := min(p+outBatch, n-1)
			lg := logits[:(e-p)*m.Vocab]
			if err := m.Forward(kv, []model.Seq{{Tokens: chunk[p:e], Pos: p, Blocks: table, Logits: lg, AllLogits: true}}); err != nil {
				return nil, err
			}
			sc.rows(lg, m.Vocab, chunk[p+1:e+1])
		}
		sc.chunkDone(c)
	}
	return sc.result(), nil
}

// NextLogits writes into dst (vocabulary-sized) the logits that follow
// tokens run from an empty cache, tokens[0] at position 0: one position's
// logits a call, which is what a device reached through the engine gives
// (kernels/cuda's tests).
type NextLogits func(ctx context.Context, tokens []int32, dst []float32) error

// PerplexityWith is Perplexity with the logits from next instead of the
// CPU forward pass: the same chunks, BOS rule and scored positions, each
// position p of a chunk asking next for the logits after chunk[:p+1].
// vocab and ctxLen are the model's. With next computing what
// model.Forward computes it gives Perplexity's result bitwise.
func PerplexityWith(ctx context.Context, next NextLogits, vocab, ctxLen int, toks []int32, o Options) (*Result, error) {
	n := o.Ctx
	chunks, err := plan(vocab, ctxLen, toks, o)
	if err != nil {
		return nil, err
	}
	sc := newScore(len(toks), chunks, o)
	chunk := make([]int32, n)
	logits := make([]float32, vocab)
	for c := 0; c < chunks; c++ {
		sc.chunk(chunk, toks, c)
		for p := n / 2; p < n-1; p++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := next(ctx, chunk[:p+1], logits); err != nil {
				return nil, fmt.Errorf("eval: chunk %d, position %d: %w", c+1, p, err)
			}
			sc.rows(logits, vocab, chunk[p+1:p+2])
		}
		sc.chunkDone(c)
	}
	return sc.result(), nil
}

// plan checks the input against the model's vocabulary and context and
// returns the number of chunks.
func plan(vocab, ctxLen int, toks []int32, o Options) (int, error) {
	n := o.Ctx
	if n < MinCtx {
		return 0, fmt.Errorf("eval: context of %d tokens; it must be at least %d", n, MinCtx)
	}
	if ctxLen > 0 && n > ctxLen {
		return 0, fmt.Errorf("eval: context of %d tokens exceeds the model's context length of %d", n, ctxLen)
	}
	if len(toks) < 2*n {
		return 0, fmt.Errorf("eval: %w: you need at least %d tokens to evaluate perplexity with a context of %d; the text tokenizes to only %d tokens",
			ErrTooShort, 2*n, n, len(toks))
	}
	chunks := len(toks) / n
	if o.Chunks > 0 {
		chunks = min(chunks, o.Chunks)
	}
	if o.AddBOS && (o.BOS < 0 || int(o.BOS) >= vocab) {
		return 0, fmt.Errorf("eval: BOS token %d outside the vocabulary of %d", o.BOS, vocab)
	}
	for i, t := range toks[:chunks*n] {
		if t < 0 || int(t) >= vocab {
			return 0, fmt.Errorf("eval: token %d (at %d) outside the model's vocabulary of %d", t, i, vocab)
		}
	}
	return chunks, nil
}

// score accumulates the scored tokens' NLLs, chunk by chunk.
type score struct {
	o         Options
	res       *Result
	sum, sum2 float64
}

func newScore(tokens, chunks int, o Options) *score {
	per := ScoredPerChunk(o.Ctx)
	return &score{o: o, res: &Result{Ctx: o.Ctx, Chunks: chunks, Tokens: tokens, Scored: chunks * per,
		Running: make([]float64, 0, chunks), NLL: make([]float64, 0, chunks*per)}}
}

// chunk copies chunk c of toks into dst, BOS first if asked.
func (s *score) chunk(dst, toks []int32, c int) {
	n := len(dst)
	copy(dst, toks[c*n:(c+1)*n])
	if s.o.AddBOS {
		dst[0] = s.o.BOS
	}
}

// rows scores targets[i] under logits row i.
func (s *score) rows(logits []float32, vocab int, targets []int32) {
	at := len(s.res.NLL)
	s.res.NLL = append(s.res.NLL, make([]float64, len(targets))...)
	scoreRows(s.res.NLL[at:], logits, vocab, targets)
	for _, v := range s.res.NLL[at:] {
		s.sum += v
		s.sum2 += v * v
	}
}

// chunkDone records the running perplexity after chunk c.
func (s *score) chunkDone(c int) {
	running := math.Exp(s.sum / float64(len(s.res.NLL)))
	s.res.Running = append(s.res.Running, running)
	if s.o.Progress != nil {
		s.o.Progress(c+1, running)
	}
}

func (s *score) result() *Result {
	s.res.MeanNLL, s.res.PPL, s.res.Uncertainty = summarize(s.sum, s.sum2, len(s.res.NLL))
	return s.res
}

// summarize turns the sums of the NLLs and of their squares over count
// tokens into llama.cpp's estimate: PPL = exp(mean), and ± PPL ×
// sqrt((mean of squares − mean²) / (count − 1)), NaN where undefined.
func summarize(sum, sum2 float64, count int) (mean, ppl, unc float64) {
	if count == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	mean = sum / float64(count)
	ppl = math.Exp(mean)
	v := sum2/float64(count) - mean*mean
	if count < 2 || !(v > 0) {
		return mean, ppl, math.NaN()
	}
	return mean, ppl, ppl * math.Sqrt(v/float64(count-1))
}

// NLL returns −log softmax(logits)[target], in float64: the maximum is
// subtracted, exp and the sum are float64.
func NLL(logits []float32, target int32) float64 {
	mx := logits[0]
	for _, v := range logits[1:] {
		mx = max(mx, v)
	}
	var s float64
	for _, v := range logits {
		s += math.Exp(float64(v) - float64(mx))
	}
	return -(float64(logits[target]) - float64(mx) - math.Log(s))
}

// scoreRows writes the NLL of targets[i] under logits row i into dst[i],
// rows split over the cores (each row's arithmetic is the same whatever
// the split).
func scoreRows(dst []float64, logits []float32, vocab int, targets []int32) {
	rows := len(dst)
	w := min(runtime.GOMAXPROCS(0), rows)
	if w <= 1 || rows*vocab < 1<<16 {
		for i := range dst {
			dst[i] = NLL(logits[i*vocab:(i+1)*vocab], targets[i])
		}
		return
	}
	var wg sync.WaitGroup
	step := (rows + w - 1) / w
	for lo := 0; lo < rows; lo += step {
		hi := min(lo+step, rows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				dst[i] = NLL(logits[i*vocab:(i+1)*vocab], targets[i])
			}
		}()
	}
	wg.Wait()
}

// Tokenize tokenizes text as llama-perplexity does: special-token
// strings taken literally, BOS first when the vocabulary adds one (and
// has one), never EOS; invalid UTF-8 is handled as the tokenizer handles
// it. It sets o.AddBOS and o.BOS to match.
func Tokenize(t *tokenizer.Tokenizer, text string, o *Options) []int32 {
	v := t.Vocab()
	o.AddBOS, o.BOS = v.AddBOS && v.BOS >= 0, v.BOS
	ids := t.EncodeWith(text, tokenizer.EncodeOptions{})
	if !o.AddBOS {
		return ids
	}
	return append([]int32{v.BOS}, ids...)
}

// Load builds the model and its tokenizer from an open GGUF file (which
// must stay open while they are used).
func Load(f *gguf.File) (*model.Model, *tokenizer.Tokenizer, error) {
	m, err := model.Load(f)
	if err != nil {
		return nil, nil, err
	}
	tok, err := tokenizer.Load(f)
	if err != nil {
		return nil, nil, err
	}
	return m, tok, nil
}
