package conformance

import (
	"testing"

	"ringlm/ringbuf"
)

// limitPayload is an OPEN_SLOT's nStop stop ids and nBias biases, the
// bias tokens ascending and inside a vocabulary of vocab tokens as far as
// it goes (past it they are out of range, which the counts are checked
// before).
func limitPayload(nStop, nBias, vocab int) ([]uint32, []ringbuf.TokenBias) {
	stop := make([]uint32, nStop)
	for i := range stop {
		stop[i] = uint32(i % vocab)
	}
	bias := make([]ringbuf.TokenBias, nBias)
	for i := range bias {
		bias[i] = ringbuf.TokenBias{Token: uint32(i), Bias: 1}
	}
	return stop, bias
}

// DeviceLimits: a device takes MaxStop stop ids and MaxBias
// biases, and refuses one more with BAD_PARAMS at the count's word, as
// the CUDA kernel does; the slot stays closed.
func DeviceLimits(t *testing.T, f Factory) {
	h := NewHost(t, f, config(2, 8, 8192))
	vocab := h.Vocab
	good := ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, RepeatLastN: 64, Seed: 5}

	stop, bias := limitPayload(ringbuf.MaxStop+1, 0, vocab)
	a := h.Open(1, good, stop, bias, nil)
	stop, bias = limitPayload(0, ringbuf.MaxBias+1, vocab)
	b := h.Open(1, good, stop, bias, nil)
	stop, bias = limitPayload(ringbuf.MaxStop+1, ringbuf.MaxBias+1, vocab)
	c := h.Open(1, good, stop, bias, nil) // n_stop is checked first
	Match(t, h.Sync(), []ringbuf.Completion{
		Err(a, 1, ringbuf.CodeBadParams, ringbuf.SPOffNStop),
		Err(b, 1, ringbuf.CodeBadParams, ringbuf.SPOffNBias),
		Err(c, 1, ringbuf.CodeBadParams, ringbuf.SPOffNStop),
	})

	// At the limits the slot opens (and closes: it was closed before); a
	// vocabulary smaller than MaxBias holds fewer distinct biases.
	stop, bias = limitPayload(ringbuf.MaxStop, min(ringbuf.MaxBias, vocab), vocab)
	h.Open(1, good, stop, bias, nil)
	d := h.Close(1)
	Match(t, h.Sync(), []ringbuf.Completion{Closed(d, 1)})
	h.Stop()
}

