package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"ringlm/chat"
	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/kernels/cpu"
	"ringlm/model"
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

	close func() error
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
	Allocator ringbuf.Allocator // nil: mmap + mlock
	Log       zerolog.Logger
	StepHook  func(step uint64, entries int, startNS, endNS uint64) // Server.StepHook
}

// Load opens a GGUF model and starts an engine over the CPU device with a
// KV pool sized by KVBlocks or KVMemoryMiB.
func Load(o LoadOptions) (*Model, error) {
	f, err := gguf.Open(o.Model)
	if err != nil {
		return nil, err
	}
	m, err := build(f, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	eng := m.Engine
	m.close = func() error {
		err := eng.Close()
		return errors.Join(err, f.Close())
	}
	return m, nil
}

func build(f *gguf.File, o LoadOptions) (*Model, error) {
	mdl, err := model.Load(f)
	if err != nil {
		return nil, err
	}
	v, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		return nil, err
	}
	kvt, ok := gguf.ParseType(o.KVType)
	if !ok || (kvt != gguf.TypeF16 && kvt != gguf.TypeF32) {
		return nil, fmt.Errorf("--kv-type must be f16 or f32, got %q", o.KVType)
	}
	slots := max(o.Slots, 1)
	bs := model.DefaultBlockSize
	perSeq := (mdl.Context + bs - 1) / bs
	blocks := o.KVBlocks
	if blocks <= 0 {
		per := model.KVBytesPerBlock(&mdl.Config, kvt, bs)
		blocks = int(int64(max(o.KVMemoryMiB, 1)) << 20 / per)
		// More than every slot at full context can never be used.
		blocks = min(blocks, slots*perSeq)
		if blocks < 1 {
			return nil, fmt.Errorf("--kv-memory %d MiB holds no KV block of %d bytes", o.KVMemoryMiB, per)
		}
	}
	dev, err := cpu.New(mdl, kvt, blocks, bs, slots)
	if err != nil {
		return nil, err
	}
	var eos []int32
	for _, id := range []int32{v.EOS, v.EOT} {
		if id >= 0 && !slices.Contains(eos, id) {
			eos = append(eos, id)
		}
	}
	eng, err := engine.New(engine.Config{Slots: slots, TokenBudget: o.TokenBudget, NumBlocks: blocks, BlockSize: bs,
		PrefixCache: o.PrefixCache, MaxQueue: o.MaxQueue, Context: mdl.Context, Vocab: mdl.Vocab, EOS: eos,
		Allocator: o.Allocator, Log: o.Log, StepHook: o.StepHook}, dev)
	if err != nil {
		return nil, err
	}
	general, _ := f.String("general.name")
	base := strings.TrimSuffix(filepath.Base(o.Model), filepath.Ext(o.Model))
	mm := &Model{Engine: eng, Tokenizer: tok, Context: mdl.Context, Created: time.Now().Unix()}
	mm.Name, mm.Aliases = modelNames(o.ModelName, general, base, filepath.Base(o.Model))
	switch {
	case o.ChatTemplate != "":
		fm, err := chat.ParseFormat(o.ChatTemplate)
		if err != nil {
			eng.Close()
			return nil, err
		}
		mm.Chat = &chat.Template{Format: fm}
	default:
		if t, err := chat.Detect(v.ChatTemplate); err == nil {
			mm.Chat = &t
		} else {
			mm.ChatErr = err
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s|%s|%d|%s|%d", general, mdl.Arch, mdl.Vocab, kvt, mdl.WeightBytes())
	mm.Fingerprint = "fp_" + hex.EncodeToString(h.Sum(nil))[:12]
	o.Log.Info().Str("model", mm.Name).Str("arch", mdl.Arch).Int("context", mdl.Context).Int("vocab", mdl.Vocab).
		Int("kv_blocks", blocks).Int("slots", slots).Str("kv_type", kvt.String()).Str("device", eng.DeviceName()).
		Msg("model loaded")
	return mm, nil
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
