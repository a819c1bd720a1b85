// Package engine owns requests and sequences, the scheduler (continuous
// batching, chunked prefill, a token budget per step), the paged KV block
// manager with its prefix cache, cancellation and token streaming. It is
// the host side of the ring protocol (ringbuf/PROTOCOL.md): one loop
// goroutine writes steps into the submit ring of a ringbuf.Arena and turns
// the device's completions into tokens on each request's Stream. It runs
// no model: a Device (kernels/cpu, kernels/cuda, kernels/null) does. The
// loop spins briefly while a step is in flight, polls every 2 ms while
// the device owes it an answer, and otherwise parks on the device's
// doorbell and Submit with no timer: an idle engine costs no CPU.
//
// Files answer one question each: sequence.go (a request's state and its
// Stream), blocks.go (KV blocks), scheduler.go (the loop: completions,
// inbox, cancellations), step.go (planning a step and writing it into the
// ring), engine.go (configuration and the public API), trace.go (the
// Tracer).
//
// # Submit
//
// Engine.Submit validates a request before it is queued: prompt ids in the
// vocabulary, the sampling parameters (sample.Params.Validate), the device
// limits of package ringbuf (MaxStop, MaxBias, MaxTop: a *LimitError
// wrapping ErrDeviceLimit), prompt + max tokens within the context
// (ErrTooLong) and within the whole KV pool, and room in the queue
// (ErrQueueFull). A request that could not fit even alone is refused here,
// never later.
//
// # Scheduling
//
// Each step first gives every decoding sequence one fed-back token, then
// continues admitted prompts in chunks of at most Config.PrefillChunk
// tokens, then admits waiting requests first come first served while slots
// are free, all within Config.TokenBudget tokens. Up to
// Config.PipelineDepth (default 2) steps are queued ahead; because the
// device feeds each slot's last sampled token back itself, the host is
// never in the per-token loop.
//
// Admission matches the prompt against the prefix cache, requires free
// blocks for the whole prompt, and writes OPEN_SLOT (sampling parameters,
// EOS ids, stop ids, biases, the start position after the cached prefix,
// the prompt length, and history tokens for the repetition penalty). It
// sizes the block table and the token history (prompt + generated, what a
// recompute re-feeds) once for the whole request, so neither grows during
// decode; a queued request holds only its prompt. A history of 32 KiB or
// more has its pages touched there: Go leaves memory fresh from the OS
// unzeroed, and its pages would otherwise fault in one at a time during
// decode (bench/RESULTS.md, "Engine").
//
// # KV memory
//
// Block tables grow lazily (GRANT_BLOCKS before the step that reaches a
// new block). When the pool is dry the newest other sequence is preempted:
// CLOSE_SLOT, its blocks return at SLOT_CLOSED, and it is queued first to
// be recomputed from prompt + generated tokens, which reproduces exactly
// the same continuation (positions, RNG draws and penalty state are
// restored).
//
// The BlockManager keeps blocks free, used (refcounted) or idle (content
// registered in the prefix cache, reusable). Full prompt blocks are
// registered when the step that filled them completes; chain hashes with
// stored tokens and parent ids make a collision a miss, never wrong KV.
// Idle blocks are mirrored in ristretto, whose eviction callbacks return
// blocks to the free list; the Go index stays authoritative.
//
// # Cancellation
//
// A request's context, or Stream.Cancel, ends the stream at once and
// closes the slot; tokens the device already sampled for it are dropped,
// and its blocks return at SLOT_CLOSED. An ERROR record for a sequence
// ends its stream with ErrDevice (when the CUDA kernel dies, its Go side
// answers one for every live sequence), or with ErrNonFinite when its
// logits held no finite value (NON_FINITE: a broken model).
//
// # Streaming
//
// The loop appends each token to its request's stream buffer as it reads
// the TOKEN record, and wakes the readers that wait in Stream.Recv once
// per drain through a one-slot channel; it never waits for a reader to
// read. A stream's lock is shared by 8 streams submitted one after another
// (64 locks in turn): the loop keeps a lock while the next tokens' streams
// use it too (adjacent in the batch as a rule) and lets go at STEP_DONE,
// at the end of a drain and before a stream ends, so a batch costs a lock
// operation per 8 streams, not per stream. A buffer starts with room for
// 256 tokens (or max tokens); a reader that keeps up reuses it; a slow
// reader costs memory bounded by the request's max tokens, never batch
// time. Token is 32 bytes (its receive time is monotonic ns since an
// epoch, Token.Time). Tokens of a request that asked for alternatives
// (Token.Top) wait in its sequence until their TOP_LOGPROBS records are
// complete.
//
// # Tracing
//
// A Tracer (Config.Tracer, or attached at run time with Engine.SetTracer;
// Engine.Record borrows one for a window) records each request's timeline
// and every device step as fixed 64-byte events: queued (with the Submit
// time), admitted, each prefill chunk (step id, tokens, first position),
// each token (receive time, step, position), preempted, end (finish, token
// counts), and step submitted/done (entries, tokens, the device's start
// and end ns). The loop gathers them in a preallocated buffer and moves
// them into a bounded ring (the newest N kept) once per turn. Off, tracing
// costs one atomic load per loop turn and a nil test per hook; on, it
// allocates nothing per event. Trace.WriteChrome writes Chrome/Perfetto
// trace JSON: a "requests" process with a thread per request (queue,
// prefill with a chunk per prefill chunk drawn over its step's device
// span, decode, requeued/recompute after a preemption, a token instant per
// token) and a "device" process with one slice and a batch counter per
// step. Host times are the monotonic clock since the engine's epoch;
// device times are shifted by the smallest (host time STEP_DONE was read −
// device end) in the window, so no step ends after the host saw it.
// Config.StepHook gets every step's entry count and device times (the
// HTTP server's step-time histogram, the benchmarks' device clock).
package engine
