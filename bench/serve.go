package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
)

const serveSynopsis = `usage: ringlm bench serve --url URL [--model NAME] [--endpoint /v1/completions|/v1/chat/completions]
         [--concurrency N] [--rate R [--burstiness B]] [--num-prompts K]
         (--input-len L --output-len M [--tokenizer FILE] | --dataset FILE.jsonl) [--result-file FILE] [--seed S] [--api-key KEY]

Drives ringlm or any OpenAI-compatible server (vLLM, llama-server, Ollama) with
streaming requests and reports TTFT, TPOT, ITL, end-to-end latency and
throughput as vLLM's "vllm bench serve" defines them. The summary goes to
stdout; --result-file writes JSON with vLLM's field names and per-request
arrays. ^C stops sending, lets requests in flight finish for --grace, then
reports what completed (^C again: stop at once).

Random prompts are --input-len tokens of the served model, counted by the
server's POST /tokenize (ringlm, llama-server, vLLM) or by --tokenizer;
without either they are estimated, and a note says so. They differ from
run to run unless --seed repeats a run's (the seed used is printed).

flags:
`

// serveFlags are the command line of `bench serve`.
type serveFlags struct {
	url, endpoint, model, apiKey string
	concurrency, numPrompts      int
	rate, burstiness             float64
	inputLen, outputLen          int
	dataset, resultFile          string
	tokenizer                    string
	seed                         int64
	percentiles                  string
	temperature                  float64
	ignoreEOS, noProgress        bool
	timeout, grace               time.Duration
	set                          map[string]bool // flags given on the command line
}

// ServeMain runs `ringlm bench serve` with args (after "serve") and
// returns the exit status: 0, 1 (the run failed or nothing completed),
// 2 (bad flags) or 130 (interrupted; the report covers what completed).
func ServeMain(args []string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	abort := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stopSigs := make(chan struct{})
	defer close(stopSigs)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-sigs:
			case <-stopSigs:
				return
			}
			if n == 0 {
				fmt.Fprintln(stderr, "\ninterrupted: sending no more requests; waiting for those in flight (^C again to stop now)")
				cancel()
			} else {
				close(abort)
				return
			}
		}
	}()
	return serveMain(ctx, abort, args, stdout, stderr)
}

