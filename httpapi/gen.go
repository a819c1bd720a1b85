package httpapi

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"ringlm/engine"
	"ringlm/sample"
	"ringlm/tokenizer"
)

// epoch is the zero of the t_engine_ns timestamps in /execute's token
// events. time.Time keeps a monotonic reading, so engine token times minus
// epoch are on the monotonic clock, comparable with time.Since(epoch) taken
// by a client in the same process (the load test).
var epoch = time.Now()

type kind uint8

const (
	kindCompletion kind = iota
	kindChat
	kindExecute
)

// Causes of a job's context cancellation.
var (
	errClientGone = errors.New("client disconnected")
	errStalled    = errors.New("client stopped reading")
	errJobDone    = errors.New("request finished")
)

// job is one HTTP generation request once parsed: everything the writer
// needs, copied out of the fasthttp request (which is reused once the
// handler returns, while a stream writer runs on).
type job struct {
	s       *Server
	m       *Model
	kind    kind
	id      string
	created int64
	model   string
	prompts [][]int32
	n       int
	params  sample.Params // Seed is the base seed when seeded
	seeded  bool
	prime   bool // continue the prompt's text: keep a leading space
	stream  bool
	usage   bool // stream_options.include_usage
	lp      bool // logprobs of the chosen tokens
	top     int  // alternatives per token (top_logprobs; logprobs in the legacy API)
	ignEOS  bool
	log     zerolog.Logger
	start   time.Time

	met *modelMetrics // the model's series, resolved once

	ctx     context.Context
	cancel  context.CancelCauseFunc
	choices []*choice
	fl      *flight
	// flushing is when the current batch's writes began (ns since
	// epoch), 0 when none is in progress: the watchdog drops a client
	// stuck in them.
	flushing atomic.Int64
	wrote    atomic.Int64 // when the last batch was flushed
	recvNS   int64        // when the current batch left the engine's stream (t_http_ns)
}

// choice is one engine request of a job: one (prompt, n) pair.
type choice struct {
	index  int
	prompt int
	seed   uint64
	st     *engine.Stream
	detok  *tokenizer.Stream
	stop   *sample.StopMatcher

	text   []byte  // released text, kept when not streaming
	lps    []tokLP // chosen-token logprobs, kept when not streaming
	offset int     // bytes of text released so far (text_offset)
	tokens int     // tokens generated
	last   time.Time
	itl    []float32 // inter-token gaps in ms (/execute's metrics only)
	finish string
	err    *apiError
	ended  bool
}

type tokLP struct {
	token   string
	logprob float32
	offset  int
	top     []sample.TokenLogprob // the engine token's alternatives (engine.Token.Top)
}

// submit starts every choice on the engine. On error nothing stays
// submitted.
func (j *job) submit() *apiError {
	base := j.params.Seed
	for p, prompt := range j.prompts {
		for i := range j.n {
			par := j.params
			par.Seed = rand.Uint64()
			if j.seeded {
				par.Seed = base + uint64(i)
			}
			idx := p*j.n + i
			rid := j.id
			if len(j.prompts)*j.n > 1 {
				rid = j.id + "/" + strconv.Itoa(idx)
			}
			st, err := j.m.Engine.Submit(j.ctx, engine.Request{ID: rid, Prompt: prompt, Params: par, IgnoreEOS: j.ignEOS})
			if err != nil {
				for _, c := range j.choices {
					c.st.Cancel()
				}
				j.choices = nil
				return submitError(err)
			}
			c := &choice{index: idx, prompt: p, seed: par.Seed, st: st, detok: j.m.Tokenizer.NewStream()}
			if j.prime {
				// Decode as a continuation: a first token "▁word" keeps its
				// space, which a fresh SentencePiece decode would strip.
				c.detok.Add(prompt[len(prompt)-1])
				c.detok.Flush()
			}
			if len(par.StopStrings) > 0 {
				c.stop = sample.NewStopMatcher(par.StopStrings)
			}
			j.choices = append(j.choices, c)
		}
	}
	for _, p := range j.prompts {
		j.met.promptTokens.Add(uint64(len(p)))
	}
	return nil
}

