package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"go.uber.org/automaxprocs/maxprocs"

	"ringlm/chat"
	"ringlm/httpapi"
	"ringlm/models"
	"ringlm/pull/ollama"
	"ringlm/runner"
)

func runServe(args []string, stdout, stderr io.Writer) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sigs: // the first: drain; serve takes the second
			cancel()
		case <-ctx.Done():
		}
	}()
	return serve(ctx, args, stderr, nil, sigs)
}

// serveSynopsis is serve -h's first lines.
const serveSynopsis = `serve [-m FILE|NAME]... [--offline] [--host 127.0.0.1] [--port 8080] [flags]  (every flag is also an environment variable, shown after its text)

-m takes a GGUF file or a model name: hf.co/{user}/{repo}[:{quant}] from
the Hugging Face Hub, or an Ollama name (llama3.2, qwen2.5:0.5b,
{host}/{namespace}/{model}:{tag}), pulled when first loaded unless
--offline ('ringlm pull NAME' pulls ahead of time). An Ollama model's
template and params are its chat template and sampling defaults.

With several -m, each model is named by its file's base name without the
extension, or as its name is written, and a request picks one by its
"model" field (none: the first).
One model is loaded at a time: a request for another waits while the
running requests finish, then the loaded model is unloaded and the one
asked for is loaded; at most --max-queue requests wait, more get 503. An
unknown name gets 404 with the names served; GET /v1/models lists them all.
'ringlm ps' lists the models that serve processes have loaded.`

