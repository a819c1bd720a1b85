package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"ringlm/eval"
	"ringlm/gguf"
	"ringlm/runner"
)

// maxPerplexityText bounds the text `ringlm perplexity` reads.
const maxPerplexityText = 256 << 20

func runPerplexity(args []string, stdout, stderr io.Writer) error {
	return perplexityWith(os.Stdin, args, stdout, stderr)
}

// perplexityJSON is --json's output. Undefined values (NaN, ±Inf) are null.
type perplexityJSON struct {
	Model        string     `json:"model"`
	PPL          *float64   `json:"ppl"`
	Uncertainty  *float64   `json:"uncertainty"`
	MeanNLL      *float64   `json:"mean_nll"`
	Chunks       int        `json:"chunks"`
	NCtx         int        `json:"n_ctx"`
	Tokens       int        `json:"tokens"`
	TokensScored int        `json:"tokens_scored"`
	Running      []*float64 `json:"running"`
	AddBOS       bool       `json:"add_bos"`
	KVType       string     `json:"kv_type"`
	Seconds      float64    `json:"seconds"`
}

func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// cfloat formats as C's printf does for NaN and infinities.
func cfloat(prec int, x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	return fmt.Sprintf("%.*f", prec, x)
}

func perplexityWith(stdin io.Reader, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("perplexity", "perplexity -m FILE --text FILE|- [--ctx N] [--chunks K] [--kv-type f16|f32] [--json]")
	modelPath := fs.String("m", "", "GGUF model file (required)")
	var textPath string
	fs.StringVar(&textPath, "text", "", "text file to score, - for stdin (required)")
	fs.StringVar(&textPath, "f", "", "same as --text (llama-perplexity's flag)")
	nCtx := fs.Int("ctx", 512, "chunk length n_ctx (default 512, or the model's context length if smaller)")
	chunks := fs.Int("chunks", -1, "score at most this many chunks (-1: all, floor(tokens / ctx))")
	kvType := fs.String("kv-type", "f16", "KV cache type: f32 or f16")
	asJSON := fs.Bool("json", false, "print one JSON object (ppl, uncertainty, chunks, tokens_scored, n_ctx, running values) instead of llama.cpp's lines")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (pass the text file with --text)", pos[0])
	}
	if *modelPath == "" {
		return usagef("-m FILE is required")
	}
	if textPath == "" {
		return usagef("--text FILE is required (- for stdin)")
	}
	if *nCtx < eval.MinCtx {
		return usagef("--ctx must be at least %d", eval.MinCtx)
	}
	if *chunks == 0 || *chunks < -1 {
		return usagef("--chunks must be positive (or -1 for all)")
	}
	kvt := gguf.TypeF16
	switch *kvType {
	case "f16":
	case "f32":
		kvt = gguf.TypeF32
	default:
		return usagef("--kv-type must be f32 or f16")
	}
	ctxSet := false
	fs.Visit(func(f *flag.Flag) { ctxSet = ctxSet || f.Name == "ctx" })

	text, err := readPerplexityText(stdin, textPath)
	if err != nil {
		return err
	}
	// The weights alone: eval runs the model's forward pass itself, on
	// no device.
	w, err := runner.Open(*modelPath)
	if err != nil {
		return err
	}
	defer w.Close()
	m, tok := w.Model, w.Tokenizer
	n := *nCtx
	if m.Context > 0 && n > m.Context {
		if ctxSet {
			return fmt.Errorf("--ctx %d exceeds the model's context length of %d", n, m.Context)
		}
		n = m.Context
	}

	start := time.Now()
	fmt.Fprintf(stderr, "perplexity: tokenizing the input ..\n")
	o := eval.Options{Ctx: n, Chunks: max(*chunks, 0), KVType: kvt}
	toks := eval.Tokenize(tok, text, &o)
	fmt.Fprintf(stderr, "perplexity: tokenization took %g ms\n", float64(time.Since(start).Microseconds())/1e3)
	if len(toks) < 2*n {
		return fmt.Errorf("you need at least %d tokens to evaluate perplexity with a context of %d; %s tokenizes to only %d tokens",
			2*n, n, textName(textPath), len(toks))
	}
	total := len(toks) / n
	if *chunks > 0 {
		total = min(total, *chunks)
	}
	fmt.Fprintf(stderr, "perplexity: calculating perplexity over %d chunks, n_ctx=%d, %d tokens scored per chunk, kv %s, add_bos %v\n",
		total, n, eval.ScoredPerChunk(n), *kvType, o.AddBOS)

	out := bufio.NewWriter(stdout)
	defer out.Flush()
	t0 := time.Now()
	o.Progress = func(c int, running float64) {
		if c == 1 {
			pass := time.Since(t0).Seconds()
			fmt.Fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", pass, pass*float64(total)/60)
		}
		if !*asJSON {
			fmt.Fprintf(out, "[%d]%s,", c, cfloat(4, running))
			out.Flush()
		}
	}
	res, err := eval.Perplexity(context.Background(), m, toks, o)
	if err != nil {
		if !*asJSON {
			out.WriteString("\n")
		}
		return err
	}
	if *asJSON {
		j := perplexityJSON{Model: *modelPath, PPL: finite(res.PPL), Uncertainty: finite(res.Uncertainty), MeanNLL: finite(res.MeanNLL),
			Chunks: res.Chunks, NCtx: res.Ctx, Tokens: res.Tokens, TokensScored: res.Scored, Running: make([]*float64, len(res.Running)),
			AddBOS: o.AddBOS, KVType: *kvType, Seconds: time.Since(t0).Seconds()}
		for i, r := range res.Running {
			j.Running[i] = finite(r)
		}
		b, err := json.MarshalIndent(j, "", "  ")
		if err != nil {
			return err
		}
		out.Write(b)
		out.WriteString("\n")
		return nil
	}
	fmt.Fprintf(out, "\nFinal estimate: PPL = %s +/- %s\n", cfloat(4, res.PPL), cfloat(5, res.Uncertainty))
	if math.IsNaN(res.Uncertainty) {
		fmt.Fprintf(stderr, "perplexity: no uncertainty: fewer than 2 scored tokens or no spread in their log-probabilities\n")
	}
	return nil
}

func textName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// readPerplexityText reads the whole text (at most maxPerplexityText
// bytes) from the file, or stdin for "-".
func readPerplexityText(stdin io.Reader, path string) (string, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPerplexityText+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", textName(path), err)
	}
	if len(b) > maxPerplexityText {
		return "", fmt.Errorf("%s: more than %d MiB of text", textName(path), maxPerplexityText>>20)
	}
	if len(b) == 0 {
		return "", errors.New(textName(path) + " is empty")
	}
	return string(b), nil
}