// sink receives a job's output: SSE for streams, a buffer otherwise.
type sink interface {
	token(c *choice, text string, t engine.Token) error
	done(c *choice, tail string) error
	flush() error
}

// run feeds engine tokens through detokenization and stop strings into sk
// until every choice has ended. It returns an error only when the client
// went away or stalled (the job's context says which); the choices are
// then cancelled.
func (j *job) run(sk sink) error {
	next, stop := j.receiver()
	defer stop()
	remaining := len(j.choices)
	for remaining > 0 {
		c, toks, done, err := next()
		if err != nil {
			return err
		}
		j.recvNS = int64(time.Since(epoch))
		if c.ended {
			continue
		}
		// Writes may block on a client that reads nothing, in a token's
		// write (the buffer filled) or in the flush: the watchdog times
		// the whole batch.
		j.flushing.Store(int64(time.Since(epoch)))
		for _, t := range toks {
			hidden := isHidden(j.m.Tokenizer, t.ID)
			text, stopped := j.feed(c, t, hidden)
			// A streamed completion has a chunk for a hidden token too (EOS
			// under ignore_eos), its text empty, as vLLM streams: clients
			// time tokens by chunks, and a run of hidden tokens is not a
			// silence until the end. A token whose bytes are held back gets
			// none: they come with a later chunk (or the tail), which
			// would otherwise count twice. With logprobs every token is
			// listed, hidden ones too (as vLLM lists every sampled token:
			// as many entries as completion_tokens).
			if text != "" || j.kind == kindExecute || (hidden && j.stream && j.kind == kindCompletion) || j.lp {
				if err := sk.token(c, text, t); err != nil {
					return err
				}
			}
			c.offset += len(text)
			if stopped {
				c.finish = "stop"
				c.st.StopWith()
				done = true
				break
			}
		}
		if done {
			if err := sk.done(c, j.end(c)); err != nil {
				return err
			}
			remaining--
		}
		if err := sk.flush(); err != nil {
			return err
		}
		if j.stream {
			j.wrote.Store(int64(time.Since(epoch)))
		}
		j.flushing.Store(0)
	}
	if j.clientLeft() {
		// The watchdog cancelled the job, and the engine ended every
		// choice before the reader saw the cancelled context.
		return context.Cause(j.ctx)
	}
	return nil
}

// clientLeft reports whether the job was cancelled because its client
// went away or stopped reading.
func (j *job) clientLeft() bool {
	cause := context.Cause(j.ctx)
	return errors.Is(cause, errClientGone) || errors.Is(cause, errStalled)
}

// receiver returns a function that blocks until one choice has tokens or
// has ended. One choice is read directly; several are merged by one
// goroutine each, since a Stream offers no channel to select on.
func (j *job) receiver() (next func() (*choice, []engine.Token, bool, error), stop func()) {
	if len(j.choices) == 1 {
		c := j.choices[0]
		var buf []engine.Token
		return func() (*choice, []engine.Token, bool, error) {
			var done bool
			var err error
			buf, done, err = c.st.Recv(j.ctx, buf[:0])
			return c, buf, done, err
		}, func() {}
	}
	type batch struct {
		c    *choice
		toks []engine.Token
		done bool
		err  error
	}
	ch := make(chan batch)
	ctx, cancel := context.WithCancel(j.ctx)
	var wg sync.WaitGroup
	for _, c := range j.choices {
		wg.Go(func() {
			for {
				toks, done, err := c.st.Recv(ctx, nil)
				select {
				case ch <- batch{c, toks, done, err}:
				case <-ctx.Done():
					return
				}
				if done || err != nil {
					return
				}
			}
		})
	}
	return func() (*choice, []engine.Token, bool, error) {
			select {
			case b := <-ch:
				return b.c, b.toks, b.done, b.err
			case <-j.ctx.Done():
				return nil, nil, false, j.ctx.Err()
			}
		}, func() {
			cancel()
			wg.Wait()
		}
}

