// Package cpu is the CPU device: a goroutine that consumes the submit
// ring and runs each step with the reference forward pass (package model)
// over a paged KV pool addressed by the same block tables the GPU uses.
package cpu

import (
	"fmt"

	"ringlm/gguf"
	"ringlm/kernels"
	"ringlm/model"
	"ringlm/ringbuf"
)

// Device runs steps on the CPU.
type Device struct {
	m     *model.Model
	kv    *model.KVPool
	slots int
	x     *kernels.Executor
	seqs  []model.Seq
}

// New allocates the KV pool (numBlocks blocks of blockSize positions, in
// kvType) for up to slots concurrent sequences.
func New(m *model.Model, kvType gguf.Type, numBlocks, blockSize, slots int) (*Device, error) {
	kv, err := model.NewKVPool(&m.Config, kvType, numBlocks, blockSize)
	if err != nil {
		return nil, err
	}
	return &Device{m: m, kv: kv, slots: slots}, nil
}

// Name says what runs the steps.
func (d *Device) Name() string { return "cpu" }

// Start begins consuming the arena's submit ring.
func (d *Device) Start(a *ringbuf.Arena) error {
	if d.x != nil {
		return fmt.Errorf("cpu: device already started")
	}
	d.x = kernels.NewExecutor(a, d, d.slots, d.kv.Blocks)
	d.x.Start()
	return nil
}

// Notify wakes the device after submit records were published.
func (d *Device) Notify() { d.x.Notify() }

// Doorbell is signalled after completions were published.
func (d *Device) Doorbell() <-chan struct{} { return d.x.Doorbell() }

// Wait returns once the device has stopped.
func (d *Device) Wait() error { return d.x.Wait() }

// Vocab is the model's vocabulary size.
func (d *Device) Vocab() int { return d.m.Vocab }

// BlockSize is the KV block size.
func (d *Device) BlockSize() int { return d.kv.BlockSize }

// Forward runs one step's entries as one batch.
func (d *Device) Forward(batch []kernels.Entry) error {
	d.seqs = d.seqs[:0]
	for _, e := range batch {
		d.seqs = append(d.seqs, model.Seq{Tokens: e.Tokens, Pos: e.Pos, Blocks: e.Blocks, Logits: e.Logits})
	}
	return d.m.Forward(d.kv, d.seqs)
}
