package httpapi

import (
	"slices"

	"ringlm/chat"
	"ringlm/engine"
	"ringlm/sample"
	"ringlm/tokenizer"
)

// Model is what the server generates with: an engine over a device, the
// model's tokenizer and chat template, and the names it answers to.
// `ringlm serve` builds it from a runner.Runner, which loads the model and
// opens the device: this package only serves the engine, so that it builds
// without the kernels.
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
	// Defaults are the model's own sampling options, which a request's
	// fields override (an Ollama model's params layer, as Ollama applies
	// a Modelfile's PARAMETERs); nil: sample.Defaults().
	Defaults *Defaults
	Created  int64
	// Fingerprint identifies the weights and settings that produce
	// outputs (system_fingerprint): the same seed under the same
	// fingerprint gives the same text.
	Fingerprint string
	// Info is what GET /api/ps reports: size, digest, details.
	Info ModelInfo
	// Backend owns the engine, its device and the model file; nil when
	// the engine is all there is to close (tests over a device of their
	// own).
	Backend Backend
}

// Defaults are a model's sampling defaults.
type Defaults struct {
	// Params are what a request starts from: temperature, top_k, top_p,
	// min_p, penalties, stop strings, and MaxTokens (0: none of the
	// model's; the server's --max-tokens and the context still bound it).
	Params sample.Params
	// Seeded says Params.Seed is the model's seed, which requests without
	// a seed of their own use, so that they are reproducible as in Ollama.
	Seeded bool
}

// Backend is what runs a Model's engine (a *runner.Runner).
type Backend interface {
	// Fault is the device's error once it has failed for good (a CUDA
	// kernel fault: sticky for the process, so the server exits and its
	// supervisor restarts it), else nil.
	Fault() error
	// Close stops the engine, then frees the device and the model file.
	Close() error
}

// Fault is the device's error once it has failed for good, else nil.
func (m *Model) Fault() error {
	if m.Backend == nil {
		return nil
	}
	return m.Backend.Fault()
}

// Close stops the engine and releases the device and the model file.
func (m *Model) Close() error {
	if m.Backend != nil {
		return m.Backend.Close()
	}
	return m.Engine.Close()
}

// Accepts reports whether name designates the model. An empty name is
// accepted: several clients omit it for single-model servers.
func (m *Model) Accepts(name string) bool {
	return name == "" || name == m.Name || slices.Contains(m.Aliases, name)
}

// isHidden reports the token ids that never become text: EOS, EOT and
// other control tokens, as vLLM's skip_special_tokens does by default.
func isHidden(t *tokenizer.Tokenizer, id int32) bool {
	return t.IsEOG(id) || t.Vocab().Type(id) == tokenizer.TypeControl
}
