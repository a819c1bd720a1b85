package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"ringlm/ringbuf"
	"ringlm/sample"
)

// Device is what the engine drives through the rings: the CPU device, the
// null device, or the CUDA device.
type Device interface {
	Name() string
	// Start begins consuming the arena's submit ring.
	Start(a *ringbuf.Arena) error
	// Notify tells the device that submit records were published.
	Notify()
	// Doorbell is signalled when completions were published. The engine
	// also polls while the device owes it an answer (a step, a close, a
	// stop), so a device may signal those sparingly; but when nothing is
	// owed the engine parks on Doorbell and Submit alone, so a record the
	// device publishes unasked (a fault responder's) must ring it.
	Doorbell() <-chan struct{}
	// Wait returns after the device answered STOP (or failed).
	Wait() error
}

// Config sizes the engine.
type Config struct {
	Slots         int // sequences on the device at once (default 64)
	TokenBudget   int // tokens per step, prefill and decode together (default DefaultTokenBudget)
	PrefillChunk  int // prompt tokens of one sequence per step (default DefaultPrefillChunk, at most TokenBudget)
	PipelineDepth int // steps submitted ahead of their completion (default 2)
	NumBlocks     int // KV blocks in the device pool (required)
	BlockSize     int // positions per KV block (default 16)
	PrefixCache   bool
	MaxQueue      int // waiting requests before ErrQueueFull (default 4096)
	Context       int // the model's context length (required)
	Vocab         int // the model's vocabulary size (required)
	EOS           []int32
	// Ring sizes; defaults fit Slots. The default CompletionCap has room
	// for PipelineDepth steps of Slots tokens that each carry the most
	// alternatives (TOP_LOGPROBS records count), twice over.
	SubmitCap, CompletionCap, StagingWords int
	Allocator                              ringbuf.Allocator // default: mmap + mlock
	Log                                    zerolog.Logger
	// StepHook is called on the engine goroutine with every completed
	// step's entry count and device timestamps (the profiler's device
	// track). It must not block.
	StepHook func(step uint64, entries int, startNS, endNS uint64)
	// Tracer, when set, records request timelines and device steps from
	// the start (trace.go; Engine.SetTracer attaches one later).
	Tracer *Tracer
}

// Defaults of Config: sized for the CPU device, whose step costs grow
// with its tokens. A device that runs a step's tokens as one matrix
// product takes more (runner.DefaultTokenBudget).
const (
	DefaultTokenBudget  = 512
	DefaultPrefillChunk = 256
)

func (c *Config) defaults() error {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Slots, 64)
	def(&c.TokenBudget, DefaultTokenBudget)
	def(&c.PrefillChunk, DefaultPrefillChunk)
	def(&c.PipelineDepth, 2)
	def(&c.BlockSize, 16)
	def(&c.MaxQueue, 4096)
	def(&c.SubmitCap, nextPow2(max(1024, 8*c.Slots)))
	// A step can answer every slot with a TOKEN and its n_top
	// alternatives (ringbuf.MaxTop of them in TopRecords(MaxTop) records)
	// or a SLOT_CLOSED, plus its STEP_DONE: room for PipelineDepth such
	// steps twice over. A device blocks on a full ring, and the loop
	// drains, so a smaller ring is slower, never wrong.
	perStep := c.Slots*(2+ringbuf.TopRecords(ringbuf.MaxTop)) + 2
	def(&c.CompletionCap, nextPow2(max(4096, 2*perStep*c.PipelineDepth)))
	def(&c.StagingWords, max(1<<20, 4*c.PipelineDepth*(c.TokenBudget+4*c.Slots+64*c.Slots)))
	if c.NumBlocks <= 0 || c.Context <= 0 || c.Vocab <= 0 {
		return fmt.Errorf("engine: NumBlocks, Context and Vocab are required (got %d, %d, %d)", c.NumBlocks, c.Context, c.Vocab)
	}
	if c.PrefillChunk > c.TokenBudget {
		c.PrefillChunk = c.TokenBudget
	}
	if len(c.EOS) > ringbuf.MaxEOS {
		return fmt.Errorf("engine: at most %d EOS ids", ringbuf.MaxEOS)
	}
	return nil
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// Errors callers branch on.
var (
	ErrQueueFull = errors.New("engine: queue full")
	ErrClosed    = errors.New("engine: closed")
	ErrTooLong   = errors.New("engine: request exceeds the context or KV memory")
	ErrDevice    = errors.New("engine: device error")
	// ErrNonFinite ends a request whose logits held no finite value (NaN
	// weights, an overflow): the model is broken, not the request. The
	// stream's error names the position.
	ErrNonFinite = errors.New("engine: the model produced non-finite logits (NaN/Inf)")
	// ErrDeviceLimit: the request asks for more than a device takes (the
	// ringbuf Max* limits); Submit returns it as a *LimitError.
	ErrDeviceLimit = errors.New("engine: request exceeds a device limit")
)

