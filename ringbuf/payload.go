package ringbuf

import (
	"math"
	"strconv"
)

// Staging payloads are runs of u32 words (little-endian, like the whole
// arena). Offsets in this file are word indexes inside a run.

// STEP entry: StepEntryWords words per entry; EntOff* are word offsets.
const (
	StepEntryWords = 4

	EntOffSlot     = 0 // u32 slot
	EntOffNTokens  = 1 // u32 tokens this entry feeds (>= 1)
	EntOffTokenOff = 2 // u32 staging word offset of the entry's tokens, or TokenOffFeedback
	EntOffFlags    = 3 // u32 Entry* flags

	// TokenOffFeedback: feed the slot's last sampled token back as its
	// next input (a decode entry); n_tokens must be 1.
	TokenOffFeedback = 0xFFFFFFFF

	// EntrySample: sample a token after the entry's last token and answer
	// KindToken. Without it the entry only fills the KV cache (a prefill
	// chunk that is not the prompt's last).
	EntrySample = 1 << 0
	// EntryLogitsAll is reserved (logits for every token of the entry);
	// a device that does not implement it ignores it.
	EntryLogitsAll = 1 << 1
)

// StepEntry is one slot's share of a step. Its tokens take positions
// pos..pos+NTokens-1, where pos is the slot's next position on the device
// (start position at open, then advanced by every executed entry).
type StepEntry struct {
	Slot     uint32
	NTokens  uint32
	TokenOff uint32 // staging word offset of NTokens token ids, or TokenOffFeedback
	Flags    uint32
}

// Put encodes e into w[:StepEntryWords].
func (e *StepEntry) Put(w []uint32) {
	w = w[:StepEntryWords:StepEntryWords]
	w[EntOffSlot] = e.Slot
	w[EntOffNTokens] = e.NTokens
	w[EntOffTokenOff] = e.TokenOff
	w[EntOffFlags] = e.Flags
}

// Get decodes w[:StepEntryWords] into e.
func (e *StepEntry) Get(w []uint32) {
	w = w[:StepEntryWords:StepEntryWords]
	*e = StepEntry{Slot: w[EntOffSlot], NTokens: w[EntOffNTokens], TokenOff: w[EntOffTokenOff], Flags: w[EntOffFlags]}
}

// OPEN_SLOT payload: a fixed block of SlotParamsWords words (SPOff* are
// word offsets), then n_stop stop-token ids, then n_bias (token id, bias as
// f32 bits) pairs, then n_hist history tokens. Words 27..31 of the block are
// reserved and zero.
const (
	SlotParamsWords = 32
	MaxEOS          = 8

	SPOffTemperature   = 0  // f32; 0 = greedy
	SPOffTopP          = 1  // f32 in (0, 1]; 1 = off
	SPOffMinP          = 2  // f32 in [0, 1]; 0 = off
	SPOffTopK          = 3  // u32; 0 = off
	SPOffRepeatPenalty = 4  // f32 > 0; 1 = off
	SPOffRepeatLastN   = 5  // i32; 0 = off, -1 = whole context
	SPOffPresence      = 6  // f32 presence penalty
	SPOffFrequency     = 7  // f32 frequency penalty
	SPOffSeedLo        = 8  // u32 low half of the u64 seed
	SPOffSeedHi        = 9  // u32 high half of the u64 seed
	SPOffMaxTokens     = 10 // u32 tokens to sample before FinishLength; 0 = no limit
	SPOffStartPos      = 11 // u32 position of the slot's first fed token (tokens before it are already in its KV blocks)
	SPOffNStop         = 12 // u32 stop-token ids after the block
	SPOffNBias         = 13 // u32 (token, bias) pairs after the stop tokens
	SPOffFlags         = 14 // u32 Slot* flags
	SPOffNHist         = 15 // u32 history tokens after the biases
	SPOffNEOS          = 16 // u32 EOS ids in use (<= MaxEOS)
	SPOffEOS           = 17 // u32[MaxEOS] EOS token ids
	SPOffPromptLen     = 25 // u32 prompt length: fed or history tokens at positions >= it are generated ones (a recompute after preemption), which the presence and frequency penalties count
	SPOffNTop          = 26 // u32 n_top: alternatives per TOKEN, sent as TOP_LOGPROBS records (0..MaxTop; > 0 needs SlotLogprobs)

	// MaxTop is the largest n_top (sample.MaxTopLogprobs).
	MaxTop = 20

	// SlotLogprobs: fill TOKEN logprobs.
	SlotLogprobs = 1 << 0
	// SlotIgnoreEOS: EOS ids do not finish the slot (benchmarks); stop
	// tokens still do.
	SlotIgnoreEOS = 1 << 1

	// SlotFlagsKnown is every defined Slot* flag; others are refused.
	SlotFlagsKnown = SlotLogprobs | SlotIgnoreEOS
)

