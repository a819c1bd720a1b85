package cuda

import (
	"fmt"

	"ringlm/model"
)

// Options size the device. Zero values take the defaults noted.
type Options struct {
	Device        int   // CUDA ordinal (default 0)
	Slots         int   // sequences at once: the engine's Slots (default 64)
	BlockSize     int   // KV positions per block: the engine's BlockSize (default 16)
	Context       int   // longest sequence (default: the model's context); the block table holds ceil(Context/BlockSize) blocks
	MaxStepTokens int   // tokens in one STEP: the engine's TokenBudget (default 512)
	NumBlocks     int   // KV blocks; 0: as many as free memory allows, capped by KVMaxBytes
	KVMaxBytes    int64 // cap on the KV pool when NumBlocks is 0 (0: none)
	GridBlocks    int   // blocks of the persistent kernel (0: one per SM × occupancy)
	// TrapStep is fault injection for tests: the kernel executes a trap
	// on its TrapStep-th STEP (0: never).
	TrapStep uint32
}

// Defaults of Options.
const (
	DefaultSlots         = 64
	DefaultBlockSize     = 16
	DefaultMaxStepTokens = 512
)

// Limits of Options: beyond them a value is surely a mistake (and would
// overflow the ABI's u32 fields).
const (
	MaxSlots      = 1 << 16
	MaxBlockSize  = 1 << 10
	MaxStepTokens = 1 << 20
	MaxNumBlocks  = 1<<31 - 1
	MaxGridBlocks = 1 << 16
)

// normalize applies the defaults and checks o against m.
func (o Options) normalize(m *model.Model) (Options, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Slots, DefaultSlots)
	def(&o.BlockSize, DefaultBlockSize)
	def(&o.MaxStepTokens, DefaultMaxStepTokens)
	if m != nil {
		def(&o.Context, m.Context)
	}
	for _, c := range []struct {
		name   string
		v, max int64
		min    int64
	}{
		{"Device", int64(o.Device), 1 << 10, 0},
		{"Slots", int64(o.Slots), MaxSlots, 1},
		{"BlockSize", int64(o.BlockSize), MaxBlockSize, 1},
		{"Context", int64(o.Context), 1 << 30, 1},
		{"MaxStepTokens", int64(o.MaxStepTokens), MaxStepTokens, 1},
		{"NumBlocks", int64(o.NumBlocks), MaxNumBlocks, 0},
		{"KVMaxBytes", o.KVMaxBytes, 1 << 62, 0},
		{"GridBlocks", int64(o.GridBlocks), MaxGridBlocks, 0},
	} {
		if c.v < c.min || c.v > c.max {
			return o, fmt.Errorf("cuda: Options.%s = %d is outside [%d, %d]", c.name, c.v, c.min, c.max)
		}
	}
	if m != nil && o.Context > m.Context {
		return o, fmt.Errorf("cuda: Options.Context %d exceeds the model's context of %d", o.Context, m.Context)
	}
	return o, nil
}

// BlocksPerSlot is the length of a slot's block table.
func (o Options) BlocksPerSlot() int { return (o.Context + o.BlockSize - 1) / o.BlockSize }
