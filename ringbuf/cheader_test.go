package ringbuf_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ringlm/ringbuf"
	"ringlm/ringbuf/internal/cheader"
)

const ringH = "../kernels/cuda/ring.h"

// TestRingHeaderUpToDate fails when kernels/cuda/ring.h is not what the
// generator writes from this package: run go generate ./ringbuf.
func TestRingHeaderUpToDate(t *testing.T) {
	want, err := cheader.Generate(".")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(ringH)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s is stale (run go generate ./ringbuf); line %d:\n have %q\n want %q", ringH, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s is stale (run go generate ./ringbuf): %d lines, want %d", ringH, len(gl), len(wl))
	}
}

func TestMacroNames(t *testing.T) {
	for goName, want := range map[string]string{
		"SubOffPayloadLen": "RLM_SUB_OFF_PAYLOAD_LEN",
		"ComOffStartNS":    "RLM_COM_OFF_START_NS",
		"SPOffTopP":        "RLM_SP_OFF_TOP_P",
		"EntOffNTokens":    "RLM_ENT_OFF_N_TOKENS",
		"MaxEOS":           "RLM_MAX_EOS",
		"MaxHeadDim":       "RLM_MAX_HEAD_DIM",
		"SPOffNEOS":        "RLM_SP_OFF_N_EOS",
		"HdrOffComplCap":   "RLM_HDR_OFF_COMPL_CAP",
		"SubOffID":         "RLM_SUB_OFF_ID",
	} {
		if got := cheader.MacroName(goName); got != want {
			t.Errorf("MacroName(%s) = %s, want %s", goName, got, want)
		}
	}
}