// feed takes one engine token of c and returns the text it releases
// (none for a hidden token: isHidden, which the caller has asked once).
func (j *job) feed(c *choice, t engine.Token, hidden bool) (string, bool) {
	c.tokens++
	if !c.last.IsZero() {
		gap := t.Time().Sub(c.last)
		j.met.itl.Observe(seconds(gap))
		if j.kind == kindExecute {
			c.itl = append(c.itl, float32(gap.Seconds()*1e3))
		}
	}
	c.last = t.Time()
	if hidden {
		return "", false
	}
	piece := c.detok.Add(t.ID)
	if c.stop == nil {
		return piece, false
	}
	return c.stop.Push(piece)
}

// end closes a choice: the text still held back, and why it ended.
func (j *job) end(c *choice) (tail string) {
	c.ended = true
	tail = c.detok.Flush()
	switch {
	case c.stop == nil:
	case c.stop.Stopped():
		tail = "" // what follows a stop string is never shown
	default:
		var stopped bool
		if tail, stopped = c.stop.Push(tail); stopped {
			c.finish = "stop"
		} else {
			tail += c.stop.Flush()
		}
	}
	f, err := c.st.Finish()
	switch {
	case c.finish == "stop":
	case f == engine.FinishCancelled && j.fl.forced.Load():
		c.finish, c.err = "error", errDraining
	case f == engine.FinishCancelled && j.fl.cancelled.Load():
		c.finish = "cancelled"
	case f == engine.FinishCancelled && j.clientLeft():
		c.finish = "abort"
	case f == engine.FinishStop || f == engine.FinishLength:
		c.finish = string(f)
	case f == engine.FinishCancelled:
		c.finish, c.err = "error", &apiError{Status: 503, Type: "server_error", Code: "cancelled", Message: "the request was cancelled"}
	default:
		msg := "generation failed"
		if err != nil {
			msg = err.Error()
		}
		c.finish, c.err = "error", internalError(errors.New(msg))
	}
	j.met.observeEnd(c.st.Timeline(), c.finish, time.Time{})
	return tail
}

// abort cancels every choice after the client went away. The watchdog
// calls it too, from its own goroutine; gone is the writer's.
func (j *job) abort(cause error) {
	j.cancel(cause)
	for _, c := range j.choices {
		c.st.Cancel()
	}
}

// gone ends a job whose client went away (or was dropped for reading
// nothing): every choice still running is cancelled and counted with
// finish reason abort, as vLLM counts them. Only the goroutine that ran
// the job calls it: it owns the choices' ended flags.
func (j *job) gone(cause error) {
	j.abort(cause)
	now := time.Now()
	for _, c := range j.choices {
		if !c.ended {
			c.ended = true
			j.met.observeEnd(c.st.Timeline(), "abort", now)
		}
	}
}

// usage counts prompt tokens once per prompt, as OpenAI does for n > 1.
func (j *job) usageCounts() (prompt, completion int) {
	for _, p := range j.prompts {
		prompt += len(p)
	}
	for _, c := range j.choices {
		completion += c.tokens
	}
	return prompt, completion
}

// firstError is the error of the first failed choice, if any.
func (j *job) firstError() *apiError {
	for _, c := range j.choices {
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

// tokenText is a token's own text for logprobs. SentencePiece's "▁" is a
// space that Decode drops at the start of a text, so it is put back.
func tokenText(t *tokenizer.Tokenizer, id int32) string {
	s := t.Decode([]int32{id})
	if strings.HasPrefix(t.Token(id), "\u2581") && !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	return s
}
