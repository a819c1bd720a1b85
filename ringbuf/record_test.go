package ringbuf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"ringlm/sample"
)

func TestSubmitRoundTrip(t *testing.T) {
	for _, r := range []SubmitRecord{
		{Op: OpOpenSlot, Slot: 7, ID: 1, PayloadOff: 96, PayloadLen: uint32(SlotPayloadWords(2, 1, 3))},
		{Op: OpGrantBlocks, Slot: 7, ID: 2, PayloadOff: 200, PayloadLen: 5, GrantFirst: 3, GrantCount: 5},
		{Op: OpStep, Slot: 3, ID: 1<<40 + 5, PayloadOff: 0, PayloadLen: 3 * StepEntryWords, StepTokens: 130, StepSample: 2},
		{Op: OpCloseSlot, Slot: 255, ID: math.MaxUint64},
		{Op: OpStop, ID: 9},
	} {
		// Written over garbage, inside a larger buffer: exactly SubmitSize
		// bytes change and reserved bytes come out zero.
		buf := bytes.Repeat([]byte{0xA5}, SubmitSize+8)
		r.Put(buf)
		if !bytes.Equal(buf[SubmitSize:], bytes.Repeat([]byte{0xA5}, 8)) {
			t.Errorf("%v: Put wrote past SubmitSize", r.Op)
		}
		if !bytes.Equal(buf[SubOffStepSample+4:SubmitSize], make([]byte, SubmitSize-SubOffStepSample-4)) {
			t.Errorf("%v: reserved bytes not zero: %x", r.Op, buf[40:64])
		}
		var got SubmitRecord
		got.Get(buf)
		if got != r {
			t.Errorf("%v: round trip %+v, want %+v", r.Op, got, r)
		}
	}
	if SubmitSize != 64 || CompletionSize != 32 || HeaderSize != 128 || StepEntryWords != 4 || SlotParamsWords != 32 {
		t.Fatal("record sizes changed: bump Version and regenerate ring.h")
	}
}

// TestSubmitBytes pins the byte layout independently of the constants.
func TestSubmitBytes(t *testing.T) {
	r := SubmitRecord{Op: OpGrantBlocks, Slot: 0x04030201, ID: 0x0C0B0A0908070605, PayloadOff: 0x100F0E0D,
		PayloadLen: 0x14131211, GrantFirst: 0x18171615, GrantCount: 0x1C1B1A19, StepTokens: 0x201F1E1D, StepSample: 0x24232221}
	b := make([]byte, SubmitSize)
	r.Put(b)
	want := []byte{2, 0, 0, 0}
	for i := byte(1); i <= 0x24; i++ {
		want = append(want, i)
	}
	want = append(want, make([]byte, 24)...)
	if !bytes.Equal(b, want) {
		t.Fatalf("bytes\n got %x\nwant %x", b, want)
	}
}

