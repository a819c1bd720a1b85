package kernels

import (
	"fmt"

	"ringlm/ringbuf"
)

// Device is the engine's view (engine.Device) of a device written in Go:
// an Executor over a Backend, started on the engine's arena. The CPU and
// null devices embed it and are the Backend.
type Device struct {
	name          string
	be            Backend
	slots, blocks int
	x             *Executor
}

// NewDevice returns a device named name that runs be for slots slots over
// a pool of numBlocks KV blocks.
func NewDevice(name string, be Backend, slots, numBlocks int) *Device {
	return &Device{name: name, be: be, slots: slots, blocks: numBlocks}
}

// Name says what runs the steps.
func (d *Device) Name() string { return d.name }

// Start begins consuming the arena's submit ring on a goroutine of its own.
func (d *Device) Start(a *ringbuf.Arena) error {
	if d.x != nil {
		return fmt.Errorf("%s: device already started", d.name)
	}
	x, err := NewExecutor(a, d.be, d.slots, d.blocks)
	if err != nil {
		return fmt.Errorf("%s: %w", d.name, err)
	}
	d.x = x
	x.Start()
	return nil
}

// Notify wakes the device after submit records were published.
func (d *Device) Notify() { d.x.Notify() }

// Doorbell is signalled after completions were published.
func (d *Device) Doorbell() <-chan struct{} { return d.x.Doorbell() }

// Wait returns once the device has stopped, with why.
func (d *Device) Wait() error { return d.x.Wait() }
