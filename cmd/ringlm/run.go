package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"ringlm/chat"
	"ringlm/engine"
	"ringlm/models"
	"ringlm/runner"
	"ringlm/sample"
	"ringlm/tokenizer"
)

func runRun(args []string, stdout, stderr io.Writer) error {
	return runWith(os.Stdin, args, stdout, stderr)
}

func runWith(stdin io.Reader, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "run [-m FILE] [-p PROMPT | stdin] [-n N] [--temp T --top-k K --top-p P --min-p M --seed S] [--chat [--system S] [--template NAME]] [--device auto|cpu|cuda]")
	modelPath := fs.String("m", "", "GGUF model file (default: the built-in "+models.DefaultName+" model, a small Go-code completer)")
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
	kvType := fs.String("kv-type", "f16", "KV cache type: f32 or f16 (f32 on the cpu device only)")
	device := fs.String("device", envOr("RINGLM_DEVICE", "auto"), "device: auto (cuda when libringlm_cuda.so loads and sees a GPU, else cpu), cpu, cuda ($RINGLM_DEVICE)")
	verbose := fs.Bool("verbose", true, "print token counts and speed at the end")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (quote the prompt and pass it with -p)", pos[0])
	}
	if *n < 0 {
		return usagef("-n must be >= 0")
	}
	// The same wiring as the server (model, tokenizer, chat template,
	// device, engine), with one slot.
	ro := runner.Options{ChatTemplate: *template, Device: *device, Slots: 1, KVType: *kvType, KVMemoryMiB: runKVMemoryMiB,
		MaxQueue: 1, Log: zerolog.Nop()}
	if err := ro.Check(); err != nil {
		return usageError{err.Error()}
	}
	if *prompt == "" {
		b, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
		if err != nil {
			return err
		}
		*prompt = strings.TrimRight(string(b), "\n")
	}

	start := time.Now()
	lm, err := runner.Load(*modelPath, ro)
	if err != nil {
		return err
	}
	defer lm.Close()
	tok := lm.Tokenizer
	text := *prompt
	if *useChat {
		if lm.Chat == nil {
			return lm.ChatErr
		}
		var msgs []chat.Message
		if *system != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: *system})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: text})
		if text, err = lm.Chat.Render(msgs, true); err != nil {
			return err
		}
	}
	ids := tok.EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: *useChat, AddSpecial: true})
	if len(ids) == 0 {
		return errors.New("the prompt is empty")
	}
	if len(ids)+*n > lm.Model.Context {
		return fmt.Errorf("prompt of %d tokens + %d to generate exceeds the model's context of %d", len(ids), *n, lm.Model.Context)
	}
	if *seed < 0 {
		*seed = time.Now().UnixNano() & (1<<53 - 1)
	}
	sp := sample.Defaults()
	sp.Temperature, sp.TopK, sp.TopP, sp.MinP = float32(*temp), *topK, float32(*topP), float32(*minP)
	sp.RepeatPenalty, sp.Seed, sp.MaxTokens = float32(*repeat), uint64(*seed), *n
	if err := sp.Validate(tok.Len()); err != nil {
		return err
	}
	if *n == 0 {
		return nil
	}
	eng := lm.Engine
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

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// runKVMemoryMiB bounds the KV cache of `ringlm run` (one sequence; the
// pool is also capped at one full context).
const runKVMemoryMiB = 1024

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
