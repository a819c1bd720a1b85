package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
)

// Server is ringlm's HTTP front end. It answers /health (503) before a
// model is set with SetModel, so a supervisor can watch it load.
type Server struct {
	cfg    Config
	log    zerolog.Logger
	cur    atomic.Pointer[loaded]   // the loaded model (models.go)
	sw     atomic.Pointer[switcher] // nil: one model (SetModel)
	srv    *fasthttp.Server
	met    *metrics
	apiKey []byte
	cors   *corsPolicy // nil: --cors-origins is off

	draining atomic.Bool

	mu      sync.Mutex
	flights map[string][]*flight
	active  int
	// idle is closed when active drops to 0 while Shutdown waits.
	idle chan struct{}
}

// flight is a running generation request, found by /cancel and Shutdown.
type flight struct {
	id        string
	j         *job
	cancelled atomic.Bool // by POST /cancel
	forced    atomic.Bool // by Shutdown's deadline
}

// New creates a server with cfg's limits. log is the one logger of the
// process; every request line carries a child of it with request_id.
func New(cfg Config, log zerolog.Logger) *Server {
	s := &Server{cfg: cfg, log: log, flights: map[string][]*flight{}}
	s.met = newMetrics(s)
	if cfg.APIKey != "" {
		s.apiKey = []byte(cfg.APIKey)
	}
	cors, err := parseOrigins(cfg.CORSOrigins)
	if err != nil {
		// Config.Check reports this to `ringlm serve`'s user; a program
		// that skipped it gets no CORS rather than a guess.
		log.Error().Err(err).Msg("--cors-origins ignored")
	}
	s.cors = cors
	s.srv = &fasthttp.Server{
		Handler:            s.handle,
		ErrorHandler:       s.protocolError,
		Name:               "ringlm",
		MaxRequestBodySize: cfg.MaxBody,
		ReadBufferSize:     16 << 10, // request line and headers
		ReadTimeout:        cfg.ReadTimeout,
		IdleTimeout:        cfg.IdleTimeout,
		// No WriteTimeout: it bounds a whole response, and streams last as
		// long as generation. Stalled readers are dropped by the watchdog.
		CloseOnShutdown:              true,
		DisablePreParseMultipartForm: true,
		NoDefaultContentType:         true,
		Logger:                       fastLogger{log},
	}
	return s
}

// Serve answers connections from ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(lingerListener{ln}) }

// Lingering close. fasthttp answers a body over the limit with 413 and
// closes the connection at once, while the client is still sending; the
// kernel then resets the connection and most clients report a broken
// pipe instead of the 413. Reading (and dropping) what the client still
// sends, for a bounded time and size, lets the answer arrive.
const (
	lingerTime  = 3 * time.Second
	lingerBytes = 64 << 20
)

type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lingerConn{Conn: c}, nil
}

type lingerConn struct {
	net.Conn
	linger atomic.Bool
}

func (c *lingerConn) Close() error {
	if c.linger.Load() {
		if tc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.CopyN(io.Discard, c.Conn, lingerBytes)
	}
	return c.Conn.Close()
}

var errNoSyscallConn = errors.New("not a system connection")

// SyscallConn exposes the socket to the disconnect watchdog.
func (c *lingerConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoSyscallConn
}

// Handler is the request handler, for tests that call it directly.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handle }

// Shutdown stops accepting requests, lets running generations finish until
// ctx is done, then ends them with an error (an `error` event, or 503) and
// waits for their writers to return. Requests waiting for a model switch
// get 503 at once. The model is not closed (CloseModels does).
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	if sw := s.sw.Load(); sw != nil {
		sw.stop()
	}
	srvDone := make(chan error, 1)
	srvCtx, srvCancel := context.WithCancel(context.Background())
	defer srvCancel()
	go func() { srvDone <- s.srv.ShutdownWithContext(srvCtx) }()

	forced := false
	select {
	case <-s.idleCh():
	case <-ctx.Done():
		forced = true
		s.mu.Lock()
		n := 0
		for _, fls := range s.flights {
			for _, fl := range fls {
				fl.forced.Store(true)
				for _, c := range fl.j.choices {
					c.st.Cancel()
				}
				n++
			}
		}
		s.mu.Unlock()
		if n > 0 {
			s.log.Warn().Int("requests", n).Msg("shutdown deadline reached: ending running requests")
		}
		// Ending a request takes one engine step; a writer stuck on a
		// client that reads nothing is cut by its stall watchdog.
		select {
		case <-s.idleCh():
		case <-time.After(s.cfg.StallTimeout + time.Second):
		}
	}
	// Connections are idle now; fasthttp closes them.
	select {
	case err := <-srvDone:
		if forced {
			return ctx.Err()
		}
		return err
	case <-time.After(2 * time.Second):
		srvCancel()
		<-srvDone
		return errors.New("httpapi: connections still open after shutdown")
	}
}

func (s *Server) idleCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	if s.active == 0 {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
	return s.idle
}

// track registers a generation request; the returned func unregisters it.
func (s *Server) track(j *job) func() {
	fl := &flight{id: j.id, j: j}
	j.fl = fl
	s.mu.Lock()
	s.flights[j.id] = append(s.flights[j.id], fl)
	s.active++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		fls := s.flights[fl.id]
		for i, f := range fls {
			if f == fl {
				fls = append(fls[:i], fls[i+1:]...)
				break
			}
		}
		if len(fls) == 0 {
			delete(s.flights, fl.id)
		} else {
			s.flights[fl.id] = fls
		}
		s.active--
		if s.active == 0 && s.idle != nil {
			select {
			case <-s.idle:
			default:
				close(s.idle)
			}
		}
	}
}

// Active is the number of generation requests running.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// req is what the handlers know of a request beyond fasthttp's ctx.
type req struct {
	id    string
	log   zerolog.Logger
	start time.Time
	route string
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	r := &req{id: requestID(ctx), start: time.Now()}
	ctx.Response.Header.Set("X-Request-Id", r.id)
	r.log = s.log.With().Str("request_id", r.id).Logger()
	path := ctx.Path()
	method := ctx.Method()
	// fasthttp does not recover handler panics: one bug would take every
	// running stream down with the process.
	defer func() {
		if p := recover(); p != nil {
			r.log.Error().Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg("handler panic")
			writeError(ctx, internalError(errors.New("internal error")))
			s.logDone(r, fasthttp.StatusInternalServerError, string(method), "panic")
		}
	}()

	route, h, auth, allow := s.route(path)
	r.route = route
	fromOrigin := s.cors != nil && s.cors.apply(ctx)
	switch {
	case fromOrigin && h != nil && isPreflight(ctx):
		s.cors.preflight(ctx)
	case h == nil:
		writeError(ctx, errNotFound)
	case string(method) != allow && !(allow == "GET" && string(method) == "HEAD"):
		ctx.Response.Header.Set("Allow", allow)
		writeError(ctx, &apiError{Status: fasthttp.StatusMethodNotAllowed, Type: "invalid_request_error",
			Message: "use " + allow + " " + route})
	case auth && !s.authorized(ctx):
		writeError(ctx, errUnauthorized)
	default:
		h(ctx, r)
	}
	if !ctx.Response.IsBodyStream() {
		s.logDone(r, ctx.Response.StatusCode(), string(method), "")
	}
}

type handler func(*fasthttp.RequestCtx, *req)

func (s *Server) route(path []byte) (name string, h handler, auth bool, method string) {
	switch string(path) {
	case "/v1/completions":
		return "/v1/completions", s.completions, true, "POST"
	case "/v1/chat/completions":
		return "/v1/chat/completions", s.chatCompletions, true, "POST"
	case "/v1/models":
		return "/v1/models", s.models, true, "GET"
	case "/api/ps":
		return "/api/ps", s.ps, true, "GET"
	case "/execute":
		return "/execute", s.execute, true, "POST"
	case "/cancel":
		return "/cancel", s.cancelRequest, true, "POST"
	case "/tokenize":
		return "/tokenize", s.tokenize, true, "POST"
	case "/detokenize":
		return "/detokenize", s.detokenize, true, "POST"
	case "/apply-template":
		return "/apply-template", s.applyTemplate, true, "POST"
	case "/health":
		return "/health", s.health, false, "GET"
	case "/metrics":
		return "/metrics", s.metricsPage, false, "GET"
	}
	if bytes.HasPrefix(path, []byte("/v1/models/")) {
		return "/v1/models/{id}", s.modelByID, true, "GET"
	}
	if s.cfg.Debug && bytes.HasPrefix(path, []byte("/debug/")) {
		if name, h := s.debugRoute(path); h != nil { // trace.go
			return name, h, true, "GET"
		}
	}
	return "other", nil, false, ""
}

// logDone writes the request's access line; /health and /metrics polls
// only at debug level.
func (s *Server) logDone(r *req, status int, method, note string) {
	s.met.request(r.route, status)
	lvl := zerolog.InfoLevel
	if r.route == "/health" || r.route == "/metrics" {
		lvl = zerolog.DebugLevel
	}
	if status >= 500 {
		lvl = zerolog.WarnLevel
	}
	e := r.log.WithLevel(lvl)
	if e == nil {
		return
	}
	e = e.Str("method", method).Str("route", r.route).Int("status", status).Dur("duration", time.Since(r.start))
	if note != "" {
		e = e.Str("end", note)
	}
	e.Msg("request")
}

func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if len(s.apiKey) == 0 {
		return true
	}
	h := ctx.Request.Header.Peek("Authorization")
	const prefix = "bearer "
	if len(h) < len(prefix) || !bytes.EqualFold(h[:len(prefix)], []byte(prefix)) {
		return false
	}
	return subtle.ConstantTimeCompare(bytes.TrimSpace(h[len(prefix):]), s.apiKey) == 1
}

// requestID keeps a caller's X-Request-Id or X-Correlation-Id when it is a
// short run of visible ASCII (it is echoed in headers and logs), else
// makes a UUID.
func requestID(ctx *fasthttp.RequestCtx) string {
	for _, h := range []string{"X-Request-Id", "X-Correlation-Id"} {
		if v := ctx.Request.Header.Peek(h); validID(v) {
			return string(v)
		}
	}
	if id, err := uuid.NewV7(); err == nil {
		return id.String()
	}
	return uuid.NewString()
}

func validID(v []byte) bool {
	if len(v) == 0 || len(v) > 128 {
		return false
	}
	for _, c := range v {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// protocolError answers requests fasthttp could not read: a body over
// --max-body, a malformed request line or headers.
func (s *Server) protocolError(ctx *fasthttp.RequestCtx, err error) {
	id := requestID(ctx)
	ctx.Response.Header.Set("X-Request-Id", id)
	route, _, _, _ := s.route(ctx.Path())
	if s.cors != nil {
		s.cors.apply(ctx) // a page may read why it was refused
	}
	r := &req{id: id, start: time.Now(), route: route, log: s.log.With().Str("request_id", id).Logger()}
	var e *apiError
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		if lc, ok := ctx.Conn().(*lingerConn); ok {
			lc.linger.Store(true)
		}
		e = &apiError{Status: errTooLarge.Status, Type: errTooLarge.Type, Code: errTooLarge.Code,
			Message: "the request body exceeds the limit of " + itoa(s.cfg.MaxBody) + " bytes"}
	case isTimeout(err):
		e = &apiError{Status: fasthttp.StatusRequestTimeout, Type: "invalid_request_error", Code: "timeout", Message: "the request was not received in time"}
	default:
		e = badRequest("", "malformed HTTP request: %s", err.Error())
	}
	writeError(ctx, e)
	ctx.SetConnectionClose()
	s.logDone(r, e.Status, string(ctx.Method()), err.Error())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// fastLogger routes fasthttp's own messages (accept errors and the like)
// to zerolog.
type fastLogger struct{ log zerolog.Logger }

func (l fastLogger) Printf(format string, args ...any) {
	// Errors serving one connection (bad requests, resets) are already in
	// the access log or are the client's business.
	lvl := zerolog.WarnLevel
	if strings.HasPrefix(format, "error when serving connection") {
		lvl = zerolog.DebugLevel
	}
	l.log.WithLevel(lvl).Str("component", "fasthttp").Msgf(format, args...)
}
