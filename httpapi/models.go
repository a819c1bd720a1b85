package httpapi

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// One model is loaded at a time. A server either serves one model
// (SetModel), or several by name (SetModels): then a request that names a
// model other than the loaded one waits while the switcher lets the
// loaded model's running requests finish, closes it and loads the one
// asked for, so that the device and its memory hold one model.
//
// Requests find the loaded model through one atomic pointer and hold it
// with a counter (loaded.acquire), so the path of a request for the
// loaded model takes no lock; only requests that wait for a switch do.

// ModelSource is one of the models a server serves by name (SetModels):
// the name requests give in their model field, and how to load it.
type ModelSource struct {
	Name string
	// Load opens the model; the switcher calls it when a request names
	// the model and another is loaded. ctx ends when the server shuts
	// down.
	Load func(ctx context.Context) (*Model, error)
}

// ModelInfo is what GET /api/ps reports of a loaded model, as Ollama's
// /api/ps reports its models.
type ModelInfo struct {
	// Digest identifies the model's file: its sha256 when the source
	// knows it (a downloaded blob), else an id of the weights and settings
	// as Model.Fingerprint has it.
	Digest            string
	Family            string // the architecture: llama, qwen2, phi3
	ParameterSize     string // "1.24B"
	QuantizationLevel string // llama.cpp's file type: "Q4_K_M", "F16"; "" unknown
	// Size is the memory the model takes: its weights and KV cache;
	// SizeVRAM the part of it in GPU memory.
	Size, SizeVRAM int64
}

// loaded is the model being served and the count of requests using it.
// A request holds it (acquire) from routing until its answer is written:
// the tokenizer and weights point into the model's file, which Close
// unmaps.
type loaded struct {
	m    *Model
	src  int    // its ModelSource (0 for SetModel's)
	name string // its ModelSource's name; "" for SetModel's, which answers to m.Accepts
	met  *modelMetrics

	users   atomic.Int64
	closing atomic.Bool
	drained chan struct{} // closed once closing and unused
	once    sync.Once
}

func newLoaded(m *Model, src int, name string, met *modelMetrics) *loaded {
	return &loaded{m: m, src: src, name: name, met: met, drained: make(chan struct{})}
}

// acquire holds l unless it is being closed. The order (count, then
// check) pairs with drain's (mark, then read the count): either the
// request sees the mark, or drain sees the request.
func (l *loaded) acquire() bool {
	l.users.Add(1)
	if l.closing.Load() {
		l.release()
		return false
	}
	return true
}

func (l *loaded) release() {
	if l.users.Add(-1) == 0 && l.closing.Load() {
		l.once.Do(func() { close(l.drained) })
	}
}

// drain refuses new users and returns once the current ones are done.
func (l *loaded) drain() <-chan struct{} {
	l.closing.Store(true)
	if l.users.Load() == 0 {
		l.once.Do(func() { close(l.drained) })
	}
	return l.drained
}

// answers reports whether a request's model field names l. An empty
// field names the default (first) model.
func (l *loaded) answers(name string) bool {
	if l.name == "" {
		return l.m.Accepts(name)
	}
	return name == l.name || (name == "" && l.src == 0)
}

// SetModel makes the server ready with m, its one model; until then
// generation endpoints and /health answer 503. The caller closes m after
// Shutdown (or calls CloseModels).
func (s *Server) SetModel(m *Model) {
	if m == nil {
		s.cur.Store(nil)
		return
	}
	s.cur.Store(newLoaded(m, 0, "", s.met.bind(m.Name)))
}

// SetModels makes the server serve the models of srcs by name, one at a
// time, starting with first, the model of srcs[0] loaded by the caller.
// At most Config.MaxQueue requests wait for a switch; more get 503.
// After Shutdown, CloseModels closes whichever is loaded.
func (s *Server) SetModels(srcs []ModelSource, first *Model) {
	ctx, cancel := context.WithCancel(context.Background())
	sw := &switcher{s: s, srcs: slices.Clone(srcs), max: s.cfg.MaxQueue, ctx: ctx, cancel: cancel,
		known: make([]knownModel, len(srcs)), started: time.Now().Unix()}
	if first != nil {
		sw.known[0] = knownModel{context: first.Context, created: first.Created}
		s.cur.Store(newLoaded(first, 0, srcs[0].Name, s.met.bind(srcs[0].Name)))
	}
	s.sw.Store(sw)
}

