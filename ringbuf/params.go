package ringbuf

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"unsafe"

	"ringlm/sample"
)

// The mapping between a request's sampling parameters and the words of an
// OPEN_SLOT payload lives here, once: the engine encodes with SlotOpen.Put,
// a Go device decodes with SlotPayload.Open, and a device locates a
// sample.ParamError with SlotPayload.ParamWord. All three go through
// slotFields, so a field cannot travel one way and not the other, or be
// reported at a word it does not travel in.

// SlotOpen is what an OPEN_SLOT tells a device, in the host's terms.
type SlotOpen struct {
	// Params are the sampling parameters. Every field travels but
	// StopStrings (the engine matches those on the text); MaxTokens is what
	// is left to sample in this opening (the engine's budget less what a
	// preempted sequence already generated), 0 for no limit.
	Params sample.Params
	// IgnoreEOS: EOS ids do not finish the slot (SlotIgnoreEOS).
	IgnoreEOS bool
	// EOS are the ids that finish the slot, at most MaxEOS (Put drops the
	// rest; engine.Config refuses more).
	EOS []int32
	// StartPos is the position of the slot's first fed token: the tokens
	// before it are in its KV blocks already (a reused prefix).
	StartPos int
	// PromptLen is the prompt's length: fed or history tokens at positions
	// >= it are generated ones (a recompute after preemption).
	PromptLen int
	// Hist are the tokens just before StartPos that the repetition
	// penalty's window reaches, which the device would not see otherwise.
	Hist []int32
}

// slotField is one field of SlotOpen that travels in the parameter block.
type slotField struct {
	// param names the field as a sample.ParamError does (the HTTP APIs'
	// name); fields that sample.Params does not hold have a name of the
	// same style.
	param string
	word  int // the block word it travels in (SPOff*)
	put   func(b *SlotParams, o *SlotOpen)
	get   func(o *SlotOpen, b *SlotParams)
}

