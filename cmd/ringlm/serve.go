package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"go.uber.org/automaxprocs/maxprocs"

	"ringlm/httpapi"
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

// serve runs the HTTP server until ctx ends (SIGTERM or ^C), then shuts
// down gracefully and returns nil. ready, when set, gets the bound address
// once the listener is open (tests use port 0). A signal on force once ctx
// has ended (a second ^C or SIGTERM) exits the process at once, with
// 128 + the signal's number, as users of uvicorn and vLLM expect: the
// drain waits for running requests, which may be long.
func serve(ctx context.Context, args []string, stderr io.Writer, ready func(addr string), force <-chan os.Signal) error {
	cfg := httpapi.DefaultConfig()
	fs := newFlagSet("serve", "serve -m FILE [--host 127.0.0.1] [--port 8080] [flags]  (every flag is also an environment variable, shown after its text)")
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
	if cfg.Model != "" { // none: the built-in model (package models)
		if _, err := os.Stat(cfg.Model); err != nil {
			return err
		}
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return usageError{err.Error()}
	}
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
				// No deferred cleanup: the process's exit frees the device
				// and the memory; running requests' connections drop.
				log.Warn().Str("signal", s.String()).Msg("second signal: exiting now without waiting for running requests")
				os.Exit(exitStatus(s))
			case <-returned:
			}
		}()
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
	log.Info().Str("addr", addr).Msg("listening; loading the model")
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	if ready != nil {
		ready(addr)
	}

	type loaded struct {
		m       *httpapi.Model
		faulted <-chan struct{} // runner.Runner.Faulted
		err     error
	}
	loadDone := make(chan loaded, 1)
	start := time.Now()
	go func() {
		ro.Log, ro.StepHook = log, srv.StepHook()
		r, err := runner.Load(cfg.Model, ro)
		if err != nil {
			loadDone <- loaded{err: err}
			return
		}
		loadDone <- loaded{m: httpModel(r), faulted: r.Faulted()}
	}()
	var m *httpapi.Model
	var faulted <-chan struct{}
	select {
	case res := <-loadDone:
		if res.err != nil {
			shutdownNow(srv)
			return res.err
		}
		m, faulted = res.m, res.faulted
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
	// --trace: the engine's trace from the first request, written once
	// the engine has stopped (finishTrace).
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
	srv.SetModel(m)
	ec := m.Engine.Config()
	log.Info().Str("addr", addr).Str("model", m.Name).Str("device", m.Engine.DeviceName()).Int("token_budget", ec.TokenBudget).
		Int("prefill_chunk", ec.PrefillChunk).Dur("load", time.Since(start)).Msg("ready")

	// A device fault is sticky for the process (CUDA): requests already
	// failed with the device's error; stop serving and exit non-zero so the
	// supervisor (systemd, Kubernetes, a shell loop) starts a fresh process.
	// The device says when (faulted): no timer wakes an idle server.
	var fault error
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case err := <-serveErr:
			m.Close()
			finishTrace()
			return err
		case <-faulted:
			if fault = m.Fault(); fault != nil {
				log.Error().Err(fault).Msg("the device failed; exiting so that a fresh process can start it again")
				break wait
			}
			faulted = nil // it stopped cleanly: nothing more to wait for
		}
	}
	log.Info().Dur("deadline", cfg.ShutdownTimeout).Int("running", srv.Active()).Msg("shutting down: no new requests; ^C again exits at once")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	err = srv.Shutdown(sctx)
	cancel()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn().Err(err).Msg("shutdown")
	}
	if cerr := m.Close(); cerr != nil {
		log.Warn().Err(cerr).Msg("closing the engine")
	}
	finishTrace()
	log.Info().Msg("stopped")
	if fault != nil {
		return fmt.Errorf("device failed: %w", fault)
	}
	return nil
}

// runnerOptions are the settings of cfg that say how to load and run the
// model.
func runnerOptions(cfg httpapi.Config) runner.Options {
	return runner.Options{Name: cfg.ModelName, ChatTemplate: cfg.ChatTemplate, ChatTemplateFile: cfg.ChatTemplateFile, Device: cfg.Device, Slots: cfg.Slots,
		TokenBudget: cfg.TokenBudget, PrefillChunk: cfg.PrefillChunk, KVBlocks: cfg.KVBlocks, KVMemoryMiB: cfg.KVMemoryMiB, KVType: cfg.KVType,
		PrefixCache: cfg.PrefixCache, MaxQueue: cfg.MaxQueue}
}

// httpModel is what the server generates with: r's engine, tokenizer and
// names, closed and watched for device faults through r.
func httpModel(r *runner.Runner) *httpapi.Model {
	return &httpapi.Model{Engine: r.Engine, Tokenizer: r.Tokenizer, Chat: r.Chat, ChatErr: r.ChatErr, Name: r.Name,
		Aliases: r.Aliases, Context: r.Model.Context, Created: time.Now().Unix(), Fingerprint: r.Fingerprint, Backend: r}
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
