package ringbuf

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestNewLayout(t *testing.T) {
	for _, c := range []struct{ sub, com, words int }{
		{2, 2, MinStagingWords},
		{8, 64, 100},
		{1024, 4096, 1 << 16},
		{MaxCap, MaxCap, MaxStagingWords},
		{4, 8, 33 * 32},
	} {
		l, err := NewLayout(c.sub, c.com, c.words)
		if err != nil {
			t.Fatalf("NewLayout(%d, %d, %d): %v", c.sub, c.com, c.words, err)
		}
		regions := []struct {
			name      string
			off, size int
		}{
			{"header", 0, HeaderSize},
			{"submit", l.Submit.Off, l.Submit.Size()},
			{"completion", l.Completion.Off, l.Completion.Size()},
			{"staging", l.StagingOff, alignUp(4 * l.StagingWords)},
		}
		end := 0
		for _, r := range regions {
			if r.off%Align != 0 || r.size%Align != 0 {
				t.Errorf("%+v: %s at %d size %d not %d-aligned", c, r.name, r.off, r.size, Align)
			}
			if r.off != end {
				t.Errorf("%+v: %s at %d, previous region ends at %d", c, r.name, r.off, end)
			}
			end = r.off + r.size
		}
		if l.Size != end {
			t.Errorf("%+v: Size %d, regions end at %d", c, l.Size, end)
		}
		if l.Submit.Cap != c.sub || l.Submit.RecSize != SubmitSize || l.Completion.Cap != c.com ||
			l.Completion.RecSize != CompletionSize || l.StagingWords != c.words {
			t.Errorf("%+v: layout %+v", c, l)
		}
		if l.Submit.Size() < RingOffRecords+c.sub*SubmitSize || l.Completion.Size() < RingOffRecords+c.com*CompletionSize {
			t.Errorf("%+v: rings too small: %+v", c, l)
		}

		b := make([]byte, l.Size)
		for i := range HeaderSize {
			b[i] = 0xEE // PutHeader must clear reserved bytes
		}
		l.PutHeader(b)
		got, err := ParseHeader(b)
		if err != nil || got != l {
			t.Errorf("%+v: header round trip: %+v, %v; want %+v", c, got, err, l)
		}
		if string(b[:8]) != "RLMRING1" {
			t.Errorf("magic bytes %q", b[:8])
		}
	}
}

func TestNewLayoutRejects(t *testing.T) {
	for _, c := range []struct{ sub, com, words int }{
		{0, 8, 1024}, {1, 8, 1024}, {3, 8, 1024}, {8, 12, 1024}, {-8, 8, 1024},
		{MaxCap * 2, 8, 1024}, {8, MaxCap * 2, 1024},
		{8, 8, MinStagingWords - 1}, {8, 8, MaxStagingWords + 1}, {8, 8, -1},
	} {
		if l, err := NewLayout(c.sub, c.com, c.words); !errors.Is(err, ErrLayout) {
			t.Errorf("NewLayout(%d, %d, %d) = %+v, %v; want ErrLayout", c.sub, c.com, c.words, l, err)
		}
	}
	if _, err := NewArena(HeapAllocator{}, Layout{}); !errors.Is(err, ErrLayout) {
		t.Errorf("NewArena(zero layout): %v", err)
	}
}

