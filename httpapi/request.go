package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"ringlm/chat"
	"ringlm/ringbuf"
	"ringlm/sample"
	"ringlm/tokenizer"
)

// Limits of one request that are not settings.
const (
	maxStops      = 16
	maxStopLen    = 512
	maxMessages   = 4096
	maxLogitBias  = ringbuf.MaxBias // the device's limit: engine.Submit refuses more
	maxCompLogLPs = 5               // the legacy completions API's logprobs maximum
)

// genRequest is the body of /v1/completions, /v1/chat/completions and
// /execute. Pointers tell absent fields from zero ones; polymorphic fields
// stay raw until the endpoint says what they may be. Unknown fields are
// ignored, as OpenAI clients send fields (user, metadata, …) that do not
// change generation.
type genRequest struct {
	Model               string             `json:"model"`
	Prompt              json.RawMessage    `json:"prompt"`
	Messages            json.RawMessage    `json:"messages"`
	MaxTokens           *int64             `json:"max_tokens"`
	MaxCompletionTokens *int64             `json:"max_completion_tokens"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	TopK                *int64             `json:"top_k"`
	MinP                *float64           `json:"min_p"`
	Seed                *int64             `json:"seed"`
	Stop                json.RawMessage    `json:"stop"`
	N                   *int64             `json:"n"`
	Stream              bool               `json:"stream"`
	StreamOptions       *streamOptions     `json:"stream_options"`
	Logprobs            json.RawMessage    `json:"logprobs"`
	TopLogprobs         *int64             `json:"top_logprobs"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	RepetitionPenalty   *float64           `json:"repetition_penalty"` // vLLM's name
	RepeatPenalty       *float64           `json:"repeat_penalty"`     // llama.cpp's name
	RepeatLastN         *int64             `json:"repeat_last_n"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	IgnoreEOS           bool               `json:"ignore_eos"`
	Echo                bool               `json:"echo"`
	BestOf              *int64             `json:"best_of"`
	Suffix              *string            `json:"suffix"`
	chatFields
}

// chatFields are the chat request's fields that say how its messages
// become the prompt: the OpenAI tools, and vLLM's template controls.
type chatFields struct {
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	// ChatTemplateKwargs are further template variables (vLLM's name), such
	// as {"enable_thinking": false}.
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
	// AddGenerationPrompt and ContinueFinalMessage are apply_chat_template's
	// switches (vLLM's names); left out, a conversation that ends with an
	// assistant message continues it (a prefill, as llama.cpp does) and
	// any other gets the generation prompt.
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
	ContinueFinalMessage *bool `json:"continue_final_message"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// parseBody decodes a request body, refusing what encoding/json would
// silently repair: invalid UTF-8 becomes U+FFFD there.
func parseBody(body []byte, dst any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return decodeError(errEOF)
	}
	if !utf8.Valid(body) {
		off := 0
		for off < len(body) {
			r, size := utf8.DecodeRune(body[off:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			off += size
		}
		return badRequest("", "the request body is not valid UTF-8 (first bad byte at offset %d)", off)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return decodeError(err)
	}
	return nil
}

// newJob checks a parsed request against the model (l, which use found
// by the request's model field) and the limits and builds the job:
// prompts in token ids and sampling parameters.
func (s *Server) newJob(l *loaded, k kind, rq *genRequest, r *req) (*job, *apiError) {
	m := l.m
	j := &job{s: s, m: m, met: l.met, kind: k, id: r.id, created: time.Now().Unix(), model: m.Name, log: r.log, start: r.start,
		stream: rq.Stream || k == kindExecute, ignEOS: rq.IgnoreEOS}
	if rq.Model != "" {
		j.model = rq.Model
	}
	if rq.Echo {
		return nil, badRequest("echo", "echo is not supported")
	}
	if rq.Suffix != nil && *rq.Suffix != "" {
		return nil, badRequest("suffix", "suffix is not supported")
	}
	if rq.StreamOptions != nil {
		if !rq.Stream {
			return nil, badRequest("stream_options", "stream_options is only allowed when stream is true")
		}
		j.usage = rq.StreamOptions.IncludeUsage
	}

	// Prompt.
	tok := m.Tokenizer
	switch {
	case k == kindChat || (k == kindExecute && len(rq.Messages) > 0):
		if len(rq.Prompt) > 0 && k == kindExecute {
			return nil, badRequest("messages", "give either prompt or messages, not both")
		}
		text, err := chatText(m, rq.Messages, &rq.chatFields)
		if err != nil {
			return nil, err
		}
		text = m.Chat.StripBOS(text, tok.Vocab().AddBOS)
		j.prompts = [][]int32{tok.EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: true, AddSpecial: true})}
	default:
		ps, err := parsePrompt(tok, rq.Prompt)
		if err != nil {
			return nil, err
		}
		j.prompts, j.prime = ps, true
	}
	for _, p := range j.prompts {
		if len(p) == 0 {
			return nil, badRequest("prompt", "the prompt is empty")
		}
		if len(p) >= m.Context {
			return nil, &apiError{Status: 400, Type: "invalid_request_error", Param: "prompt", Code: "context_length_exceeded",
				Message: "this model's maximum context length is " + itoa(m.Context) + " tokens, but the prompt has " + itoa(len(p)) + " tokens"}
		}
	}

	// Choices.
	j.n = 1
	if rq.N != nil {
		if *rq.N < 1 || *rq.N > int64(s.cfg.MaxChoices) {
			return nil, badRequest("n", "n must be between 1 and %d, got %d", s.cfg.MaxChoices, *rq.N)
		}
		j.n = int(*rq.N)
	}
	if k == kindExecute && j.n != 1 {
		return nil, badRequest("n", "/execute generates one sequence; use n = 1")
	}
	if rq.BestOf != nil && *rq.BestOf != int64(j.n) {
		return nil, badRequest("best_of", "best_of is not supported (it must equal n)")
	}
	if len(j.prompts)*j.n > s.cfg.MaxChoices {
		return nil, badRequest("n", "%d prompts × n = %d exceeds the limit of %d sequences per request", len(j.prompts), len(j.prompts)*j.n, s.cfg.MaxChoices)
	}

	p, err := s.sampling(m, k, rq, j)
	if err != nil {
		return nil, err
	}
	j.params = p
	return j, nil
}

