package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"ringlm/chat"
	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/kernels/cpu"
	"ringlm/kernels/cuda"
	"ringlm/model"
	"ringlm/models"
	"ringlm/ringbuf"
	"ringlm/tokenizer"
)

// Model is what the server generates with: an engine over a device, the
// model's tokenizer and chat template, and the names it answers to.
type Model struct {
	Engine    *engine.Engine
	Tokenizer *tokenizer.Tokenizer
	// Chat is nil when the GGUF's template was not recognised; ChatErr
	// then says why and chat requests are refused with it.
	Chat    *chat.Template
	ChatErr error
	// Name is reported by /v1/models; Aliases are accepted too.
	Name    string
	Aliases []string
	Context int
	Created int64
	// Fingerprint identifies the weights and settings that produce
	// outputs (system_fingerprint): the same seed under the same
	// fingerprint gives the same text.
	Fingerprint string

	// fault reports a device that died (a CUDA kernel fault: sticky for
	// the process, so the server exits and its supervisor restarts it);
	// nil for devices that cannot fault.
	fault func() error
	close func() error
}

// Fault is the device's error once it has failed for good, else nil.
func (m *Model) Fault() error {
	if m.fault == nil {
		return nil
	}
	return m.fault()
}

// Close stops the engine and releases the model file.
func (m *Model) Close() error {
	if m.close != nil {
		return m.close()
	}
	return m.Engine.Close()
}

// Accepts reports whether name designates the model. An empty name is
// accepted: several clients omit it for single-model servers.
func (m *Model) Accepts(name string) bool {
	return name == "" || name == m.Name || slices.Contains(m.Aliases, name)
}

// noControl is the set of token ids that never become text: EOS, EOT and
// other control tokens, as vLLM's skip_special_tokens does by default.
func isHidden(t *tokenizer.Tokenizer, id int32) bool {
	return t.IsEOG(id) || t.Vocab().Type(id) == tokenizer.TypeControl
}

// LoadOptions are the parts of Config that Load reads, plus what tests
// replace.
type LoadOptions struct {
	Config
	Allocator ringbuf.Allocator // CPU device: nil = mmap + mlock (the CUDA device brings its own)
	Log       zerolog.Logger
	StepHook  func(step uint64, entries int, startNS, endNS uint64) // Server.StepHook
}

