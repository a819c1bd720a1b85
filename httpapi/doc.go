// Package httpapi is ringlm's HTTP front end, on fasthttp: the
// OpenAI-compatible API (/v1/completions, /v1/chat/completions, /v1/models)
// with SSE streaming, the native endpoints (/execute, /cancel, /health,
// /metrics in Prometheus format), request ids, bearer-token auth, request
// limits, client-disconnect cancellation and graceful shutdown.
//
// It owns the translation between HTTP and engine requests: parsing and
// validating bodies, tokenizing prompts and chat messages, detokenizing
// streamed tokens (never splitting a character) and applying stop strings.
// It does not schedule anything: every generation is an engine.Stream.
//
// Streaming: a request's tokens are read from its engine.Stream by
// fasthttp's connection goroutine itself, through a response body that
// implements fasthttp.BodyWriterTo; each batch the engine delivers becomes
// SSE events in one chunk, flushed at once. A failed flush means the client
// went away, and a watchdog peeks at the socket of a request that is not
// writing (queued, prefilling, non-streaming), so a disconnect cancels the
// engine request and frees its KV blocks either way. The watchdog also
// drops a streaming client that accepts nothing for --stall-timeout.
//
// Settings (flags and RINGLM_* environment variables) are all listed in
// Config.Settings with their defaults.
//
// Not supported yet (answered with a clear 400): logprobs of alternative
// tokens (top_logprobs > 0, or logprobs > 0 in the legacy completions API),
// because the device protocol returns only the chosen token's logprob;
// echo, suffix, best_of != n, and non-text chat content parts.
package httpapi