// sampling maps the request's sampling fields onto sample.Params, over
// the model's defaults.
func (s *Server) sampling(m *Model, k kind, rq *genRequest, j *job) (sample.Params, *apiError) {
	p := sample.Defaults()
	if d := m.Defaults; d != nil {
		p = d.Params
		p.StopStrings = slices.Clone(p.StopStrings)
		j.seeded = d.Seeded
	}
	f32 := func(dst *float32, v *float64) {
		if v != nil {
			*dst = float32(*v)
			if math.IsInf(float64(*dst), 0) && !math.IsInf(*v, 0) {
				*dst = float32(math.NaN()) // overflowed: let Validate name it
			}
		}
	}
	f32(&p.Temperature, rq.Temperature)
	f32(&p.TopP, rq.TopP)
	f32(&p.MinP, rq.MinP)
	f32(&p.PresencePenalty, rq.PresencePenalty)
	f32(&p.FrequencyPenalty, rq.FrequencyPenalty)
	f32(&p.RepeatPenalty, rq.RepetitionPenalty)
	f32(&p.RepeatPenalty, rq.RepeatPenalty)
	if rq.TopK != nil {
		// vLLM and llama.cpp use -1 for "off".
		switch {
		case *rq.TopK == -1:
			p.TopK = 0
		case *rq.TopK < 0 || *rq.TopK > math.MaxInt32:
			return p, badRequest("top_k", "top_k must be >= 0 (0 or -1 = off), got %d", *rq.TopK)
		default:
			p.TopK = int(*rq.TopK)
		}
	}
	if rq.RepeatLastN != nil {
		if *rq.RepeatLastN < -1 || *rq.RepeatLastN > math.MaxInt32 {
			return p, badRequest("repeat_last_n", "repeat_last_n must be >= -1, got %d", *rq.RepeatLastN)
		}
		p.RepeatLastN = int(*rq.RepeatLastN)
	}
	if rq.Seed != nil {
		p.Seed, j.seeded = uint64(*rq.Seed), true
	}

	// Length: the prompt and the new tokens must fit the context.
	maxTok := rq.MaxTokens
	param := "max_tokens"
	if rq.MaxCompletionTokens != nil {
		maxTok, param = rq.MaxCompletionTokens, "max_completion_tokens"
	}
	longest := 0
	for _, pr := range j.prompts {
		longest = max(longest, len(pr))
	}
	room := m.Context - longest
	if maxTok == nil {
		limit := s.cfg.MaxTokens
		if p.MaxTokens > 0 { // the model's num_predict
			limit = min(limit, p.MaxTokens)
		}
		p.MaxTokens = min(limit, room)
	} else {
		n := *maxTok
		switch {
		case n < 1:
			return p, badRequest(param, "%s must be at least 1, got %d", param, n)
		case n > int64(s.cfg.MaxTokens):
			return p, badRequest(param, "%s must be at most %d (the server's --max-tokens), got %d", param, s.cfg.MaxTokens, n)
		case n > int64(room):
			return p, &apiError{Status: 400, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded",
				Message: "this model's maximum context length is " + itoa(m.Context) + " tokens, but " + itoa(longest) +
					" prompt tokens + " + strconv.FormatInt(n, 10) + " tokens to generate exceed it; reduce the prompt or " + param}
		}
		p.MaxTokens = int(n)
	}

	stops, err := parseStop(rq.Stop)
	if err != nil {
		return p, err
	}
	if stops != nil { // else the model's, if any
		p.StopStrings = stops
	}

	if len(rq.LogitBias) > maxLogitBias {
		return p, badRequest("logit_bias", "at most %d logit_bias entries", maxLogitBias)
	}
	if len(rq.LogitBias) > 0 {
		p.LogitBias = make(map[int32]float32, len(rq.LogitBias))
		for key, v := range rq.LogitBias {
			id, err := strconv.ParseInt(key, 10, 32)
			if err != nil {
				return p, badRequest("logit_bias", "logit_bias keys must be token ids, got %q", key)
			}
			p.LogitBias[int32(id)] = float32(v)
		}
	}

	if err := s.logprobs(k, rq, &p); err != nil {
		return p, err
	}
	j.lp, j.top = p.Logprobs, p.TopLogprobs
	if err := p.Validate(m.Engine.Config().Vocab); err != nil {
		return p, submitError(err)
	}
	return p, nil
}