func serveMain(ctx context.Context, abort <-chan struct{}, args []string, stdout, stderr io.Writer) int {
	f, err := parseServeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ringlm bench serve: %s\n", err)
		return 2
	}
	endpointURL, base, err := endpointURLs(f.url, f.endpoint)
	if err != nil {
		fmt.Fprintf(stderr, "ringlm bench serve: %s\n", err)
		return 2
	}
	pcts, _ := parsePercentiles(f.percentiles) // checked by parseServeFlags

	if !f.set["seed"] {
		// A fresh seed each run: the same prompts twice would let the
		// second run's TTFT come from the server's prefix cache.
		f.seed = rand.Int64N(1 << 31)
	}

	var reqs []ServeRequest
	if f.dataset != "" {
		reqs, err = ReadServeDataset(f.dataset, f.outputLen)
		if err != nil {
			fmt.Fprintf(stderr, "ringlm bench serve: %s\n", err)
			return 1
		}
		if f.set["num-prompts"] {
			if f.numPrompts > len(reqs) {
				fmt.Fprintf(stderr, "note: %s has %d prompts; repeating them in order to make %d\n", f.dataset, len(reqs), f.numPrompts)
			}
			reqs = cycleServeRequests(reqs, f.numPrompts)
		}
	}

	client := NewHTTPClient(f.concurrency, max(len(reqs), f.numPrompts))
	model := f.model
	if model == "" {
		model, err = firstModel(ctx, client, base, f.apiKey)
		var ue *url.Error
		switch {
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "ringlm bench serve: cannot reach the server: %s\n", flatLine(err.Error()))
			return 1
		case err != nil:
			fmt.Fprintf(stderr, "note: no model from %s/v1/models (%s); requests name none (use --model)\n", base, flatLine(err.Error()))
		}
	}

	chat := strings.HasSuffix(strings.TrimSuffix(endpointURL.Path, "/"), "/chat/completions")
	var prompts promptNotes
	if f.dataset == "" {
		reqs, prompts, err = makeRandomPrompts(ctx, f, client, base, model)
		if err != nil && ctx.Err() != nil {
			fmt.Fprintln(stderr, "ringlm bench serve: interrupted while making the prompts; nothing was sent")
			return 130
		}
		if err != nil {
			fmt.Fprintf(stderr, "ringlm bench serve: %s\n", err)
			return 1
		}
	}
	info := &ServeInfo{Date: time.Now(), URL: endpointURL.String(), Endpoint: endpointURL.Path, Chat: chat, Model: model,
		NumPrompts: len(reqs), Rate: f.rate, Burstiness: f.burstiness, Concurrency: f.concurrency, Seed: f.seed,
		Dataset: f.dataset, OutputLen: f.outputLen, IgnoreEOS: f.ignoreEOS}
	if f.dataset == "" {
		info.InputLen = f.inputLen
		info.PromptTokenizer = prompts.source
		info.PromptsOffTarget = prompts.off
	}
	temp := f.temperature
	info.Temperature = &temp
	conc := "no cap"
	if f.concurrency > 0 {
		conc = strconv.Itoa(f.concurrency)
	}
	fmt.Fprintf(stderr, "bench serve: %d requests to %s (model %q), request rate %s, burstiness %g, concurrency %s\n",
		len(reqs), info.URL, model, rateText(f.rate), f.burstiness, conc)
	if f.dataset == "" {
		prompts.write(stderr, f, chat)
	}

	var done, failed atomic.Int64
	stopProgress := startProgress(stderr, f.noProgress, len(reqs), &done, &failed)
	res, err := RunServe(ctx, ServeRunOptions{
		URL: info.URL, Chat: chat, Model: model, APIKey: f.apiKey, Requests: reqs,
		Rate: f.rate, Burstiness: f.burstiness, Concurrency: f.concurrency, Seed: f.seed,
		Temperature: &temp, IgnoreEOS: f.ignoreEOS, Timeout: f.timeout, Grace: f.grace, Abort: abort,
		Client: client,
		Done: func(ok bool) {
			done.Add(1)
			if !ok {
				failed.Add(1)
			}
		},
	})
	stopProgress()
	if err != nil {
		fmt.Fprintf(stderr, "ringlm bench serve: %s\n", err)
		return 1
	}
	info.Interrupted = res.Interrupted
	sum := SummarizeServe(res.Records, WithDefaultPercentiles(pcts))
	WriteServeSummary(stdout, info, &sum, res.Records, pcts)
	if f.resultFile != "" {
		b, err := ServeResultJSON(info, &sum, res.Records)
		if err == nil {
			err = os.WriteFile(f.resultFile, append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "ringlm bench serve: writing the result file: %s\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "wrote %s\n", f.resultFile)
	}
	switch {
	case res.Interrupted:
		return 130
	case sum.Completed == 0:
		fmt.Fprintln(stderr, "ringlm bench serve: no request completed")
		return 1
	}
	return 0
}

func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{set: map[string]bool{}}
	fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
	// Errors are reported once, by the caller; the usage only on -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&f.url, "url", "", "the server's base `URL` (http://127.0.0.1:8080, or …/v1) or an endpoint's full URL (required)")
	fs.StringVar(&f.endpoint, "endpoint", "/v1/completions", "request `PATH`: /v1/completions or /v1/chat/completions")
	fs.StringVar(&f.model, "model", "", "model `NAME` sent in requests (default: the first of GET /v1/models)")
	fs.IntVar(&f.concurrency, "concurrency", 0, "at most `N` requests in flight (0: no cap)")
	fs.IntVar(&f.concurrency, "max-concurrency", 0, "the same as --concurrency (vLLM's name)")
	fs.Float64Var(&f.rate, "rate", math.Inf(1), "requests per second `R`, with gamma-distributed gaps (inf: all at once)")
	fs.Float64Var(&f.rate, "request-rate", math.Inf(1), "the same as --rate (vLLM's name)")
	fs.Float64Var(&f.burstiness, "burstiness", 1, "gamma shape `B` of the gaps with --rate: 1 is Poisson, lower is burstier, higher more regular")
	fs.IntVar(&f.numPrompts, "num-prompts", 1000, "`K` requests (with --dataset: default every line, more repeat the file)")
	fs.IntVar(&f.inputLen, "input-len", 1024, "random prompts of `L` tokens of the served model (counted by the server's /tokenize or --tokenizer)")
	fs.StringVar(&f.tokenizer, "tokenizer", "", "count --input-len with the tokenizer of `FILE` (a GGUF model, or a HF tokenizer.json) instead of the server's /tokenize")
	fs.IntVar(&f.outputLen, "output-len", 128, "`M` tokens asked for (max_tokens); with --dataset, for lines without output_len")
	fs.StringVar(&f.dataset, "dataset", "", "JSONL `FILE` of prompts: {\"prompt\": \"...\", \"output_len\": N} per line, instead of random prompts")
	fs.StringVar(&f.resultFile, "result-file", "", "write the results as JSON to `FILE` (vLLM's field names, per-request arrays)")
	fs.Int64Var(&f.seed, "seed", 0, "`SEED` of the random prompts and arrival gaps (default: a new one each run, printed)")
	fs.StringVar(&f.apiKey, "api-key", os.Getenv("OPENAI_API_KEY"), "send 'Authorization: Bearer `KEY`' (default $OPENAI_API_KEY)")
	fs.StringVar(&f.percentiles, "percentiles", "90,99", "comma-separated `LIST` of percentiles to print (the result file always has 90 and 99)")
	fs.Float64Var(&f.temperature, "temperature", 0, "sampling temperature `T` sent with each request")
	fs.BoolVar(&f.ignoreEOS, "ignore-eos", true, "send \"ignore_eos\": true so that every request generates its max_tokens (servers that do not know it ignore it)")
	fs.DurationVar(&f.timeout, "timeout", 6*time.Hour, "a request taking longer than `DURATION` fails (0: no limit)")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "after ^C, requests in flight may finish for `DURATION`")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress line on stderr (there is none when stderr is not a terminal)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, serveSynopsis)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (every setting is a flag; see -h)", fs.Arg(0))
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	switch {
	case f.url == "":
		return nil, errors.New("--url is required (the server's base URL, e.g. http://127.0.0.1:8080)")
	case f.set["concurrency"] && f.set["max-concurrency"]:
		return nil, errors.New("give --concurrency or --max-concurrency, not both")
	case f.set["rate"] && f.set["request-rate"]:
		return nil, errors.New("give --rate or --request-rate, not both")
	case f.concurrency < 0:
		return nil, fmt.Errorf("--concurrency %d: must be at least 1 (or 0: no cap)", f.concurrency)
	case math.IsNaN(f.rate) || f.rate <= 0:
		return nil, fmt.Errorf("--rate %g: must be a positive number of requests per second, or inf", f.rate)
	case math.IsNaN(f.burstiness) || math.IsInf(f.burstiness, 0) || f.burstiness <= 0:
		return nil, fmt.Errorf("--burstiness %g: must be a positive number (1: Poisson arrivals)", f.burstiness)
	case f.numPrompts < 1:
		return nil, fmt.Errorf("--num-prompts %d: must be at least 1", f.numPrompts)
	case f.inputLen < 1:
		return nil, fmt.Errorf("--input-len %d: must be at least 1", f.inputLen)
	case f.outputLen < 1:
		return nil, fmt.Errorf("--output-len %d: must be at least 1", f.outputLen)
	case f.dataset != "" && f.set["input-len"]:
		return nil, errors.New("--input-len makes random prompts; a --dataset brings its own")
	case f.dataset != "" && f.tokenizer != "":
		return nil, errors.New("--tokenizer counts random prompts (--input-len); a --dataset's lengths come from the server's usage")
	case math.IsNaN(f.temperature) || f.temperature < 0:
		return nil, fmt.Errorf("--temperature %g: must be at least 0", f.temperature)
	case f.timeout < 0:
		return nil, fmt.Errorf("--timeout %s: must not be negative", f.timeout)
	case f.grace < 0:
		return nil, fmt.Errorf("--grace %s: must not be negative", f.grace)
	}
	if f.set["burstiness"] && math.IsInf(f.rate, 1) {
		return nil, errors.New("--burstiness shapes the gaps of --rate; give a --rate too")
	}
	if _, err := parsePercentiles(f.percentiles); err != nil {
		return nil, err
	}
	return f, nil
}

