package ringbuf

import (
	"errors"
	"testing"
)

// payloadWith encodes testSlotParams with n stop ids and m biases.
func payloadWith(nStop, nBias int) []uint32 {
	p := testSlotParams()
	stop := make([]uint32, nStop)
	bias := make([]TokenBias, nBias)
	for i := range bias {
		bias[i] = TokenBias{Token: uint32(i), Bias: 1}
	}
	w := make([]uint32, SlotPayloadWords(nStop, nBias, 0))
	PutSlotPayload(w, &p, stop, bias, nil)
	return w
}

func wantWord(t *testing.T, what string, w []uint32, word int) {
	t.Helper()
	_, err := ParseSlotPayload(w)
	var pe *PayloadError
	if !errors.As(err, &pe) || pe.Word != word {
		t.Errorf("%s: %v, want a PayloadError at word %d", what, err, word)
	}
}

// TestSlotPayloadLimits: n_stop and n_bias up to the device limits pass,
// one more is refused at its count's word, as the CUDA kernel does.
func TestSlotPayloadLimits(t *testing.T) {
	if _, err := ParseSlotPayload(payloadWith(MaxStop, MaxBias)); err != nil {
		t.Fatalf("payload at the limits: %v", err)
	}
	wantWord(t, "n_stop over MaxStop", payloadWith(MaxStop+1, 0), SPOffNStop)
	wantWord(t, "n_bias over MaxBias", payloadWith(0, MaxBias+1), SPOffNBias)
}

// TestSlotPayloadCheckOrder: a payload with several faults is refused at
// the word of the first check in the CUDA kernel's order (counts, n_stop,
// n_bias, n_eos, flags, n_top), then the reserved words (Go only).
func TestSlotPayloadCheckOrder(t *testing.T) {
	type fault func(w []uint32) []uint32
	counts := func(w []uint32) []uint32 { return append(w, 0) }
	eos := func(w []uint32) []uint32 { w[SPOffNEOS] = MaxEOS + 1; return w }
	flags := func(w []uint32) []uint32 { w[SPOffFlags] |= 1 << 9; return w }
	nTop := func(w []uint32) []uint32 { w[SPOffNTop] = MaxTop + 1; return w }
	reserved := func(w []uint32) []uint32 { w[SlotParamsWords-1] = 1; return w }
	for _, c := range []struct {
		name   string
		stop   int
		bias   int
		faults []fault
		word   int
	}{
		{"counts before everything", MaxStop + 1, MaxBias + 1, []fault{counts, eos, flags, nTop, reserved}, SPOffNStop},
		{"n_stop before n_bias", MaxStop + 1, MaxBias + 1, []fault{eos, flags, nTop, reserved}, SPOffNStop},
		{"n_bias before n_eos", 0, MaxBias + 1, []fault{eos, flags, nTop, reserved}, SPOffNBias},
		{"n_eos before flags", 0, 0, []fault{eos, flags, nTop, reserved}, SPOffNEOS},
		{"flags before n_top", 0, 0, []fault{flags, nTop, reserved}, SPOffFlags},
		{"n_top before reserved", 0, 0, []fault{nTop, reserved}, SPOffNTop},
		{"reserved last", 0, 0, []fault{reserved}, SlotParamsWords - 1},
	} {
		w := payloadWith(c.stop, c.bias)
		for _, f := range c.faults {
			w = f(w)
		}
		wantWord(t, c.name, w, c.word)
	}
}