// logprobs reads `logprobs`: an integer (0–5 alternatives) in the legacy
// completions API, a boolean with `top_logprobs` (0–20 alternatives) in
// chat and /execute. The alternatives come from the device with each
// token (sample.Params.TopLogprobs).
func (s *Server) logprobs(k kind, rq *genRequest, p *sample.Params) *apiError {
	raw := bytes.TrimSpace(rq.Logprobs)
	if len(raw) == 0 || string(raw) == "null" {
		if rq.TopLogprobs != nil && *rq.TopLogprobs > 0 {
			return badRequest("top_logprobs", "top_logprobs requires logprobs to be true")
		}
		return nil
	}
	top := int64(0)
	if k == kindCompletion {
		if err := json.Unmarshal(raw, &top); err != nil {
			return badRequest("logprobs", "invalid type for \"logprobs\": expected an integer (0 to %d) or null", maxCompLogLPs)
		}
		if top < 0 || top > maxCompLogLPs {
			return badRequest("logprobs", "logprobs must be between 0 and %d, got %d", maxCompLogLPs, top)
		}
		p.Logprobs = true
	} else {
		var on bool
		if err := json.Unmarshal(raw, &on); err != nil {
			return badRequest("logprobs", "invalid type for \"logprobs\": expected a boolean")
		}
		p.Logprobs = on
		if rq.TopLogprobs != nil {
			top = *rq.TopLogprobs
			if top < 0 || top > sample.MaxTopLogprobs {
				return badRequest("top_logprobs", "top_logprobs must be between 0 and %d, got %d", sample.MaxTopLogprobs, top)
			}
			if top > 0 && !on {
				return badRequest("top_logprobs", "top_logprobs requires logprobs to be true")
			}
		}
	}
	p.TopLogprobs = int(top)
	return nil
}

// parsePrompt accepts OpenAI's prompt forms: a string, an array of
// strings, an array of token ids, or an array of arrays of token ids.
func parsePrompt(tok *tokenizer.Tokenizer, raw json.RawMessage) ([][]int32, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("prompt", "prompt is required")
	}
	encode := func(s string) []int32 {
		return tok.EncodeWith(s, tokenizer.EncodeOptions{ParseSpecial: true, AddSpecial: true})
	}
	checkIDs := func(ids []int32) *apiError {
		for _, id := range ids {
			if id < 0 || int(id) >= tok.Len() {
				return badRequest("prompt", "prompt token id %d is outside the vocabulary [0, %d)", id, tok.Len())
			}
		}
		return nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, decodeError(err)
		}
		return [][]int32{encode(s)}, nil
	case '[':
		var strs []string
		if json.Unmarshal(raw, &strs) == nil {
			if len(strs) == 0 {
				return nil, badRequest("prompt", "the prompt array is empty")
			}
			out := make([][]int32, len(strs))
			for i, s := range strs {
				out[i] = encode(s)
			}
			return out, nil
		}
		var ids []int32
		if json.Unmarshal(raw, &ids) == nil {
			if len(ids) == 0 {
				return nil, badRequest("prompt", "the prompt array is empty")
			}
			return [][]int32{ids}, checkIDs(ids)
		}
		var batches [][]int32
		if json.Unmarshal(raw, &batches) == nil && len(batches) > 0 {
			for _, ids := range batches {
				if err := checkIDs(ids); err != nil {
					return nil, err
				}
			}
			return batches, nil
		}
	}
	return nil, badRequest("prompt", "invalid type for \"prompt\": expected a string, an array of strings, an array of token ids or an array of arrays of token ids")
}

