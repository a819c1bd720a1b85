package runner

import (
	"fmt"
	"os"
	"strconv"

	"github.com/rs/zerolog"

	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/kernels"
	"ringlm/kernels/cpu"
	"ringlm/kernels/cuda"
	"ringlm/model"
	"ringlm/ringbuf"
)

// PickDevice resolves --device to "cpu" or "cuda" for a KV cache of type
// kvType, as Start does before it opens the device (which may still fall
// back to the CPU: the GPU may not take the model). auto takes the GPU when
// the library loads and sees one, and logs which device it chose and why.
func PickDevice(device, kvType string, log zerolog.Logger) (string, error) {
	o := Options{Device: device, KVType: kvType}
	if err := o.Check(); err != nil {
		return "", err
	}
	kvt, _ := parseKVType(o.KVType) // checked
	return pickDevice(device, kvt, log)
}

func pickDevice(device string, kvt gguf.Type, log zerolog.Logger) (string, error) {
	switch device {
	case "cpu":
		return "cpu", nil
	case "cuda":
		if err := cuda.Available(); err != nil {
			return "", fmt.Errorf("--device cuda is not usable: %w", err)
		}
		if kvt != gguf.TypeF16 {
			return "", fmt.Errorf("--kv-type %s: the cuda device keeps an f16 KV cache", kvt)
		}
		return "cuda", nil
	}
	if err := cuda.Available(); err != nil {
		log.Info().Str("device", "cpu").Str("reason", err.Error()).Msg("device auto: the CUDA device is not usable; running on the CPU")
		return "cpu", nil
	}
	if kvt != gguf.TypeF16 {
		log.Info().Str("device", "cpu").Str("reason", "--kv-type "+kvt.String()+" (the CUDA device keeps f16)").Msg("device auto: running on the CPU")
		return "cpu", nil
	}
	log.Info().Str("device", "cuda").Str("library", cuda.Library()).Int("gpus", cuda.Devices()).Msg("device auto: running on the GPU")
	return "cuda", nil
}

// DefaultTokenBudget is the tokens of one engine step on device ("cpu" or
// "cuda") when Options.TokenBudget is 0. The CUDA kernel runs a step's
// tokens as one matrix product that streams the weights once, so a large
// step costs little more than a small one and prefill goes through in
// big chunks; the CPU device's step time grows with its tokens, and a
// smaller budget keeps the decoding requests' inter-token latency down.
func DefaultTokenBudget(device string) int {
	if device == "cuda" {
		return 2048
	}
	return engine.DefaultTokenBudget
}

// DefaultSlots is the sequences decoded together on device when
// Options.Slots is 0: 256 on CUDA (as vLLM's max_num_seqs: a step of
// many rows costs little more than one of few there), 64 on the CPU.
func DefaultSlots(device string) int {
	if device == "cuda" {
		return 256
	}
	return 64
}

// deviceSlots is o's slots on device: Options.Slots, or the device's
// default.
func deviceSlots(device string, o Options) int {
	if o.Slots > 0 {
		return o.Slots
	}
	return DefaultSlots(device)
}

// DefaultPrefillChunk is the prompt tokens one request gets in a step on
// device when Options.PrefillChunk is 0: on CUDA the whole budget (a
// prompt of up to budget tokens is prefilled in one step), on the CPU the
// engine's default.
func DefaultPrefillChunk(device string, budget int) int {
	if device == "cuda" {
		return budget
	}
	return min(engine.DefaultPrefillChunk, budget)
}

// stepSizes resolves o's step sizes on device.
func stepSizes(device string, o Options) (budget, chunk int) {
	budget = o.TokenBudget
	if budget <= 0 {
		budget = DefaultTokenBudget(device)
	}
	chunk = o.PrefillChunk
	if chunk <= 0 {
		chunk = DefaultPrefillChunk(device, budget)
	}
	return budget, min(chunk, budget)
}

// device is an opened device and what the engine over it needs.
type device struct {
	kind   string // "cpu" or "cuda"
	dev    engine.Device
	slots  int                    // sequences decoded together (deviceSlots)
	budget int                    // tokens per step (stepSizes)
	chunk  int                    // prompt tokens of one request per step
	blocks int                    // KV blocks in its pool
	alloc  ringbuf.Allocator      // of the engine's rings
	fault  func() error           // nil: it cannot fault
	exited func() <-chan struct{} // closed when it may have faulted; nil: it cannot fault
	close  func() error           // frees it after the engine is closed; nil: the engine does
}

// openDevice opens the device o picks with a KV pool for its slots
// (deviceSlots).
func openDevice(mdl *model.Model, kvt gguf.Type, o Options) (*device, error) {
	kind, err := pickDevice(o.Device, kvt, o.Log)
	if err != nil {
		return nil, err
	}
	bs := model.DefaultBlockSize
	if kind == "cuda" {
		budget, chunk := stepSizes("cuda", o)
		slots := deviceSlots("cuda", o)
		cd, err := openCUDA(mdl, o, slots, bs, budget)
		switch {
		case err == nil:
			return &device{kind: "cuda", dev: cd, slots: slots, budget: budget, chunk: chunk, blocks: cd.NumBlocks(), alloc: cd.Allocator(),
				fault: cd.Fault, exited: cd.Exited, close: cd.Close}, nil
		case o.Device == "cuda":
			return nil, err
		}
		o.Log.Warn().Err(err).Msg("device auto: the GPU could not take the model; running on the CPU")
	}
	slots := deviceSlots("cpu", o)
	blocks := o.KVBlocks
	if blocks <= 0 {
		per := model.KVBytesPerBlock(&mdl.Config, kvt, bs)
		blocks = int(int64(max(o.KVMemoryMiB, 1)) << 20 / per)
		// More than every slot at full context can never be used.
		blocks = min(blocks, slots*((mdl.Context+bs-1)/bs))
		if blocks < 1 {
			return nil, fmt.Errorf("--kv-memory %d MiB holds no KV block of %d bytes", o.KVMemoryMiB, per)
		}
	}
	cd, err := cpu.New(mdl, kvt, blocks, bs, slots)
	if err != nil {
		return nil, err
	}
	// The capacity rules of a CUDA device opened with these step sizes.
	budget, chunk := stepSizes("cpu", o)
	cd.SetLimits(kernels.Limits{Context: mdl.Context, MaxStepTokens: budget})
	return &device{kind: "cpu", dev: cd, slots: slots, budget: budget, chunk: chunk, blocks: blocks, alloc: o.Allocator}, nil
}

// openCUDA creates the CUDA device: the model is uploaded and the KV pool
// allocated in GPU memory, --kv-blocks blocks or as many as --kv-memory (and
// free memory) allow, capped at every slot at full context.
func openCUDA(mdl *model.Model, o Options, slots, bs, budget int) (*cuda.Device, error) {
	co := cuda.Options{Slots: slots, BlockSize: bs, Context: mdl.Context, MaxStepTokens: budget}
	// Fault injection for the tests of fault handling: trap on that STEP.
	if n, err := strconv.ParseUint(os.Getenv("RINGLM_CUDA_TRAP_STEP"), 10, 32); err == nil {
		co.TrapStep = uint32(n)
	}
	if o.KVBlocks > 0 {
		co.NumBlocks = o.KVBlocks
	} else {
		perSeq := int64(mdl.Context+bs-1) / int64(bs)
		per := model.KVBytesPerBlock(&mdl.Config, gguf.TypeF16, bs)
		co.KVMaxBytes = min(int64(max(o.KVMemoryMiB, 1))<<20, int64(slots)*perSeq*per)
	}
	return cuda.Open(mdl, co)
}
