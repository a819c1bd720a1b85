package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ServeRunOptions configure one load run.
type ServeRunOptions struct {
	URL    string // the endpoint's full URL (…/v1/completions or …/v1/chat/completions)
	Chat   bool   // send chat messages and read chat chunks
	Model  string // "" leaves the model field out
	APIKey string // sent as "Authorization: Bearer KEY" when set

	Requests []ServeRequest

	// Rate is requests per second (≤ 0 or +Inf: all due at once), with
	// gamma-distributed gaps of shape Burstiness (0 means 1).
	Rate, Burstiness float64
	// Concurrency caps the requests in flight (0: no cap). A request due
	// while the cap is reached waits for a free place; its send time is
	// when it goes out.
	Concurrency int
	Seed        int64

	Temperature *float64 // sent when set
	IgnoreEOS   bool     // sends "ignore_eos": true

	// Timeout bounds one request (0: none).
	Timeout time.Duration
	// Grace is how long requests in flight may go on once ctx ends (no
	// more are sent); after it, and at once when Abort closes, they are
	// cancelled and recorded as failed.
	Grace time.Duration
	Abort <-chan struct{}

	// Client sends the requests; nil makes one with an idle pool large
	// enough for the concurrency.
	Client *http.Client
	// Now is the clock of the measurements (nil: time.Now). It is called
	// once as a request is sent, once per streamed chunk that carries a token
	// and once when the stream ends, and nowhere else: pacing uses the
	// real clock.
	Now func() time.Time
	// Done, when set, is called as each request ends (from the request's
	// goroutine).
	Done func(ok bool)
}

// ServeRunResult is what RunServe measured.
type ServeRunResult struct {
	// Records of the requests sent, in request order (those sent are a
	// prefix of ServeRunOptions.Requests).
	Records []ServeRecord
	// Interrupted is set when ctx ended before every request finished.
	Interrupted bool
}

// RunServe sends the requests and measures them. Ending ctx stops sending;
// requests in flight get ServeRunOptions.Grace to finish.
func RunServe(ctx context.Context, o ServeRunOptions) (*ServeRunResult, error) {
	if len(o.Requests) == 0 {
		return nil, errors.New("no requests")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Client == nil {
		o.Client = NewHTTPClient(max(o.Concurrency, 0), len(o.Requests))
	}
	offsets := ArrivalOffsets(len(o.Requests), o.Rate, o.Burstiness, seededRand(o.Seed, randArrivals))

	reqCtx, cancelReqs := context.WithCancel(context.Background())
	defer cancelReqs()
	var sem chan struct{}
	if o.Concurrency > 0 {
		sem = make(chan struct{}, o.Concurrency)
	}
	raws := make([]serveRaw, len(o.Requests))
	var wg sync.WaitGroup
	start := time.Now()
	sent := 0
dispatch:
	for i := range o.Requests {
		if wait := time.Until(start.Add(offsets[i])); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				break dispatch
			}
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				break dispatch
			}
		}
		if ctx.Err() != nil {
			break
		}
		sent++
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			o.send(reqCtx, &o.Requests[i], &raws[i])
			if sem != nil {
				<-sem
			}
			if o.Done != nil {
				o.Done(raws[i].err == "")
			}
		}(i)
	}

	interrupted := sent < len(o.Requests)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		interrupted = true
		grace := time.NewTimer(o.Grace)
		select {
		case <-done:
		case <-grace.C:
		case <-o.Abort:
		}
		grace.Stop()
		cancelReqs()
		<-done
	}
	res := &ServeRunResult{Records: serveRecords(raws[:sent]), Interrupted: interrupted}
	return res, nil
}

// NewHTTPClient is a client whose idle pool keeps a connection for each
// request that may be in flight (concurrency, or every request without a
// cap). Compression is off: a gzipped stream would reach the reader in
// bursts.
func NewHTTPClient(concurrency, requests int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	pool := concurrency
	if pool <= 0 {
		pool = requests
	}
	pool = max(pool, 2)
	tr.MaxIdleConns = pool
	tr.MaxIdleConnsPerHost = pool
	tr.MaxConnsPerHost = 0
	tr.DisableCompression = true
	tr.IdleConnTimeout = 5 * time.Minute
	return &http.Client{Transport: tr}
}

