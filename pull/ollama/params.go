package ollama

import (
	"fmt"
	"math"

	"ringlm/sample"
)

// SampleParams lays the model's default options (its params layer, what
// `ollama show --parameters` lists) over p and returns the result:
// temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n,
// presence_penalty, frequency_penalty, seed (a negative one, Ollama's
// "random", leaves p.Seed), num_predict (MaxTokens; Ollama's -1 and -2,
// no limit, become 0) and stop (StopStrings). Start from sample.Defaults
// and apply a user's own settings after it. num_ctx is NumCtx's; options
// ringlm's sampler does not have (mirostat, typical_p, num_gpu, ...) stay
// in m.Params for the caller to report. A value of the wrong type is an
// error naming the option; ranges are sample.Params.Validate's to check.
func (m *Model) SampleParams(p sample.Params) (sample.Params, error) {
	for _, o := range []struct {
		key   string
		whole bool
		set   func(float64)
	}{
		{"temperature", false, func(f float64) { p.Temperature = float32(f) }},
		{"top_k", true, func(f float64) { p.TopK = int(max(f, 0)) }},
		{"top_p", false, func(f float64) { p.TopP = float32(f) }},
		{"min_p", false, func(f float64) { p.MinP = float32(f) }},
		{"repeat_penalty", false, func(f float64) { p.RepeatPenalty = float32(f) }},
		{"repeat_last_n", true, func(f float64) { p.RepeatLastN = int(f) }},
		{"presence_penalty", false, func(f float64) { p.PresencePenalty = float32(f) }},
		{"frequency_penalty", false, func(f float64) { p.FrequencyPenalty = float32(f) }},
		{"seed", true, func(f float64) {
			if f >= 0 {
				p.Seed = uint64(f)
			}
		}},
		{"num_predict", true, func(f float64) { p.MaxTokens = int(max(f, 0)) }},
	} {
		f, ok, err := m.number(o.key, o.whole)
		if err != nil {
			return p, err
		}
		if ok {
			o.set(f)
		}
	}
	if v, ok := m.Params["stop"]; ok {
		stops, ok := stopStrings(v)
		if !ok {
			return p, fmt.Errorf("ollama: model %s: parameter stop is %s, want a list of strings", m.Name, jsonString(v))
		}
		p.StopStrings = stops
	}
	return p, nil
}

// NumCtx is the model's num_ctx, the context length Ollama runs it with;
// 0 when its params do not set one.
func (m *Model) NumCtx() (int, error) {
	f, ok, err := m.number("num_ctx", true)
	if err != nil || !ok {
		return 0, err
	}
	if f < 1 || f > math.MaxInt32 {
		return 0, fmt.Errorf("ollama: model %s: parameter num_ctx is %v, want 1 to %d tokens", m.Name, f, math.MaxInt32)
	}
	return int(f), nil
}

// number is parameter key as a number (whole: an integer that a float64
// holds exactly); ok is false when the model does not set it.
func (m *Model) number(key string, whole bool) (f float64, ok bool, err error) {
	v, ok := m.Params[key]
	if !ok {
		return 0, false, nil
	}
	f, isNum := v.(float64)
	if whole && isNum && (f != math.Trunc(f) || math.Abs(f) > 1<<53) {
		return 0, false, fmt.Errorf("ollama: model %s: parameter %s is %v, want a whole number", m.Name, key, f)
	}
	if !isNum {
		return 0, false, fmt.Errorf("ollama: model %s: parameter %s is %s, want a number", m.Name, key, jsonString(v))
	}
	return f, true, nil
}

// stopStrings reads stop as Ollama writes it (a list of strings), or as
// one string.
func stopStrings(v any) ([]string, bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case []any:
		out := make([]string, len(v))
		for i, s := range v {
			str, ok := s.(string)
			if !ok {
				return nil, false
			}
			out[i] = str
		}
		return out, true
	}
	return nil, false
}
