// Package cuda is the CUDA device: libringlm_cuda.so (kernels/cuda/*.cu,
// built by `make cuda`) runs one persistent kernel that consumes the submit
// ring straight from pinned host memory, and this package loads it with
// dlopen, describes the model to it, and gives the engine an
// engine.Device and the ringbuf.Allocator for the arena. Nothing here
// needs the CUDA toolkit to build: without the library, Available says
// why and the server falls back to the CPU device.
package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"ringlm/model"
	"ringlm/ringbuf"
)

// Info describes a created device (rlm_info).
type Info struct {
	Name        string // the GPU
	SMCount     int
	GridBlocks  int // blocks of the persistent kernel
	Threads     int // threads per block
	NumBlocks   int // KV blocks allocated
	WeightBytes uint64
	KVBytes     uint64
	WorkBytes   uint64 // activations, logits, per-slot state
	FreeBytes   uint64 // free VRAM after everything
	TotalBytes  uint64
	Launches    uint64 // kernel launches since Open
	// Kernel is the module whose persistent kernel runs the model:
	// "tensor-core" (the default paths), "block-quantized" (a model with
	// Q4_K ... weights) or "general" (every path: RINGLM_CUDA_GEMV=1,
	// RINGLM_CUDA_ATTN=cores, shapes the tensor-core code does not take).
	Kernel string
}

// Device is the CUDA device. It implements engine.Device.
type Device struct {
	lib   *library
	ctx   unsafe.Pointer // rlm_ctx *
	alloc *HostAllocator
	opts  Options
	info  Info
	vocab int

	doorbell chan struct{}
	notify   chan struct{}

	mu      sync.Mutex
	sup     *supervisor
	started bool
	closed  bool
}

// Open uploads m to GPU o.Device and allocates its KV pool (rlm_create).
// The model's weights are copied: the GGUF file may be closed afterwards.
func Open(m *model.Model, o Options) (*Device, error) {
	l, err := lib()
	if err != nil {
		return nil, err
	}
	return openWith(l, m, o)
}

func openWith(l *library, m *model.Model, o Options) (*Device, error) {
	var err error
	if m == nil {
		return nil, errors.New("cuda: Open of a nil model")
	}
	o, err = o.normalize(m)
	if err != nil {
		return nil, err
	}
	d, err := newDesc(m, o)
	if err != nil {
		return nil, err
	}
	ctx, err := l.createCtx(d)
	d.free()
	if err != nil {
		return nil, err
	}
	info, err := l.info(ctx)
	if err == nil && info.NumBlocks <= 0 {
		err = errors.New("cuda: rlm_create allocated no KV block")
	}
	if err != nil {
		l.destroyCtx(ctx)
		return nil, err
	}
	return &Device{lib: l, ctx: ctx, alloc: newHostAllocator(l), opts: o, info: info, vocab: m.Vocab,
		doorbell: make(chan struct{}, 1), notify: make(chan struct{}, 1)}, nil
}

// Name says what runs the steps.
func (d *Device) Name() string { return "cuda (" + d.info.Name + ")" }

// Allocator is the allocator the engine's arena must come from
// (engine.Config.Allocator).
func (d *Device) Allocator() ringbuf.Allocator { return d.alloc }

// Options are the options in effect (defaults applied).
func (d *Device) Options() Options { return d.opts }

// NumBlocks is the size of the KV pool: the engine's NumBlocks.
func (d *Device) NumBlocks() int { return d.info.NumBlocks }

// Vocab is the model's vocabulary size.
func (d *Device) Vocab() int { return d.vocab }

// BlockSize is the KV block size.
func (d *Device) BlockSize() int { return d.opts.BlockSize }

// Slots is the number of sequences the device holds at once.
func (d *Device) Slots() int { return d.opts.Slots }

// Info asks the library for the device's figures (Launches changes).
func (d *Device) Info() (Info, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return Info{}, errClosed
	}
	return d.lib.info(d.ctx)
}

var errClosed = errors.New("cuda: device closed")