// Load opens a GGUF model and starts an engine over the device --device
// picks (the CPU, or the GPU through kernels/cuda) with a KV pool sized by
// KVBlocks or KVMemoryMiB.
func Load(o LoadOptions) (*Model, error) {
	if err := CheckDevice(o.Device); err != nil {
		return nil, err
	}
	var f *gguf.File
	var err error
	if o.Model == "" {
		// The built-in model (package models), parsed from memory.
		f, err = gguf.Parse(models.Default())
	} else {
		f, err = gguf.Open(o.Model)
	}
	if err != nil {
		return nil, err
	}
	m, closeDev, err := build(f, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	eng := m.Engine
	m.close = func() error {
		// The engine stops the device (STOP), then the device is freed,
		// then the mapping its weights were uploaded from.
		err := eng.Close()
		if closeDev != nil {
			err = errors.Join(err, closeDev())
		}
		return errors.Join(err, f.Close())
	}
	return m, nil
}

// pickDevice resolves --device to "cpu" or "cuda". auto takes the GPU when
// the library loads and sees one, and logs which device it chose and why.
func pickDevice(o LoadOptions, kvt gguf.Type) (string, error) {
	switch o.Device {
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
		o.Log.Info().Str("device", "cpu").Str("reason", err.Error()).Msg("device auto: the CUDA device is not usable; running on the CPU")
		return "cpu", nil
	}
	if kvt != gguf.TypeF16 {
		o.Log.Info().Str("device", "cpu").Str("reason", "--kv-type "+kvt.String()+" (the CUDA device keeps f16)").Msg("device auto: running on the CPU")
		return "cpu", nil
	}
	o.Log.Info().Str("device", "cuda").Str("library", cuda.Library()).Int("gpus", cuda.Devices()).Msg("device auto: running on the GPU")
	return "cuda", nil
}

// openCUDA creates the CUDA device: the model is uploaded and the KV pool
// allocated in GPU memory, --kv-blocks blocks or as many as --kv-memory (and
// free memory) allow, capped at every slot at full context.
func openCUDA(mdl *model.Model, o LoadOptions, slots, bs int) (*cuda.Device, error) {
	co := cuda.Options{Slots: slots, BlockSize: bs, Context: mdl.Context, MaxStepTokens: o.TokenBudget}
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

// build loads the model and tokenizer and starts the engine; closeDev (nil
// for the CPU) frees the device after the engine is closed.
func build(f *gguf.File, o LoadOptions) (mm *Model, closeDev func() error, err error) {
	mdl, err := model.Load(f)
	if err != nil {
		return nil, nil, err
	}
	tok, err := tokenizer.Load(f)
	if err != nil {
		return nil, nil, err
	}
	v := tok.Vocab()
	kvt, ok := gguf.ParseType(o.KVType)
	if !ok || (kvt != gguf.TypeF16 && kvt != gguf.TypeF32) {
		return nil, nil, fmt.Errorf("--kv-type must be f16 or f32, got %q", o.KVType)
	}
	var forced *chat.Template
	if o.ChatTemplate != "" {
		fm, err := chat.ParseFormat(o.ChatTemplate)
		if err != nil {
			return nil, nil, err
		}
		forced = &chat.Template{Format: fm}
	}
	slots := max(o.Slots, 1)
	bs := model.DefaultBlockSize
	perSeq := (mdl.Context + bs - 1) / bs
	kind, err := pickDevice(o, kvt)
	if err != nil {
		return nil, nil, err
	}
	var (
		dev    engine.Device
		blocks int
		alloc  = o.Allocator
		fault  func() error
	)
	if kind == "cuda" {
		cd, err := openCUDA(mdl, o, slots, bs)
		switch {
		case err == nil:
			dev, blocks, alloc, closeDev, fault = cd, cd.NumBlocks(), cd.Allocator(), cd.Close, cd.Fault
		case o.Device == "cuda":
			return nil, nil, err
		default:
			o.Log.Warn().Err(err).Msg("device auto: the GPU could not take the model; running on the CPU")
			kind = "cpu"
		}
	}
	if kind == "cpu" {
		blocks = o.KVBlocks
		if blocks <= 0 {
			per := model.KVBytesPerBlock(&mdl.Config, kvt, bs)
			blocks = int(int64(max(o.KVMemoryMiB, 1)) << 20 / per)
			// More than every slot at full context can never be used.
			blocks = min(blocks, slots*perSeq)
			if blocks < 1 {
				return nil, nil, fmt.Errorf("--kv-memory %d MiB holds no KV block of %d bytes", o.KVMemoryMiB, per)
			}
		}
		cd, err := cpu.New(mdl, kvt, blocks, bs, slots)
		if err != nil {
			return nil, nil, err
		}
		dev = cd
	}
	var eos []int32
	for _, id := range []int32{v.EOS, v.EOT} {
		if id >= 0 && !slices.Contains(eos, id) {
			eos = append(eos, id)
		}
	}
	eng, err := engine.New(engine.Config{Slots: slots, TokenBudget: o.TokenBudget, NumBlocks: blocks, BlockSize: bs,
		PrefixCache: o.PrefixCache, MaxQueue: o.MaxQueue, Context: mdl.Context, Vocab: mdl.Vocab, EOS: eos,
		Allocator: alloc, Log: o.Log, StepHook: o.StepHook}, dev)
	if err != nil {
		if closeDev != nil {
			closeDev()
		}
		return nil, nil, err
	}
	general, _ := f.String("general.name")
	file := o.Model
	if file == "" {
		file = models.DefaultFile
		if o.ModelName == "" {
			o.ModelName = models.DefaultName
		}
	}
	base := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	mm = &Model{Engine: eng, Tokenizer: tok, Context: mdl.Context, Created: time.Now().Unix(), fault: fault}
	mm.Name, mm.Aliases = modelNames(o.ModelName, general, base, filepath.Base(file))
	switch {
	case forced != nil:
		mm.Chat = forced
	default:
		if t, err := chat.Detect(v.ChatTemplate); err == nil {
			mm.Chat = &t
		} else {
			mm.ChatErr = err
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s|%s|%d|%s|%d", general, mdl.Arch, mdl.Vocab, kvt, mdl.WeightBytes())
	if kind == "cuda" {
		// Another device computes other floating-point sums: another fingerprint.
		fmt.Fprint(h, "|cuda")
	}
	mm.Fingerprint = "fp_" + hex.EncodeToString(h.Sum(nil))[:12]
	o.Log.Info().Str("model", mm.Name).Str("arch", mdl.Arch).Int("context", mdl.Context).Int("vocab", mdl.Vocab).
		Int("kv_blocks", blocks).Int("slots", slots).Str("kv_type", kvt.String()).Str("device", eng.DeviceName()).
		Msg("model loaded")
	return mm, closeDev, nil
}

// modelNames picks the reported name (an explicit one, else general.name,
// else the file's base name) and the other names accepted.
func modelNames(explicit, general, base, file string) (string, []string) {
	var all []string
	for _, n := range []string{explicit, general, base, file} {
		if n != "" && !slices.Contains(all, n) {
			all = append(all, n)
		}
	}
	if len(all) == 0 {
		return "model", nil
	}
	return all[0], all[1:]
}