// LimitError is a request over one of the device limits. It wraps
// ErrDeviceLimit.
type LimitError struct {
	Param string // the field in the HTTP APIs' terms (a sample.ParamError's Param)
	What  string // what is counted, for the message
	N     int    // what the request asks for
	Max   int    // what the device takes
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("engine: %d %s, the device takes at most %d", e.N, e.What, e.Max)
}

func (e *LimitError) Unwrap() error { return ErrDeviceLimit }

// checkDeviceLimits refuses parameters that no device would take: the
// OPEN_SLOT would fail in the ring (CUDA and the Go executor refuse
// n_stop > MaxStop and n_bias > MaxBias, n_top > MaxTop) after the request
// was queued. Only counts are compared, so it runs before the
// per-element validation and bounds its work.
func checkDeviceLimits(p *sample.Params) error {
	switch {
	case len(p.StopTokens) > ringbuf.MaxStop:
		return &LimitError{Param: "stop_tokens", What: "stop tokens", N: len(p.StopTokens), Max: ringbuf.MaxStop}
	case len(p.LogitBias) > ringbuf.MaxBias:
		return &LimitError{Param: "logit_bias", What: "logit-bias entries", N: len(p.LogitBias), Max: ringbuf.MaxBias}
	case p.TopLogprobs > ringbuf.MaxTop:
		return &LimitError{Param: "top_logprobs", What: "top logprobs", N: p.TopLogprobs, Max: ringbuf.MaxTop}
	}
	return nil
}

// Stats are engine counters (read with Engine.Stats).
type Stats struct {
	Running, Waiting     int
	Steps                uint64
	PromptTokens         uint64 // prompt tokens computed (not counting cached ones)
	GeneratedTokens      uint64
	CachedTokens         uint64 // prompt tokens reused from the prefix cache
	Preemptions          uint64
	Blocks               BlockStats
	LastStepNS           uint64 // device time of the last step
	StepNSTotal          uint64
	RequestsDone, Failed uint64
}

