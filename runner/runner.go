// Package runner loads a model to run: a GGUF file (or the built-in model
// of package models) and Options in; the weights, the tokenizer, the chat
// template, a device (the CPU, or the GPU through kernels/cuda) and an
// engine over it out. `ringlm serve`, `run`, `bench engine` and
// `perplexity` load their models through it, so they read a file, pick a
// device and size the KV cache the same way.
//
// It owns the choice of device (--device auto|cpu|cuda, and the fallback
// to the CPU when auto finds no usable GPU or the GPU cannot take the
// model), the choice of chat template (--chat-template NAME, else
// --chat-template-file, else the template the model came with, an Ollama
// model's (Options.Chat), else the GGUF's own Jinja template, else ChatML
// for a GGUF without one, as llama.cpp's server does; logged once), the
// context a sequence may fill (Options.Context, an Ollama model's num_ctx),
// the KV pool's size, the step sizes by device (DefaultTokenBudget:
// 2048 tokens a step on the GPU, the engine's 512 on the CPU), the names a
// model answers to and its fingerprint. It does not schedule requests (package engine) nor speak
// HTTP (package httpapi, which serves a Runner's engine without importing
// this package, so that the HTTP layer builds without the kernels).
package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"ringlm/chat"
	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/model"
	"ringlm/models"
	"ringlm/ringbuf"
	"ringlm/tokenizer"
)

// Weights are a GGUF file's model and tokenizer, which point into the
// file's mapping: it stays open until Close.
type Weights struct {
	Path      string // the GGUF file; "" for the built-in model
	File      *gguf.File
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	mapped    *gguf.File // the file's mapping, when File is its resident copy
}