// Start launches the persistent kernel on a (rlm_start). The arena must
// have come from Allocator.
func (d *Device) Start(a *ringbuf.Arena) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return errClosed
	case d.started:
		return errors.New("cuda: device already started")
	case a == nil || len(a.Mem) == 0:
		return errors.New("cuda: Start without an arena")
	case !d.alloc.owns(a.Mem):
		return errors.New("cuda: the arena does not come from this device's Allocator (set engine.Config.Allocator to Device.Allocator())")
	case a.Completion.Cap() < ringbuf.MinCompletionCap(d.opts.Slots):
		// The kernel reserves a step's records before its rows write them.
		return fmt.Errorf("cuda: a completion ring of %d records for %d slots (one step can answer %d; at least %d)",
			a.Completion.Cap(), d.opts.Slots, ringbuf.StepRecords(d.opts.Slots), ringbuf.MinCompletionCap(d.opts.Slots))
	}
	if err := d.lib.startKernel(d.ctx, unsafe.Pointer(unsafe.SliceData(a.Mem)), uint64(len(a.Mem))); err != nil {
		return err
	}
	d.started = true
	s := newSupervisor(a, d.opts.Slots, d.doorbell, d.notify)
	d.sup = s
	l, ctx := d.lib, d.ctx
	go func() { s.kernelExited(l.waitKernel(ctx)) }()
	go s.run()
	return nil
}

// Notify wakes the completion watcher if it is idle (the kernel itself
// polls the submit ring).
func (d *Device) Notify() {
	select {
	case d.notify <- struct{}{}:
	default:
	}
}

// Doorbell is signalled when the kernel published completions.
func (d *Device) Doorbell() <-chan struct{} { return d.doorbell }

// Wait returns once the kernel has answered STOP and exited, with nil, or
// with the CUDA error after a fault. After a fault the Go side answers the
// engine's records in the kernel's place (every sequence fails with a
// DEVICE error) until STOP, so the engine drains instead of hanging.
func (d *Device) Wait() error {
	d.mu.Lock()
	s := d.sup
	d.mu.Unlock()
	if s == nil {
		return errors.New("cuda: Wait before Start")
	}
	return s.wait()
}

// Fault is the kernel's error once it has died, nil while it runs or after
// a clean stop. It does not block.
func (d *Device) Fault() error {
	d.mu.Lock()
	s := d.sup
	d.mu.Unlock()
	if s == nil || !s.hasExited() {
		return nil
	}
	return s.exitErr
}

// Exited is closed once the kernel has exited, after a fault (Fault then
// returns its error) or a clean stop; nil, which is never ready, before
// Start. A server selects on it rather than polling Fault.
func (d *Device) Exited() <-chan struct{} {
	d.mu.Lock()
	s := d.sup
	d.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.exited
}

// Logits copies the logits the last executed step computed for its row-th
// sampling entry (entries with SAMPLE, in entry order) into dst[:Vocab].
// For tests, between steps.
func (d *Device) Logits(row int, dst []float32) error {
	if row < 0 || len(dst) < d.vocab {
		return fmt.Errorf("cuda: Logits row %d into %d floats (vocabulary %d)", row, len(dst), d.vocab)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	return d.lib.readLogits(d.ctx, row, dst[:d.vocab])
}

// CopyBandwidth measures device-to-device copy bandwidth in GB/s (bytes
// read plus bytes written per second) over a buffer of the given size: the
// practical ceiling for a step that streams the weights.
func (d *Device) CopyBandwidth(bytes int64) (float64, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("cuda: CopyBandwidth of %d bytes", bytes)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, errClosed
	}
	return d.lib.copyBW(d.ctx, uint64(bytes))
}

// Close frees the device (rlm_destroy). A started device must have
// stopped first (Engine.Close sends STOP and waits); Close refuses while
// the kernel runs, since freeing under it would fault. It may be called
// more than once.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	if s := d.sup; s != nil {
		if !s.hasExited() {
			return errors.New("cuda: Close while the kernel runs (close the engine first)")
		}
		s.stop() // a fault responder still answering gives up
		<-s.done
	}
	d.lib.destroyCtx(d.ctx)
	d.ctx = nil
	d.closed = true
	return nil
}