func TestParseHeaderRejects(t *testing.T) {
	l, err := NewLayout(16, 32, 256)
	if err != nil {
		t.Fatal(err)
	}
	good := make([]byte, l.Size)
	l.PutHeader(good)
	le := binary.LittleEndian
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:HeaderSize-1] }},
		{"truncated arena", func(b []byte) []byte { return b[:l.Size-1] }},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }},
		{"version", func(b []byte) []byte { le.PutUint32(b[HdrOffVersion:], Version+1); return b }},
		{"header size", func(b []byte) []byte { le.PutUint32(b[HdrOffHeaderSize:], 64); return b }},
		{"reserved word", func(b []byte) []byte { b[HdrOffStagingWords+4] = 1; return b }},
		{"reserved tail", func(b []byte) []byte { b[HeaderSize-1] = 1; return b }},
		{"submit record size", func(b []byte) []byte { le.PutUint32(b[HdrOffSubmitRecSize:], 32); return b }},
		{"completion record size", func(b []byte) []byte { le.PutUint32(b[HdrOffComplRecSize:], 64); return b }},
		{"submit cap", func(b []byte) []byte { le.PutUint32(b[HdrOffSubmitCap:], 17); return b }},
		{"completion cap", func(b []byte) []byte { le.PutUint32(b[HdrOffComplCap:], 0); return b }},
		{"bigger cap", func(b []byte) []byte { le.PutUint32(b[HdrOffSubmitCap:], 32); return b }},
		{"staging words", func(b []byte) []byte { le.PutUint32(b[HdrOffStagingWords:], 1); return b }},
		{"submit offset", func(b []byte) []byte { le.PutUint64(b[HdrOffSubmitOff:], 256); return b }},
		{"completion offset", func(b []byte) []byte { le.PutUint64(b[HdrOffComplOff:], uint64(l.Submit.Off)); return b }},
		{"staging offset", func(b []byte) []byte { le.PutUint64(b[HdrOffStagingOff:], uint64(l.Size)); return b }},
		{"total size", func(b []byte) []byte { le.PutUint64(b[HdrOffTotalSize:], uint64(l.Size)+Align); return b }},
	} {
		b := c.edit(append([]byte(nil), good...))
		if got, err := ParseHeader(b); !errors.Is(err, ErrHeader) {
			t.Errorf("%s: ParseHeader = %+v, %v; want ErrHeader", c.name, got, err)
		}
		if c.name != "short" && c.name != "truncated arena" {
			if _, err := Attach(alignedCopy(b)); !errors.Is(err, ErrHeader) {
				t.Errorf("%s: Attach: %v; want ErrHeader", c.name, err)
			}
		}
	}
	// A larger buffer than the arena is fine.
	if _, err := ParseHeader(append(append([]byte(nil), good...), 0, 0, 0)); err != nil {
		t.Errorf("longer buffer: %v", err)
	}
}

func alignedCopy(b []byte) []byte {
	m, _ := HeapAllocator{}.Alloc(len(b))
	copy(m, b)
	return m
}

func TestArenaAttach(t *testing.T) {
	l, err := NewLayout(8, 16, 128)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewArena(HeapAllocator{}, l)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Submit.Cap() != 8 || a.Completion.Cap() != 16 || a.Staging.Cap() != 128 ||
		a.Submit.RecSize() != SubmitSize || a.Completion.RecSize() != CompletionSize {
		t.Fatalf("views: submit %d/%d completion %d/%d staging %d", a.Submit.Cap(), a.Submit.RecSize(),
			a.Completion.Cap(), a.Completion.RecSize(), a.Staging.Cap())
	}
	// Three records through the host's views; a second view of the same
	// memory (a device attaching) resumes at the stored indices.
	for i := range 3 {
		if _, ok := a.PushSubmit(&SubmitRecord{Op: OpCloseSlot, Slot: uint32(i), ID: uint64(i)}); !ok {
			t.Fatal("push")
		}
	}
	d, err := Attach(a.Mem)
	if err != nil {
		t.Fatal(err)
	}
	var r SubmitRecord
	if i, ok := d.NextSubmit(&r); !ok || i != 0 || r.Slot != 0 {
		t.Fatalf("device first record: %d %v %+v", i, ok, r)
	}
	d.Submit.Done()
	d2, err := Attach(a.Mem)
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := d2.NextSubmit(&r); !ok || i != 1 || r.Slot != 1 {
		t.Fatalf("re-attached device: %d %v %+v", i, ok, r)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Attach(a.Mem[1:]); err == nil {
		t.Fatal("Attach accepted a misaligned arena")
	}
}
