package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"ringlm/engine"
)

// The debug endpoints (--debug): /debug/trace records the engine's
// Chrome/Perfetto trace for a while (engine/trace.go), /debug/pprof/ is
// Go's profiler (pprof.go). Without --debug they are 404 like any
// unknown path; with --api-key they need it like /v1/*.

// debugRoute names the /debug/ endpoints; nil handler: none.
func (s *Server) debugRoute(path []byte) (string, handler) {
	switch {
	case string(path) == "/debug/trace":
		return "/debug/trace", s.debugTrace
	case string(path) == "/debug/pprof" || bytes.HasPrefix(path, []byte("/debug/pprof/")):
		return "/debug/pprof/", s.pprof
	}
	return "", nil
}

// maxTraceSeconds bounds /debug/trace's window.
const maxTraceSeconds = 60

// debugTrace is GET /debug/trace?seconds=N (default 5, at most 60; a
// fraction is fine): it records the engine for N seconds and answers the
// trace JSON. A client that hangs up, or the server shutting down, ends
// the window early.
func (s *Server) debugTrace(ctx *fasthttp.RequestCtx, r *req) {
	// The loaded model's engine, held for the window: a model switch
	// waits for it.
	l := s.current()
	if l == nil {
		writeError(ctx, errLoading)
		return
	}
	defer l.release()
	m := l.m
	secs := 5.0
	if v := ctx.QueryArgs().Peek("seconds"); v != nil {
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || !(f > 0 && f <= maxTraceSeconds) {
			writeError(ctx, badRequest("seconds", "seconds must be a number of seconds in (0, %d], got %q", maxTraceSeconds, v))
			return
		}
		secs = f
	}
	// The watchdog is done before the handler returns: fasthttp reuses
	// ctx and its connection after that.
	rctx, cancel := context.WithCancel(context.Background())
	conn, shutdown := ctx.Conn(), ctx.Done()
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-shutdown:
				cancel()
				return
			case <-t.C:
				if conn != nil && peerClosed(conn) {
					cancel()
					return
				}
			}
		}
	})
	tr := m.Engine.Record(rctx, time.Duration(secs*float64(time.Second)), s.cfg.TraceEvents)
	cancel()
	wg.Wait()
	ctx.SetContentType("application/json")
	if err := tr.WriteChrome(ctx); err != nil {
		ctx.ResetBody()
		writeError(ctx, internalError(err))
	}
}

// TraceFile is `ringlm serve --trace FILE`: the engine's trace from the
// start, written when the server stops.
type TraceFile struct {
	f  *os.File
	t  *engine.Tracer
	e  *engine.Engine
	at string
}

// StartTraceFile attaches a tracer keeping the newest events events to e
// and creates path now, so that a path that cannot be written fails at
// start rather than at shutdown.
func StartTraceFile(e *engine.Engine, path string, events int) (*TraceFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	t := engine.NewTracer(events)
	e.SetTracer(t)
	return &TraceFile{f: f, t: t, e: e, at: path}, nil
}

// Finish detaches the tracer (the engine may be closed already), writes
// the trace and closes the file. It returns the number of events written.
func (tf *TraceFile) Finish() (int, error) {
	tf.e.SetTracer(nil)
	tr := tf.t.All()
	tr.Device = tf.e.DeviceName()
	w := bufio.NewWriterSize(tf.f, 1<<20)
	err := tr.WriteChrome(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tf.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, errors.Join(errors.New("writing the trace to "+tf.at), err)
	}
	return len(tr.Events), nil
}
