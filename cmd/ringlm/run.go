package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"ringlm/chat"
	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/kernels/cpu"
	"ringlm/model"
	"ringlm/sample"
	"ringlm/tokenizer"
)

func runRun(args []string, stdout, stderr io.Writer) error {
	return runWith(os.Stdin, args, stdout, stderr)
}

func runWith(stdin io.Reader, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "run -m FILE [-p PROMPT | stdin] [-n N] [--temp T --top-k K --top-p P --min-p M --seed S] [--chat [--system S] [--template NAME]]", stderr)
	modelPath := fs.String("m", "", "GGUF model file (required)")
	prompt := fs.String("p", "", "prompt (default: read from stdin)")
	n := fs.Int("n", 128, "tokens to generate at most")
	temp := fs.Float64("temp", 0.8, "temperature (0 = greedy)")
	topK := fs.Int("top-k", 40, "top-k (0 = off)")
	topP := fs.Float64("top-p", 0.95, "top-p (1 = off)")
	minP := fs.Float64("min-p", 0.05, "min-p (0 = off)")
	repeat := fs.Float64("repeat-penalty", 1.0, "repetition penalty over the last 64 tokens (1 = off)")
	seed := fs.Int64("seed", -1, "random seed (-1: pick one and print it)")
	useChat := fs.Bool("chat", false, "wrap the prompt in the model's chat template")
	system := fs.String("system", "", "system message (with --chat)")
	template := fs.String("template", "", "force a chat template: chatml, llama3, llama2, mistral, phi3")
	kvType := fs.String("kv-type", "f16", "KV cache type: f32 or f16")
	verbose := fs.Bool("verbose", true, "print token counts and speed at the end")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (quote the prompt and pass it with -p)", pos[0])
	}
	if *modelPath == "" {
		return usagef("-m FILE is required")
	}
	if *n < 0 {
		return usagef("-n must be >= 0")
	}
	kvt, ok := gguf.ParseType(*kvType)
	if !ok || (kvt != gguf.TypeF32 && kvt != gguf.TypeF16) {
		return usagef("--kv-type must be f32 or f16")
	}
	if *prompt == "" {
		b, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
		if err != nil {
			return err
		}
		*prompt = strings.TrimRight(string(b), "\n")
	}

	start := time.Now()
	f, err := gguf.Open(*modelPath)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := model.Load(f)
	if err != nil {
		return err
	}
	v, err := tokenizer.FromGGUF(f)
	if err != nil {
		return err
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		return err
	}
	text := *prompt
	if *useChat {
		var t chat.Template
		if *template != "" {
			fm, err := chat.ParseFormat(*template)
			if err != nil {
				return err
			}
			t = chat.Template{Format: fm}
		} else if t, err = chat.Detect(v.ChatTemplate); err != nil {
			return err
		}
		var msgs []chat.Message
		if *system != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: *system})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: text})
		if text, err = t.Render(msgs, true); err != nil {
			return err
		}
	}
	ids := tok.EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: *useChat, AddSpecial: true})
	if len(ids) == 0 {
		return errors.New("the prompt is empty")
	}
	if len(ids)+*n > m.Context {
		return fmt.Errorf("prompt of %d tokens + %d to generate exceeds the model's context of %d", len(ids), *n, m.Context)
	}
	if *seed < 0 {
		*seed = time.Now().UnixNano() & (1<<53 - 1)
	}
	sp := sample.Defaults()
	sp.Temperature, sp.TopK, sp.TopP, sp.MinP = float32(*temp), *topK, float32(*topP), float32(*minP)
	sp.RepeatPenalty, sp.Seed, sp.MaxTokens = float32(*repeat), uint64(*seed), *n
	if err := sp.Validate(m.Vocab); err != nil {
		return err
	}
	if *n == 0 {
		return nil
	}
	// Generation goes through the engine and the CPU device's rings, the
	// same path the server uses.
	blocks := (len(ids)+*n+model.DefaultBlockSize-1)/model.DefaultBlockSize + 1
	dev, err := cpu.New(m, kvt, blocks, model.DefaultBlockSize, 1)
	if err != nil {
		return err
	}
	eng, err := engine.New(engine.Config{Slots: 1, NumBlocks: blocks, Context: m.Context, Vocab: m.Vocab,
		EOS: eogTokens(v), Log: zerolog.Nop()}, dev)
	if err != nil {
		return err
	}
	defer eng.Close()
	loadTime := time.Since(start)

	out := bufio.NewWriter(stdout)
	defer out.Flush()
	stream, err := eng.Submit(context.Background(), engine.Request{Prompt: ids, Params: sp})
	if err != nil {
		return err
	}
	detok := tok.NewStream()
	var toks []engine.Token
	generated := 0
	for {
		var done bool
		toks, done, err = stream.Recv(context.Background(), toks[:0])
		if err != nil {
			return err
		}
		for _, t := range toks {
			generated++
			if tok.IsEOG(t.ID) {
				continue
			}
			out.WriteString(detok.Add(t.ID))
		}
		out.Flush()
		if done {
			break
		}
	}
	out.WriteString(detok.Flush())
	out.WriteString("\n")
	out.Flush()
	reason, ferr := stream.Finish()
	if ferr != nil {
		return ferr
	}
	tl := stream.Timeline()
	promptTime := tl.FirstToken.Sub(tl.Arrival)
	evalTime := tl.End.Sub(tl.FirstToken)
	if *verbose {
		fmt.Fprintf(stderr, "\nload time     = %8.2f ms\n", ms(loadTime))
		fmt.Fprintf(stderr, "prompt eval   = %8.2f ms / %4d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
			ms(promptTime), len(ids), ms(promptTime)/float64(len(ids)), float64(len(ids))/promptTime.Seconds())
		if generated > 1 {
			fmt.Fprintf(stderr, "eval          = %8.2f ms / %4d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
				ms(evalTime), generated-1, ms(evalTime)/float64(generated-1), float64(generated-1)/evalTime.Seconds())
		}
		fmt.Fprintf(stderr, "finish reason = %s, seed = %d, device = %s\n", reason, *seed, eng.DeviceName())
	}
	return nil
}

// eogTokens are the ids that end generation: EOS and EOT.
func eogTokens(v *tokenizer.Vocab) []int32 {
	var ids []int32
	for _, id := range []int32{v.EOS, v.EOT} {
		if id >= 0 && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