// SlotParams is the fixed block of an OPEN_SLOT payload. The sampling
// fields mean what sample.Params says (SlotOpen maps one to the other);
// history tokens (the tokens before StartPos that the repetition
// penalty's window reaches, which the device never sees when a prefix is
// reused from the cache) travel with the stop tokens and biases after the
// block.
type SlotParams struct {
	Temperature   float32
	TopP          float32
	MinP          float32
	TopK          uint32
	RepeatPenalty float32
	RepeatLastN   int32
	Presence      float32
	Frequency     float32
	Seed          uint64
	MaxTokens     uint32
	StartPos      uint32
	Flags         uint32
	NEOS          uint32
	EOS           [MaxEOS]uint32
	PromptLen     uint32
	NTop          uint32 // alternatives per token (TOP_LOGPROBS records); needs SlotLogprobs
}

// TokenBias is one logit bias.
type TokenBias struct {
	Token uint32
	Bias  float32
}

// SlotPayloadWords is the OPEN_SLOT payload length for these counts.
func SlotPayloadWords(nStop, nBias, nHist int) int {
	return SlotParamsWords + nStop + 2*nBias + nHist
}

// PutSlotPayload writes an OPEN_SLOT payload into w, which must hold
// SlotPayloadWords(len(stop), len(bias), len(hist)) words, and returns that
// length.
func PutSlotPayload(w []uint32, p *SlotParams, stop []uint32, bias []TokenBias, hist []uint32) int {
	n := SlotPayloadWords(len(stop), len(bias), len(hist))
	w = w[:n:n]
	putSlotBlock(w[:SlotParamsWords], p, len(stop), len(bias), len(hist))
	o := SlotParamsWords
	o += copy(w[o:], stop)
	for _, tb := range bias {
		w[o], w[o+1] = tb.Token, math.Float32bits(tb.Bias)
		o += 2
	}
	copy(w[o:], hist)
	return n
}

// putSlotBlock writes the parameter block b (SlotParamsWords words) of a
// payload with these counts; the reserved words are zeroed.
func putSlotBlock(b []uint32, p *SlotParams, nStop, nBias, nHist int) {
	b = b[:SlotParamsWords:SlotParamsWords]
	clear(b)
	b[SPOffTemperature] = math.Float32bits(p.Temperature)
	b[SPOffTopP] = math.Float32bits(p.TopP)
	b[SPOffMinP] = math.Float32bits(p.MinP)
	b[SPOffTopK] = p.TopK
	b[SPOffRepeatPenalty] = math.Float32bits(p.RepeatPenalty)
	b[SPOffRepeatLastN] = uint32(p.RepeatLastN)
	b[SPOffPresence] = math.Float32bits(p.Presence)
	b[SPOffFrequency] = math.Float32bits(p.Frequency)
	b[SPOffSeedLo] = uint32(p.Seed)
	b[SPOffSeedHi] = uint32(p.Seed >> 32)
	b[SPOffMaxTokens] = p.MaxTokens
	b[SPOffStartPos] = p.StartPos
	b[SPOffNStop] = uint32(nStop)
	b[SPOffNBias] = uint32(nBias)
	b[SPOffFlags] = p.Flags
	b[SPOffNHist] = uint32(nHist)
	b[SPOffNEOS] = p.NEOS
	copy(b[SPOffEOS:SPOffEOS+MaxEOS], p.EOS[:])
	b[SPOffPromptLen] = p.PromptLen
	b[SPOffNTop] = p.NTop
}

// SlotPayload is a decoded OPEN_SLOT payload. Its slices alias the words
// it was parsed from.
type SlotPayload struct {
	Params SlotParams
	Stop   []uint32
	Bias   []uint32 // n_bias pairs: token id, bias as f32 bits; see BiasAt
	Hist   []uint32
}

// NBias is the number of logit biases.
func (p *SlotPayload) NBias() int { return len(p.Bias) / 2 }

// BiasAt returns the i-th logit bias.
func (p *SlotPayload) BiasAt(i int) TokenBias {
	return TokenBias{Token: p.Bias[2*i], Bias: math.Float32frombits(p.Bias[2*i+1])}
}

// PayloadError locates a malformed payload. Word is the index of the
// offending word in the payload: the Detail of the device's CodeBadParams
// completion.
type PayloadError struct {
	Word   int
	Reason string
}

func (e *PayloadError) Error() string {
	return "ringbuf: slot payload word " + strconv.Itoa(e.Word) + ": " + e.Reason
}

