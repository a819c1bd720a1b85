// Package cpu is the CPU device: a goroutine that consumes the submit
// ring and runs each step with the reference forward pass (package model)
// over a paged KV pool addressed by the same block tables the GPU uses.
package cpu

import (
	"ringlm/gguf"
	"ringlm/kernels"
	"ringlm/model"
)

// Device runs steps on the CPU.
type Device struct {
	*kernels.Device
	m    *model.Model
	kv   *model.KVPool
	lim  kernels.Limits
	seqs []model.Seq
}

// New allocates the KV pool (numBlocks blocks of blockSize positions, in
// kvType) for up to slots concurrent sequences.
func New(m *model.Model, kvType gguf.Type, numBlocks, blockSize, slots int) (*Device, error) {
	kv, err := model.NewKVPool(&m.Config, kvType, numBlocks, blockSize)
	if err != nil {
		return nil, err
	}
	d := &Device{m: m, kv: kv, lim: kernels.Limits{Context: m.Context}}
	d.Device = kernels.NewDevice("cpu", d, slots, kv.Blocks)
	return d, nil
}

// SetLimits replaces the capacity limits the device answers by (default:
// the model's context, no step limit), as the CUDA device is opened with
// them; call it before Start.
func (d *Device) SetLimits(l kernels.Limits) { d.lim = l }

// Limits are the device's capacity limits (kernels.Limiter).
func (d *Device) Limits() kernels.Limits { return d.lim }

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