// serve runs the HTTP server until ctx ends (SIGTERM or ^C), then shuts
// down gracefully and returns nil. ready, when set, gets the bound address
// once the listener is open (tests use port 0). A signal on force once ctx
// has ended (a second ^C or SIGTERM) exits the process at once, with
// 128 + the signal's number, as users of uvicorn and vLLM expect: the
// drain waits for running requests, which may be long.
func serve(ctx context.Context, args []string, stderr io.Writer, ready func(addr string), force <-chan os.Signal) error {
	cfg := httpapi.DefaultConfig()
	fs := newFlagSet("serve", serveSynopsis)
	if err := cfg.Register(fs, os.Getenv); err != nil {
		return usageError{err.Error()}
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if err := cfg.Check(); err != nil {
		return usageError{err.Error()}
	}
	ro := runnerOptions(cfg)
	if err := ro.Check(); err != nil {
		return usageError{err.Error()}
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return usageError{err.Error()}
	}
	f := newFetcher(&cfg)
	f.note = func(name string) { log.Info().Str("model", name).Msg("not pulled yet: pulling it (--offline refuses)") }
	specs, err := modelSpecs(cfg.Models, f)
	if err != nil {
		return err
	}
	// Go 1.25+ already follows cgroup CPU quotas; maxprocs keeps the same
	// behaviour for older runtimes and logs what it decided.
	if undo, err := maxprocs.Set(maxprocs.Logger(func(f string, a ...any) { log.Debug().Msgf(f, a...) })); err == nil {
		defer undo()
	}

	srv := httpapi.New(cfg, log)
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	// What `ringlm ps` finds; a server that cannot register still serves.
	unregister, err := register(addr)
	if err != nil {
		log.Warn().Err(err).Msg("not registered for 'ringlm ps'")
		unregister = func() {}
	}
	defer unregister()
	if force != nil {
		returned := make(chan struct{})
		defer close(returned)
		go func() {
			select {
			case <-ctx.Done():
			case <-returned:
				return
			}
			select {
			case s := <-force:
				// No deferred cleanup but the registration (ps would drop
				// it anyway): the process's exit frees the device and the
				// memory; running requests' connections drop.
				log.Warn().Str("signal", s.String()).Msg("second signal: exiting now without waiting for running requests")
				unregister()
				os.Exit(exitStatus(s))
			case <-returned:
			}
		}()
	}
	log.Info().Str("addr", addr).Msg("listening; loading the model")
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	if ready != nil {
		ready(addr)
	}

	// A device fault is sticky for the process (CUDA): requests already
	// failed with the device's error; serve stops and exits non-zero so
	// that the supervisor (systemd, Kubernetes, a shell loop) starts a
	// fresh process. The device says when: no timer wakes an idle server.
	faults := make(chan error, 1)
	load := func(ctx context.Context, sp modelSpec, name string) (*httpapi.Model, error) {
		src, err := sp.Open(ctx)
		if err != nil {
			return nil, err
		}
		if note := ignoredNote(src); note != "" {
			log.Warn().Msg(note)
		}
		o := ro
		o.Name, o.Log, o.StepHook, o.Chat, o.Context = name, log, srv.StepHook(), src.Chat, src.Context
		r, err := runner.Load(src.Path, o)
		if err != nil {
			return nil, err
		}
		watchFault(r, faults)
		return httpModel(r, src), nil
	}
	// One model is served under the name runner gives it (--model-name,
	// general.name, the file's name), as before serve took several.
	// A model name is served as written, as Ollama serves it.
	firstName := cfg.ModelName
	if len(specs) > 1 || (firstName == "" && specs[0].ByName) {
		firstName = specs[0].Name
	}

	type loaded struct {
		m   *httpapi.Model
		err error
	}
	loadDone := make(chan loaded, 1)
	start := time.Now()
	go func() {
		m, err := load(ctx, specs[0], firstName)
		loadDone <- loaded{m, err}
	}()
	var m *httpapi.Model
	select {
	case res := <-loadDone:
		if res.err != nil {
			shutdownNow(srv)
			return res.err
		}
		m = res.m
	case <-ctx.Done():
		log.Info().Msg("signal while loading: stopping")
		shutdownNow(srv)
		if res := <-loadDone; res.m != nil {
			res.m.Close()
		}
		return nil
	case err := <-serveErr:
		return err
	}
	// --trace (one model only: Config.Check): the engine's trace from the
	// first request, written once the engine has stopped (finishTrace).
	var trace *httpapi.TraceFile
	if cfg.Trace != "" {
		if trace, err = httpapi.StartTraceFile(m.Engine, cfg.Trace, cfg.TraceEvents); err != nil {
			shutdownNow(srv)
			m.Close()
			return err
		}
	}
	finishTrace := func() {
		if trace == nil {
			return
		}
		if n, err := trace.Finish(); err != nil {
			log.Error().Err(err).Msg("trace")
		} else {
			log.Info().Str("file", cfg.Trace).Int("events", n).Msg("trace written")
		}
	}
	if len(specs) == 1 {
		srv.SetModel(m)
	} else {
		srcs := make([]httpapi.ModelSource, len(specs))
		for i, sp := range specs {
			srcs[i] = httpapi.ModelSource{Name: sp.Name, Load: func(ctx context.Context) (*httpapi.Model, error) { return load(ctx, sp, sp.Name) }}
		}
		srv.SetModels(srcs, m)
	}
	closeModels := func() {
		if err := srv.CloseModels(); err != nil {
			log.Warn().Err(err).Msg("closing the engine")
		}
		finishTrace()
	}
	ec := m.Engine.Config()
	log.Info().Str("addr", addr).Str("model", m.Name).Int("models", len(specs)).Str("device", m.Engine.DeviceName()).Int("token_budget", ec.TokenBudget).
		Int("prefill_chunk", ec.PrefillChunk).Dur("load", time.Since(start)).Msg("ready")

	var fault error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		closeModels()
		return err
	case fault = <-faults:
		log.Error().Err(fault).Msg("the device failed; exiting so that a fresh process can start it again")
	}
	log.Info().Dur("deadline", cfg.ShutdownTimeout).Int("running", srv.Active()).Msg("shutting down: no new requests; ^C again exits at once")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	err = srv.Shutdown(sctx)
	cancel()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn().Err(err).Msg("shutdown")
	}
	closeModels()
	log.Info().Msg("stopped")
	if fault != nil {
		return fmt.Errorf("device failed: %w", fault)
	}
	return nil
}

// watchFault sends r's device error to faults once the device has failed
// for good; a device that stops cleanly (closed at a model switch or at
// shutdown) sends nothing.
func watchFault(r *runner.Runner, faults chan<- error) {
	ch := r.Faulted()
	if ch == nil {
		return // the device cannot fail
	}
	go func() {
		<-ch
		if err := r.Fault(); err != nil {
			select {
			case faults <- err:
			default: // one is enough to stop
			}
		}
	}()
}

// modelSpec is a model serve offers: the name requests route by, and how
// to find its weights. Open is where a name becomes a file: a file's path
// as it is, a model name's place in its cache, pulled there first when it
// is not (unless --offline). serve calls it when the model is loaded,
// each time it is.
type modelSpec struct {
	Name   string
	ByName bool // the -m value is a model name, which is the name served
	Open   func(ctx context.Context) (modelSource, error)
}