// ParseSlotPayload decodes and checks the structure of an OPEN_SLOT
// payload (length, counts, the device limits, flags, n_top, reserved
// words, the order of the bias tokens); the values of the sampling fields
// are the sample package's business. Every device checks in this order
// (ringbuf/PROTOCOL.md), so that all name the same word for a payload with
// several faults: the counts against the length, n_stop, n_bias, n_eos,
// flags, n_top, the reserved words, then the bias tokens. It does not
// allocate unless it fails.
func ParseSlotPayload(w []uint32) (SlotPayload, error) {
	if len(w) < SlotParamsWords {
		return SlotPayload{}, &PayloadError{Word: len(w), Reason: "shorter than the " + strconv.Itoa(SlotParamsWords) + "-word parameter block"}
	}
	b := w[:SlotParamsWords]
	nStop, nBias, nHist := uint64(b[SPOffNStop]), uint64(b[SPOffNBias]), uint64(b[SPOffNHist])
	if want := SlotParamsWords + nStop + 2*nBias + nHist; want != uint64(len(w)) {
		return SlotPayload{}, &PayloadError{Word: SPOffNStop,
			Reason: "counts need " + strconv.FormatUint(want, 10) + " words, payload has " + strconv.Itoa(len(w))}
	}
	if nStop > MaxStop {
		return SlotPayload{}, &PayloadError{Word: SPOffNStop, Reason: "more than " + strconv.Itoa(MaxStop) + " stop ids"}
	}
	if nBias > MaxBias {
		return SlotPayload{}, &PayloadError{Word: SPOffNBias, Reason: "more than " + strconv.Itoa(MaxBias) + " logit biases"}
	}
	if b[SPOffNEOS] > MaxEOS {
		return SlotPayload{}, &PayloadError{Word: SPOffNEOS, Reason: "more than " + strconv.Itoa(MaxEOS) + " EOS ids"}
	}
	if b[SPOffFlags]&^SlotFlagsKnown != 0 {
		return SlotPayload{}, &PayloadError{Word: SPOffFlags, Reason: "unknown flag bits"}
	}
	if b[SPOffNTop] > MaxTop {
		return SlotPayload{}, &PayloadError{Word: SPOffNTop, Reason: "more than " + strconv.Itoa(MaxTop) + " alternatives (n_top)"}
	}
	if b[SPOffNTop] > 0 && b[SPOffFlags]&SlotLogprobs == 0 {
		return SlotPayload{}, &PayloadError{Word: SPOffNTop, Reason: "n_top > 0 without the logprobs flag"}
	}
	for i := SPOffNTop + 1; i < SlotParamsWords; i++ {
		if b[i] != 0 {
			return SlotPayload{}, &PayloadError{Word: i, Reason: "reserved word is not zero"}
		}
	}
	// Bias pairs name ascending tokens, each once: a token named twice
	// would be biased once on one device and twice (or racily) on another.
	bias := w[SlotParamsWords+nStop : SlotParamsWords+nStop+2*nBias]
	for i := 2; i < len(bias); i += 2 {
		if bias[i] <= bias[i-2] {
			return SlotPayload{}, &PayloadError{Word: SlotParamsWords + int(nStop) + i, Reason: "logit-bias tokens are not ascending (or one is named twice)"}
		}
	}
	p := SlotPayload{Params: SlotParams{
		Temperature:   math.Float32frombits(b[SPOffTemperature]),
		TopP:          math.Float32frombits(b[SPOffTopP]),
		MinP:          math.Float32frombits(b[SPOffMinP]),
		TopK:          b[SPOffTopK],
		RepeatPenalty: math.Float32frombits(b[SPOffRepeatPenalty]),
		RepeatLastN:   int32(b[SPOffRepeatLastN]),
		Presence:      math.Float32frombits(b[SPOffPresence]),
		Frequency:     math.Float32frombits(b[SPOffFrequency]),
		Seed:          uint64(b[SPOffSeedLo]) | uint64(b[SPOffSeedHi])<<32,
		MaxTokens:     b[SPOffMaxTokens],
		StartPos:      b[SPOffStartPos],
		Flags:         b[SPOffFlags],
		NEOS:          b[SPOffNEOS],
		PromptLen:     b[SPOffPromptLen],
		NTop:          b[SPOffNTop],
	}}
	copy(p.Params.EOS[:], b[SPOffEOS:SPOffEOS+MaxEOS])
	o := uint64(SlotParamsWords)
	p.Stop = w[o : o+nStop : o+nStop]
	o += nStop
	p.Bias = w[o : o+2*nBias : o+2*nBias]
	o += 2 * nBias
	p.Hist = w[o : o+nHist : o+nHist]
	return p, nil
}
