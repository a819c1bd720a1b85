package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"ringlm/chat"
	"ringlm/engine"
	"ringlm/models"
	"ringlm/pull"
	"ringlm/runner"
	"ringlm/sample"
	"ringlm/tokenizer"
)

func runRun(args []string, stdout, stderr io.Writer) error {
	return runWith(os.Stdin, isatty.IsTerminal(os.Stdin.Fd()), args, stdout, stderr)
}

// runWith is `ringlm run` reading stdin; tty says whether stdin is a
// terminal, where no -p opens the interactive chat (repl.go) as
// `ollama run` does, instead of reading the prompt to EOF.
func runWith(stdin io.Reader, tty bool, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "run [NAME|FILE] [PROMPT] [-m FILE|NAME] [-p PROMPT | stdin] [-n N] [--temp T --top-k K --top-p P --min-p M --seed S] [--chat [--system S] [--chat-template NAME | --chat-template-file FILE]] [--device auto|cpu|cuda] [--offline]\n\n"+
		"With no prompt and a terminal on stdin, run opens a chat: /clear, /bye, Ctrl-D; Ctrl-C stops an answer.\n"+
		"A NAME (hf.co/{user}/{repo}[:{quant}], or an Ollama name such as llama3.2) is pulled on first use unless --offline;\n"+
		"an Ollama model's template wraps the prompt (--chat=false: a raw completion) and its params are the sampling defaults.")
	modelPath := fs.String("m", "", "GGUF model `FILE` or model NAME, as the first argument (default: the built-in "+models.DefaultName+" model, a small Go-code completer)")
	prompt := fs.String("p", "", "prompt (default: read from stdin; a terminal on stdin opens the interactive chat)")
	n := fs.Int("n", 128, "tokens to generate at most; stops at the context's end (interactive chat: up to the context's end unless given)")
	temp := fs.Float64("temp", 0.8, "temperature (0 = greedy)")
	topK := fs.Int("top-k", 40, "top-k (0 = off)")
	topP := fs.Float64("top-p", 0.95, "top-p (1 = off)")
	minP := fs.Float64("min-p", 0.05, "min-p (0 = off)")
	repeat := fs.Float64("repeat-penalty", 1.0, "repetition penalty over the last 64 tokens (1 = off)")
	seed := fs.Int64("seed", -1, "random seed (-1: pick one and print it)")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past the end-of-generation token")
	useChat := fs.Bool("chat", false, "wrap the prompt in the model's chat template")
	system := fs.String("system", "", "system message (with --chat, and in the interactive chat)")
	var template string
	fs.StringVar(&template, "chat-template", "", "named chat template instead of the model's own: chatml, llama3, llama2, mistral, phi3 (a model without one gets chatml)")
	fs.StringVar(&template, "template", "", "the same as --chat-template")
	templateFile := fs.String("chat-template-file", "", "Jinja chat template file instead of the model's own")
	kvType := fs.String("kv-type", "f16", "KV cache type: f32 or f16 (f32 on the cpu device only)")
	device := fs.String("device", envOr("RINGLM_DEVICE", "auto"), "device: auto (cuda when libringlm_cuda.so loads and sees a GPU, else cpu), cpu, cuda ($RINGLM_DEVICE)")
	mmap := fs.Bool("mmap", false, "on the cpu device, read the weights in place from the file's mapping instead of a private copy in huge pages (faster decode, the file's size in memory)")
	verbose := fs.Bool("verbose", true, "print token counts and speed at the end (interactive chat: after each answer when given)")
	settings, err := settingsFlags(fs, "offline", "registry", "insecure")
	if err != nil {
		return err
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	// ollama run MODEL [PROMPT...]: the model first, unless -m gave it.
	if *modelPath == "" && len(pos) > 0 {
		*modelPath, pos = pos[0], pos[1:]
	}
	if len(pos) > 0 {
		if *prompt != "" {
			return usagef("unexpected argument %q: the prompt is given with -p", pos[0])
		}
		*prompt = strings.Join(pos, " ")
	}
	ref, err := parseModelRef(*modelPath)
	if err != nil {
		return err
	}
	if *n < 0 {
		return usagef("-n must be >= 0")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// The same wiring as the server (model, tokenizer, chat template,
	// device, engine), with one slot.
	ro := runner.Options{ChatTemplate: template, ChatTemplateFile: *templateFile, Device: *device, Slots: 1,
		KVType: *kvType, KVMemoryMiB: runKVMemoryMiB, MaxQueue: 1, Mmap: *mmap, Log: zerolog.Nop()}
	if err := ro.Check(); err != nil {
		return usageError{err.Error()} // before a name is pulled
	}
	src, err := runSource(ref, newFetcher(settings), stderr)
	if err != nil {
		return err
	}
	if note := ignoredNote(src); note != "" {
		fmt.Fprintln(stderr, "ringlm run:", note)
	}
	if src.Chat != nil && !set["chat"] {
		*useChat = true // as ollama run wraps every prompt in the model's template
	}
	ro.Chat, ro.Context = src.Chat, src.Context
	interactive := *prompt == "" && tty
	if *prompt == "" && !interactive {
		b, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
		if err != nil {
			return err
		}
		*prompt = strings.TrimRight(string(b), "\n")
	}
	if *seed < 0 {
		*seed = time.Now().UnixNano() & (1<<53 - 1)
	}
	// run's defaults, under an Ollama model's params, under the flags
	// given.
	sp := sample.Defaults()
	flags := func(all bool) {
		given := func(name string) bool { return all || set[name] }
		if given("temp") {
			sp.Temperature = float32(*temp)
		}
		if given("top-k") {
			sp.TopK = *topK
		}
		if given("top-p") {
			sp.TopP = float32(*topP)
		}
		if given("min-p") {
			sp.MinP = float32(*minP)
		}
		if given("repeat-penalty") {
			sp.RepeatPenalty = float32(*repeat)
		}
		if given("seed") {
			sp.Seed = uint64(*seed)
		}
		if given("n") {
			sp.MaxTokens = *n
		}
	}
	flags(true)
	modelLength := false // the model's num_predict replaces -n's default
	if m := src.Ollama; m != nil {
		if sp, err = m.SampleParams(sp); err != nil {
			return err
		}
		_, modelLength = m.Params["num_predict"]
		flags(false)
	}

	start := time.Now()
	lm, err := runner.Load(src.Path, ro)
	if err != nil {
		return err
	}
	defer lm.Close()
	if err := sp.Validate(lm.Tokenizer.Len()); err != nil {
		return err
	}
	loadTime := time.Since(start)
	if (interactive || *useChat) && lm.Chat == nil {
		return fmt.Errorf("%w; pick one with --chat-template or --chat-template-file", lm.ChatErr)
	}
	if (interactive || *useChat) && lm.ChatFallback {
		fmt.Fprintln(stderr, "ringlm run: the model has no chat template; using ChatML (--chat-template picks another)")
	}

	if interactive {
		if !set["n"] && !modelLength {
			sp.MaxTokens = 0 // each answer may run to the context's end
		}
		r := &repl{lm: lm, params: sp, ignoreEOS: *ignoreEOS, system: *system, in: bufio.NewReader(stdin),
			out: stdout, stats: stderr, verbose: set["verbose"] && *verbose}
		return r.runWithSignals()
	}

	text := *prompt
	if *useChat {
		var msgs []chat.Message
		if *system != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: *system})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: text})
		if text, err = lm.Chat.Render(msgs, true); err != nil {
			return err
		}
		text = lm.Chat.StripBOS(text, lm.Tokenizer.Vocab().AddBOS)
	}
	ids := lm.Tokenizer.EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: *useChat, AddSpecial: true})
	if len(ids) == 0 {
		return errors.New("the prompt is empty")
	}
	limit, why := contextLimit(lm)
	if len(ids) >= limit {
		return fmt.Errorf("the prompt of %d tokens fills %s", len(ids), why)
	}
	if sp.MaxTokens == 0 && modelLength && !set["n"] {
		sp.MaxTokens = limit - len(ids) // the model's num_predict -1: no limit but the context
	}
	// -n beyond the context: generate up to its end and say so, rather
	// than refuse what the user can only guess the right figure for.
	clipped := len(ids)+sp.MaxTokens > limit
	if clipped {
		sp.MaxTokens = limit - len(ids)
	}
	if *n == 0 {
		return nil
	}

	ctx, which, stop := interruptContext()
	defer stop()
	out := bufio.NewWriter(stdout)
	a, err := generate(ctx, lm, engine.Request{Prompt: ids, Params: sp, IgnoreEOS: *ignoreEOS}, out, false)
	if err != nil {
		return err
	}
	out.WriteString("\n")
	out.Flush()
	if clipped && a.reason == engine.FinishLength {
		fmt.Fprintf(stderr, "(output stopped at %s: %d prompt + %d generated tokens)\n", why, len(ids), a.generated)
	}
	if *verbose {
		fmt.Fprintln(stderr)
		a.printStats(stderr, loadTime)
		fmt.Fprintf(stderr, "finish reason = %s, seed = %d, device = %s\n", a.reason, sp.Seed, lm.Engine.DeviceName())
	}
	if a.reason == finishInterrupted {
		return interrupted{which()}
	}
	return nil
}

