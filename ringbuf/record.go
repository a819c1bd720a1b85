package ringbuf

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Op is a submit record's operation.
type Op uint32

// Submit operations (host -> device).
const (
	// OpOpenSlot starts a sequence in a slot. Payload: a slot parameter
	// block (SlotParamsWords words) followed by its stop tokens, logit
	// biases and history tokens; see SlotParams.
	OpOpenSlot Op = 1
	// OpGrantBlocks appends KV blocks to a slot's block table: logical
	// blocks [GrantFirst, GrantFirst+GrantCount) get the physical block ids
	// in the payload (GrantCount words).
	OpGrantBlocks Op = 2
	// OpStep runs one forward step over Slot entries (the payload, each
	// StepEntryWords words; see StepEntry).
	OpStep Op = 3
	// OpCloseSlot ends a slot; the device answers KindSlotClosed. No
	// payload.
	OpCloseSlot Op = 4
	// OpStop makes the device finish every earlier record, answer
	// KindStopped and exit. No payload.
	OpStop Op = 5
)

var opNames = [...]string{"", "OPEN_SLOT", "GRANT_BLOCKS", "STEP", "CLOSE_SLOT", "STOP"}

func (o Op) String() string {
	if int(o) > 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return "Op(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// Submit record: SubmitSize bytes; SubOff* are byte offsets. Bytes 24..39
// are op-specific inline fields (each op's fields have their own offsets, so
// no two ops share a byte); 40..63 are reserved and zero.
const (
	SubmitSize = 64

	SubOffOp         = 0  // u32 Op
	SubOffSlot       = 4  // u32 slot (OPEN/GRANT/CLOSE); number of entries (STEP)
	SubOffID         = 8  // u64 step id (STEP, strictly increasing); host sequence number (others)
	SubOffPayloadOff = 16 // u32 staging word offset of the payload
	SubOffPayloadLen = 20 // u32 payload length in words (0: no payload, offset ignored)
	SubOffGrantFirst = 24 // u32 GRANT_BLOCKS: first logical block index
	SubOffGrantCount = 28 // u32 GRANT_BLOCKS: number of blocks (= payload length)
	SubOffStepTokens = 32 // u32 STEP: sum of the entries' n_tokens
	SubOffStepSample = 36 // u32 STEP: number of entries with EntrySample
)

// SubmitRecord is a decoded submit record. Fields an op does not use are
// zero.
type SubmitRecord struct {
	Op         Op
	Slot       uint32 // slot; for OpStep the number of entries
	ID         uint64 // step id (OpStep) or host sequence number
	PayloadOff uint32 // staging word offset
	PayloadLen uint32 // words
	GrantFirst uint32 // OpGrantBlocks
	GrantCount uint32 // OpGrantBlocks
	StepTokens uint32 // OpStep
	StepSample uint32 // OpStep
}

// Put encodes r into b[:SubmitSize], reserved bytes zeroed.
func (r *SubmitRecord) Put(b []byte) {
	b = b[:SubmitSize:SubmitSize]
	le := binary.LittleEndian
	le.PutUint32(b[SubOffOp:], uint32(r.Op))
	le.PutUint32(b[SubOffSlot:], r.Slot)
	le.PutUint64(b[SubOffID:], r.ID)
	le.PutUint32(b[SubOffPayloadOff:], r.PayloadOff)
	le.PutUint32(b[SubOffPayloadLen:], r.PayloadLen)
	le.PutUint32(b[SubOffGrantFirst:], r.GrantFirst)
	le.PutUint32(b[SubOffGrantCount:], r.GrantCount)
	le.PutUint32(b[SubOffStepTokens:], r.StepTokens)
	le.PutUint32(b[SubOffStepSample:], r.StepSample)
	clear(b[SubOffStepSample+4:])
}

// Get decodes b[:SubmitSize] into r.
func (r *SubmitRecord) Get(b []byte) {
	b = b[:SubmitSize:SubmitSize]
	le := binary.LittleEndian
	*r = SubmitRecord{
		Op:         Op(le.Uint32(b[SubOffOp:])),
		Slot:       le.Uint32(b[SubOffSlot:]),
		ID:         le.Uint64(b[SubOffID:]),
		PayloadOff: le.Uint32(b[SubOffPayloadOff:]),
		PayloadLen: le.Uint32(b[SubOffPayloadLen:]),
		GrantFirst: le.Uint32(b[SubOffGrantFirst:]),
		GrantCount: le.Uint32(b[SubOffGrantCount:]),
		StepTokens: le.Uint32(b[SubOffStepTokens:]),
		StepSample: le.Uint32(b[SubOffStepSample:]),
	}
}

// Kind is a completion record's kind.
type Kind uint32

// Completion kinds (device -> host).
const (
	// KindToken: a slot sampled a token in a step.
	KindToken Kind = 1
	// KindStepDone: the step's last record; Slot holds the entries
	// executed, StartNS/EndNS the device clock around the step.
	KindStepDone Kind = 2
	// KindError: a record or entry failed; Code and Detail say why. Slot
	// is the slot concerned or NoSlot.
	KindError Kind = 3
	// KindSlotClosed acknowledges OpCloseSlot: no later record mentions
	// the slot until it is opened again.
	KindSlotClosed Kind = 4
	// KindStopped acknowledges OpStop; it is the device's last record.
	KindStopped Kind = 5
	// KindSkipped: a step entry for a slot the device had already
	// finished (or failed) was not executed.
	KindSkipped Kind = 6
	// KindTopLogprobs: up to TopPerRecord alternatives of the TOKEN just
	// before it, for a slot opened with n_top > 0. TopRecords(n) of them
	// follow that TOKEN at once (nothing else between), carrying the first
	// n of the sampler's order, most likely first; n is n_top, or fewer
	// when fewer candidates exist. An unused second pair has token TopNone
	// and logprob 0. Slot and Step are the TOKEN's.
	KindTopLogprobs Kind = 7
)

var kindNames = [...]string{"", "TOKEN", "STEP_DONE", "ERROR", "SLOT_CLOSED", "STOPPED", "SKIPPED", "TOP_LOGPROBS"}

func (k Kind) String() string {
	if int(k) > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.FormatUint(uint64(k), 10) + ")"
}

// FinishReason says why a TOKEN ended its slot's generation.
type FinishReason uint32

const (
	FinishNone   FinishReason = 0 // the slot goes on
	FinishStop   FinishReason = 1 // the token is an EOS id or a stop token
	FinishLength FinishReason = 2 // the slot reached its max_tokens
)

// ErrorCode is the Code of a KindError completion. Detail carries the
// value named after each code.
type ErrorCode uint32

const (
	CodeBadOp      ErrorCode = 1  // unknown op; detail: the op
	CodeBadSlot    ErrorCode = 2  // slot number beyond the device's slots; detail: the slot
	CodeSlotState  ErrorCode = 3  // OPEN of an open slot, or GRANT/STEP/CLOSE of a closed one; detail: the op
	CodeBadPayload ErrorCode = 4  // payload or token run outside the staging area, or a length that disagrees with its counts; detail: the offset
	CodeNoBlock    ErrorCode = 5  // a position beyond the slot's granted blocks (or a block id beyond the pool); detail: the position or block id
	CodeBadToken   ErrorCode = 6  // a token id beyond the vocabulary; detail: the token id
	CodeBadParams  ErrorCode = 7  // a slot parameter block the device refuses; detail: the word index
	CodeNoFeedback ErrorCode = 8  // a feedback entry for a slot with no sampled token yet, or with n_tokens != 1; detail: n_tokens
	CodeDevice     ErrorCode = 9  // the device failed internally; detail: device-specific
	CodeNonFinite  ErrorCode = 10 // the logits an entry samples from hold no finite value (NaN/Inf weights or overflow); detail: the position of the token it would have sampled
)

var codeNames = [...]string{"", "BAD_OP", "BAD_SLOT", "SLOT_STATE", "BAD_PAYLOAD", "NO_BLOCK",
	"BAD_TOKEN", "BAD_PARAMS", "NO_FEEDBACK", "DEVICE", "NON_FINITE"}

func (c ErrorCode) String() string {
	if int(c) > 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "ErrorCode(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// NoSlot is the Slot of an error that concerns no particular slot.
const NoSlot = 0xFFFFFFFF

// Completion record: CompletionSize bytes; ComOff* are byte offsets. Bytes
// 16..31 depend on the kind; kinds without fields there write zeros.
const (
	CompletionSize = 32

	ComOffKind = 0 // u32 Kind
	ComOffSlot = 4 // u32 slot (TOKEN/TOP_LOGPROBS/ERROR/SLOT_CLOSED/SKIPPED); entries executed (STEP_DONE)
	ComOffStep = 8 // u64 step id, or the ID of the submit record answered

	ComOffToken    = 16 // TOKEN u32 token id
	ComOffLogprob  = 20 // TOKEN f32 log probability (0 unless the slot asked for logprobs)
	ComOffFinish   = 24 // TOKEN u32 FinishReason
	ComOffPosition = 28 // TOKEN u32 position of the token in its sequence
	ComOffStartNS  = 16 // STEP_DONE u64 device clock at the step's start, ns
	ComOffEndNS    = 24 // STEP_DONE u64 device clock at the step's end, ns
	ComOffCode     = 16 // ERROR u32 ErrorCode
	ComOffDetail   = 20 // ERROR u32 detail

	ComOffTopToken0   = 16 // TOP_LOGPROBS u32 first alternative's token id
	ComOffTopLogprob0 = 20 // TOP_LOGPROBS f32 first alternative's log probability
	ComOffTopToken1   = 24 // TOP_LOGPROBS u32 second alternative's token id, or TopNone
	ComOffTopLogprob1 = 28 // TOP_LOGPROBS f32 second alternative's log probability (0 when unused)

	// TopPerRecord is the number of alternatives one TOP_LOGPROBS record
	// carries.
	TopPerRecord = 2
	// TopNone is the token of an unused pair of a TOP_LOGPROBS record.
	TopNone = 0xFFFFFFFF
)

// TopRecords is the number of TOP_LOGPROBS records that carry n
// alternatives.
func TopRecords(n int) int { return (n + TopPerRecord - 1) / TopPerRecord }

// StepRecords is the most completions one STEP can produce on a device of
// slots slots: a TOKEN and the alternatives of MaxTop for every slot, and
// the STEP_DONE. (An entry that fails or is skipped answers one record in
// place of its TOKEN.)
func StepRecords(slots int) int { return slots*(1+TopRecords(MaxTop)) + 1 }

// MinCompletionCap is the smallest completion ring a device of slots slots
// starts on: one whole step's records fit, so a device that reserves a
// step's records before it samples them (the CUDA kernel writes each
// row's TOKEN from another block) never waits for room it cannot get.
func MinCompletionCap(slots int) int {
	c := 1
	for c < StepRecords(slots) {
		c <<= 1
	}
	return c
}

// TopLogprob is one alternative of a TOP_LOGPROBS record.
type TopLogprob struct {
	Token   uint32 // TopNone: unused
	Logprob float32
}

// Completion is a decoded completion record. Only the fields of its Kind
// are encoded; Get leaves the others zero.
type Completion struct {
	Kind Kind
	Slot uint32 // slot, or entries executed for KindStepDone
	Step uint64 // step id or the answered record's ID

	Token    uint32       // KindToken
	Logprob  float32      // KindToken
	Finish   FinishReason // KindToken
	Position uint32       // KindToken

	StartNS uint64 // KindStepDone
	EndNS   uint64 // KindStepDone

	Code   ErrorCode // KindError
	Detail uint32    // KindError

	Top [TopPerRecord]TopLogprob // KindTopLogprobs
}

// Put encodes c into b[:CompletionSize]. Every kind's fields pair up
// into four 8-byte words, and Put writes those: a device that streams
// thousands of records into lines the host has just read is bound by how
// many stores wait for those lines, not by the arithmetic.
func (c *Completion) Put(b []byte) {
	b = b[:CompletionSize:CompletionSize]
	var w2, w3 uint64 // bytes 16..23, 24..31
	switch c.Kind {
	case KindToken:
		w2 = uint64(c.Token) | uint64(math.Float32bits(c.Logprob))<<32
		w3 = uint64(c.Finish) | uint64(c.Position)<<32
	case KindStepDone:
		w2, w3 = c.StartNS, c.EndNS
	case KindError:
		w2 = uint64(c.Code) | uint64(c.Detail)<<32
	case KindTopLogprobs:
		w2 = uint64(c.Top[0].Token) | uint64(math.Float32bits(c.Top[0].Logprob))<<32
		w3 = uint64(c.Top[1].Token) | uint64(math.Float32bits(c.Top[1].Logprob))<<32
	}
	le := binary.LittleEndian
	le.PutUint64(b[ComOffKind:], uint64(c.Kind)|uint64(c.Slot)<<32)
	le.PutUint64(b[ComOffStep:], c.Step)
	le.PutUint64(b[ComOffToken:], w2)
	le.PutUint64(b[ComOffFinish:], w3)
}

// PutToken encodes a TOKEN record into b[:CompletionSize], as Put does
// for a Completion of KindToken, without building one: a device's
// per-token path.
func PutToken(b []byte, slot uint32, step uint64, token uint32, logprob float32, finish FinishReason, pos uint32) {
	b = b[:CompletionSize:CompletionSize]
	le := binary.LittleEndian
	le.PutUint64(b[ComOffKind:], uint64(KindToken)|uint64(slot)<<32)
	le.PutUint64(b[ComOffStep:], step)
	le.PutUint64(b[ComOffToken:], uint64(token)|uint64(math.Float32bits(logprob))<<32)
	le.PutUint64(b[ComOffFinish:], uint64(finish)|uint64(pos)<<32)
}

// The pairs Put and PutToken write as words.
var _ = [1]struct{}{}[(ComOffSlot-ComOffKind-4)|(ComOffLogprob-ComOffToken-4)|(ComOffPosition-ComOffFinish-4)|
	(ComOffToken-ComOffStep-8)|(ComOffFinish-ComOffToken-8)|(ComOffStartNS-ComOffToken)|(ComOffEndNS-ComOffFinish)|
	(ComOffCode-ComOffToken)|(ComOffDetail-ComOffLogprob)|(ComOffTopToken0-ComOffToken)|(ComOffTopLogprob0-ComOffLogprob)|
	(ComOffTopToken1-ComOffFinish)|(ComOffTopLogprob1-ComOffPosition)|(ComOffStep-ComOffKind-8)|(CompletionSize-32)]

// Get decodes b[:CompletionSize] into c.
func (c *Completion) Get(b []byte) {
	b = b[:CompletionSize:CompletionSize]
	le := binary.LittleEndian
	*c = Completion{
		Kind: Kind(le.Uint32(b[ComOffKind:])),
		Slot: le.Uint32(b[ComOffSlot:]),
		Step: le.Uint64(b[ComOffStep:]),
	}
	switch c.Kind {
	case KindToken:
		c.Token = le.Uint32(b[ComOffToken:])
		c.Logprob = math.Float32frombits(le.Uint32(b[ComOffLogprob:]))
		c.Finish = FinishReason(le.Uint32(b[ComOffFinish:]))
		c.Position = le.Uint32(b[ComOffPosition:])
	case KindStepDone:
		c.StartNS = le.Uint64(b[ComOffStartNS:])
		c.EndNS = le.Uint64(b[ComOffEndNS:])
	case KindError:
		c.Code = ErrorCode(le.Uint32(b[ComOffCode:]))
		c.Detail = le.Uint32(b[ComOffDetail:])
	case KindTopLogprobs:
		c.Top[0] = TopLogprob{le.Uint32(b[ComOffTopToken0:]), math.Float32frombits(le.Uint32(b[ComOffTopLogprob0:]))}
		c.Top[1] = TopLogprob{le.Uint32(b[ComOffTopToken1:]), math.Float32frombits(le.Uint32(b[ComOffTopLogprob1:]))}
	}
}