// parseStop accepts a string or an array of strings.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var stops []string
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, decodeError(err)
		}
		stops = []string{s}
	} else if err := json.Unmarshal(raw, &stops); err != nil {
		return nil, badRequest("stop", "invalid type for \"stop\": expected a string or an array of strings")
	}
	if len(stops) > maxStops {
		return nil, badRequest("stop", "at most %d stop strings, got %d", maxStops, len(stops))
	}
	for _, s := range stops {
		if s == "" {
			return nil, badRequest("stop", "stop strings must not be empty")
		}
		if len(s) > maxStopLen {
			return nil, badRequest("stop", "stop strings must be at most %d bytes", maxStopLen)
		}
	}
	return stops, nil
}

// Limits of a chat request's tools.
const (
	maxTools    = 128
	maxToolVars = 64
)

// chatText renders messages with the model's template. Special-token text
// in the rendering is parsed as those tokens when it is tokenized. Errors
// name the field at fault; a template that refuses the conversation
// (raise_exception, or a message it cannot show) is a 400 saying why.
func chatText(m *Model, raw json.RawMessage, f *chatFields) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", badRequest("messages", "messages is required")
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		if e := decodeError(err); e.Param != "" {
			e.Param = "messages" + e.Param
			return "", e
		}
		return "", badRequest("messages", "invalid type for \"messages\": expected an array of {role, content} objects")
	}
	if len(msgs) == 0 {
		return "", badRequest("messages", "messages must not be empty")
	}
	if len(msgs) > maxMessages {
		return "", badRequest("messages", "at most %d messages", maxMessages)
	}
	if m.Chat == nil {
		msg := "the model has no usable chat template"
		if m.ChatErr != nil {
			msg += ": " + m.ChatErr.Error()
		}
		return "", badRequest("messages", "%s; start the server with --chat-template or --chat-template-file, or use /v1/completions", msg)
	}
	r := chat.Request{Messages: make([]chat.Message, len(msgs))}
	for i, mm := range msgs {
		msg, err := chat.ParseMessage(mm)
		if err != nil {
			param, text := "messages["+itoa(i)+"]", err.Error()
			var fe *chat.FieldError
			if errors.As(err, &fe) {
				if fe.Field != "" {
					param += "." + fe.Field
				}
				text = fe.Msg
			}
			return "", badRequest(param, "%s: %s", param, text)
		}
		switch msg.Role {
		case "system", "user", "assistant", "tool":
		default:
			return "", badRequest("messages", "messages[%d].role must be system, developer, user, assistant or tool, got %q", i, msg.Role)
		}
		r.Messages[i] = msg
	}
	if err := checkTools(f.Tools); err != nil {
		return "", err
	}
	if string(bytes.TrimSpace(f.ToolChoice)) != `"none"` {
		r.Tools = f.Tools
	}
	if len(f.ChatTemplateKwargs) > maxToolVars {
		return "", badRequest("chat_template_kwargs", "at most %d template variables", maxToolVars)
	}
	r.Vars = f.ChatTemplateKwargs
	last := r.Messages[len(r.Messages)-1]
	switch {
	case f.AddGenerationPrompt != nil || f.ContinueFinalMessage != nil:
		r.ContinueFinal = f.ContinueFinalMessage != nil && *f.ContinueFinalMessage
		r.AddGenerationPrompt = !r.ContinueFinal
		if f.AddGenerationPrompt != nil {
			r.AddGenerationPrompt = *f.AddGenerationPrompt
		}
	case last.Role == "assistant" && !last.Null:
		r.ContinueFinal = true
	default:
		r.AddGenerationPrompt = true
	}
	text, err := m.Chat.Apply(r)
	if err != nil {
		return "", badRequest("messages", "%s", err.Error())
	}
	return text, nil
}

// checkTools accepts the OpenAI tools field: absent, null, or an array of
// {"type": "function", "function": {"name": ...}} objects.
func checkTools(raw json.RawMessage) *apiError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var tools []struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return badRequest("tools", "invalid type for \"tools\": expected an array of {\"type\": \"function\", \"function\": {...}} objects")
	}
	if len(tools) > maxTools {
		return badRequest("tools", "at most %d tools", maxTools)
	}
	for i, t := range tools {
		if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return badRequest("tools", "tools[%d] must be {\"type\": \"function\", \"function\": {\"name\": ...}}", i)
		}
	}
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }
