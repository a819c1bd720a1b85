package ringbuf

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

func TestHeapAllocator(t *testing.T) {
	for _, size := range []int{1, 127, 128, 4096, 1 << 20} {
		b, err := HeapAllocator{}.Alloc(size)
		if err != nil || len(b) != size || cap(b) != size || uintptr(unsafe.Pointer(&b[0]))%Align != 0 {
			t.Fatalf("Alloc(%d): len %d cap %d at %p, %v", size, len(b), cap(b), unsafe.SliceData(b), err)
		}
	}
	if _, err := (HeapAllocator{}).Alloc(0); err == nil {
		t.Fatal("Alloc(0) succeeded")
	}
}

func TestMmapAllocator(t *testing.T) {
	a := NewMmapAllocator()
	l, err := NewLayout(1024, 1024, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	ar, err := NewArena(a, l)
	if err != nil {
		t.Fatal(err)
	}
	if uintptr(unsafe.Pointer(&ar.Mem[0]))%uintptr(os.Getpagesize()) != 0 {
		t.Error("arena is not page-aligned")
	}
	for i := range 3000 { // through every slot of the ring, twice
		if _, ok := ar.PushSubmit(&SubmitRecord{Op: OpStep, ID: uint64(i)}); !ok {
			t.Fatal("push")
		}
		var r SubmitRecord
		if _, ok := ar.NextSubmit(&r); !ok || r.ID != uint64(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
		ar.Submit.Done()
	}
	t.Logf("locked %v, warning %q", a.Locked(), a.Warning())
	if runtime.GOOS == "linux" && !a.Locked() && !strings.Contains(a.Warning(), "continuing unlocked") {
		t.Errorf("unlocked without a warning: %q", a.Warning())
	}
	if err := ar.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ar.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := a.Alloc(-1); err == nil {
		t.Fatal("Alloc(-1) succeeded")
	}
}