// Engine multiplexes requests onto a device through the rings.
type Engine struct {
	cfg    Config
	dev    Device
	arena  *ringbuf.Arena
	blocks *BlockManager
	log    zerolog.Logger

	inMu     sync.Mutex
	inbox    []*seq
	cancels  []*seq
	closing  bool
	wake     chan struct{}
	loopDone chan struct{}
	loopErr  error
	nextID   atomic.Uint64

	// Stream locks: stream k (in Submit order) uses lock
	// k/streamGroup mod streamLocks, each on a cache line of its own.
	streamMu [streamLocks]struct {
		sync.Mutex
		_ [64 - unsafe.Sizeof(sync.Mutex{})]byte
	}
	nextStream atomic.Uint64

	// Loop state (engine goroutine only).
	waiting   []*seq
	running   []*seq
	bySlot    []*seq
	freeSlots []int
	stepID    uint64 // id of the last STEP
	inflight  int
	stepRegs  map[uint64][]*seq // prompts to register when the step completes
	hostSeq   uint64            // id of the last submit record, STEPs included
	stopSent  bool
	stopped   bool
	ctrl      []ringbuf.SubmitRecord // CLOSE_SLOT records waiting for room
	now       int64                  // when the current batch of completions was drained (sinceEpoch)
	genDelta  uint64                 // tokens received since stats were last published
	dirty     []*seq                 // sequences with tokens to deliver after this drain
	held      *sync.Mutex            // the stream lock handOver holds
	wakes     []*Stream              // readers to wake once it is released
	topOpen   *seq                   // its last TOKEN may still get TOP_LOGPROBS records
	fences    []fence                // slots of failed OPENs, freed once the device is past them

	closingSeen            bool // Close was called (as of the last takeInbox)
	pubRunning, pubWaiting int  // queue lengths last copied into stats

	// The loop parks on its channels alone when idle; parked says it does
	// now, parks counts the times (the tests' evidence that an idle
	// engine wakes for nothing).
	parked atomic.Bool
	parks  atomic.Uint64

	closeOnce sync.Once
	closeErr  error

	statsMu sync.Mutex
	stats   Stats

	scratch stepScratch

	// Tracing (trace.go). SetTracer stores tracer and moves traceGen; the
	// loop then copies tracer into tr, which its hooks test.
	tracer             atomic.Pointer[Tracer]
	traceGen, traceAck atomic.Uint64
	tr                 *Tracer // the loop's
	traceSeen          uint64  // the loop's
	recMu              sync.Mutex
	recOwned           *Tracer // the tracer Record attached, shared by recUsers Records
	recUsers           int
}

// New creates an engine for dev. Call Close to stop it.
func New(cfg Config, dev Device) (*Engine, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	layout, err := ringbuf.NewLayout(cfg.SubmitCap, cfg.CompletionCap, cfg.StagingWords)
	if err != nil {
		return nil, err
	}
	alloc := cfg.Allocator
	if alloc == nil {
		ma := ringbuf.NewMmapAllocator()
		alloc = ma
		defer func() {
			if w := ma.Warning(); w != "" {
				cfg.Log.Warn().Msg(w)
			}
		}()
	}
	arena, err := ringbuf.NewArena(alloc, layout)
	if err != nil {
		return nil, err
	}
	bm, err := NewBlockManager(cfg.NumBlocks, cfg.BlockSize, cfg.PrefixCache)
	if err != nil {
		arena.Close()
		return nil, err
	}
	e := &Engine{cfg: cfg, dev: dev, arena: arena, blocks: bm, log: cfg.Log,
		wake: make(chan struct{}, 1), loopDone: make(chan struct{}),
		bySlot: make([]*seq, cfg.Slots), stepRegs: map[uint64][]*seq{}}
	for i := cfg.Slots - 1; i >= 0; i-- {
		e.freeSlots = append(e.freeSlots, i)
	}
	if cfg.Tracer != nil {
		e.tracer.Store(cfg.Tracer)
		e.traceGen.Store(1)
	}
	if err := dev.Start(arena); err != nil {
		bm.Close()
		arena.Close()
		return nil, err
	}
	go e.loop()
	return e, nil
}

// A stream's lock is shared by streamGroup streams submitted one after
// another: the engine delivers a drained batch of tokens taking one lock
// per group, not one per stream (every lock operation waits for the
// engine's earlier stores, many of them to lines the readers had, to
// complete). A reader's Recv contends with the other streamGroup-1 at
// most. With streamLocks of them, a lock is reused every
// streamGroup*streamLocks streams.
const streamGroup, streamLocks = 8, 64

func (e *Engine) lockFor(k uint64) *sync.Mutex { return &e.streamMu[k/streamGroup%streamLocks].Mutex }

// Config returns the engine's configuration with defaults applied.
func (e *Engine) Config() Config { return e.cfg }