// parsePercentiles reads "50,90,99.9".
func parsePercentiles(s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := strconv.ParseFloat(part, 64)
		if err != nil || math.IsNaN(p) || p < 0 || p > 100 {
			return nil, fmt.Errorf("--percentiles: %q is not a percentile between 0 and 100", part)
		}
		out = append(out, p)
	}
	return out, nil
}

// endpointURLs resolves --url and --endpoint into the URL requests go to
// and the server's base URL (for /v1/models). --url may be a base
// (http://h:8080), a base ending in /v1 (as OpenAI clients take it), or
// an endpoint's full URL (its path then wins over --endpoint).
func endpointURLs(raw, endpoint string) (*url.URL, string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, "", fmt.Errorf("--url %q: want http://HOST:PORT or https://…", raw)
	}
	if !strings.HasPrefix(endpoint, "/") || !strings.HasSuffix(endpoint, "/completions") {
		return nil, "", fmt.Errorf("--endpoint %q: want /v1/completions or /v1/chat/completions", endpoint)
	}
	u.RawQuery, u.Fragment = "", ""
	path := strings.TrimSuffix(u.Path, "/")
	switch {
	case strings.HasSuffix(path, "/completions"): // a full endpoint URL
		u.Path = path
		base := strings.TrimSuffix(strings.TrimSuffix(path, "/completions"), "/chat")
		base = strings.TrimSuffix(base, "/v1")
		return u, u.Scheme + "://" + u.Host + base, nil
	case strings.HasSuffix(path, "/v1") && strings.HasPrefix(endpoint, "/v1/"):
		path = strings.TrimSuffix(path, "/v1")
	}
	base := u.Scheme + "://" + u.Host + path
	u.Path = path + endpoint
	return u, base, nil
}