// slotFields is the mapping, in block order. Counts (n_stop, n_bias,
// n_hist, n_eos) follow from the lists and are written by Put; the lists
// themselves travel after the block.
var slotFields = [...]slotField{
	{"temperature", SPOffTemperature,
		func(b *SlotParams, o *SlotOpen) { b.Temperature = o.Params.Temperature },
		func(o *SlotOpen, b *SlotParams) { o.Params.Temperature = b.Temperature }},
	{"top_p", SPOffTopP,
		func(b *SlotParams, o *SlotOpen) { b.TopP = o.Params.TopP },
		func(o *SlotOpen, b *SlotParams) { o.Params.TopP = b.TopP }},
	{"min_p", SPOffMinP,
		func(b *SlotParams, o *SlotOpen) { b.MinP = o.Params.MinP },
		func(o *SlotOpen, b *SlotParams) { o.Params.MinP = b.MinP }},
	// A top_k beyond the word is off as surely as one beyond the
	// vocabulary: clamped, not wrapped (2^32+5 would be 5).
	{"top_k", SPOffTopK,
		func(b *SlotParams, o *SlotOpen) { b.TopK = clampU32(o.Params.TopK) },
		func(o *SlotOpen, b *SlotParams) { o.Params.TopK = int(b.TopK) }},
	{"repeat_penalty", SPOffRepeatPenalty,
		func(b *SlotParams, o *SlotOpen) { b.RepeatPenalty = o.Params.RepeatPenalty },
		func(o *SlotOpen, b *SlotParams) { o.Params.RepeatPenalty = b.RepeatPenalty }},
	// A window beyond the word covers any context, as -1 does.
	{"repeat_last_n", SPOffRepeatLastN,
		func(b *SlotParams, o *SlotOpen) {
			b.RepeatLastN = int32(min(max(o.Params.RepeatLastN, math.MinInt32), math.MaxInt32))
		},
		func(o *SlotOpen, b *SlotParams) { o.Params.RepeatLastN = int(b.RepeatLastN) }},
	{"presence_penalty", SPOffPresence,
		func(b *SlotParams, o *SlotOpen) { b.Presence = o.Params.PresencePenalty },
		func(o *SlotOpen, b *SlotParams) { o.Params.PresencePenalty = b.Presence }},
	{"frequency_penalty", SPOffFrequency,
		func(b *SlotParams, o *SlotOpen) { b.Frequency = o.Params.FrequencyPenalty },
		func(o *SlotOpen, b *SlotParams) { o.Params.FrequencyPenalty = b.Frequency }},
	{"seed", SPOffSeedLo,
		func(b *SlotParams, o *SlotOpen) { b.Seed = o.Params.Seed },
		func(o *SlotOpen, b *SlotParams) { o.Params.Seed = b.Seed }},
	{"max_tokens", SPOffMaxTokens,
		func(b *SlotParams, o *SlotOpen) { b.MaxTokens = clampU32(o.Params.MaxTokens) },
		func(o *SlotOpen, b *SlotParams) { o.Params.MaxTokens = int(b.MaxTokens) }},
	{"start_pos", SPOffStartPos,
		func(b *SlotParams, o *SlotOpen) { b.StartPos = clampU32(o.StartPos) },
		func(o *SlotOpen, b *SlotParams) { o.StartPos = int(b.StartPos) }},
	{"logprobs", SPOffFlags,
		func(b *SlotParams, o *SlotOpen) { b.Flags |= flagIf(o.Params.Logprobs, SlotLogprobs) },
		func(o *SlotOpen, b *SlotParams) { o.Params.Logprobs = b.Flags&SlotLogprobs != 0 }},
	{"ignore_eos", SPOffFlags,
		func(b *SlotParams, o *SlotOpen) { b.Flags |= flagIf(o.IgnoreEOS, SlotIgnoreEOS) },
		func(o *SlotOpen, b *SlotParams) { o.IgnoreEOS = b.Flags&SlotIgnoreEOS != 0 }},
	{"eos", SPOffEOS,
		func(b *SlotParams, o *SlotOpen) {
			for i, id := range o.EOS[:min(len(o.EOS), MaxEOS)] {
				b.EOS[i] = uint32(id)
			}
			b.NEOS = uint32(min(len(o.EOS), MaxEOS))
		},
		func(o *SlotOpen, b *SlotParams) { o.EOS = appendInt32(o.EOS, b.EOS[:min(b.NEOS, MaxEOS)]) }},
	{"prompt_len", SPOffPromptLen,
		func(b *SlotParams, o *SlotOpen) { b.PromptLen = clampU32(o.PromptLen) },
		func(o *SlotOpen, b *SlotParams) { o.PromptLen = int(b.PromptLen) }},
	{"top_logprobs", SPOffNTop,
		func(b *SlotParams, o *SlotOpen) { b.NTop = clampU32(o.Params.TopLogprobs) },
		func(o *SlotOpen, b *SlotParams) { o.Params.TopLogprobs = int(b.NTop) }},
}

// The lists after the block, for ParamWord. Their words depend on the
// counts, so they are not rows of slotFields.
const (
	paramStopTokens = "stop_tokens"
	paramLogitBias  = "logit_bias"
)

func clampU32(v int) uint32 { return uint32(min(max(v, 0), math.MaxUint32)) }

func flagIf(on bool, f uint32) uint32 {
	if on {
		return f
	}
	return 0
}

func appendInt32(dst []int32, src []uint32) []int32 {
	for _, v := range src {
		dst = append(dst, int32(v))
	}
	return dst
}

// Words is the length of o's OPEN_SLOT payload.
func (o *SlotOpen) Words() int {
	return SlotPayloadWords(len(o.Params.StopTokens), len(o.Params.LogitBias), len(o.Hist))
}