// DeviceName names the device.
func (e *Engine) DeviceName() string { return e.dev.Name() }

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Submit queues a request. The returned stream delivers its tokens; the
// request is cancelled when ctx is done or Stream.Cancel is called. A
// request over a device limit (stop tokens, logit biases, top logprobs)
// is refused with a *LimitError, which wraps ErrDeviceLimit.
func (e *Engine) Submit(ctx context.Context, r Request) (*Stream, error) {
	if len(r.Prompt) == 0 {
		return nil, fmt.Errorf("engine: empty prompt")
	}
	for _, t := range r.Prompt {
		if t < 0 || int(t) >= e.cfg.Vocab {
			return nil, fmt.Errorf("engine: prompt token %d outside the vocabulary of %d", t, e.cfg.Vocab)
		}
	}
	if err := checkDeviceLimits(&r.Params); err != nil {
		return nil, err
	}
	if err := r.Params.Validate(e.cfg.Vocab); err != nil {
		return nil, err
	}
	maxTok := r.Params.MaxTokens
	room := e.cfg.Context - len(r.Prompt)
	if room <= 0 {
		return nil, fmt.Errorf("%w: prompt of %d tokens fills the context of %d", ErrTooLong, len(r.Prompt), e.cfg.Context)
	}
	if maxTok <= 0 {
		maxTok = room
	}
	if maxTok > room {
		return nil, fmt.Errorf("%w: %d prompt + %d new tokens > context %d", ErrTooLong, len(r.Prompt), maxTok, e.cfg.Context)
	}
	need := (len(r.Prompt) + maxTok + e.cfg.BlockSize - 1) / e.cfg.BlockSize
	if need > e.cfg.NumBlocks {
		return nil, fmt.Errorf("%w: needs %d KV blocks, the pool has %d", ErrTooLong, need, e.cfg.NumBlocks)
	}
	if r.ID == "" {
		r.ID = fmt.Sprintf("req-%d", e.nextID.Add(1))
	}
	k := e.nextStream.Add(1)
	s := &seq{req: r, state: Queued, nPrompt: len(r.Prompt), maxTokens: maxTok, slot: -1, nTop: uint8(r.Params.TopLogprobs),
		tokens: slices.Clone(r.Prompt), serial: k} // room for the generated tokens comes at admission
	s.stream = newStream(r.ID, e.lockFor(k), maxTok, func() { e.cancel(s) })
	s.stream.timeline.Arrival = time.Now()

	e.inMu.Lock()
	if e.closing {
		e.inMu.Unlock()
		return nil, ErrClosed
	}
	if len(e.inbox)+e.waitingCount() >= e.cfg.MaxQueue {
		e.inMu.Unlock()
		return nil, ErrQueueFull
	}
	e.inbox = append(e.inbox, s)
	e.inMu.Unlock()
	e.poke()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				e.cancel(s)
			case <-s.stream.notifyDone():
			}
		}()
	}
	return s.stream, nil
}

func (e *Engine) waitingCount() int {
	e.statsMu.Lock()
	defer e.statsMu.Unlock()
	return e.stats.Waiting
}

func (e *Engine) cancel(s *seq) {
	e.inMu.Lock()
	e.cancels = append(e.cancels, s)
	e.inMu.Unlock()
	e.poke()
}

// Stats returns a snapshot of the engine's counters.
func (e *Engine) Stats() Stats {
	e.statsMu.Lock()
	st := e.stats
	e.statsMu.Unlock()
	st.Blocks = e.blocks.Stats()
	return st
}

// FreeBlocks is the number of KV blocks allocatable now.
func (e *Engine) FreeBlocks() int { return e.blocks.Free() }

// Close cancels every request, stops the device and frees the rings. It
// may be called more than once.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.inMu.Lock()
		e.closing = true
		e.inMu.Unlock()
		e.poke()
		<-e.loopDone
		e.closeErr = e.dev.Wait()
		e.blocks.Close()
		e.arena.Close()
		if e.loopErr != nil {
			e.closeErr = e.loopErr
		}
	})
	return e.closeErr
}