// Open reads the model and tokenizer of the GGUF file at path, or of the
// built-in model (package models) when path is "".
func Open(path string) (*Weights, error) {
	var f *gguf.File
	var err error
	name := path
	if path == "" {
		// Parsed from memory: the embedded image has no file to map.
		f, err = gguf.Parse(models.Default())
		name = "the built-in model " + models.DefaultName
	} else {
		f, err = gguf.Open(path) // its errors name the file
	}
	if err != nil {
		return nil, err
	}
	w := &Weights{Path: path, File: f}
	if w.Model, err = model.Load(f); err == nil {
		w.Tokenizer, err = tokenizer.Load(f)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return w, nil
}

// Close releases the file; the model and tokenizer are unusable after.
func (w *Weights) Close() error {
	err := w.File.Close()
	if w.mapped != nil {
		err = errors.Join(w.mapped.Close(), err)
	}
	return err
}

// resident reads the model's weights again, from the file into memory of
// their own (gguf.OpenResident), and points the model at them. The file's
// mapping stays open (the tokenizer and the metadata may point into it)
// until Close. A failure leaves the weights as they were.
func (w *Weights) resident() error {
	if w.Path == "" || w.mapped != nil {
		return nil
	}
	f, err := gguf.OpenResident(w.Path)
	if err != nil {
		return err
	}
	m, err := model.Load(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", w.Path, err)
	}
	m.Context = w.Model.Context
	w.mapped, w.File, w.Model = w.File, f, m
	return nil
}

// Options say how to run a model.
type Options struct {
	// Name is the name the model is reported by; "" = the GGUF's
	// general.name, else the file's base name (the built-in model's: its
	// own name).
	Name string
	// ChatTemplate forces a named chat format (chat.ParseFormat; the
	// commands' --chat-template) instead of the GGUF's own template.
	// ChatTemplateFile is a Jinja template file used instead of the GGUF's
	// (--chat-template-file). Without either the GGUF's template is
	// rendered; a GGUF without one gets ChatML, as llama.cpp's server
	// gives it.
	ChatTemplate     string
	ChatTemplateFile string
	// Chat is the template the model came with when it is not the GGUF's
	// (an Ollama model's template layer): it replaces the GGUF's, and
	// ChatTemplate or ChatTemplateFile replace it.
	Chat *chat.Template
	// Context caps the positions one sequence may hold below the model's
	// context length (an Ollama model's num_ctx); 0, or more than the
	// model's, is the model's.
	Context int
	Device  string // auto, cpu or cuda ("" = auto)
	Slots   int    // sequences decoded together; 0: the device's default (DefaultSlots)
	// TokenBudget is the tokens of one engine step, prefill and decode
	// together, and PrefillChunk the prompt tokens one request gets in a
	// step (at most TokenBudget); 0 takes the device's default
	// (DefaultTokenBudget, DefaultPrefillChunk).
	TokenBudget  int
	PrefillChunk int
	// KVBlocks is the size of the KV pool in blocks of
	// model.DefaultBlockSize positions; 0 sizes it from KVMemoryMiB
	// (at least 1 MiB), capped at every slot at full context and, on the
	// GPU, by its free memory.
	KVBlocks    int
	KVMemoryMiB int
	KVType      string // f16 or f32 ("" = f16); the cuda device keeps f16
	PrefixCache bool
	MaxQueue    int // waiting requests (0: the engine's default)
	// Mmap keeps a GGUF file's weights in the file's mapping on the CPU
	// device too. Otherwise the CPU device reads them into memory of their
	// own in transparent huge pages (gguf.OpenResident): its decode, which
	// streams every weight once a token, runs faster for it, and it costs
	// the file's size in private memory. The GPU device always uploads
	// from the mapping.
	Mmap      bool
	Allocator ringbuf.Allocator // CPU device: nil = mmap + mlock (the CUDA device brings its own)
	Log       zerolog.Logger
	StepHook  func(step uint64, entries int, startNS, endNS uint64) // engine.Config.StepHook
}

// Check rejects options no flag parser can: the device, the KV type,
// their combination and the chat template's name. Start checks them too; commands call Check first to
// report a usage error before loading anything.
func (o *Options) Check() error {
	if err := CheckDevice(o.Device); err != nil {
		return err
	}
	kvt, err := parseKVType(o.KVType)
	if err != nil {
		return err
	}
	if o.TokenBudget < 0 || o.PrefillChunk < 0 {
		return fmt.Errorf("--token-budget %d, --prefill-chunk %d: must be ≥ 0 (0: the device's default)", o.TokenBudget, o.PrefillChunk)
	}
	if o.Device == "cuda" && kvt != gguf.TypeF16 {
		return fmt.Errorf("--kv-type %s: the cuda device keeps an f16 KV cache", o.KVType)
	}
	if o.ChatTemplate != "" {
		if _, err := chat.ParseFormat(o.ChatTemplate); err != nil {
			return fmt.Errorf("--chat-template: %w", err)
		}
		if o.ChatTemplateFile != "" {
			return errors.New("--chat-template and --chat-template-file: give one of them")
		}
	}
	if o.ChatTemplateFile != "" {
		if _, err := templateFile(o.ChatTemplateFile); err != nil {
			return err
		}
	}
	return nil
}

// templateFile reads and compiles a --chat-template-file (without the
// vocabulary's tokens: the check is that it parses).
func templateFile(path string) (string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--chat-template-file: %w", err)
	}
	if _, err := chat.Compile(string(src), "", ""); err != nil {
		return "", fmt.Errorf("--chat-template-file %s: %w", path, err)
	}
	return string(src), nil
}

// CheckDevice rejects a --device value other than auto, cpu or cuda ("" is
// auto).
func CheckDevice(d string) error {
	switch d {
	case "", "auto", "cpu", "cuda":
		return nil
	}
	return fmt.Errorf("--device must be auto, cpu or cuda, got %q", d)
}

func parseKVType(s string) (gguf.Type, error) {
	if s == "" {
		return gguf.TypeF16, nil
	}
	kvt, ok := gguf.ParseType(s)
	if !ok || (kvt != gguf.TypeF16 && kvt != gguf.TypeF32) {
		return 0, fmt.Errorf("--kv-type must be f16 or f32, got %q", s)
	}
	return kvt, nil
}

// Runner is a model running on a device: an engine over it, and what
// callers need to build requests for the engine and to report the model.
type Runner struct {
	*Weights
	Engine *engine.Engine
	// Chat is nil when the GGUF's template neither parses nor is
	// recognised; ChatErr then says why (the commands add the flag that
	// picks one).
	Chat    *chat.Template
	ChatErr error
	// ChatFallback is set when the GGUF has no template and Chat is
	// ChatML, the fallback.
	ChatFallback bool
	// Name is the model's reported name; Aliases are the others it
	// answers to (general.name, the file's names).
	Name    string
	Aliases []string
	// Fingerprint identifies the weights and settings that produce
	// outputs: the same seed under the same fingerprint gives the same
	// tokens.
	Fingerprint string
	Device      string // the device's kind, "cpu" or "cuda" (Engine.DeviceName says more)
	// KVBytes is the memory of the KV pool (on the GPU for cuda).
	KVBytes int64

	// fault reports a device that died (a CUDA kernel fault: sticky for
	// the process); nil for devices that cannot fault.
	fault    func() error
	exited   func() <-chan struct{}
	closeDev func() error // nil for the CPU device, which the engine frees
}

