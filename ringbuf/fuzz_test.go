package ringbuf

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzParseHeader: any bytes either fail with ErrHeader or describe a
// layout that NewLayout produces and PutHeader writes back identically.
func FuzzParseHeader(f *testing.F) {
	for _, c := range [][3]int{{2, 2, 64}, {8, 64, 100}, {1024, 1024, 4096}} {
		l, _ := NewLayout(c[0], c[1], c[2])
		b := make([]byte, HeaderSize)
		l.PutHeader(b)
		f.Add(b, uint32(l.Size))
	}
	f.Fuzz(func(t *testing.T, hdr []byte, size uint32) {
		size %= 1 << 22
		arena := make([]byte, max(int(size), len(hdr)))
		copy(arena, hdr)
		l, err := ParseHeader(arena[:size])
		if err != nil {
			return
		}
		want, err := NewLayout(l.Submit.Cap, l.Completion.Cap, l.StagingWords)
		if err != nil || want != l {
			t.Fatalf("accepted %+v, NewLayout gives %+v, %v", l, want, err)
		}
		b := make([]byte, HeaderSize)
		l.PutHeader(b)
		if !bytes.Equal(b, arena[:HeaderSize]) {
			t.Fatalf("accepted header %x, canonical %x", arena[:HeaderSize], b)
		}
	})
}

// FuzzParseSlotPayload: a payload either fails with a PayloadError inside
// it or re-encodes to the same words.
func FuzzParseSlotPayload(f *testing.F) {
	p := testSlotParams()
	w := make([]uint32, SlotPayloadWords(1, 1, 1))
	PutSlotPayload(w, &p, []uint32{9}, []TokenBias{{Token: 4, Bias: -1}}, []uint32{5})
	var seed []byte
	for _, x := range w {
		seed = binary.LittleEndian.AppendUint32(seed, x)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		w := make([]uint32, len(b)/4)
		for i := range w {
			w[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
		got, err := ParseSlotPayload(w)
		if err != nil {
			if pe, ok := err.(*PayloadError); !ok || pe.Word < 0 || pe.Word > len(w) {
				t.Fatalf("error %v", err)
			}
			return
		}
		bias := make([]TokenBias, got.NBias())
		for i := range bias {
			bias[i] = got.BiasAt(i)
		}
		again := make([]uint32, len(w))
		if n := PutSlotPayload(again, &got.Params, got.Stop, bias, got.Hist); n != len(w) {
			t.Fatalf("re-encoded %d words, parsed %d", n, len(w))
		}
		for i := range w {
			// -0 and NaN payloads survive as bits, so words compare exactly.
			if w[i] != again[i] {
				t.Fatalf("word %d: %#x re-encoded as %#x", i, w[i], again[i])
			}
		}
	})
}