func TestCompletionRoundTrip(t *testing.T) {
	for _, c := range []Completion{
		{Kind: KindToken, Slot: 3, Step: 77, Token: 151643, Logprob: -0.6931472, Finish: FinishStop, Position: 4095},
		{Kind: KindToken, Slot: 0, Step: 1, Token: 5, Logprob: float32(math.Inf(-1)), Finish: FinishLength, Position: 1},
		{Kind: KindStepDone, Slot: 12, Step: 78, StartNS: 1_700_000_000_123_456_789, EndNS: 1_700_000_000_124_000_000},
		{Kind: KindError, Slot: NoSlot, Step: 5, Code: CodeBadOp, Detail: 99},
		{Kind: KindSlotClosed, Slot: 4, Step: 80},
		{Kind: KindStopped, Step: 81},
		{Kind: KindSkipped, Slot: 9, Step: 79},
		{Kind: KindTopLogprobs, Slot: 3, Step: 77, Top: [TopPerRecord]TopLogprob{{Token: 151643, Logprob: -0.25}, {Token: 2, Logprob: -1.5}}},
		{Kind: KindTopLogprobs, Slot: 3, Step: 77, Top: [TopPerRecord]TopLogprob{{Token: 9, Logprob: -4}, {Token: TopNone}}},
	} {
		buf := bytes.Repeat([]byte{0x5A}, CompletionSize+4)
		c.Put(buf)
		if !bytes.Equal(buf[CompletionSize:], []byte{0x5A, 0x5A, 0x5A, 0x5A}) {
			t.Errorf("%v: Put wrote past CompletionSize", c.Kind)
		}
		var got Completion
		got.Get(buf)
		if got != c {
			t.Errorf("%v: round trip %+v, want %+v", c.Kind, got, c)
		}
		le := binary.LittleEndian
		switch c.Kind {
		case KindToken:
			if le.Uint32(buf[ComOffToken:]) != c.Token || le.Uint32(buf[ComOffPosition:]) != c.Position ||
				math.Float32frombits(le.Uint32(buf[ComOffLogprob:])) != c.Logprob {
				t.Errorf("token bytes %x", buf)
			}
		case KindStepDone:
			if le.Uint64(buf[ComOffStartNS:]) != c.StartNS || le.Uint64(buf[ComOffEndNS:]) != c.EndNS {
				t.Errorf("step done bytes %x", buf)
			}
		case KindError:
			if le.Uint32(buf[ComOffCode:]) != uint32(c.Code) || le.Uint32(buf[ComOffDetail:]) != c.Detail ||
				!bytes.Equal(buf[24:32], make([]byte, 8)) {
				t.Errorf("error bytes %x", buf)
			}
		case KindTopLogprobs:
			if le.Uint32(buf[ComOffTopToken0:]) != c.Top[0].Token || le.Uint32(buf[ComOffTopToken1:]) != c.Top[1].Token ||
				math.Float32frombits(le.Uint32(buf[ComOffTopLogprob0:])) != c.Top[0].Logprob ||
				math.Float32frombits(le.Uint32(buf[ComOffTopLogprob1:])) != c.Top[1].Logprob {
				t.Errorf("top logprobs bytes %x", buf)
			}
		default:
			if !bytes.Equal(buf[16:32], make([]byte, 16)) {
				t.Errorf("%v: kind-specific bytes not zero: %x", c.Kind, buf)
			}
		}
	}
	// Fields of other kinds are not encoded.
	var got Completion
	c := Completion{Kind: KindSkipped, Slot: 1, Step: 2, Token: 3, StartNS: 4, Code: 5, Top: [TopPerRecord]TopLogprob{{6, 7}, {8, 9}}}
	b := make([]byte, CompletionSize)
	c.Put(b)
	got.Get(b)
	if got != (Completion{Kind: KindSkipped, Slot: 1, Step: 2}) {
		t.Errorf("SKIPPED carried other kinds' fields: %+v", got)
	}
	c = Completion{Kind: KindTopLogprobs, Slot: 1, Step: 2, Token: 3, Logprob: -1, Finish: FinishStop, Position: 4, Top: [TopPerRecord]TopLogprob{{6, -7}, {8, -9}}}
	c.Put(b)
	got.Get(b)
	if got != (Completion{Kind: KindTopLogprobs, Slot: 1, Step: 2, Top: c.Top}) {
		t.Errorf("TOP_LOGPROBS carried other kinds' fields: %+v", got)
	}
}

func TestNames(t *testing.T) {
	if OpStep.String() != "STEP" || Op(0).String() != "Op(0)" || KindSkipped.String() != "SKIPPED" ||
		KindTopLogprobs.String() != "TOP_LOGPROBS" || Kind(8).String() != "Kind(8)" || CodeNoFeedback.String() != "NO_FEEDBACK" || ErrorCode(42).String() != "ErrorCode(42)" {
		t.Error("String methods")
	}
}

func TestStepEntryRoundTrip(t *testing.T) {
	w := make([]uint32, 2*StepEntryWords)
	es := []StepEntry{{Slot: 1, NTokens: 17, TokenOff: 300, Flags: 0}, {Slot: 2, NTokens: 1, TokenOff: TokenOffFeedback, Flags: EntrySample}}
	for i := range es {
		es[i].Put(w[i*StepEntryWords:])
	}
	if w[StepEntryWords+EntOffTokenOff] != 0xFFFFFFFF || w[EntOffNTokens] != 17 {
		t.Errorf("words %v", w)
	}
	for i := range es {
		var e StepEntry
		e.Get(w[i*StepEntryWords:])
		if e != es[i] {
			t.Errorf("entry %d: %+v, want %+v", i, e, es[i])
		}
	}
}

func testSlotParams() SlotParams {
	return SlotParams{Temperature: 0.7, TopP: 0.95, MinP: 0.05, TopK: 40, RepeatPenalty: 1.1, RepeatLastN: -1,
		Presence: 0.5, Frequency: -0.25, Seed: 0xDEADBEEF_01234567, MaxTokens: 256, StartPos: 48,
		Flags: SlotLogprobs | SlotIgnoreEOS, NEOS: 2, EOS: [MaxEOS]uint32{128001, 128009}, PromptLen: 30, NTop: MaxTop}
}

