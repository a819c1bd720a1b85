package httpapi

import (
	"bufio"
	"encoding/json"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"ringlm/engine"
	"ringlm/tokenizer"
)

// execute is POST /execute: one sequence, streamed as SSE events
// started, token…, metrics, then end or error.
func (s *Server) execute(ctx *fasthttp.RequestCtx, r *req) { s.generate(ctx, r, kindExecute) }

// execSink writes /execute's events.
type execSink struct {
	j   *job
	w   *bufio.Writer
	buf []byte
	err error
}

func newExecSink(j *job, w *bufio.Writer) *execSink {
	s := &execSink{j: j, w: w, buf: make([]byte, 0, 256)}
	c := j.choices[0]
	b := append(s.buf[:0], "event: started\ndata: {\"request_id\":"...)
	b = appendJSONString(b, j.id)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, j.model)
	b = append(b, `,"prompt_tokens":`...)
	b = appendInt(b, int64(len(j.prompts[0])))
	b = append(b, `,"max_tokens":`...)
	b = appendInt(b, int64(j.params.MaxTokens))
	b = append(b, `,"seed":`...)
	b = strconvAppendUint(b, c.seed)
	b = append(b, "}\n\n"...)
	s.write(b)
	s.err = s.flush()
	return s
}

func (s *execSink) write(b []byte) {
	s.buf = b
	if s.err == nil {
		_, s.err = s.w.Write(b)
	}
}

func (s *execSink) token(c *choice, text string, t engine.Token) error {
	b := append(s.buf[:0], "event: token\ndata: {\"text\":"...)
	b = appendJSONString(b, text)
	b = append(b, `,"id":`...)
	b = appendInt(b, int64(t.ID))
	b = append(b, `,"pos":`...)
	b = appendInt(b, int64(t.Pos))
	if s.j.lp {
		b = append(b, `,"logprob":`...)
		b = appendFloat32(b, t.Logprob)
	}
	if s.j.top > 0 {
		b = append(b, `,"top_logprobs":[`...)
		for i, a := range t.Top() {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendInt(b, int64(a.Token))
			b = append(b, `,"text":`...)
			b = appendJSONString(b, tokenText(s.j.m.Tokenizer, a.Token))
			b = append(b, `,"logprob":`...)
			b = appendFloat32(b, a.Logprob)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	// Profiling timestamps, ns on the server's monotonic clock: when the
	// engine received the token, and when the HTTP layer took it from the
	// engine's stream. The difference to the client's receive time is
	// what each side adds.
	b = append(b, `,"t_engine_ns":`...)
	b = appendInt(b, int64(t.Time().Sub(epoch)))
	b = append(b, `,"t_http_ns":`...)
	b = appendInt(b, s.j.recvNS)
	b = append(b, "}\n\n"...)
	s.write(b)
	return s.err
}

func (s *execSink) done(c *choice, tail string) error {
	if tail != "" {
		b := append(s.buf[:0], "event: token\ndata: {\"text\":"...)
		b = appendJSONString(b, tail)
		b = append(b, "}\n\n"...)
		s.write(b)
	}
	s.write(appendExecMetrics(append(s.buf[:0], "event: metrics\ndata: "...), c, len(s.j.prompts[0])))
	if c.err != nil {
		b := append(s.buf[:0], "event: error\ndata: {\"message\":"...)
		b = appendJSONString(b, c.err.Message)
		b = append(b, `,"code":`...)
		b = appendNullString(b, c.err.Code)
		b = append(b, "}\n\n"...)
		s.write(b)
		return s.err
	}
	b := append(s.buf[:0], "event: end\ndata: {\"finish_reason\":"...)
	b = appendJSONString(b, c.finish)
	b = append(b, "}\n\n"...)
	s.write(b)
	return s.err
}

func (s *execSink) flush() error {
	if s.err != nil {
		return s.err
	}
	s.err = s.w.Flush()
	return s.err
}

// appendExecMetrics writes a finished request's timings: queue wait,
// time to first token, inter-token gaps and the end-to-end time, all
// measured by the engine.
func appendExecMetrics(b []byte, c *choice, prompt int) []byte {
	tl := c.st.Timeline()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, int64(prompt))
	b = append(b, `,"cached_tokens":`...)
	b = appendInt(b, int64(tl.CachedToks))
	b = append(b, `,"generated_tokens":`...)
	b = appendInt(b, int64(c.tokens))
	if !tl.Scheduled.IsZero() {
		b = append(b, `,"queued_ms":`...)
		b = appendFloat(b, ms(tl.Scheduled.Sub(tl.Arrival)))
	}
	if !tl.FirstToken.IsZero() {
		b = append(b, `,"ttft_ms":`...)
		b = appendFloat(b, ms(tl.FirstToken.Sub(tl.Arrival)))
	}
	if !tl.End.IsZero() {
		b = append(b, `,"e2e_ms":`...)
		b = appendFloat(b, ms(tl.End.Sub(tl.Arrival)))
	}
	if n := len(c.itl); n > 0 {
		sorted := slices.Clone(c.itl)
		slices.Sort(sorted)
		var sum float64
		for _, v := range sorted {
			sum += float64(v)
		}
		b = append(b, `,"itl_ms_mean":`...)
		b = appendFloat(b, round3(sum/float64(n)))
		b = append(b, `,"itl_ms_p50":`...)
		b = appendFloat(b, round3(float64(sorted[n/2])))
		b = append(b, `,"itl_ms_p99":`...)
		b = appendFloat(b, round3(float64(sorted[min(n-1, n*99/100)])))
		b = append(b, `,"itl_ms_max":`...)
		b = appendFloat(b, round3(float64(sorted[n-1])))
		if sum > 0 {
			b = append(b, `,"decode_tokens_per_s":`...)
			b = appendFloat(b, round3(float64(n)/(sum/1e3)))
		}
	}
	b = append(b, `,"preemptions":`...)
	b = appendInt(b, int64(tl.Preempted))
	return append(b, "}\n\n"...)
}

func round3(v float64) float64 { return float64(int64(v*1e3+0.5)) / 1e3 }

// cancelRequest is POST /cancel with {"request_id": "..."} (or
// ?request_id=): it ends that request's generation, which then finishes
// with finish_reason "cancelled".
func (s *Server) cancelRequest(ctx *fasthttp.RequestCtx, r *req) {
	id := string(ctx.QueryArgs().Peek("request_id"))
	if id == "" {
		var body struct {
			RequestID string `json:"request_id"`
		}
		if err := parseBody(ctx.PostBody(), &body); err != nil {
			writeError(ctx, err)
			return
		}
		id = body.RequestID
	}
	if id == "" {
		writeError(ctx, badRequest("request_id", "request_id is required"))
		return
	}
	s.mu.Lock()
	fls := slices.Clone(s.flights[id])
	s.mu.Unlock()
	if len(fls) == 0 {
		writeError(ctx, &apiError{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Param: "request_id",
			Code: "request_not_found", Message: "no running request has id " + quote(id)})
		return
	}
	for _, fl := range fls {
		fl.cancelled.Store(true)
		for _, c := range fl.j.choices {
			c.st.Cancel()
		}
	}
	r.log.Info().Str("cancelled", id).Msg("request cancelled by /cancel")
	b := append([]byte(`{"request_id":`), appendJSONString(nil, id)...)
	b = append(b, `,"cancelled":true}`...)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// health is GET /health: 503 while loading or shutting down, 200 with
// the device, the model, KV usage and the queue when ready, and 200
// {"status":"switching"} while a server of several models has none
// loaded (a switch, or a load that failed: requests are still taken).
func (s *Server) health(ctx *fasthttp.RequestCtx, r *req) {
	ctx.SetContentType("application/json")
	if s.draining.Load() {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"shutting_down"}`)
		return
	}
	l := s.current()
	if l == nil {
		if sw := s.sw.Load(); sw != nil {
			// Requests are taken and wait for their model: ready, with
			// none loaded this moment.
			ctx.SetBodyString(`{"status":"switching"}`)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"status":"loading"}`)
		return
	}
	defer l.release()
	m := l.m
	if err := m.Fault(); err != nil {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		b, _ := marshal(struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}{"device_failed", err.Error()})
		ctx.SetBody(b)
		return
	}
	st := m.Engine.Stats()
	cfg := m.Engine.Config()
	total := st.Blocks.Free + st.Blocks.Used + st.Blocks.Idle
	h := struct {
		Status string `json:"status"`
		Device string `json:"device"`
		Model  string `json:"model"`
		KV     struct {
			BlocksTotal  int     `json:"blocks_total"`
			BlocksUsed   int     `json:"blocks_used"`
			BlocksFree   int     `json:"blocks_free"`
			BlocksCached int     `json:"blocks_cached"`
			BlockSize    int     `json:"block_size"`
			Usage        float64 `json:"usage"`
		} `json:"kv"`
		Queue struct {
			Running int `json:"running"`
			Waiting int `json:"waiting"`
			Slots   int `json:"slots"`
			Max     int `json:"max_waiting"`
		} `json:"queue"`
		Context int `json:"context_length"`
	}{Status: "ok", Device: m.Engine.DeviceName(), Model: m.Name, Context: m.Context}
	h.KV.BlocksTotal, h.KV.BlocksUsed, h.KV.BlocksFree, h.KV.BlocksCached = total, st.Blocks.Used, st.Blocks.Free, st.Blocks.Idle
	h.KV.BlockSize = cfg.BlockSize
	if total > 0 {
		h.KV.Usage = round3(float64(st.Blocks.Used) / float64(total))
	}
	h.Queue.Running, h.Queue.Waiting, h.Queue.Slots, h.Queue.Max = st.Running, st.Waiting, cfg.Slots, cfg.MaxQueue
	b, err := marshal(h)
	if err != nil {
		writeError(ctx, internalError(err))
		return
	}
	ctx.SetBody(b)
}

// tokenizeRequest is POST /tokenize's body, as llama.cpp's server takes
// it. Pointers tell absent fields from false ones.
type tokenizeRequest struct {
	Model        string  `json:"model"` // vLLM's; absent: the default model
	Content      *string `json:"content"`
	AddSpecial   bool    `json:"add_special"`
	ParseSpecial *bool   `json:"parse_special"`
	WithPieces   bool    `json:"with_pieces"`
}

// tokenize is POST /tokenize: {"content": "...", "add_special": false,
// "parse_special": true, "with_pieces": false} answered with {"tokens":
// [ids]}, or with pieces {"tokens": [{"id": 1, "piece": "..."}]} where a
// piece that is not whole UTF-8 (a byte of a split character) is a list
// of byte values, as llama.cpp's server answers. add_special adds BOS
// (and EOS) as a completion prompt gets them, so the count equals the
// prompt_tokens a /v1/completions request with the same text reports.
func (s *Server) tokenize(ctx *fasthttp.RequestCtx, r *req) {
	var body tokenizeRequest
	l := s.useBody(ctx, &body, func() string { return body.Model })
	if l == nil {
		return
	}
	defer l.release()
	m := l.m
	if body.Content == nil {
		writeError(ctx, badRequest("content", `content is required: {"content": "text to tokenize"}`))
		return
	}
	opts := tokenizer.EncodeOptions{ParseSpecial: body.ParseSpecial == nil || *body.ParseSpecial, AddSpecial: body.AddSpecial}
	ids := m.Tokenizer.EncodeWith(*body.Content, opts)
	b := make([]byte, 0, 16+len(ids)*8)
	b = append(b, `{"tokens":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		if !body.WithPieces {
			b = appendInt(b, int64(id))
			continue
		}
		b = append(b, `{"id":`...)
		b = appendInt(b, int64(id))
		b = append(b, `,"piece":`...)
		if p := m.Tokenizer.Piece(id); utf8.ValidString(p) {
			b = appendJSONString(b, p)
		} else {
			b = append(b, '[')
			for k := 0; k < len(p); k++ {
				if k > 0 {
					b = append(b, ',')
				}
				b = appendInt(b, int64(p[k]))
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// applyTemplate is POST /apply-template, as llama.cpp's server has it: a
// chat request's messages (with tools, chat_template_kwargs,
// add_generation_prompt and continue_final_message) answered with
// {"prompt": "..."}, the text the model's template makes of them: the
// prompt /v1/chat/completions would tokenize, shown as HuggingFace's
// apply_chat_template renders it (with the template's BOS text).
func (s *Server) applyTemplate(ctx *fasthttp.RequestCtx, r *req) {
	var body struct {
		Model    string          `json:"model"`
		Messages json.RawMessage `json:"messages"`
		chatFields
	}
	l := s.useBody(ctx, &body, func() string { return body.Model })
	if l == nil {
		return
	}
	defer l.release()
	text, err := chatText(l.m, body.Messages, &body.chatFields)
	if err != nil {
		writeError(ctx, err)
		return
	}
	b := append(make([]byte, 0, len(text)+16), `{"prompt":`...)
	b = appendJSONString(b, text)
	b = append(b, '}')
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// detokenize is POST /detokenize: {"tokens": [ids]} answered with
// {"content": "..."}, special tokens written out as their text (HF's
// decode with skip_special_tokens=False, llama.cpp's /detokenize).
func (s *Server) detokenize(ctx *fasthttp.RequestCtx, r *req) {
	var body struct {
		Model  string   `json:"model"`
		Tokens *[]int32 `json:"tokens"`
	}
	l := s.useBody(ctx, &body, func() string { return body.Model })
	if l == nil {
		return
	}
	defer l.release()
	m := l.m
	if body.Tokens == nil {
		writeError(ctx, badRequest("tokens", `tokens is required: {"tokens": [1, 2, 3]}`))
		return
	}
	ids := *body.Tokens
	for _, id := range ids {
		if id < 0 || int(id) >= m.Tokenizer.Len() {
			writeError(ctx, badRequest("tokens", "token id %d is outside the vocabulary [0, %d)", id, m.Tokenizer.Len()))
			return
		}
	}
	b := append([]byte(`{"content":`), appendJSONString(nil, m.Tokenizer.Decode(ids))...)
	b = append(b, '}')
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// useBody parses the request's JSON body into body and takes the model it
// names (model reads the name once the body is parsed); nil after it has
// answered an error.
func (s *Server) useBody(ctx *fasthttp.RequestCtx, body any, model func() string) *loaded {
	if err := parseBody(ctx.PostBody(), body); err != nil {
		writeError(ctx, err)
		return nil
	}
	l, e := s.use(ctx, model())
	if e != nil {
		writeError(ctx, e)
		return nil
	}
	return l
}
