package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"ringlm/sample"
)

// State is where a sequence is in its life.
type State int

const (
	Queued     State = iota // waiting for a slot and KV blocks
	Prefilling              // prompt chunks being submitted
	Decoding                // prompt submitted; tokens fed back on the device
	Finished                // EOS, stop token or length
	Cancelled               // by the caller
	Preempted               // KV taken back; waits to be recomputed
	Failed                  // a device or engine error
)

var stateNames = [...]string{"queued", "prefilling", "decoding", "finished", "cancelled", "preempted", "failed"}

func (s State) String() string { return stateNames[s] }

// Finish says why a request ended.
type Finish string

const (
	FinishStop      Finish = "stop"      // EOS, a stop token, or the caller's stop string
	FinishLength    Finish = "length"    // max tokens
	FinishCancelled Finish = "cancelled" // the caller cancelled or went away
	FinishError     Finish = "error"     // see Stream's error
)

// Request is a generation request in token ids.
type Request struct {
	ID     string
	Prompt []int32
	Params sample.Params // MaxTokens 0: up to the context length
	// IgnoreEOS keeps generating past EOS (benchmarks).
	IgnoreEOS bool
}

// Token is one generated token.
type Token struct {
	ID      int32
	Logprob float32
	Pos     int
	// at is when the engine received the token: nanoseconds on the
	// monotonic clock since epoch (see Time). An integer, not a
	// time.Time, keeps Token at 32 bytes: every token is copied three
	// times on its way, and the stream buffer's cache lines move between
	// the engine's core and the reader's (48-byte tokens cost the null
	// device's batch-256 step about 5%).
	at int64
	// top points at the alternatives (see Top), nil unless the request
	// asked for them (a slice field cost the null device's batch-256 step
	// about 15%).
	top *[]sample.TokenLogprob
}

// epoch is the zero of Token's receive times; it carries a monotonic
// reading, so Token.Time does too.
var epoch = time.Now()

// sinceEpoch is the monotonic time now as a Token receive time.
func sinceEpoch() int64 { return int64(time.Since(epoch)) }

// Time is when the engine received the token from the device (with a
// monotonic reading: differences between tokens' times are exact).
func (t Token) Time() time.Time { return epoch.Add(time.Duration(t.at)) }

// Top returns the Params.TopLogprobs most likely tokens at the token's
// position with their logprobs, most likely first (sample.Result.Top;
// fewer when fewer tokens had a finite logit), or nil unless the request
// asked for alternatives. The engine never writes them again once the
// token is delivered, so a reader may keep them.
func (t Token) Top() []sample.TokenLogprob {
	if t.top == nil {
		return nil
	}
	return *t.top
}

// Timeline is a request's life for the profiler.
type Timeline struct {
	Arrival    time.Time
	Scheduled  time.Time   // first admitted to a slot
	Chunks     []time.Time // each prefill chunk submitted
	FirstToken time.Time
	End        time.Time
	Preempted  int
	CachedToks int // prompt tokens reused from the prefix cache
}

// Stream delivers a request's tokens. The engine appends tokens without
// ever blocking (the buffer grows to at most max_tokens entries), so a slow
// reader never stalls the batch; Recv blocks until there is something new.
type Stream struct {
	ID string

	// mu guards the fields below. It is one of the engine's stream locks,
	// shared with the streams submitted around this one (see
	// Engine.lockFor), so the engine delivers to a group of streams under
	// one lock.
	mu       *sync.Mutex
	buf      []Token
	bufCap   int // buf's capacity when the first tokens come
	read     int
	waiting  bool // a reader is blocked in Recv
	started  bool // tokens were delivered (timeline.FirstToken is set)
	finish   Finish
	err      error
	done     bool
	timeline Timeline
	notify   chan struct{}
	doneCh   chan struct{} // closed when the request ends
	cancel   func()
}

// streamBuffer is how many tokens a stream's buffer holds before it
// grows: what a reader that falls that many steps behind needs (8 KiB).
// A buffer that started empty doubled its way up, an allocation every
// time a reader fell further behind than before, during decode.
const streamBuffer = 256

func newStream(id string, mu *sync.Mutex, maxTokens int, cancel func()) *Stream {
	return &Stream{ID: id, mu: mu, bufCap: min(maxTokens, streamBuffer), notify: make(chan struct{}, 1),
		doneCh: make(chan struct{}), cancel: cancel}
}

func (s *Stream) notifyDone() <-chan struct{} { return s.doneCh }

// Done is closed when the request has ended (tokens may still be unread).
func (s *Stream) Done() <-chan struct{} { return s.doneCh }

func (s *Stream) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// deliverLocked appends the tokens the engine collected for this stream
// since the last drain; s.mu is held. It reports whether a reader waits
// in Recv for them: the caller wakes it once the lock is released. One
// wake-up per stream per drained batch of completions, not per token.
func (s *Stream) deliverLocked(toks []Token) (wake bool) {
	if s.buf == nil {
		s.buf = make([]Token, 0, max(s.bufCap, len(toks)))
	}
	s.buf = append(s.buf, toks...)
	return s.delivered(toks[0])
}

// putLocked is deliverLocked for one token.
func (s *Stream) putLocked(t Token) (wake bool) {
	if s.buf == nil {
		s.buf = make([]Token, 0, s.bufCap)
	}
	s.buf = append(s.buf, t)
	return s.delivered(t)
}

