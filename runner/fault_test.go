package runner

import (
	"testing"

	"ringlm/kernels/cuda"
)

// Faulted is what serve waits on instead of polling Fault: never ready on
// the CPU, which cannot fail for good; on the GPU open while the kernel
// runs and closed once it exits, with Fault nil after a clean stop.
func TestFaulted(t *testing.T) {
	r, _, err := loadWith(t, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if r.Faulted() != nil || r.Fault() != nil {
		t.Errorf("cpu: Faulted %v, Fault %v; want nil, nil", r.Faulted(), r.Fault())
	}
	if cuda.Available() != nil {
		return
	}
	r, _, err = loadWith(t, "cuda")
	if err != nil {
		t.Fatal(err)
	}
	ch := r.Faulted()
	if ch == nil {
		t.Fatal("cuda: Faulted is nil")
	}
	select {
	case <-ch:
		t.Fatal("cuda: Faulted closed while the kernel runs")
	default:
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("cuda: Faulted still open after Close")
	}
	if err := r.Fault(); err != nil {
		t.Errorf("cuda: Fault after a clean stop: %v", err)
	}
}
