package engine

import (
	"context"
	"errors"
	"testing"

	"ringlm/ringbuf"
	"ringlm/sample"
)

// TestSubmitDeviceLimits: requests over a device limit are refused at
// Submit with a *LimitError naming the numbers (they would fail in the
// ring otherwise); requests at the limits run.
func TestSubmitDeviceLimits(t *testing.T) {
	e := newNullEngine(t, Config{Vocab: 2000})
	ids := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(i)
		}
		return out
	}
	bias := func(n int) map[int32]float32 {
		m := make(map[int32]float32, n)
		for i := range n {
			m[int32(i)] = -1
		}
		return m
	}
	for _, c := range []struct {
		name  string
		set   func(p *sample.Params)
		param string
		msg   string
	}{
		{"stop tokens", func(p *sample.Params) { p.StopTokens = ids(300) }, "stop_tokens",
			"engine: 300 stop tokens, the device takes at most 256"},
		{"logit bias", func(p *sample.Params) { p.LogitBias = bias(ringbuf.MaxBias + 1) }, "logit_bias",
			"engine: 1025 logit-bias entries, the device takes at most 1024"},
		// Before the validation of each element: an oversized list is not
		// walked.
		{"stop tokens out of the vocabulary", func(p *sample.Params) { p.StopTokens = append(ids(ringbuf.MaxStop), -1) }, "stop_tokens",
			"engine: 257 stop tokens, the device takes at most 256"},
	} {
		p := sample.Defaults()
		p.MaxTokens = 4
		c.set(&p)
		_, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2}, Params: p})
		var le *LimitError
		if !errors.Is(err, ErrDeviceLimit) || !errors.As(err, &le) || le.Param != c.param || err.Error() != c.msg {
			t.Errorf("%s: Submit error %v, want %q (a *LimitError for %s)", c.name, err, c.msg, c.param)
		}
	}

	// top_logprobs: sample.Params.Validate bounds it by MaxTopLogprobs,
	// which is MaxTop today; the device check stands should the two part.
	p := sample.Defaults()
	p.Logprobs, p.TopLogprobs = true, ringbuf.MaxTop+1
	if err := checkDeviceLimits(&p); !errors.Is(err, ErrDeviceLimit) ||
		err.Error() != "engine: 21 top logprobs, the device takes at most 20" {
		t.Errorf("top logprobs over MaxTop: %v", err)
	}

	p = sample.Defaults()
	p.MaxTokens = 3
	p.StopTokens = ids(ringbuf.MaxStop)
	p.LogitBias = bias(ringbuf.MaxBias)
	p.Logprobs, p.TopLogprobs = true, ringbuf.MaxTop
	s, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2}, Params: p, IgnoreEOS: true})
	if err != nil {
		t.Fatalf("a request at the limits: %v", err)
	}
	if _, err := collectErr(s); err != nil {
		t.Fatalf("a request at the limits: %v", err)
	}
}