// TestRingHeaderCompiles builds testdata/ringcheck.c against ring.h as
// strict C11 (no implicit padding allowed) and checks it as C++17; then
// feeds it records that Go encoded and headers that Go judged, and
// requires the C side to read the same fields and reach the same verdicts.
func TestRingHeaderCompiles(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ringcheck")
	flags := []string{"-Wall", "-Wextra", "-Wpadded", "-pedantic", "-Werror", "-I", filepath.Dir(ringH)}
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run(cc, append([]string{"-std=c11", "-O1", "-o", bin, "testdata/ringcheck.c"}, flags...)...)
	if cxx, err := exec.LookPath("c++"); err == nil {
		run(cxx, append([]string{"-std=c++17", "-fsyntax-only", "-x", "c++", "testdata/ringcheck.c"}, flags...)...)
	}

	var in bytes.Buffer
	var want []string
	le := binary.LittleEndian

	// Headers: valid ones and one corruption per field; the C check must
	// accept exactly what ParseHeader accepts.
	for _, c := range [][3]int{{2, 2, 64}, {8, 64, 100}, {1024, 4096, 1 << 12}, {4, 8, 33 * 32}} {
		l, err := ringbuf.NewLayout(c[0], c[1], c[2])
		if err != nil {
			t.Fatal(err)
		}
		base := make([]byte, ringbuf.HeaderSize)
		l.PutHeader(base)
		type hcase struct {
			size int
			hdr  []byte
		}
		cases := []hcase{{l.Size, base}, {l.Size + 1, base}, {l.Size - 1, base}}
		for off := 0; off < ringbuf.HeaderSize; off++ {
			for _, x := range []byte{1, 0x80} {
				h := bytes.Clone(base)
				h[off] ^= x
				cases = append(cases, hcase{l.Size, h})
			}
		}
		for _, hc := range cases {
			arena := make([]byte, max(hc.size, ringbuf.HeaderSize))
			copy(arena, hc.hdr)
			_, err := ringbuf.ParseHeader(arena[:hc.size])
			in.WriteByte('H')
			in.Write(le.AppendUint64(nil, uint64(hc.size)))
			in.Write(hc.hdr)
			if err == nil {
				want = append(want, "H 0")
			} else {
				want = append(want, "H fail") // any non-zero check number
			}
		}
	}

	rec := make([]byte, ringbuf.SubmitSize)
	for _, s := range []ringbuf.SubmitRecord{
		{Op: ringbuf.OpOpenSlot, Slot: 7, ID: 1, PayloadOff: 96, PayloadLen: 40},
		{Op: ringbuf.OpGrantBlocks, Slot: 7, ID: 2, PayloadOff: 200, PayloadLen: 5, GrantFirst: 3, GrantCount: 5},
		{Op: ringbuf.OpStep, Slot: 3, ID: 1<<40 + 5, PayloadLen: 12, StepTokens: 130, StepSample: 2},
		{Op: ringbuf.OpCloseSlot, Slot: 0xFFFFFFFE, ID: 1<<64 - 1},
		{Op: ringbuf.OpStop, ID: 9},
	} {
		s.Put(rec)
		in.WriteByte('S')
		in.Write(rec)
		want = append(want, fmt.Sprintf("S %d %d %d %d %d %d %d %d %d", s.Op, s.Slot, s.ID, s.PayloadOff, s.PayloadLen,
			s.GrantFirst, s.GrantCount, s.StepTokens, s.StepSample))
	}
	for _, c := range []ringbuf.Completion{
		{Kind: ringbuf.KindToken, Slot: 3, Step: 77, Token: 151643, Logprob: -0.6931472, Finish: ringbuf.FinishStop, Position: 4095},
		{Kind: ringbuf.KindStepDone, Slot: 12, Step: 78, StartNS: 1_700_000_000_123_456_789, EndNS: 1<<64 - 2},
		{Kind: ringbuf.KindError, Slot: ringbuf.NoSlot, Step: 5, Code: ringbuf.CodeBadOp, Detail: 99},
		{Kind: ringbuf.KindSlotClosed, Slot: 4, Step: 80},
		{Kind: ringbuf.KindStopped, Step: 81},
		{Kind: ringbuf.KindSkipped, Slot: 9, Step: 79},
		{Kind: ringbuf.KindTopLogprobs, Slot: 3, Step: 77, Top: [ringbuf.TopPerRecord]ringbuf.TopLogprob{
			{Token: 151643, Logprob: -0.6931472}, {Token: 17, Logprob: -3.25}}},
		{Kind: ringbuf.KindTopLogprobs, Slot: 3, Step: 77, Top: [ringbuf.TopPerRecord]ringbuf.TopLogprob{
			{Token: 5, Logprob: -7.5}, {Token: ringbuf.TopNone}}},
	} {
		c.Put(rec)
		in.WriteByte('C')
		in.Write(rec[:ringbuf.CompletionSize])
		line := fmt.Sprintf("C %d %d %d", c.Kind, c.Slot, c.Step)
		switch c.Kind {
		case ringbuf.KindToken:
			line += fmt.Sprintf(" %d %.9g %d %d", c.Token, float64(c.Logprob), c.Finish, c.Position)
		case ringbuf.KindStepDone:
			line += fmt.Sprintf(" %d %d", c.StartNS, c.EndNS)
		case ringbuf.KindError:
			line += fmt.Sprintf(" %d %d", c.Code, c.Detail)
		case ringbuf.KindTopLogprobs:
			line += fmt.Sprintf(" %d %.9g %d %.9g", c.Top[0].Token, float64(c.Top[0].Logprob), c.Top[1].Token, float64(c.Top[1].Logprob))
		}
		want = append(want, line)
	}
	words := make([]uint32, ringbuf.SlotParamsWords)
	wordBytes := func(w []uint32) []byte {
		var b []byte
		for _, x := range w {
			b = le.AppendUint32(b, x)
		}
		return b
	}
	e := ringbuf.StepEntry{Slot: 5, NTokens: 1, TokenOff: ringbuf.TokenOffFeedback, Flags: ringbuf.EntrySample}
	e.Put(words)
	in.WriteByte('E')
	in.Write(wordBytes(words[:ringbuf.StepEntryWords]))
	want = append(want, fmt.Sprintf("E %d %d %d %d", e.Slot, e.NTokens, e.TokenOff, e.Flags))

	p := ringbuf.SlotParams{Temperature: 0.7, TopP: 0.95, MinP: 0.05, TopK: 40, RepeatPenalty: 1.1, RepeatLastN: -1,
		Presence: 0.5, Frequency: -0.25, Seed: 0xDEADBEEF_01234567, MaxTokens: 256, StartPos: 48,
		Flags: ringbuf.SlotLogprobs, NEOS: 3, EOS: [ringbuf.MaxEOS]uint32{128001, 128008, 128009}, PromptLen: 40, NTop: 17}
	ringbuf.PutSlotPayload(words, &p, nil, nil, nil)
	in.WriteByte('P')
	in.Write(wordBytes(words))
	line := fmt.Sprintf("P %.9g %.9g %.9g %d %.9g %d %.9g %.9g %d %d %d %d %d %d %d %d", float64(p.Temperature),
		float64(p.TopP), float64(p.MinP), p.TopK, float64(p.RepeatPenalty), p.RepeatLastN, float64(p.Presence),
		float64(p.Frequency), p.Seed, p.MaxTokens, p.StartPos, 0, 0, p.Flags, 0, p.NEOS)
	for _, id := range p.EOS {
		line += fmt.Sprintf(" %d", id)
	}
	line += fmt.Sprintf(" %d %d", p.PromptLen, p.NTop)
	want = append(want, line)

	cmd := exec.Command(bin)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ringcheck: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("ringcheck printed %d lines, want %d", len(got), len(want))
	}
	for i := range got {
		g := got[i]
		if strings.HasPrefix(g, "H ") && g != "H 0" {
			g = "H fail"
		}
		if g != want[i] {
			t.Errorf("case %d: C read %q, Go wrote %q", i, got[i], want[i])
		}
	}
}
