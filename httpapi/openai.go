package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"

	"ringlm/engine"
)

func (s *Server) completions(ctx *fasthttp.RequestCtx, r *req) { s.generate(ctx, r, kindCompletion) }

func (s *Server) chatCompletions(ctx *fasthttp.RequestCtx, r *req) { s.generate(ctx, r, kindChat) }

// generate is the common path of the generation endpoints: parse, submit,
// then answer with one JSON body or an SSE stream.
func (s *Server) generate(ctx *fasthttp.RequestCtx, r *req, k kind) {
	if s.draining.Load() {
		writeError(ctx, errDraining)
		return
	}
	var rq genRequest
	if err := parseBody(ctx.PostBody(), &rq); err != nil {
		writeError(ctx, err)
		return
	}
	l, err := s.use(ctx, rq.Model)
	if err != nil {
		writeError(ctx, err)
		return
	}
	// Held until the answer is written: it reads the tokenizer. A stream
	// hands it to its body.
	held := true
	defer func() {
		if held {
			l.release()
		}
	}()
	j, err := s.newJob(l, k, &rq, r)
	if err != nil {
		writeError(ctx, err)
		return
	}
	j.ctx, j.cancel = contextWithCancelCause()
	if err := j.submit(); err != nil {
		j.cancel(errJobDone)
		writeError(ctx, err)
		return
	}
	untrack := s.track(j)
	conn := ctx.Conn()
	method := string(ctx.Method())

	if !j.stream {
		stopWatch := j.watch(conn)
		runErr := j.run(collector{j})
		stopWatch()
		untrack()
		if runErr != nil {
			// Nobody to answer; 499 (nginx's "client closed request")
			// marks it in the access log and metrics.
			j.gone(errClientGone)
			ctx.SetStatusCode(499)
			ctx.SetConnectionClose()
			return
		}
		j.cancel(errJobDone)
		if e := j.firstError(); e != nil {
			writeError(ctx, e)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(j.responseJSON())
		return
	}

	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
	// Send headers at once: clients learn that the request was accepted
	// before the first token, which may wait behind the queue.
	ctx.Response.ImmediateHeaderFlush = true
	held = false
	ctx.SetBodyStream(&sseBody{s: s, j: j, k: k, r: r, conn: conn, method: method, untrack: untrack, release: l.release}, -1)
}

// sseBody is a streaming response body that fasthttp's connection
// goroutine writes itself (fasthttp.BodyWriterTo): each batch of tokens
// becomes SSE events in one chunk, flushed to the socket by that
// goroutine. SetBodyStreamWriter would run the writer on a goroutine of
// its own and pass every event through an in-memory pipe to the
// connection goroutine: two goroutine hand-offs per event, which under a
// burst of tokens from a large batch cost most of the per-token latency
// (bench/RESULTS.md, "HTTP API").
type sseBody struct {
	s       *Server
	j       *job
	k       kind
	r       *req
	conn    net.Conn
	method  string
	untrack func()
	release func() // the model, once the body is written
	ran     bool
}

func (b *sseBody) SupportsBodyWriteTo() bool { return true }

// WriteTo streams the job into w, where every write is one chunk. An
// error (the client went away) makes fasthttp close the connection.
func (b *sseBody) WriteTo(w io.Writer) (int64, error) {
	b.ran = true
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 4<<10)
	stopWatch := b.j.watch(b.conn)
	note, err := b.j.streamSSE(bw, b.k)
	stopWatch()
	b.untrack()
	b.release()
	b.s.logDone(b.r, fasthttp.StatusOK, b.method, note)
	return cw.n, err
}

// Read exists because a body stream must be an io.Reader; fasthttp uses
// WriteTo for chunked bodies, so this only runs if that ever changes,
// and then ends the body rather than hang.
func (b *sseBody) Read([]byte) (int, error) { return 0, io.EOF }