// serveRaw is a request's measurements in clock readings.
type serveRaw struct {
	sent, end time.Time
	chunks    []time.Time
	prompt    int
	promptRep bool
	output    int
	outputRep bool
	err       string
}

func serveRecords(raws []serveRaw) []ServeRecord {
	recs := make([]ServeRecord, len(raws))
	if len(raws) == 0 {
		return recs
	}
	origin := raws[0].sent
	for _, r := range raws {
		if r.sent.Before(origin) {
			origin = r.sent
		}
	}
	for i, r := range raws {
		rec := ServeRecord{Sent: r.sent.Sub(origin), End: r.end.Sub(origin), Chunks: make([]time.Duration, len(r.chunks)),
			PromptTokens: r.prompt, PromptReported: r.promptRep, OutputTokens: r.output, OutputReported: r.outputRep, Err: r.err}
		for j, c := range r.chunks {
			rec.Chunks[j] = c.Sub(origin)
		}
		recs[i] = rec
	}
	return recs
}

type serveMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type serveStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type servePayload struct {
	Model         string             `json:"model,omitempty"`
	Prompt        string             `json:"prompt,omitempty"`
	Messages      []serveMessage     `json:"messages,omitempty"`
	MaxTokens     int                `json:"max_tokens"`
	Temperature   *float64           `json:"temperature,omitempty"`
	IgnoreEOS     bool               `json:"ignore_eos,omitempty"`
	Stream        bool               `json:"stream"`
	StreamOptions serveStreamOptions `json:"stream_options"`
}

// send makes one streaming request and records it into raw.
func (o *ServeRunOptions) send(ctx context.Context, rq *ServeRequest, raw *serveRaw) {
	raw.prompt = rq.InputLen
	p := servePayload{Model: o.Model, MaxTokens: rq.MaxTokens, Temperature: o.Temperature, IgnoreEOS: o.IgnoreEOS,
		Stream: true, StreamOptions: serveStreamOptions{IncludeUsage: true}}
	if o.Chat {
		p.Messages = []serveMessage{{Role: "user", Content: rq.Prompt}}
	} else {
		p.Prompt = rq.Prompt
	}
	body, err := json.Marshal(p)
	if err != nil { // cannot happen for these types
		raw.sent, raw.err = o.Now(), err.Error()
		raw.end = raw.sent
		return
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL, bytes.NewReader(body))
	if err != nil {
		raw.sent, raw.err = o.Now(), err.Error()
		raw.end = raw.sent
		return
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if o.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+o.APIKey)
	}

	raw.sent = o.Now()
	err = o.receive(hreq, raw)
	if raw.end.IsZero() {
		raw.end = o.Now()
	}
	if err == nil && len(raw.chunks) == 0 {
		err = errors.New("no streamed chunk carried a token, so there is no first token to time")
	}
	if err != nil {
		switch {
		case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			raw.err = fmt.Sprintf("timed out after %s (%v)", o.Timeout, err)
		case ctx.Err() != nil:
			raw.err = "interrupted: cancelled after the grace period"
		default:
			raw.err = flatLine(err.Error())
		}
	}
	if !raw.outputRep {
		raw.output = len(raw.chunks)
	}
}

