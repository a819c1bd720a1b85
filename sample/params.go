package sample

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// MaxTopLogprobs is the largest TopLogprobs accepted, as in the OpenAI API.
const MaxTopLogprobs = 20

// MaxLogitBias bounds a logit bias in magnitude, as in the OpenAI API. -100
// bans a token in practice: real logits span far less than 100.
const MaxLogitBias = 100

// Params are one request's sampling controls. The zero value is not valid
// (TopP 0 and RepeatPenalty 0 are out of range): start from Defaults.
type Params struct {
	// Temperature divides the logits before the filters; 0 means greedy
	// (argmax, no randomness).
	Temperature float32
	// TopK keeps the TopK most likely tokens; 0 turns it off.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP (nucleus sampling); 1 turns it off. In (0, 1].
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely one;
	// 0 turns it off. In [0, 1].
	MinP float32

	// RepeatPenalty (llama.cpp repeat_penalty) divides positive logits and
	// multiplies negative ones of every token among the last RepeatLastN
	// observed tokens, prompt included; 1 turns it off. Must be > 0.
	RepeatPenalty float32
	// RepeatLastN is the window of RepeatPenalty in tokens: 0 turns the
	// penalty off, -1 means the whole context.
	RepeatLastN int
	// PresencePenalty and FrequencyPenalty (OpenAI) subtract
	// presence + frequency*count from the logit of every token generated
	// count > 0 times so far (prompt excluded). In [-2, 2]; 0 turns them off.
	PresencePenalty  float32
	FrequencyPenalty float32
	// LogitBias is added to the logits of the given token ids before
	// anything else. Values in [-100, 100].
	LogitBias map[int32]float32

	// Seed keys the random draws. Requests with the same seed, parameters
	// and prompt produce the same tokens. A server should choose a fresh
	// seed when the client gives none, or every such request would agree.
	Seed uint64

	// MaxTokens bounds the generated tokens; 0 means no bound other than
	// the context. Enforced by the engine, not by Sampler.
	MaxTokens int
	// StopTokens end generation when sampled (the token is not emitted as
	// text). Enforced by the engine.
	StopTokens []int32
	// StopStrings end generation when they appear in the output text; see
	// StopMatcher.
	StopStrings []string

	// Logprobs asks for the sampled token's log probability; TopLogprobs
	// (0 to MaxTopLogprobs, requires Logprobs) for that many most likely
	// alternatives at each position.
	Logprobs    bool
	TopLogprobs int
}

// Defaults returns the neutral parameters: sampling from the model's own
// distribution at temperature 1 with every filter and penalty off, as the
// OpenAI API does when a field is omitted. RepeatLastN is llama.cpp's 64,
// which matters only once RepeatPenalty is set. Front ends that want
// llama.cpp's or Ollama's defaults (temperature 0.8, top_k 40, ...) overlay
// them.
func Defaults() Params {
	return Params{
		Temperature:   1,
		TopP:          1,
		RepeatPenalty: 1,
		RepeatLastN:   64,
	}
}

// ParamError is one out-of-range parameter. Param is its name in the HTTP
// APIs, so that a server can report it as is.
type ParamError struct {
	Param  string
	Reason string
}

func (e *ParamError) Error() string {
	return "sample: " + e.Param + " " + e.Reason
}

// Validate reports every out-of-range field against a vocabulary of vocab
// tokens, as *ParamError values joined with errors.Join (errors.As finds
// the first), or nil.
func (p Params) Validate(vocab int) error {
	var errs []error
	bad := func(param, format string, args ...any) {
		errs = append(errs, &ParamError{Param: param, Reason: fmt.Sprintf(format, args...)})
	}
	if vocab <= 0 {
		return fmt.Errorf("sample: vocabulary size must be positive, got %d", vocab)
	}
	finite := func(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

	switch t := p.Temperature; {
	case !finite(t):
		bad("temperature", "must be a finite number, got %v", t)
	case t < 0:
		bad("temperature", "must be >= 0, got %v", t)
	}
	if p.TopK < 0 {
		bad("top_k", "must be >= 0 (0 = off), got %d", p.TopK)
	}
	// NaN fails every comparison, so "!(in range)" rejects it too.
	if !(p.TopP > 0 && p.TopP <= 1) {
		bad("top_p", "must be in (0, 1] (1 = off), got %v", p.TopP)
	}
	if !(p.MinP >= 0 && p.MinP <= 1) {
		bad("min_p", "must be in [0, 1] (0 = off), got %v", p.MinP)
	}
	if !(p.RepeatPenalty > 0) || !finite(p.RepeatPenalty) {
		bad("repeat_penalty", "must be a finite number > 0 (1 = off), got %v", p.RepeatPenalty)
	}
	if p.RepeatLastN < -1 {
		bad("repeat_last_n", "must be >= -1 (0 = off, -1 = whole context), got %d", p.RepeatLastN)
	}
	if !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2) {
		bad("presence_penalty", "must be in [-2, 2], got %v", p.PresencePenalty)
	}
	if !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2) {
		bad("frequency_penalty", "must be in [-2, 2], got %v", p.FrequencyPenalty)
	}
	// Sorted so that the messages do not depend on map order.
	ids := make([]int32, 0, len(p.LogitBias))
	for id := range p.LogitBias {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if id < 0 || int64(id) >= int64(vocab) {
			bad("logit_bias", "token id %d is outside the vocabulary [0, %d)", id, vocab)
		}
		if v := p.LogitBias[id]; !(v >= -MaxLogitBias && v <= MaxLogitBias) {
			bad("logit_bias", "value for token %d must be in [-100, 100], got %v", id, v)
		}
	}
	if p.MaxTokens < 0 {
		bad("max_tokens", "must be >= 0 (0 = no limit), got %d", p.MaxTokens)
	}
	for _, id := range p.StopTokens {
		if id < 0 || int64(id) >= int64(vocab) {
			bad("stop_tokens", "token id %d is outside the vocabulary [0, %d)", id, vocab)
		}
	}
	for i, s := range p.StopStrings {
		if s == "" {
			bad("stop", "string %d is empty", i)
		}
	}
	switch {
	case p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs:
		bad("top_logprobs", "must be in [0, %d], got %d", MaxTopLogprobs, p.TopLogprobs)
	case p.TopLogprobs > 0 && !p.Logprobs:
		bad("top_logprobs", "requires logprobs to be enabled")
	}
	return errors.Join(errs...)
}