// Close runs after the response; a body that never ran (the connection
// failed before it) still releases its request.
func (b *sseBody) Close() error {
	if !b.ran {
		b.ran = true
		b.j.gone(errClientGone)
		b.untrack()
		b.release()
		b.s.logDone(b.r, fasthttp.StatusOK, b.method, "never sent")
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// streamSSE writes a job as SSE and returns how it ended, for the access
// log, and an error when the client went away.
func (j *job) streamSSE(w *bufio.Writer, k kind) (string, error) {
	var sk sink
	switch k {
	case kindExecute:
		sk = newExecSink(j, w)
	default:
		sk = newChunkSink(j, w)
	}
	if err := j.run(sk); err != nil {
		j.gone(errClientGone)
		return "client gone: " + err.Error(), err
	}
	j.cancel(errJobDone)
	if fs, ok := sk.(interface{ finish() error }); ok {
		if err := fs.finish(); err != nil {
			return "client gone at the end", err
		}
	}
	if e := j.firstError(); e != nil {
		return "error: " + e.Message, nil
	}
	return "done", nil
}

// collector keeps output for a JSON response.
type collector struct{ j *job }

func (k collector) token(c *choice, text string, t engine.Token) error {
	if k.j.lp {
		c.lps = append(c.lps, tokLP{token: tokenText(k.j.m.Tokenizer, t.ID), logprob: t.Logprob, offset: c.offset, top: t.Top()})
	}
	c.text = append(c.text, text...)
	return nil
}

func (collector) done(c *choice, tail string) error {
	c.text = append(c.text, tail...)
	return nil
}

func (collector) flush() error { return nil }

// jfloat is a logprob for encoding/json: -Inf (a token the filters ruled
// out) has no JSON form and becomes null.
type jfloat float32

func (f jfloat) MarshalJSON() ([]byte, error) { return appendFloat32(nil, float32(f)), nil }

type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completionLogprobs struct {
	Tokens        []string `json:"tokens"`
	TokenLogprobs []jfloat `json:"token_logprobs"`
	TopLogprobs   []topMap `json:"top_logprobs"` // null unless logprobs > 0
	TextOffset    []int    `json:"text_offset"`
}

// topMap is one position of the legacy API's top_logprobs: an object
// {text: logprob} of the alternatives, most likely first, and the chosen
// token (OpenAI: "up to logprobs+1 elements"). Two alternatives with the
// same text keep the first, more likely one: a JSON object has one value
// per key.
type topMap struct {
	j  *job
	lp *tokLP
}

func (m topMap) MarshalJSON() ([]byte, error) { return m.j.appendTopMap(nil, m.lp), nil }

type chatLogprob struct {
	Token       string           `json:"token"`
	Logprob     jfloat           `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

// chatTopLogprob is one of chat's top_logprobs.
type chatTopLogprob struct {
	Token   string `json:"token"`
	Logprob jfloat `json:"logprob"`
	Bytes   []int  `json:"bytes"`
}

type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type choiceJSON struct {
	Index        int                 `json:"index"`
	Text         *string             `json:"text,omitempty"`
	Message      *chatMessage        `json:"message,omitempty"`
	Logprobs     any                 `json:"logprobs"`
	FinishReason string              `json:"finish_reason"`
	compLP       *completionLogprobs // typed views of Logprobs
}

type responseJSON struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []choiceJSON `json:"choices"`
	Usage             usageJSON    `json:"usage"`
}

func (j *job) responseJSON() []byte {
	resp := responseJSON{ID: j.responseID(), Object: "text_completion", Created: j.created, Model: j.model,
		SystemFingerprint: j.m.Fingerprint, Choices: make([]choiceJSON, len(j.choices))}
	if j.kind == kindChat {
		resp.Object = "chat.completion"
	}
	for i, c := range j.choices {
		cj := choiceJSON{Index: c.index, FinishReason: c.finish}
		text := string(c.text)
		if j.kind == kindChat {
			cj.Message = &chatMessage{Role: "assistant", Content: text}
			if j.lp {
				lp := chatLogprobs{Content: make([]chatLogprob, 0, len(c.lps))}
				for _, t := range c.lps {
					top := make([]chatTopLogprob, len(t.top))
					for i, a := range t.top {
						text := tokenText(j.m.Tokenizer, a.Token)
						top[i] = chatTopLogprob{Token: text, Logprob: jfloat(a.Logprob), Bytes: byteInts(text)}
					}
					lp.Content = append(lp.Content, chatLogprob{Token: t.token, Logprob: jfloat(t.logprob), Bytes: byteInts(t.token), TopLogprobs: top})
				}
				cj.Logprobs = lp
			}
		} else {
			cj.Text = &text
			if j.lp {
				// Lists, never null (an answer with no token has empty ones).
				lp := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []jfloat{}, TextOffset: []int{}}
				if j.top > 0 {
					lp.TopLogprobs = []topMap{}
				}
				for i := range c.lps {
					t := &c.lps[i]
					lp.Tokens = append(lp.Tokens, t.token)
					lp.TokenLogprobs = append(lp.TokenLogprobs, jfloat(t.logprob))
					lp.TextOffset = append(lp.TextOffset, t.offset)
					if j.top > 0 {
						lp.TopLogprobs = append(lp.TopLogprobs, topMap{j, t})
					}
				}
				cj.Logprobs = lp
			}
		}
		resp.Choices[i] = cj
	}
	p, c := j.usageCounts()
	resp.Usage = usageJSON{p, c, p + c}
	b, err := marshal(resp)
	if err != nil {
		// Every value above is marshalable; this is a bug, not input.
		return appendError(nil, internalError(err))
	}
	return b
}

// marshal is json.Marshal without HTML escaping: generated text full of
// \u003c is valid but hard to read in logs and curl output.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func byteInts(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}

func (j *job) responseID() string {
	if j.kind == kindChat {
		return "chatcmpl-" + j.id
	}
	return "cmpl-" + j.id
}

// chunkSink writes OpenAI SSE chunks. Each chunk is appended by hand into
// one reused buffer; the part before the choice index is built once.
type chunkSink struct {
	j    *job
	w    *bufio.Writer
	head []byte // `data: {"id":…,"choices":[{"index":`
	buf  []byte
	err  error
}

func newChunkSink(j *job, w *bufio.Writer) *chunkSink {
	obj := "text_completion"
	if j.kind == kindChat {
		obj = "chat.completion.chunk"
	}
	h := append([]byte(nil), `data: {"id":`...)
	h = appendJSONString(h, j.responseID())
	h = append(h, `,"object":"`...)
	h = append(h, obj...)
	h = append(h, `","created":`...)
	h = appendInt(h, j.created)
	h = append(h, `,"model":`...)
	h = appendJSONString(h, j.model)
	h = append(h, `,"system_fingerprint":`...)
	h = appendJSONString(h, j.m.Fingerprint)
	h = append(h, `,"choices":[{"index":`...)
	s := &chunkSink{j: j, w: w, head: h, buf: make([]byte, 0, 512)}
	if j.kind == kindChat {
		// OpenAI opens every chat choice with the assistant role.
		for _, c := range j.choices {
			s.chunk(c, deltaRole, "", "", nil)
		}
		s.err = s.flush()
	}
	return s
}

// Kinds of choice body in a chunk.
const (
	deltaText  = iota // the text (completions) or delta.content (chat)
	deltaRole         // chat's opening delta
	deltaEmpty        // the closing chunk with finish_reason
)

// chunk writes one chunk for choice c.
func (s *chunkSink) chunk(c *choice, mode int, text, finish string, lp *tokLP) {
	chat := s.j.kind == kindChat
	b := append(s.buf[:0], s.head...)
	b = appendInt(b, int64(c.index))
	switch {
	case mode == deltaRole:
		b = append(b, `,"delta":{"role":"assistant","content":""}`...)
	case mode == deltaEmpty && chat:
		b = append(b, `,"delta":{}`...)
	case chat:
		b = append(b, `,"delta":{"content":`...)
		b = appendJSONString(b, text)
		b = append(b, '}')
	default:
		b = append(b, `,"text":`...)
		b = appendJSONString(b, text)
	}
	b = s.appendLogprobs(b, lp)
	b = append(b, `,"finish_reason":`...)
	b = appendNullString(b, finish)
	b = append(b, "}]"...)
	if s.j.usage {
		b = append(b, `,"usage":null`...)
	}
	b = append(b, "}\n\n"...)
	s.buf = b
	s.write(b)
}

func (s *chunkSink) write(b []byte) {
	if s.err == nil {
		_, s.err = s.w.Write(b)
	}
}

func (s *chunkSink) appendLogprobs(b []byte, lp *tokLP) []byte {
	b = append(b, `,"logprobs":`...)
	if lp == nil {
		return append(b, "null"...)
	}
	if s.j.kind == kindChat {
		b = append(b, `{"content":[{"token":`...)
		b = appendJSONString(b, lp.token)
		b = append(b, `,"logprob":`...)
		b = appendFloat32(b, lp.logprob)
		b = append(b, `,"bytes":`...)
		b = appendByteArray(b, lp.token)
		b = append(b, `,"top_logprobs":[`...)
		for i, a := range lp.top {
			if i > 0 {
				b = append(b, ',')
			}
			text := tokenText(s.j.m.Tokenizer, a.Token)
			b = append(b, `{"token":`...)
			b = appendJSONString(b, text)
			b = append(b, `,"logprob":`...)
			b = appendFloat32(b, a.Logprob)
			b = append(b, `,"bytes":`...)
			b = appendByteArray(b, text)
			b = append(b, '}')
		}
		return append(b, "]}]}"...)
	}
	b = append(b, `{"tokens":[`...)
	b = appendJSONString(b, lp.token)
	b = append(b, `],"token_logprobs":[`...)
	b = appendFloat32(b, lp.logprob)
	b = append(b, `],"top_logprobs":`...)
	if s.j.top > 0 {
		b = append(b, '[')
		b = s.j.appendTopMap(b, lp)
		b = append(b, ']')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"text_offset":[`...)
	b = appendInt(b, int64(lp.offset))
	return append(b, "]}"...)
}

// appendTopMap writes one position of the legacy API's top_logprobs (see
// topMap).
func (j *job) appendTopMap(b []byte, lp *tokLP) []byte {
	var seen [maxCompLogLPs + 1]string
	n := 0
	add := func(text string, logprob float32) {
		for _, s := range seen[:n] {
			if s == text {
				return
			}
		}
		if n < len(seen) {
			seen[n] = text
			n++
		}
		if n > 1 {
			b = append(b, ',')
		}
		b = appendJSONString(b, text)
		b = append(b, ':')
		b = appendFloat32(b, logprob)
	}
	b = append(b, '{')
	for _, a := range lp.top[:min(len(lp.top), maxCompLogLPs)] {
		add(tokenText(j.m.Tokenizer, a.Token), a.Logprob)
	}
	add(lp.token, lp.logprob)
	return append(b, '}')
}

func (s *chunkSink) token(c *choice, text string, t engine.Token) error {
	var lp *tokLP
	if s.j.lp {
		lp = &tokLP{token: tokenText(s.j.m.Tokenizer, t.ID), logprob: t.Logprob, offset: c.offset, top: t.Top()}
	}
	s.chunk(c, deltaText, text, "", lp)
	return s.err
}

func (s *chunkSink) done(c *choice, tail string) error {
	if tail != "" {
		s.chunk(c, deltaText, tail, "", nil)
	}
	if c.err != nil {
		b := append(s.buf[:0], "data: "...)
		b = appendError(b, c.err)
		b = append(b, "\n\n"...)
		s.buf = b
		s.write(b)
		return s.err
	}
	s.chunk(c, deltaEmpty, "", c.finish, nil)
	return s.err
}

func (s *chunkSink) flush() error {
	if s.err != nil {
		return s.err
	}
	s.err = s.w.Flush()
	return s.err
}

// finish writes the usage chunk when asked for, then [DONE].
func (s *chunkSink) finish() error {
	if s.j.usage {
		p, c := s.j.usageCounts()
		b := append(s.buf[:0], s.head[:len(s.head)-len(`[{"index":`)]...)
		b = append(b, `[],"usage":{"prompt_tokens":`...)
		b = appendInt(b, int64(p))
		b = append(b, `,"completion_tokens":`...)
		b = appendInt(b, int64(c))
		b = append(b, `,"total_tokens":`...)
		b = appendInt(b, int64(p+c))
		b = append(b, "}}\n\n"...)
		s.buf = b
		s.write(b)
	}
	s.write([]byte("data: [DONE]\n\n"))
	return s.flush()
}

// models is GET /v1/models: every model served. With several, each
// says whether it is the loaded one, and max_model_len is there once it
// has been loaded.
func (s *Server) models(ctx *fasthttp.RequestCtx, r *req) {
	b := []byte(`{"object":"list","data":[`)
	for i, m := range s.modelList() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendModel(b, m)
	}
	b = append(b, "]}"...)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func (s *Server) modelByID(ctx *fasthttp.RequestCtx, r *req) {
	name := string(ctx.Path()[len("/v1/models/"):])
	list := s.modelList()
	if len(list) == 0 {
		writeError(ctx, errLoading)
		return
	}
	if s.sw.Load() == nil {
		// One model: it answers to its aliases too.
		if l := s.cur.Load(); name == "" || l == nil || !l.m.Accepts(name) {
			writeError(ctx, errModelNotFound(name, []string{list[0].name}))
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(appendModel(nil, list[0]))
		return
	}
	names := make([]string, len(list))
	for i, m := range list {
		if m.name == name {
			ctx.SetContentType("application/json")
			ctx.SetBody(appendModel(nil, m))
			return
		}
		names[i] = m.name
	}
	writeError(ctx, errModelNotFound(name, names))
}

func appendModel(b []byte, m listedModel) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, m.name)
	b = append(b, `,"object":"model","created":`...)
	b = appendInt(b, m.created)
	b = append(b, `,"owned_by":"ringlm"`...)
	if m.context > 0 {
		b = append(b, `,"max_model_len":`...)
		b = appendInt(b, int64(m.context))
	}
	if m.multi {
		b = append(b, `,"loaded":`...)
		b = strconv.AppendBool(b, m.loaded)
	}
	return append(b, '}')
}
