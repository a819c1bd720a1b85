// Package httpapi is ringlm's HTTP front end, on fasthttp: the
// OpenAI-compatible API (/v1/completions, /v1/chat/completions, /v1/models)
// with SSE streaming, the native endpoints (/execute, /cancel, /health,
// /metrics in Prometheus format, and /tokenize, /detokenize and
// /apply-template shaped like llama.cpp's server's), GET /api/ps in
// Ollama's shape, request ids, bearer-token auth, CORS for browser
// pages (--cors-origins), request limits, client-disconnect cancellation
// and graceful shutdown.
//
// Models: a server serves one model (SetModel) or several by name
// (SetModels), one loaded at a time (models.go). Every endpoint that
// takes a model field (the generation endpoints, /tokenize, /detokenize,
// /apply-template) routes by it, an absent one to the first model; an
// unknown name is a 404 (model_not_found) listing the names served. A
// request for a model that is not loaded waits while the loaded model's
// running requests finish, the model is closed and the one asked for is
// loaded through its ModelSource; at most Config.MaxQueue wait, and more
// get 503. A request holds its model through one atomic pointer and a
// counter from routing until its answer is written, so the loaded
// model's requests take no lock. /api/ps (ps.go) reports the loaded
// model's size, digest and device, for `ringlm ps`. A model may bring
// sampling defaults of its own (Model.Defaults: an Ollama model's params
// layer), which a request's fields override, as in Ollama.
//
// It owns the translation between HTTP and engine requests: parsing and
// validating bodies, tokenizing prompts and chat messages, detokenizing
// streamed tokens (never splitting a character) and applying stop strings.
// It does not schedule anything: every generation is an engine.Stream.
// Nor does it load models or open devices: package runner does, and
// `ringlm serve` gives the server a Model over a runner.Runner's engine, so
// this package builds without the kernels.
//
// Streaming: a request's tokens are read from its engine.Stream by
// fasthttp's connection goroutine itself, through a response body that
// implements fasthttp.BodyWriterTo; each batch the engine delivers becomes
// SSE events in one chunk, flushed at once. A failed flush means the client
// went away, and a watchdog peeks at the socket of a request that is not
// writing (queued, prefilling, non-streaming), so a disconnect cancels the
// engine request and frees its KV blocks either way. The watchdog also
// drops a streaming client that accepts nothing for --stall-timeout.
// A streamed completion has an event for every token that makes text and
// for every hidden token (EOS under ignore_eos), with empty text, as vLLM
// streams special tokens; a chat stream has events for tokens with content
// (and for every token when logprobs are asked).
//
// Settings (flags and RINGLM_* environment variables) are all listed in
// Config.Settings with their defaults.
//
// Chat: messages are rendered by the model's own Jinja template (package
// chat) with the request's tools (OpenAI's field; tool_choice "none" leaves
// them out), chat_template_kwargs as further template variables, and
// vLLM's add_generation_prompt / continue_final_message; without those, a
// conversation ending with an assistant message continues it (a prefill,
// as llama.cpp does). Roles are system, developer (rendered as system),
// user, assistant and tool; a message's other members (tool_calls,
// tool_call_id, name, ...) reach the template as sent. A template that
// refuses a conversation (raise_exception, or a message it cannot show)
// is a 400 with the template's line and reason. The tokenizer adds BOS
// when the vocabulary asks, so a leading bos_token the template wrote is
// dropped first (as llama.cpp does); /apply-template shows the rendering
// with it, as HuggingFace's apply_chat_template returns it.
//
// Logprobs: the chosen token's log probability and up to 20 alternatives,
// as the device computes them (sample/doc.go: log-softmax at temperature 1
// after bias and penalties; the alternatives are the first tokens of the
// sampler's order, most likely first). Chat (and /execute) take logprobs:
// true and top_logprobs 0–20: each logprobs.content entry is {token,
// logprob, bytes, top_logprobs: [{token, logprob, bytes}, …]}. The legacy
// completions API takes logprobs 0–5: logprobs.top_logprobs holds one
// object {text: logprob} per token with the alternatives and the chosen
// token (up to logprobs+1 entries, as OpenAI documents; two tokens with the
// same text share one key, the more likely one's), null for logprobs 0.
// /execute's token events carry "top_logprobs": [{id, text, logprob}, …]
// when asked. Streaming and non-streaming answers carry the same values.
// Every generated token is listed, hidden ones too (EOS, EOT, control
// tokens, with their vocabulary text, "</s>"), as vLLM lists every sampled
// token: as many entries as usage.completion_tokens. They add no text, so
// text_offset does not move past them.
//
// Files: config.go is the one settings table (flag, RINGLM_* variable,
// default, doc) that `ringlm serve` reads; request.go parses and validates
// a body (every bad field is a 400 in OpenAI's error shape naming the
// field), and errors.go gives engine.Submit's refusals the same shape (a
// sample.ParamError, or an engine.LimitError for a request over a device
// limit: 400; a full queue or a draining server: 503); gen.go turns it into engine requests (tokenize, chat template, one
// engine request per choice with seeds seed, seed+1, …); metrics.go keeps
// the Prometheus histograms (TTFT, inter-token, end-to-end, queue time,
// step time from the engine's StepHook) and counters in a client_golang
// registry of the server's own, with Go's and the process's collectors,
// reads the engine's gauges at scrape time, exports the metrics vLLM also
// has under vLLM's names too, and serves the page through fasthttp's
// net/http adaptor; a request whose client went away counts as finish
// reason abort, as in vLLM. cors.go answers the origins of --cors-origins
// (preflights before auth); trace.go and
// pprof.go serve /debug/trace?seconds=N (Chrome/Perfetto JSON from an
// engine.Tracer) and Go's pprof under /debug/pprof/, only with --debug
// and behind --api-key when one is set. Server.Shutdown stops accepting,
// lets running requests finish until its deadline and then ends them with
// an error event.
//
// Not supported yet (answered with a clear 400): echo, suffix, best_of !=
// n, and non-text chat content parts.
package httpapi