// CloseModels closes the loaded model once no request holds it, after
// Shutdown (which ends them); with several models it first waits for a
// load in progress. A model still held after Config.StallTimeout is left
// open (its file stays mapped) and reported.
func (s *Server) CloseModels() error {
	if sw := s.sw.Load(); sw != nil {
		<-sw.stop()
	}
	l := s.cur.Swap(nil)
	if l == nil {
		return nil
	}
	select {
	case <-l.drain():
	case <-time.After(s.cfg.StallTimeout):
		return errors.New("httpapi: requests still hold the model; not closing it")
	}
	return l.m.Close()
}

// use finds the model that a request's model field names and holds it;
// the caller releases it once the answer is written.
func (s *Server) use(ctx context.Context, name string) (*loaded, *apiError) {
	if l := s.cur.Load(); l != nil && l.answers(name) && l.acquire() {
		return l, nil
	}
	if sw := s.sw.Load(); sw != nil {
		return sw.use(ctx, name)
	}
	l := s.cur.Load()
	if l == nil {
		return nil, errLoading
	}
	return nil, errModelNotFound(name, []string{l.m.Name})
}

// current holds the loaded model, for the endpoints that report it; nil
// while none is (loading, switching).
func (s *Server) current() *loaded {
	if l := s.cur.Load(); l != nil && l.acquire() {
		return l
	}
	return nil
}

// switcher loads the model requests ask for when another is loaded.
type switcher struct {
	s       *Server
	srcs    []ModelSource
	max     int   // requests waiting at most
	started int64 // the server's start: /v1/models' created before a load
	ctx     context.Context
	cancel  context.CancelFunc

	mu      sync.Mutex
	queue   []*waiter // in arrival order
	known   []knownModel
	running bool
	stopped bool
	idle    chan struct{} // closed when run returns; nil before the first
}

// knownModel is what /v1/models reports of a model loaded before.
type knownModel struct {
	context int
	created int64
}

// waiter is a request waiting for its model.
type waiter struct {
	src  int
	done chan waited // one answer, buffered
}

type waited struct {
	l   *loaded
	err *apiError
}

func (sw *switcher) index(name string) int {
	if name == "" {
		return 0
	}
	return slices.IndexFunc(sw.srcs, func(m ModelSource) bool { return m.Name == name })
}

func (sw *switcher) names() []string {
	out := make([]string, len(sw.srcs))
	for i, m := range sw.srcs {
		out[i] = m.Name
	}
	return out
}

// use holds the model name designates, waiting for a switch if another
// is loaded.
func (sw *switcher) use(ctx context.Context, name string) (*loaded, *apiError) {
	src := sw.index(name)
	if src < 0 {
		return nil, errModelNotFound(name, sw.names())
	}
	w := &waiter{src: src, done: make(chan waited, 1)}
	sw.mu.Lock()
	if sw.stopped {
		sw.mu.Unlock()
		return nil, errDraining
	}
	// Loaded since the caller looked, and not being switched away.
	if l := sw.s.cur.Load(); l != nil && l.src == src && l.acquire() {
		sw.mu.Unlock()
		return l, nil
	}
	if len(sw.queue) >= sw.max {
		sw.mu.Unlock()
		return nil, errSwitchQueueFull(sw.srcs[src].Name, sw.max)
	}
	sw.queue = append(sw.queue, w)
	if !sw.running {
		sw.running, sw.idle = true, make(chan struct{})
		go sw.run()
	}
	sw.mu.Unlock()
	select {
	case r := <-w.done:
		return r.l, r.err
	case <-ctx.Done():
		sw.mu.Lock()
		if i := slices.Index(sw.queue, w); i >= 0 {
			sw.queue = slices.Delete(sw.queue, i, i+1)
			sw.mu.Unlock()
			return nil, errDraining
		}
		sw.mu.Unlock()
		// Answered meanwhile: give back what it got.
		if r := <-w.done; r.l != nil {
			r.l.release()
		}
		return nil, errDraining
	}
}