// Put encodes o into w, which must hold o.Words() words, and returns that
// length. The biases go in token order, so that the payload does not
// depend on the map's order.
func (o *SlotOpen) Put(w []uint32) int {
	p := &o.Params
	n := o.Words()
	w = w[:n:n]
	var b SlotParams
	for i := range slotFields {
		slotFields[i].put(&b, o)
	}
	putSlotBlock(w[:SlotParamsWords], &b, len(p.StopTokens), len(p.LogitBias), len(o.Hist))
	at := SlotParamsWords
	for _, t := range p.StopTokens {
		w[at] = uint32(t)
		at++
	}
	pairs := w[at : at+2*len(p.LogitBias)]
	j := 0
	for id, v := range p.LogitBias {
		pairs[j], pairs[j+1] = uint32(id), math.Float32bits(v)
		j += 2
	}
	sortPairs(pairs)
	at += len(pairs)
	for _, t := range o.Hist {
		w[at] = uint32(t)
		at++
	}
	return n
}

// sortPairs sorts (token, bias bits) pairs by token, in place: the words
// of a pair are a [2]uint32 (arrays are contiguous, and [2]uint32 needs
// no more alignment than uint32), so the slice is viewed as one.
func sortPairs(w []uint32) {
	if len(w) < 4 {
		return
	}
	pairs := unsafe.Slice((*[2]uint32)(unsafe.Pointer(unsafe.SliceData(w))), len(w)/2)
	slices.SortFunc(pairs, func(x, y [2]uint32) int { return cmp.Compare(x[0], y[0]) })
}

// Open decodes p into o: the inverse of SlotOpen.Put. Fields that do not
// travel (Params.StopStrings) are left at their zero values. The stop ids,
// EOS ids and history are appended to the emptied o.Params.StopTokens,
// o.EOS and o.Hist, so a caller may lend buffers there; the logit biases
// get a new map when there are any.
func (p *SlotPayload) Open(o *SlotOpen) {
	stop, eos, hist := o.Params.StopTokens[:0], o.EOS[:0], o.Hist[:0]
	*o = SlotOpen{EOS: eos}
	for i := range slotFields {
		slotFields[i].get(o, &p.Params)
	}
	o.Params.StopTokens = appendInt32(stop, p.Stop)
	if n := p.NBias(); n > 0 {
		o.Params.LogitBias = make(map[int32]float32, n)
		for i := range n {
			b := p.BiasAt(i)
			o.Params.LogitBias[int32(b.Token)] = b.Bias
		}
	}
	o.Hist = appendInt32(hist, p.Hist)
}

// ParamWord is the payload word that err, a sample.Params validation of
// the parameters p carries, is about: the Detail of the CodeBadParams
// completion. For a list, it is the first element that sample rejects
// (for a logit bias, its token word if the token is outside the
// vocabulary of vocab tokens, else its bias word), as the CUDA kernel
// reports it. ok is false when err is no *sample.ParamError or names a
// parameter that does not travel; word is then 0.
func (p *SlotPayload) ParamWord(err error, vocab int) (word uint32, ok bool) {
	var pe *sample.ParamError
	if !errors.As(err, &pe) {
		return 0, false
	}
	inVocab := func(t uint32) bool { return int64(int32(t)) >= 0 && int64(int32(t)) < int64(vocab) }
	switch pe.Param {
	case paramStopTokens:
		base := uint32(SlotParamsWords)
		for i, t := range p.Stop {
			if !inVocab(t) {
				return base + uint32(i), true
			}
		}
		return base, true
	case paramLogitBias:
		base := uint32(SlotParamsWords + len(p.Stop))
		for i := range p.NBias() {
			b := p.BiasAt(i)
			if !inVocab(b.Token) {
				return base + 2*uint32(i), true
			}
			if !(b.Bias >= -sample.MaxLogitBias && b.Bias <= sample.MaxLogitBias) {
				return base + 2*uint32(i) + 1, true
			}
		}
		return base, true
	}
	for i := range slotFields {
		if slotFields[i].param == pe.Param {
			return uint32(slotFields[i].word), true
		}
	}
	return 0, false
}
