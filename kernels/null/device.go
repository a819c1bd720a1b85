// Package null is a device that completes steps at once with tokens that
// depend only on (seed, slot position): no model, no logits. It measures
// the scheduler and the rings alone. Its tokens have logprob 0; a slot
// that asks for n_top alternatives gets n_top deterministic placeholders,
// kernels.PickerTop (the token itself first, at 0), in TOP_LOGPROBS
// records like a real device's, so the host's side of top logprobs and
// the completion ring's load can be measured here too.
package null

import (
	"ringlm/kernels"
)

// Device completes steps instantly.
type Device struct {
	*kernels.Device
	vocab, blockSize int
	lim              kernels.Limits
}

// New returns a null device for a vocabulary of vocab tokens.
func New(vocab, numBlocks, blockSize, slots int) *Device {
	d := &Device{vocab: vocab, blockSize: blockSize}
	d.Device = kernels.NewDevice("null", d, slots, numBlocks)
	return d
}

// SetLimits sets the capacity limits the device answers by (default:
// none); call it before Start.
func (d *Device) SetLimits(l kernels.Limits) { d.lim = l }

// Limits are the device's capacity limits (kernels.Limiter).
func (d *Device) Limits() kernels.Limits { return d.lim }

func (d *Device) Vocab() int     { return d.vocab }
func (d *Device) BlockSize() int { return d.blockSize }

// Forward does nothing: the null device has no model.
func (d *Device) Forward([]kernels.Entry) error { return nil }

// Token is the token the null device samples at pos for seed: a mix of
// both, so tests can predict every token.
func Token(seed uint64, pos, vocab int) int32 {
	h := seed ^ uint64(pos)*0x9E3779B97F4A7C15
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return int32(h % uint64(vocab))
}

// Pick implements kernels.Picker.
func (d *Device) Pick(_ int, seed uint64, pos int) int32 { return Token(seed, pos, d.vocab) }
