package sample

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDefaultsValid(t *testing.T) {
	p := Defaults()
	if err := p.Validate(10); err != nil {
		t.Fatal(err)
	}
	if p.Temperature != 1 || p.TopP != 1 || p.TopK != 0 || p.MinP != 0 || p.RepeatPenalty != 1 || p.RepeatLastN != 64 {
		t.Errorf("Defaults() = %+v", p)
	}
	if err := (Params{}).Validate(10); err == nil {
		t.Error("the zero Params validated; TopP 0 should not")
	}
}

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	const vocab = 100
	cases := []struct {
		name  string
		mod   func(*Params)
		param string // "" = valid
	}{
		{"defaults", func(p *Params) {}, ""},
		{"greedy", func(p *Params) { p.Temperature = 0 }, ""},
		{"hot", func(p *Params) { p.Temperature = 100 }, ""},
		{"negative temperature", func(p *Params) { p.Temperature = -0.1 }, "temperature"},
		{"NaN temperature", func(p *Params) { p.Temperature = nan }, "temperature"},
		{"Inf temperature", func(p *Params) { p.Temperature = inf }, "temperature"},
		{"top_k 1", func(p *Params) { p.TopK = 1 }, ""},
		{"top_k above vocab", func(p *Params) { p.TopK = 1000 }, ""},
		{"negative top_k", func(p *Params) { p.TopK = -1 }, "top_k"},
		{"top_p tiny", func(p *Params) { p.TopP = 1e-6 }, ""},
		{"top_p 0", func(p *Params) { p.TopP = 0 }, "top_p"},
		{"top_p above 1", func(p *Params) { p.TopP = 1.01 }, "top_p"},
		{"negative top_p", func(p *Params) { p.TopP = -0.5 }, "top_p"},
		{"NaN top_p", func(p *Params) { p.TopP = nan }, "top_p"},
		{"min_p 1", func(p *Params) { p.MinP = 1 }, ""},
		{"negative min_p", func(p *Params) { p.MinP = -0.01 }, "min_p"},
		{"min_p above 1", func(p *Params) { p.MinP = 1.5 }, "min_p"},
		{"NaN min_p", func(p *Params) { p.MinP = nan }, "min_p"},
		{"repeat_penalty below 1", func(p *Params) { p.RepeatPenalty = 0.5 }, ""},
		{"repeat_penalty 0", func(p *Params) { p.RepeatPenalty = 0 }, "repeat_penalty"},
		{"negative repeat_penalty", func(p *Params) { p.RepeatPenalty = -1.1 }, "repeat_penalty"},
		{"NaN repeat_penalty", func(p *Params) { p.RepeatPenalty = nan }, "repeat_penalty"},
		{"Inf repeat_penalty", func(p *Params) { p.RepeatPenalty = inf }, "repeat_penalty"},
		{"repeat_last_n -1", func(p *Params) { p.RepeatLastN = -1 }, ""},
		{"repeat_last_n 0", func(p *Params) { p.RepeatLastN = 0 }, ""},
		{"repeat_last_n -2", func(p *Params) { p.RepeatLastN = -2 }, "repeat_last_n"},
		{"presence 2", func(p *Params) { p.PresencePenalty = 2 }, ""},
		{"presence -2", func(p *Params) { p.PresencePenalty = -2 }, ""},
		{"presence 2.1", func(p *Params) { p.PresencePenalty = 2.1 }, "presence_penalty"},
		{"presence NaN", func(p *Params) { p.PresencePenalty = nan }, "presence_penalty"},
		{"frequency -2.5", func(p *Params) { p.FrequencyPenalty = -2.5 }, "frequency_penalty"},
		{"frequency NaN", func(p *Params) { p.FrequencyPenalty = nan }, "frequency_penalty"},
		{"bias ok", func(p *Params) { p.LogitBias = map[int32]float32{0: -100, 99: 100} }, ""},
		{"bias id negative", func(p *Params) { p.LogitBias = map[int32]float32{-1: 1} }, "logit_bias"},
		{"bias id at vocab", func(p *Params) { p.LogitBias = map[int32]float32{vocab: 1} }, "logit_bias"},
		{"bias too large", func(p *Params) { p.LogitBias = map[int32]float32{3: -101} }, "logit_bias"},
		{"bias NaN", func(p *Params) { p.LogitBias = map[int32]float32{3: nan} }, "logit_bias"},
		{"bias -Inf", func(p *Params) { p.LogitBias = map[int32]float32{3: -inf} }, "logit_bias"},
		{"max_tokens", func(p *Params) { p.MaxTokens = 10 }, ""},
		{"negative max_tokens", func(p *Params) { p.MaxTokens = -1 }, "max_tokens"},
		{"stop tokens ok", func(p *Params) { p.StopTokens = []int32{0, 99} }, ""},
		{"stop token outside", func(p *Params) { p.StopTokens = []int32{0, 100} }, "stop_tokens"},
		{"stop strings ok", func(p *Params) { p.StopStrings = []string{"\n\n", "</s>"} }, ""},
		{"empty stop string", func(p *Params) { p.StopStrings = []string{"a", ""} }, "stop"},
		{"top_logprobs 20", func(p *Params) { p.Logprobs, p.TopLogprobs = true, 20 }, ""},
		{"top_logprobs 21", func(p *Params) { p.Logprobs, p.TopLogprobs = true, 21 }, "top_logprobs"},
		{"negative top_logprobs", func(p *Params) { p.Logprobs, p.TopLogprobs = true, -1 }, "top_logprobs"},
		{"top_logprobs without logprobs", func(p *Params) { p.TopLogprobs = 3 }, "top_logprobs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Defaults()
			c.mod(&p)
			err := p.Validate(vocab)
			if c.param == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if _, err := New(p, vocab); err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			var pe *ParamError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v, want a *ParamError", err)
			}
			if pe.Param != c.param || !strings.Contains(err.Error(), c.param) {
				t.Errorf("error %q names %q, want %q", err, pe.Param, c.param)
			}
			if s, err := New(p, vocab); err == nil || s != nil {
				t.Errorf("New accepted what Validate rejects")
			}
		})
	}
}

func TestValidateReportsEveryError(t *testing.T) {
	p := Defaults()
	p.Temperature, p.TopP, p.TopK = -1, 2, -3
	p.LogitBias = map[int32]float32{500: 1, -4: 1, 7: 1000}
	err := p.Validate(100)
	msg := err.Error()
	for _, want := range []string{"temperature", "top_p", "top_k", "token id -4", "token id 500", "token 7"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	// Bias errors come in id order, whatever the map order.
	if strings.Index(msg, "-4") > strings.Index(msg, "500") {
		t.Errorf("bias errors out of order: %q", msg)
	}
	if err := Defaults().Validate(0); err == nil {
		t.Error("vocabulary 0 accepted")
	}
}

func TestNewCopiesParams(t *testing.T) {
	p := Defaults()
	p.LogitBias = map[int32]float32{1: -100}
	p.StopTokens = []int32{2}
	s, err := New(p, 10)
	if err != nil {
		t.Fatal(err)
	}
	p.LogitBias[1] = 100
	p.LogitBias[3] = 5
	p.StopTokens[0] = 9
	got := s.Params()
	if len(got.LogitBias) != 1 || got.LogitBias[1] != -100 || got.StopTokens[0] != 2 {
		t.Errorf("Params() = %+v after the caller changed its copies", got)
	}
}