// run switches to the model of the oldest waiting request until none
// waits. Each switch serves every request then waiting for that model,
// so models take turns rather than one starving the others.
func (sw *switcher) run() {
	log := sw.s.log
	for {
		sw.mu.Lock()
		if len(sw.queue) == 0 || sw.stopped {
			sw.running = false
			close(sw.idle)
			sw.mu.Unlock()
			return
		}
		src := sw.queue[0].src
		cur := sw.s.cur.Load()
		if cur != nil && cur.src == src {
			sw.handLocked(cur)
			sw.mu.Unlock()
			continue
		}
		waiting := len(sw.queue)
		sw.mu.Unlock()
		name := sw.srcs[src].Name
		if cur != nil {
			log.Info().Str("from", cur.name).Str("to", name).Int64("running", cur.users.Load()).Int("waiting", waiting).
				Msg("switching models: letting the running requests finish")
			<-cur.drain()
			sw.s.cur.Store(nil)
			if err := cur.m.Close(); err != nil {
				log.Warn().Err(err).Str("model", cur.name).Msg("closing the model")
			}
		}
		sw.mu.Lock()
		stopped := sw.stopped
		sw.mu.Unlock()
		if stopped {
			continue // no load at shutdown; the loop ends
		}
		start := time.Now()
		m, err := sw.srcs[src].Load(sw.ctx)
		sw.mu.Lock()
		if err != nil {
			log.Error().Err(err).Str("model", name).Msg("loading the model")
			sw.failLocked(src, &apiError{Status: 500, Type: "server_error", Code: "model_load_failed", Param: "model",
				Message: "loading the model " + quote(name) + ": " + err.Error()})
		} else {
			l := newLoaded(m, src, name, sw.s.met.bind(name))
			sw.known[src] = knownModel{context: m.Context, created: m.Created}
			sw.s.cur.Store(l)
			sw.handLocked(l)
			log.Info().Str("model", name).Str("device", m.Engine.DeviceName()).Dur("load", time.Since(start)).Msg("model loaded; serving it")
		}
		sw.mu.Unlock()
	}
}

// handLocked gives l to every request waiting for it.
func (sw *switcher) handLocked(l *loaded) {
	sw.queue = slices.DeleteFunc(sw.queue, func(w *waiter) bool {
		if w.src != l.src {
			return false
		}
		l.users.Add(1) // not closing: only run closes, and it is here
		w.done <- waited{l: l}
		return true
	})
}

// failLocked answers every request waiting for src with e.
func (sw *switcher) failLocked(src int, e *apiError) {
	sw.queue = slices.DeleteFunc(sw.queue, func(w *waiter) bool {
		if src >= 0 && w.src != src {
			return false
		}
		w.done <- waited{err: e}
		return true
	})
}

// stop ends switching: waiting requests get 503 and a load in progress
// is told to give up. The channel is closed once run has returned.
func (sw *switcher) stop() <-chan struct{} {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.stopped = true
	sw.cancel()
	sw.failLocked(-1, errDraining)
	if !sw.running {
		done := make(chan struct{})
		close(done)
		return done
	}
	return sw.idle
}

// modelList is what /v1/models lists: every model served, and whether
// it is the loaded one.
func (s *Server) modelList() []listedModel {
	l := s.cur.Load()
	sw := s.sw.Load()
	if sw == nil {
		if l == nil {
			return nil
		}
		return []listedModel{{name: l.m.Name, created: l.m.Created, context: l.m.Context}}
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	out := make([]listedModel, len(sw.srcs))
	for i, src := range sw.srcs {
		k := sw.known[i]
		out[i] = listedModel{name: src.Name, created: k.created, context: k.context, multi: true, loaded: l != nil && l.src == i}
		if k.created == 0 {
			out[i].created = sw.started
		}
	}
	return out
}

type listedModel struct {
	name          string
	created       int64
	context       int  // 0: not known before it is loaded
	multi, loaded bool // loaded is reported only when several are served
}