// serveChunk is the part of a completions or chat completions chunk
// (or an error event) that the benchmark reads.
type serveChunk struct {
	Choices []struct {
		Text  *string `json:"text"`
		Delta *struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     *int `json:"prompt_tokens"`
		CompletionTokens *int `json:"completion_tokens"`
	} `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
}

// hasToken reports whether the chunk stands for generated tokens: it
// carries text, or it is a completions chunk with empty text and no
// finish_reason, which vLLM and ringlm stream for a token that makes no
// text (a special token under ignore_eos), as vLLM's completions client
// counts it. A chat chunk needs content: the first chunk of a chat stream
// has the role only.
func (c *serveChunk) hasToken() bool {
	for _, ch := range c.Choices {
		if ch.Text != nil && (*ch.Text != "" || ch.FinishReason == nil || *ch.FinishReason == "") {
			return true
		}
		if d := ch.Delta; d != nil {
			for _, s := range []*string{d.Content, d.ReasoningContent, d.Reasoning} {
				if s != nil && *s != "" {
					return true
				}
			}
		}
	}
	return false
}

func (c *serveChunk) finished() bool {
	for _, ch := range c.Choices {
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			return true
		}
	}
	return false
}

// errorText is the message of an error event, or "".
func (c *serveChunk) errorText() string {
	if len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) {
		return "error event: " + apiErrorMessage(c.Error)
	}
	if c.Object == "error" {
		return "error event: " + c.Message
	}
	return ""
}

// apiErrorMessage takes the message out of an OpenAI-shaped error body
// ({"error": {"message": …}}, {"error": "…"}, {"message": …}), else
// returns the body itself, shortened.
func apiErrorMessage(b []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &v) == nil {
		if len(v.Error) > 0 {
			return apiErrorMessage(v.Error)
		}
		if v.Message != "" {
			return v.Message
		}
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s
	}
	return cutText(flatLine(string(b)), 300)
}

// receive sends the request and reads its event stream into raw.
func (o *ServeRunOptions) receive(hreq *http.Request, raw *serveRaw) error {
	resp, err := o.Client.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		msg := apiErrorMessage(b)
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("the server did not stream (Content-Type %s)", ct)
	}
	br := bufio.NewReaderSize(resp.Body, 32<<10)
	var data, line []byte
	hasData, finished := false, false
	for {
		var rerr error
		line, rerr = readSSELine(br, line[:0])
		switch {
		case len(line) == 0 && rerr != nil: // nothing more
		case len(line) == 0: // a blank line ends an event
			if hasData {
				done, err := o.event(data, raw, &finished)
				if done {
					raw.end = o.Now()
					io.Copy(io.Discard, io.LimitReader(br, 64<<10)) // keeps the connection reusable
					return nil
				}
				if err != nil {
					return err
				}
			}
			data, hasData = data[:0], false
		case line[0] == ':': // a comment (keep-alive)
		case bytes.HasPrefix(line, []byte("data:")):
			v := line[5:]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, v...), true
		default: // event:, id:, retry: carry nothing the benchmark reads
		}
		if rerr == nil {
			continue
		}
		if !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("reading the stream: %w", rerr)
		}
		if hasData { // the last event lacks its blank line
			done, err := o.event(data, raw, &finished)
			if done {
				return nil
			}
			if err != nil {
				return err
			}
		}
		if finished { // no [DONE], but the choice ended cleanly
			return nil
		}
		return errors.New("the stream ended before data: [DONE]")
	}
}

// readSSELine appends the next line, without its line ending, to buf. At the
// end of the stream it returns what was left (maybe nothing) with the
// error.
func readSSELine(br *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		part, err := br.ReadSlice('\n')
		buf = append(buf, part...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		return buf, err
	}
}

// event handles one event's data; done reports [DONE].
func (o *ServeRunOptions) event(data []byte, raw *serveRaw, finished *bool) (done bool, err error) {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		return true, nil
	}
	var c serveChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, fmt.Errorf("a chunk is not JSON (%v): %s", err, cutText(string(data), 200))
	}
	if msg := c.errorText(); msg != "" {
		return false, errors.New(msg)
	}
	if c.hasToken() {
		raw.chunks = append(raw.chunks, o.Now())
	}
	if c.finished() {
		*finished = true
	}
	if u := c.Usage; u != nil {
		if u.PromptTokens != nil {
			raw.prompt, raw.promptRep = *u.PromptTokens, true
		}
		if u.CompletionTokens != nil {
			raw.output, raw.outputRep = *u.CompletionTokens, true
		}
	}
	return false, nil
}

func flatLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