// modelSource is where a model's weights are, as its spec's Open found
// them, and what else the model came with.
type modelSource struct {
	Path string // a GGUF file; "" = the built-in model
	// Digest is the file's sha256 when it is known without reading the
	// file (a downloaded blob is named by it; an Ollama model's is its
	// manifest's, as ollama ps shows); ps reports it. "" = the model's
	// fingerprint stands in.
	Digest string
	// Name is the model's name when it came by name (for messages).
	Name string
	// An Ollama model's template and params layers: its chat template
	// (nil: the GGUF's), its sampling defaults (nil: ringlm's), its
	// num_ctx (0: the GGUF's context), and the params ringlm has no use
	// for, to report.
	Chat     *chat.Template
	Defaults *httpapi.Defaults
	Context  int
	Ignored  []string
	Ollama   *ollama.Model // the model's manifest and small layers; nil unless from an Ollama store
}

// modelSpecs are the models of serve's -m values: files, named by their
// base name, and model names, named as written; none is the built-in
// model. Two of the same name are a usage error: a request could not
// tell them apart.
func modelSpecs(args []string, f fetcher) ([]modelSpec, error) {
	if len(args) == 0 {
		return []modelSpec{{Name: models.DefaultName, Open: fileSource("")}}, nil
	}
	specs := make([]modelSpec, 0, len(args))
	for _, a := range args {
		ref, err := parseModelRef(a)
		if err != nil {
			return nil, err
		}
		sp := modelSpec{Name: a, ByName: ref.isName, Open: func(ctx context.Context) (modelSource, error) { return f.source(ctx, ref) }}
		if !ref.isName {
			sp.Name, sp.Open = runner.BaseName(a), fileSource(a)
		}
		if j := slices.IndexFunc(specs, func(s modelSpec) bool { return s.Name == sp.Name }); j >= 0 {
			return nil, usagef("-m %s and -m %s are both named %q; rename or link one of them", args[j], a, sp.Name)
		}
		specs = append(specs, sp)
	}
	return specs, nil
}

func fileSource(path string) func(context.Context) (modelSource, error) {
	return func(context.Context) (modelSource, error) { return modelSource{Path: path}, nil }
}

// runnerOptions are the settings of cfg that say how to load and run the
// model.
func runnerOptions(cfg httpapi.Config) runner.Options {
	return runner.Options{Name: cfg.ModelName, ChatTemplate: cfg.ChatTemplate, ChatTemplateFile: cfg.ChatTemplateFile, Device: cfg.Device, Slots: cfg.Slots,
		TokenBudget: cfg.TokenBudget, PrefillChunk: cfg.PrefillChunk, KVBlocks: cfg.KVBlocks, KVMemoryMiB: cfg.KVMemoryMiB, KVType: cfg.KVType,
		PrefixCache: cfg.PrefixCache, MaxQueue: cfg.MaxQueue, Mmap: cfg.Mmap}
}

// httpModel is what the server generates with: r's engine, tokenizer and
// names, closed and watched for device faults through r, and what
// /api/ps reports of it.
func httpModel(r *runner.Runner, src modelSource) *httpapi.Model {
	var params, weights uint64
	for i := range r.File.Tensors {
		params += r.File.Tensors[i].Elements()
		weights += r.File.Tensors[i].Size
	}
	info := httpapi.ModelInfo{Digest: src.Digest, Family: r.Model.Arch, ParameterSize: humanCount(params),
		Size: int64(weights) + r.KVBytes}
	if info.Digest == "" {
		info.Digest = strings.TrimPrefix(r.Fingerprint, "fp_")
	}
	info.QuantizationLevel = quantOf(r.File)
	if r.Device == "cuda" {
		// The weights are copied to the GPU (in the file's size, give or
		// take the kernel's layout) and the KV pool is there.
		info.SizeVRAM = info.Size
	}
	return &httpapi.Model{Engine: r.Engine, Tokenizer: r.Tokenizer, Chat: r.Chat, ChatErr: r.ChatErr, Name: r.Name,
		Aliases: r.Aliases, Context: r.Model.Context, Defaults: src.Defaults, Created: time.Now().Unix(), Fingerprint: r.Fingerprint, Info: info, Backend: r}
}

func shutdownNow(srv *httpapi.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = srv.Shutdown(ctx)
}

// newLogger builds the process's one logger: JSON, or a console format
// when stderr is a terminal (or when asked).
func newLogger(cfg httpapi.Config, w io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || lvl == zerolog.NoLevel {
		return zerolog.Logger{}, errors.New("--log-level must be debug, info, warn or error")
	}
	console := cfg.LogFormat == "console"
	if cfg.LogFormat == "auto" {
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			console = true
		}
	}
	if console {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