// OpenCheckOrder: an OPEN_SLOT with several faults is refused at the
// word of the first check in the protocol's order: the structure (the
// counts, n_stop, n_bias, n_eos, flags, n_top) before the values
// (temperature, top_p, min_p, repeat_penalty, repeat_last_n, presence,
// frequency, then the biases in payload order, token before value).
func OpenCheckOrder(t *testing.T, f Factory) {
	h := NewHost(t, f, config(2, 8, 8192))
	vocab := h.Vocab
	good := ringbuf.SlotParams{Temperature: 1, TopP: 1, RepeatPenalty: 1, RepeatLastN: 64, Seed: 5}
	badValues := func(p *ringbuf.SlotParams) {
		p.Temperature, p.TopP, p.MinP, p.RepeatPenalty, p.RepeatLastN, p.Presence, p.Frequency = -1, 0, 2, 0, -2, 3, 3
	}
	type tc struct {
		name string
		set  func(p *ringbuf.SlotParams)
		stop int
		bias []ringbuf.TokenBias
		word uint32
	}
	_, overBias := limitPayload(0, ringbuf.MaxBias+1, vocab)
	cases := []tc{
		{"n_stop before n_eos", func(p *ringbuf.SlotParams) { badValues(p); p.NEOS = ringbuf.MaxEOS + 1 }, ringbuf.MaxStop + 1, nil, ringbuf.SPOffNStop},
		{"n_bias before n_eos", func(p *ringbuf.SlotParams) { badValues(p); p.NEOS = ringbuf.MaxEOS + 1 }, 0, overBias, ringbuf.SPOffNBias},
		{"n_eos before flags", func(p *ringbuf.SlotParams) { badValues(p); p.NEOS, p.Flags = ringbuf.MaxEOS+1, 1<<5 }, 0, nil, ringbuf.SPOffNEOS},
		{"flags before n_top", func(p *ringbuf.SlotParams) { badValues(p); p.Flags, p.NTop = 1<<5, ringbuf.MaxTop+1 }, 0, nil, ringbuf.SPOffFlags},
		{"n_top before the values", func(p *ringbuf.SlotParams) { badValues(p); p.NTop = 1 }, 0, nil, ringbuf.SPOffNTop},
		{"temperature first of the values", badValues, 0, []ringbuf.TokenBias{{Token: uint32(vocab), Bias: 500}}, ringbuf.SPOffTemperature},
		{"top_p", func(p *ringbuf.SlotParams) { badValues(p); p.Temperature = 1 }, 0, nil, ringbuf.SPOffTopP},
		{"min_p", func(p *ringbuf.SlotParams) { badValues(p); p.Temperature, p.TopP = 1, 1 }, 0, nil, ringbuf.SPOffMinP},
		{"repeat_penalty", func(p *ringbuf.SlotParams) { badValues(p); p.Temperature, p.TopP, p.MinP = 1, 1, 0 }, 0, nil, ringbuf.SPOffRepeatPenalty},
		{"repeat_last_n", func(p *ringbuf.SlotParams) {
			badValues(p)
			p.Temperature, p.TopP, p.MinP, p.RepeatPenalty = 1, 1, 0, 1
		}, 0, nil, ringbuf.SPOffRepeatLastN},
		{"presence", func(p *ringbuf.SlotParams) {
			badValues(p)
			p.Temperature, p.TopP, p.MinP, p.RepeatPenalty, p.RepeatLastN = 1, 1, 0, 1, 0
		}, 0, nil, ringbuf.SPOffPresence},
		{"frequency before the biases", func(p *ringbuf.SlotParams) {
			badValues(p)
			p.Temperature, p.TopP, p.MinP, p.RepeatPenalty, p.RepeatLastN, p.Presence = 1, 1, 0, 1, 0, 0
		}, 2, []ringbuf.TokenBias{{Token: uint32(vocab), Bias: 1}}, ringbuf.SPOffFrequency},
		{"the first bad pair, token before value", nil, 2, []ringbuf.TokenBias{{Token: 1, Bias: 1}, {Token: uint32(vocab), Bias: 500}},
			ringbuf.SlotParamsWords + 2 + 2},
		{"the first bad pair, its value", nil, 2, []ringbuf.TokenBias{{Token: 1, Bias: 1}, {Token: 3, Bias: 500}, {Token: uint32(vocab), Bias: 1}},
			ringbuf.SlotParamsWords + 2 + 3},
		{"bias tokens out of order, before the values", badValues, 2, []ringbuf.TokenBias{{Token: 3, Bias: 1}, {Token: 2, Bias: 1}},
			ringbuf.SlotParamsWords + 2 + 2},
		{"a bias token named twice", nil, 0, []ringbuf.TokenBias{{Token: 1, Bias: 1}, {Token: 4, Bias: 1}, {Token: 4, Bias: -1}},
			ringbuf.SlotParamsWords + 4},
	}
	var want []ringbuf.Completion
	for _, c := range cases {
		p := good
		if c.set != nil {
			c.set(&p)
		}
		stop, _ := limitPayload(c.stop, 0, vocab)
		want = append(want, Err(h.Open(1, p, stop, c.bias, nil), 1, ringbuf.CodeBadParams, c.word))
	}
	got := h.Sync()
	Match(t, got, want)
	if t.Failed() {
		for i, c := range cases {
			if i < len(got) && got[i].Detail != c.word {
				t.Logf("%s: detail %d, want %d", c.name, got[i].Detail, c.word)
			}
		}
	}
	h.Stop()
}