// runSource finds run's model, pulling a name on first use (unless
// --offline) with its progress on stderr; ^C stops the pull, which keeps
// what it has for the next one.
func runSource(ref modelRef, f fetcher, stderr io.Writer) (modelSource, error) {
	ctx, which, stop := interruptContext()
	defer stop()
	f.note = pullNote(stderr, "run")
	if pull.IsTerminal(stderr) {
		f.progress = pull.NewProgress(stderr, false)
	}
	src, err := f.source(ctx, ref)
	if err != nil && ctx.Err() != nil {
		return src, interruptedBy{err, which()}
	}
	return src, err
}

// contextLimit is how many tokens, prompt and output together, one
// sequence may hold: the model's context, or fewer when run's KV cache
// (runKVMemoryMiB) is smaller; why says which, for messages.
func contextLimit(lm *runner.Runner) (limit int, why string) {
	cfg := lm.Engine.Config()
	limit = lm.Model.Context
	why = fmt.Sprintf("the model's context length of %d tokens", limit)
	if kv := cfg.NumBlocks * cfg.BlockSize; kv < limit {
		limit = kv
		why = fmt.Sprintf("the %d positions run's KV cache of %d MiB holds (the model's context is %d)", kv, runKVMemoryMiB, lm.Model.Context)
	}
	return limit, why
}

