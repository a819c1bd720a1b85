package ringbuf

import (
	"fmt"
	"testing"
)

// BenchmarkRing measures one record through the submit ring at Cap 1024:
// the producer goroutine reserves, encodes and publishes, the consumer
// (the benchmark goroutine) reads, decodes and releases. ns/op is per
// record; batch is how many records share one Publish and one Done.
func BenchmarkRing(b *testing.B) {
	for _, alloc := range []struct {
		name string
		a    func() Allocator
	}{{"heap", func() Allocator { return HeapAllocator{} }}, {"mmap", func() Allocator { return NewMmapAllocator() }}} {
		for _, batch := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/2goroutines/batch%d", alloc.name, batch), func(b *testing.B) {
				benchTwoGoroutines(b, alloc.a(), batch)
			})
		}
	}
	b.Run("heap/1goroutine", func(b *testing.B) {
		a := newTestArena(b, 1024, 1024, 1<<12)
		rec := SubmitRecord{Op: OpStep, Slot: 3}
		var got SubmitRecord
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, buf, _ := a.Submit.Reserve()
			rec.ID = uint64(i)
			rec.Put(buf)
			a.Submit.Publish()
			_, buf, _ = a.Submit.Next()
			got.Get(buf)
			a.Submit.Done()
		}
	})
}

func benchTwoGoroutines(b *testing.B, alloc Allocator, batch int) {
	l, err := NewLayout(1024, 1024, 1<<12)
	if err != nil {
		b.Fatal(err)
	}
	a, err := NewArena(alloc, l)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	n := b.N
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		defer close(done)
		var bo Backoff
		rec := SubmitRecord{Op: OpStep, Slot: 3}
		for i := 0; i < n; i++ {
			for {
				_, buf, ok := a.Submit.Reserve()
				if ok {
					rec.ID = uint64(i)
					rec.Put(buf)
					break
				}
				a.Submit.Publish()
				bo.Wait()
			}
			bo.Reset()
			if (i+1)%batch == 0 {
				a.Submit.Publish()
			}
		}
		a.Submit.Publish()
	}()
	var bo Backoff
	var rec SubmitRecord
	for i := 0; i < n; {
		_, buf, ok := a.Submit.Next()
		if !ok {
			a.Submit.Done()
			bo.Wait()
			continue
		}
		bo.Reset()
		rec.Get(buf)
		if rec.ID != uint64(i) {
			b.Fatalf("record %d has ID %d", i, rec.ID)
		}
		i++
		if i%batch == 0 {
			a.Submit.Done()
		}
	}
	a.Submit.Done()
	<-done
}

// BenchmarkStaging is the host's bookkeeping per payload: allocate a run,
// commit it to a record, release it when the device has passed the record.
func BenchmarkStaging(b *testing.B) {
	s := newTestStaging(1 << 12)
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		if _, _, ok := s.Alloc(24 + int(i%40)); !ok {
			b.Fatal("staging full")
		}
		s.Commit(i)
		if i >= 16 {
			s.Release(i - 16)
		}
	}
}