// firstModel asks GET base/v1/models for the first model's id. A
// *url.Error means the server could not be reached at all.
func firstModel(ctx context.Context, client *http.Client, base, apiKey string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, apiErrorMessage(b))
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return "", fmt.Errorf("not a model list: %v", err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", errors.New("the list is empty")
	}
	return list.Data[0].ID, nil
}

// startProgress draws a progress line on stderr while requests run, when
// stderr is a terminal; the returned function clears it.
func startProgress(w io.Writer, off bool, total int, done, failed *atomic.Int64) func() {
	f, ok := w.(*os.File)
	if off || !ok || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return func() {}
	}
	start := time.Now()
	stop, stopped := make(chan struct{}), make(chan struct{})
	draw := func() {
		d, fl := int(done.Load()), int(failed.Load())
		const width = 30
		filled := d * width / total
		fmt.Fprintf(f, "\r[%s%s] %d/%d requests, %d failed, %.1f s ",
			strings.Repeat("#", filled), strings.Repeat(".", width-filled), d, total, fl, time.Since(start).Seconds())
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				draw()
			case <-stop:
				draw()
				fmt.Fprintln(f)
				return
			}
		}
	}()
	return func() { close(stop); <-stopped }
}

// promptNotes is what the report says about the random prompts.
type promptNotes struct {
	source  string // the tokenizer that counted them, "" for an estimate
	why     string // why there is no tokenizer, for the estimate's note
	special int    // tokens the server adds to each prompt
	off     int    // prompts whose count is not --input-len
	lo, hi  int    // their counts' range
}

// makeRandomPrompts builds --num-prompts prompts of --input-len tokens
// with --tokenizer, else the server's /tokenize, else an estimate.
func makeRandomPrompts(ctx context.Context, f *serveFlags, client *http.Client, base, model string) ([]ServeRequest, promptNotes, error) {
	var n promptNotes
	var tk PromptTokenizer
	var err error
	if f.tokenizer != "" {
		if tk, err = LoadPromptTokenizer(f.tokenizer); err != nil {
			return nil, n, fmt.Errorf("--tokenizer: %w", err)
		}
	} else {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		tk, err = ServerTokenizer(pctx, client, base, f.apiKey, model)
		cancel()
		if err != nil {
			tk, n.why = nil, flatLine(err.Error())
		}
	}
	reqs, err := RandomPrompts(ctx, tk, f.numPrompts, f.inputLen, f.outputLen, f.seed)
	if err != nil {
		return nil, n, fmt.Errorf("making the prompts: %w", err)
	}
	if tk == nil {
		return reqs, n, nil
	}
	n.source, n.special = tk.Source(), tk.Special()
	for _, r := range reqs {
		if r.InputLen != f.inputLen {
			if n.off == 0 {
				n.lo, n.hi = r.InputLen, r.InputLen
			}
			n.off++
			n.lo, n.hi = min(n.lo, r.InputLen), max(n.hi, r.InputLen)
		}
	}
	return reqs, n, nil
}

// write says on stderr how the prompts were made, one line each.
func (n *promptNotes) write(w io.Writer, f *serveFlags, chat bool) {
	how := "exactly " + strconv.Itoa(f.inputLen) + " tokens each, counted by " + n.source
	if n.source == "" {
		how = "about " + strconv.Itoa(f.inputLen) + " tokens each (estimated)"
	}
	if chat {
		how += ", plus the chat template's tokens"
	}
	fmt.Fprintf(w, "prompts: %s; %d output tokens; seed %d (--seed %d sends the same prompts again)\n", how, f.outputLen, f.seed, f.seed)
	switch {
	case n.source == "":
		fmt.Fprintf(w, "note: no tokenizer to count --input-len in the served model's tokens (%s); prompts are estimated at 4 bytes a token; give --tokenizer FILE.gguf for exact lengths\n", cutText(n.why, 200))
	case f.inputLen <= n.special:
		fmt.Fprintf(w, "note: --input-len %d leaves no room for text beside the %d special tokens the server adds; prompts are %d tokens\n", f.inputLen, n.special, n.lo)
	case n.off > 0:
		rng := strconv.Itoa(n.lo)
		if n.hi != n.lo {
			rng += " to " + strconv.Itoa(n.hi)
		}
		fmt.Fprintf(w, "note: %d of %d prompts are %s tokens, not %d: no cut of their words re-encodes to exactly %d\n", n.off, f.numPrompts, rng, f.inputLen, f.inputLen)
	}
}