// finishInterrupted is the finish reason of an answer stopped by Ctrl-C.
const finishInterrupted engine.Finish = "interrupted"

// answer is one generation's outcome, for the stats and the chat history.
type answer struct {
	text      string // the decoded output, end-of-generation tokens left out (kept on request)
	prompt    int    // prompt tokens
	generated int    // tokens sampled, an end-of-generation token included
	reason    engine.Finish
	// arrival, first and end time the prompt's evaluation (arrival to the
	// first token) and the decoding after it.
	arrival, first, end time.Time
}

// generate streams the output of req to out as it is sampled, until the
// request ends or ctx ends (Ctrl-C): then the request is cancelled, the
// output so far kept and the reason is finishInterrupted. keep collects
// the text into answer.text.
func generate(ctx context.Context, lm *runner.Runner, req engine.Request, out *bufio.Writer, keep bool) (answer, error) {
	a := answer{prompt: len(req.Prompt)}
	st, err := lm.Engine.Submit(ctx, req) // cancelled with ctx
	if err != nil {
		return a, err
	}
	defer st.Cancel()
	tok := lm.Tokenizer
	detok := tok.NewStream()
	var text strings.Builder
	emit := func(s string) {
		out.WriteString(s)
		if keep {
			text.WriteString(s)
		}
	}
	// Stop strings (an Ollama model's) are matched on the text, as the
	// server matches them: the engine knows only token ids.
	var stops *sample.StopMatcher
	if len(req.Params.StopStrings) > 0 {
		stops = sample.NewStopMatcher(req.Params.StopStrings)
	}
	var toks []engine.Token
	for {
		var done bool
		toks, done, err = st.Recv(ctx, toks[:0])
		if err != nil && ctx.Err() == nil {
			return a, err
		}
		for _, t := range toks {
			a.generated++
			if tok.IsEOG(t.ID) {
				continue
			}
			piece := detok.Add(t.ID)
			if stops != nil {
				var stopped bool
				if piece, stopped = stops.Push(piece); stopped {
					emit(piece)
					st.StopWith()
					done = true
					break
				}
			}
			emit(piece)
		}
		out.Flush()
		// Checked after the write as well as in Recv: tokens that were
		// already buffered when ^C came are not printed after it.
		if ctx.Err() != nil {
			a.reason = finishInterrupted
			break
		}
		if done {
			break
		}
	}
	tail := detok.Flush()
	if stops != nil {
		piece, stopped := stops.Push(tail)
		tail = piece
		if !stopped {
			tail += stops.Flush()
		}
	}
	emit(tail)
	a.end = time.Now()
	tl := st.Timeline()
	a.arrival, a.first = tl.Arrival, tl.FirstToken
	if a.reason == "" {
		if a.reason, err = st.Finish(); err != nil {
			return a, err
		}
		if !tl.End.IsZero() {
			a.end = tl.End
		}
	}
	a.text = text.String()
	return a, out.Flush()
}

// printStats writes llama.cpp's timing lines: the load (when given), the
// prompt's evaluation and the decoding after the first token. An answer
// interrupted before its first token has no timings.
func (a answer) printStats(w io.Writer, load time.Duration) {
	if load > 0 {
		fmt.Fprintf(w, "load time     = %8.2f ms\n", ms(load))
	}
	if a.first.IsZero() || a.prompt == 0 {
		return
	}
	promptTime := a.first.Sub(a.arrival)
	fmt.Fprintf(w, "prompt eval   = %8.2f ms / %4d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
		ms(promptTime), a.prompt, ms(promptTime)/float64(a.prompt), float64(a.prompt)/promptTime.Seconds())
	if evalTime := a.end.Sub(a.first); a.generated > 1 && evalTime > 0 {
		fmt.Fprintf(w, "eval          = %8.2f ms / %4d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
			ms(evalTime), a.generated-1, ms(evalTime)/float64(a.generated-1), float64(a.generated-1)/evalTime.Seconds())
	}
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