// Load opens the GGUF file at path ("" = the built-in model) and starts
// an engine over it on the device o picks.
func Load(path string, o Options) (*Runner, error) {
	if err := o.Check(); err != nil {
		return nil, err // a usage error before the file is opened
	}
	w, err := Open(path)
	if err != nil {
		return nil, err
	}
	r, err := Start(w, o)
	if err != nil {
		w.Close()
		return nil, err
	}
	return r, nil
}

// Start runs w on the device o picks. The Runner takes w: its Close
// closes w. On error w stays open, the caller's to close.
func Start(w *Weights, o Options) (*Runner, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	kvt, _ := parseKVType(o.KVType) // checked
	if !o.Mmap {
		// The CPU device streams the weights from host memory every token.
		if kind, err := pickDevice(o.Device, kvt, zerolog.Nop()); err == nil && kind == "cpu" {
			if err := w.resident(); err != nil {
				o.Log.Warn().Err(err).Msg("the weights stay in the file's mapping")
			}
		}
	}
	mdl, v := w.Model, w.Tokenizer.Vocab()
	if o.Context > 0 && o.Context < mdl.Context {
		// Every limit (the device's, the KV pool's cap, the engine's)
		// reads the model's context, which is now this.
		mdl.Context = o.Context
	}
	src := templateSource{forced: o.ChatTemplate, given: o.Chat, jinja: v.ChatTemplate, bos: tokenText(v, v.BOS), eos: tokenText(v, v.EOS)}
	if o.ChatTemplateFile != "" {
		var err error
		if src.jinja, err = templateFile(o.ChatTemplateFile); err != nil {
			return nil, err
		}
		src.file = true
	}
	chosen := pickTemplate(src)
	if src.file && chosen.err != nil {
		return nil, chosen.err
	}
	dev, err := openDevice(mdl, kvt, o)
	if err != nil {
		return nil, err
	}
	var eos []int32
	for _, id := range []int32{v.EOS, v.EOT} {
		if id >= 0 && !slices.Contains(eos, id) {
			eos = append(eos, id)
		}
	}
	slots := dev.slots
	eng, err := engine.New(engine.Config{Slots: slots, TokenBudget: dev.budget, PrefillChunk: dev.chunk, NumBlocks: dev.blocks, BlockSize: model.DefaultBlockSize,
		PrefixCache: o.PrefixCache, MaxQueue: o.MaxQueue, Context: mdl.Context, Vocab: mdl.Vocab, EOS: eos,
		Allocator: dev.alloc, Log: o.Log, StepHook: o.StepHook}, dev.dev)
	if err != nil {
		if dev.close != nil {
			dev.close()
		}
		return nil, fmt.Errorf("starting the engine: %w", err)
	}
	r := &Runner{Weights: w, Engine: eng, Device: dev.kind, fault: dev.fault, exited: dev.exited, closeDev: dev.close}
	// On cuda kvt is f16: pickDevice takes the CPU for any other.
	r.KVBytes = int64(dev.blocks) * model.KVBytesPerBlock(&mdl.Config, kvt, model.DefaultBlockSize)
	general, _ := w.File.String("general.name")
	file, explicit := w.Path, o.Name
	if file == "" {
		file = models.DefaultFile
		if explicit == "" {
			explicit = models.DefaultName
		}
	}
	r.Name, r.Aliases = modelNames(explicit, general, BaseName(file), filepath.Base(file))
	r.Chat, r.ChatFallback, r.ChatErr = chosen.t, chosen.fallback, chosen.err
	switch {
	case r.ChatFallback:
		// Once per model: requests render ChatML without a word.
		o.Log.Warn().Str("model", r.Name).Str("chat_template", string(chat.ChatML)).
			Msg("the model has no chat template; using ChatML (--chat-template picks another)")
	case chosen.parseErr != nil && r.Chat != nil:
		o.Log.Warn().Str("model", r.Name).Str("chat_template", string(r.Chat.Format)).Str("error", chosen.parseErr.Error()).
			Msg("the model's chat template does not parse; using the named format its markers show (--chat-template-file or --chat-template picks another)")
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s|%s|%d|%s|%d", general, mdl.Arch, mdl.Vocab, kvt, mdl.WeightBytes())
	if dev.kind == "cuda" {
		// Another device computes other floating-point sums: another fingerprint.
		fmt.Fprint(h, "|cuda")
	}
	r.Fingerprint = "fp_" + hex.EncodeToString(h.Sum(nil))[:12]
	o.Log.Info().Str("model", r.Name).Str("arch", mdl.Arch).Int("context", mdl.Context).Int("vocab", mdl.Vocab).
		Int("kv_blocks", dev.blocks).Int("slots", slots).Str("kv_type", kvt.String()).Str("device", eng.DeviceName()).
		Msg("model loaded")
	return r, nil
}

// templateSource is what the chat template is chosen from.
type templateSource struct {
	forced   string         // --chat-template NAME
	given    *chat.Template // Options.Chat
	jinja    string         // the GGUF's template, or --chat-template-file's
	file     bool           // jinja came from --chat-template-file
	bos, eos string         // the vocabulary's BOS and EOS texts
}

// chatChoice is the chat template chosen for a model.
type chatChoice struct {
	t        *chat.Template // nil when err
	fallback bool           // no template at all: ChatML
	parseErr error          // why the GGUF's template was not used as it is
	err      error
}

// pickTemplate chooses the chat template: the forced format, else
// --chat-template-file's, else the one the model came with (Options.Chat),
// else the GGUF's Jinja template, else (no template at all) ChatML. A GGUF template that does not parse falls back to the named
// format its marker strings show, with parseErr saying why; one that is
// not recognised either stays an error rather than ChatML: the model was
// trained on another format, which ChatML would only guess at.
func pickTemplate(s templateSource) chatChoice {
	switch {
	case s.forced != "":
		f, err := chat.ParseFormat(s.forced) // checked by Options.Check
		if err != nil {
			return chatChoice{err: err}
		}
		return chatChoice{t: &chat.Template{Format: f}}
	case s.given != nil && !s.file:
		return chatChoice{t: s.given}
	case strings.TrimSpace(s.jinja) == "":
		return chatChoice{t: &chat.Template{Format: chat.ChatML}, fallback: true}
	}
	t, parseErr := chat.Compile(s.jinja, s.bos, s.eos)
	if parseErr == nil || s.file {
		return chatChoice{t: t, err: parseErr}
	}
	d, err := chat.Detect(s.jinja)
	if err != nil {
		return chatChoice{parseErr: parseErr, err: fmt.Errorf("%w; %w", parseErr, err)}
	}
	return chatChoice{t: &d, parseErr: parseErr}
}

// tokenText is the text of a special token, "" when the vocabulary has
// none.
func tokenText(v *tokenizer.Vocab, id int32) string {
	if id < 0 || int(id) >= len(v.Tokens) {
		return ""
	}
	return v.Tokens[id]
}

// Fault is the device's error once it has failed for good, else nil.
func (r *Runner) Fault() error {
	if r.fault == nil {
		return nil
	}
	return r.fault()
}

// Faulted is closed when the device may have failed for good (Fault says
// whether it did: a CUDA kernel that exited cleanly did not); nil, which
// is never ready, for a device that cannot fail. A server waits on it
// instead of polling Fault, so an idle server wakes for nothing.
func (r *Runner) Faulted() <-chan struct{} {
	if r.exited == nil {
		return nil
	}
	return r.exited()
}

// Close stops the engine, then frees the device, then releases the file
// its weights were uploaded from, in that order.
func (r *Runner) Close() error {
	err := r.Engine.Close()
	if r.closeDev != nil {
		err = errors.Join(err, r.closeDev())
	}
	return errors.Join(err, r.Weights.Close())
}

// BaseName is the name a model file goes by: its base name without the
// extension ("models/Qwen2.5-0.5B-Q8_0.gguf" is "Qwen2.5-0.5B-Q8_0").
func BaseName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
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