// delivered notes that tokens from first on were appended.
func (s *Stream) delivered(first Token) (wake bool) {
	if !s.started {
		s.started = true
		s.timeline.FirstToken = first.Time()
	}
	// Only a reader blocked in Recv needs the wake-up; one that is busy
	// finds the tokens when it next looks.
	wake = s.waiting
	s.waiting = false
	return wake
}

func (s *Stream) end(f Finish, err error) {
	s.mu.Lock()
	if !s.done {
		s.done, s.finish, s.err = true, f, err
		s.timeline.End = time.Now()
		close(s.doneCh)
	}
	s.mu.Unlock()
	s.wake()
}

// ErrCancelled is the error of a stream whose request was cancelled.
var ErrCancelled = errors.New("engine: request cancelled")

// Recv returns the tokens that arrived since the last call (appended to
// dst), blocking until there is at least one or the stream ends. done is
// true once every token has been returned and the request has ended; then
// Finish and Err say why. A cancelled ctx returns ctx.Err() but does not
// cancel the request (use Cancel).
func (s *Stream) Recv(ctx context.Context, dst []Token) (toks []Token, done bool, err error) {
	for {
		s.mu.Lock()
		if s.read < len(s.buf) {
			dst = append(dst, s.buf[s.read:]...)
			// Everything is read: reuse the backing array, so a reader that
			// keeps up costs no allocation per token.
			s.buf, s.read = s.buf[:0], 0
			s.mu.Unlock()
			return dst, false, nil
		}
		if s.done {
			s.mu.Unlock()
			return dst, true, nil
		}
		if err := ctx.Err(); err != nil {
			s.mu.Unlock()
			return dst, false, err
		}
		s.waiting = true
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return dst, false, ctx.Err()
		}
	}
}

// Finish is why the request ended ("" while it runs).
func (s *Stream) Finish() (Finish, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finish, s.err
}

// Timeline returns a copy of the request's timeline.
func (s *Stream) Timeline() Timeline {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.timeline
	t.Chunks = append([]time.Time(nil), t.Chunks...)
	return t
}

// Cancel ends the request: it leaves the batch at the next step and its KV
// blocks return to the pool. Safe to call more than once and after the end.
func (s *Stream) Cancel() { s.cancel() }

// StopWith ends the request as finished with reason stop (a stop string
// matched by the caller), freeing its resources like Cancel.
func (s *Stream) StopWith() {
	s.end(FinishStop, nil)
	s.cancel()
}

// seq is the scheduler's state for one request. Only the engine loop
// touches it.
type seq struct {
	// The fields every token touches come first: handling a TOKEN reads
	// the first cache line of the sequence, planning its next decode
	// entry the first two.
	stream   *Stream
	closing  bool  // CLOSE_SLOT submitted, waiting for SLOT_CLOSED
	fenced   bool  // the OPEN failed; the slot is freed by a fence
	register bool  // register the prompt's blocks once its prefill completes
	requeue  bool  // preempted: back to the queue after SLOT_CLOSED
	nTop     uint8 // alternatives per token (Params.TopLogprobs, <= 20)
	// pendFin is a finish (finStop, finLength) that waits for the
	// finishing token's TOP_LOGPROBS records; 0 when none.
	pendFin   uint8
	state     State
	generated int     // tokens received
	maxTokens int     // tokens to generate in all
	tokens    []int32 // prompt + generated: what a recompute re-feeds
	slot      int     // device slot, -1 when none
	computed  int     // positions submitted to the device
	// samples counts submitted entries that sample; when it reaches
	// maxTokens-generatedAtOpen no more entries are scheduled.
	samples int
	openGen int     // generated when the slot was opened
	blocks  []int32 // block table
	granted int     // blocks granted to the device

	pending []Token // with nTop > 0: tokens received in the current drain, not yet delivered
	nPrompt int     // original prompt length
	cached  int     // prompt tokens reused from the prefix cache
	endWith Finish
	endErr  error
	openID  uint64 // ID of the OPEN_SLOT record of the current slot
	req     Request
	// Where the next tokens' alternatives are carved from: room for
	// nTop of them and a list header per token.
	topSlab []sample.TokenLogprob
	topHdrs [][]sample.TokenLogprob
	serial  uint64 // the request's number in Submit order (trace events)
}

// Pending finishes (seq.pendFin).
const (
	finStop   = 1
	finLength = 2
)

// topSlabTokens is how many tokens' alternatives one allocation holds.
const topSlabTokens = 64

// topList returns an empty list with room for the sequence's n_top
// alternatives, carved (with its header) from slabs whose carved parts
// are never written again once their token is delivered, so readers keep
// their lists.
func (s *seq) topList() *[]sample.TokenLogprob {
	n := int(s.nTop)
	if len(s.topHdrs) == cap(s.topHdrs) || cap(s.topSlab)-len(s.topSlab) < n {
		k := min(topSlabTokens, max(1, s.maxTokens-s.generated+1))
		s.topSlab = make([]sample.TokenLogprob, 0, n*k)
		s.topHdrs = make([][]sample.TokenLogprob, 0, k)
	}
	i := len(s.topSlab)
	s.topSlab = s.topSlab[:i+n]
	s.topHdrs = append(s.topHdrs, s.topSlab[i:i:i+n])
	return &s.topHdrs[len(s.topHdrs)-1]
}