func TestSlotPayloadRoundTrip(t *testing.T) {
	p := testSlotParams()
	stop := []uint32{13, 198}
	bias := []TokenBias{{Token: 5, Bias: -100}, {Token: 7, Bias: 0}, {Token: 1000, Bias: 2.5}}
	hist := []uint32{1, 2, 3, 4}
	n := SlotPayloadWords(len(stop), len(bias), len(hist))
	w := make([]uint32, n)
	for i := range w {
		w[i] = 0xFFFFFFFF // PutSlotPayload must clear the reserved words
	}
	if got := PutSlotPayload(w, &p, stop, bias, hist); got != n || n != 32+2+6+4 {
		t.Fatalf("PutSlotPayload wrote %d words, want %d", got, n)
	}
	if w[SPOffSeedLo] != 0x01234567 || w[SPOffSeedHi] != 0xDEADBEEF || w[SPOffRepeatLastN] != 0xFFFFFFFF ||
		w[SPOffNStop] != 2 || w[SPOffNBias] != 3 || w[SPOffNHist] != 4 || w[SPOffEOS+1] != 128009 ||
		w[SPOffPromptLen] != 30 || w[SPOffNTop] != MaxTop || math.Float32frombits(w[SPOffTemperature]) != 0.7 {
		t.Errorf("block words %v", w[:SlotParamsWords])
	}
	got, err := ParseSlotPayload(w)
	if err != nil {
		t.Fatal(err)
	}
	if got.Params != p || !slices.Equal(got.Stop, stop) || !slices.Equal(got.Hist, hist) || got.NBias() != len(bias) {
		t.Fatalf("round trip %+v", got)
	}
	for i, b := range bias {
		if got.BiasAt(i) != b {
			t.Errorf("bias %d: %+v, want %+v", i, got.BiasAt(i), b)
		}
	}
	if &got.Stop[0] != &w[SlotParamsWords] {
		t.Error("Stop does not alias the payload")
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = ParseSlotPayload(w) }); a != 0 {
		t.Errorf("ParseSlotPayload allocates %v times", a)
	}

	// Malformed payloads name the offending word.
	for _, c := range []struct {
		name string
		edit func([]uint32) []uint32
		word int
	}{
		{"short", func(w []uint32) []uint32 { return w[:SlotParamsWords-1] }, SlotParamsWords - 1},
		{"reserved", func(w []uint32) []uint32 { w[SlotParamsWords-1] = 1; return w }, SlotParamsWords - 1},
		{"eos count", func(w []uint32) []uint32 { w[SPOffNEOS] = MaxEOS + 1; return w }, SPOffNEOS},
		{"flags", func(w []uint32) []uint32 { w[SPOffFlags] |= 1 << 7; return w }, SPOffFlags},
		{"too long", func(w []uint32) []uint32 { return append(w, 0) }, SPOffNStop},
		{"too short", func(w []uint32) []uint32 { return w[:len(w)-1] }, SPOffNStop},
		{"huge count", func(w []uint32) []uint32 { w[SPOffNBias] = 0xFFFFFFFF; return w }, SPOffNStop},
		{"n_top over the maximum", func(w []uint32) []uint32 { w[SPOffNTop] = MaxTop + 1; return w }, SPOffNTop},
		{"n_top huge", func(w []uint32) []uint32 { w[SPOffNTop] = 0xFFFFFFFF; return w }, SPOffNTop},
		{"n_top without logprobs", func(w []uint32) []uint32 { w[SPOffFlags] &^= SlotLogprobs; w[SPOffNTop] = 1; return w }, SPOffNTop},
		{"reserved after n_top", func(w []uint32) []uint32 { w[SPOffNTop+1] = 1; return w }, SPOffNTop + 1},
	} {
		_, err := ParseSlotPayload(c.edit(slices.Clone(w)))
		var pe *PayloadError
		if !errors.As(err, &pe) || pe.Word != c.word {
			t.Errorf("%s: %v, want a PayloadError at word %d", c.name, err, c.word)
		}
	}
}

func TestRecordsDoNotAllocate(t *testing.T) {
	b := make([]byte, SubmitSize)
	r := SubmitRecord{Op: OpStep, Slot: 3, ID: 4}
	c := Completion{Kind: KindToken, Token: 3}
	w := make([]uint32, StepEntryWords)
	e := StepEntry{Slot: 1}
	if a := testing.AllocsPerRun(100, func() {
		r.Put(b)
		r.Get(b)
		c.Put(b)
		c.Get(b)
		e.Put(w)
		e.Get(w)
	}); a != 0 {
		t.Errorf("%v allocations", a)
	}
}

func TestTopRecords(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 1, 2: 1, 3: 2, 19: 10, MaxTop: 10} {
		if got := TopRecords(n); got != want {
			t.Errorf("TopRecords(%d) = %d, want %d", n, got, want)
		}
	}
	// The ring's limit is the sampler's: the engine passes
	// sample.Params.TopLogprobs through as n_top.
	if MaxTop != sample.MaxTopLogprobs {
		t.Errorf("MaxTop %d != sample.MaxTopLogprobs %d", MaxTop, sample.MaxTopLogprobs)
	}
}
