package httpapi

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config is every setting of `ringlm serve`. Each one is a flag and an
// environment variable; Settings lists them with their defaults and docs, so
// this file is the only place a setting is described. Models, ModelName,
// ChatTemplate, ChatTemplateFile, Device to PrefixCache and MaxQueue are what `ringlm serve`
// passes to runner.Load, Offline, Registry and Insecure how it finds a -m
// name's model; the server reads the others (and reports Slots and
// MaxQueue in /health; MaxQueue also bounds the requests waiting for a
// model switch).
type Config struct {
	// Models are the models to serve (-m, repeated): GGUF files or model
	// names (hf.co/..., Ollama names), pulled on first load unless
	// Offline; none = the built-in model. With several, requests pick one
	// by name and one is loaded at a time (SetModels).
	Models    []string
	ModelName string // name reported by /v1/models for the one model; "" = general.name, else the file's base name
	// Offline refuses to download a -m name that is not pulled; Registry
	// (a base URL) and Insecure (plain HTTP) say how to reach an Ollama
	// name's registry.
	Offline  bool
	Registry string
	Insecure bool
	Host     string
	Port     int
	APIKey   string
	// CORSOrigins lists the browser origins answered with CORS headers,
	// comma-separated; "*" is any origin, "" turns CORS off.
	CORSOrigins string

	ChatTemplate     string // a named chat format instead of the GGUF's template
	ChatTemplateFile string // a Jinja template file instead of the GGUF's template

	Device       string // auto, cpu or cuda ("" = auto)
	Slots        int
	TokenBudget  int // 0: the device's default (runner.DefaultTokenBudget)
	PrefillChunk int // 0: the device's default (runner.DefaultPrefillChunk)
	KVBlocks     int
	KVMemoryMiB  int
	KVType       string
	PrefixCache  bool
	Mmap         bool // keep the weights in the file's mapping on the CPU device too (runner.Options.Mmap)

	MaxQueue   int
	MaxBody    int
	MaxTokens  int
	MaxChoices int

	ReadTimeout     time.Duration
	IdleTimeout     time.Duration
	StallTimeout    time.Duration
	ShutdownTimeout time.Duration

	LogFormat string
	LogLevel  string

	Debug       bool   // serve /debug/pprof/ and /debug/trace
	Trace       string // write the engine's trace from start to this file on shutdown
	TraceEvents int    // trace events kept (64 bytes each)
}

// DefaultConfig returns the defaults that Settings documents.
func DefaultConfig() Config {
	return Config{
		Host:            "127.0.0.1",
		Port:            8080,
		Device:          "auto",
		Slots:           0,
		KVMemoryMiB:     1024,
		KVType:          "f16",
		PrefixCache:     true,
		MaxQueue:        256,
		MaxBody:         4 << 20,
		MaxTokens:       4096,
		MaxChoices:      16,
		ReadTimeout:     60 * time.Second,
		IdleTimeout:     120 * time.Second,
		StallTimeout:    60 * time.Second,
		ShutdownTimeout: 30 * time.Second,
		LogFormat:       "auto",
		LogLevel:        "info",
		TraceEvents:     1 << 20,
	}
}

// Setting is one configurable value: its flag, its environment variable and
// what it means.
type Setting struct {
	Flag, Env, Usage string
	Value            flag.Value
}

// Settings binds every field of c to its flag and environment variable.
func (c *Config) Settings() []Setting {
	return []Setting{
		{"m", "RINGLM_MODEL", "GGUF model `FILE`, or a model NAME (hf.co/{user}/{repo}[:{quant}], or an Ollama name such as llama3.2), pulled on first load unless --offline (default: the built-in gocoder model, a small Go-code completer); repeat -m to serve several, each named by its file's base name or as its NAME is written, and loaded when a request names it, one at a time (comma-separated in the variable)", &listVal{p: &c.Models}},
		{"model-name", "RINGLM_MODEL_NAME", "`NAME` reported by /v1/models and accepted in requests, with one -m (default: the GGUF's general.name, else the file's base name; both are always accepted)", strVal{&c.ModelName}},
		{"offline", "RINGLM_OFFLINE", "never download: a model NAME that is not pulled is an error saying to run 'ringlm pull NAME' first", boolVal{&c.Offline}},
		{"registry", "RINGLM_REGISTRY", "base `URL` that stands for the host of Ollama model names (a mirror; default: the name's own host, registry.ollama.ai)", strVal{&c.Registry}},
		{"insecure", "RINGLM_INSECURE", "reach the registry of Ollama model names over plain HTTP, as ollama pull --insecure", boolVal{&c.Insecure}},
		{"host", "RINGLM_HOST", "`ADDRESS` to listen on; 127.0.0.1 keeps the server local, 0.0.0.0 exposes it", strVal{&c.Host}},
		{"port", "RINGLM_PORT", "TCP `PORT` (0 picks a free one and logs it)", intVal{&c.Port, 0, 65535}},
		{"api-key", "RINGLM_API_KEY", "require 'Authorization: Bearer `KEY`' on /v1/*, /api/ps, /execute, /cancel, /tokenize, /detokenize and /apply-template (/health, /metrics and CORS preflights stay open)", strVal{&c.APIKey}},
		{"cors-origins", "RINGLM_CORS_ORIGINS", "let web pages from these `ORIGINS` call the API (comma-separated scheme://host[:port], or * for any): CORS headers, and preflight OPTIONS answered without --api-key; empty: off", strVal{&c.CORSOrigins}},
		{"chat-template", "RINGLM_CHAT_TEMPLATE", "named chat `FORMAT` to use instead of the GGUF's own template: chatml, llama3, llama2, mistral, phi3", strVal{&c.ChatTemplate}},
		{"chat-template-file", "RINGLM_CHAT_TEMPLATE_FILE", "Jinja chat template `FILE` to use instead of the GGUF's tokenizer.chat_template, rendered as HuggingFace's apply_chat_template does", strVal{&c.ChatTemplateFile}},
		{"device", "RINGLM_DEVICE", "`DEVICE` that runs the model: auto (cuda when libringlm_cuda.so loads and sees a GPU, else cpu; the log says which and why), cpu, or cuda (an error if unusable)", strVal{&c.Device}},
		{"slots", "RINGLM_SLOTS", "`N` sequences decoded together (engine slots; 0: the device's, 64 on the CPU, 256 on CUDA)", intVal{&c.Slots, 0, 4096}},
		{"token-budget", "RINGLM_TOKEN_BUDGET", "`N` tokens per engine step, prefill and decode together, as vLLM's --max-num-batched-tokens (0: 2048 on cuda, 512 on cpu)", intVal{&c.TokenBudget, 0, 1 << 20}},
		{"prefill-chunk", "RINGLM_PREFILL_CHUNK", "`N` prompt tokens of one request per engine step, at most --token-budget; longer prompts are prefilled over several steps (0: the whole budget on cuda, 256 on cpu)", intVal{&c.PrefillChunk, 0, 1 << 20}},
		{"kv-blocks", "RINGLM_KV_BLOCKS", "`N` KV cache blocks of 16 positions (0: size from --kv-memory)", intVal{&c.KVBlocks, 0, 1 << 26}},
		{"kv-memory", "RINGLM_KV_MEMORY", "KV cache size in `MiB` when --kv-blocks is 0 (capped at slots × context; on cuda also by free GPU memory)", intVal{&c.KVMemoryMiB, 1, 1 << 24}},
		{"kv-type", "RINGLM_KV_TYPE", "KV cache element `TYPE`: f16 or f32 (cpu only; cuda keeps f16)", strVal{&c.KVType}},
		{"prefix-cache", "RINGLM_PREFIX_CACHE", "reuse the KV blocks of prompt prefixes seen before", boolVal{&c.PrefixCache}},
		{"mmap", "RINGLM_MMAP", "on the cpu device, read the weights in place from the file's mapping (shared page cache) instead of a private copy in huge pages (faster decode, the file's size in memory)", boolVal{&c.Mmap}},
		{"max-queue", "RINGLM_MAX_QUEUE", "`N` requests waiting for a slot before new ones get 503; as many may wait for a model switch (several -m)", intVal{&c.MaxQueue, 1, 1 << 20}},
		{"max-body", "RINGLM_MAX_BODY", "largest request body in `BYTES` (larger ones get 413)", intVal{&c.MaxBody, 1 << 10, 1 << 30}},
		{"max-tokens", "RINGLM_MAX_TOKENS", "largest max_tokens (`N`) a request may ask for; also the default, capped by the context", intVal{&c.MaxTokens, 1, 1 << 24}},
		{"max-choices", "RINGLM_MAX_CHOICES", "largest n × prompts (`N`) of one request", intVal{&c.MaxChoices, 1, 1024}},
		{"read-timeout", "RINGLM_READ_TIMEOUT", "`DURATION` to read a whole request", durVal{&c.ReadTimeout}},
		{"idle-timeout", "RINGLM_IDLE_TIMEOUT", "keep-alive connections idle this `DURATION` are closed", durVal{&c.IdleTimeout}},
		{"stall-timeout", "RINGLM_STALL_TIMEOUT", "a streaming client that accepts nothing for this `DURATION` is dropped and its request cancelled", durVal{&c.StallTimeout}},
		{"shutdown-timeout", "RINGLM_SHUTDOWN_TIMEOUT", "on SIGTERM, the `DURATION` running requests may finish before they end with an error", durVal{&c.ShutdownTimeout}},
		{"log-format", "RINGLM_LOG_FORMAT", "log `FORMAT`: auto (console on a terminal, else JSON), json, console", strVal{&c.LogFormat}},
		{"log-level", "RINGLM_LOG_LEVEL", "log `LEVEL`: debug, info, warn, error", strVal{&c.LogLevel}},
		{"debug", "RINGLM_DEBUG", "serve GET /debug/pprof/ (Go's profiles) and GET /debug/trace?seconds=N (records the engine for N seconds, default 5, at most 60, and answers Chrome/Perfetto trace JSON); behind --api-key when set; off: 404", boolVal{&c.Debug}},
		{"trace", "RINGLM_TRACE", "record the engine's Chrome/Perfetto trace (request timelines, device steps) from start and write it to `FILE` on shutdown", strVal{&c.Trace}},
		{"trace-events", "RINGLM_TRACE_EVENTS", "`N` newest events --trace and /debug/trace keep (64 bytes each; older ones are dropped)", intVal{&c.TraceEvents, 1 << 10, 1 << 26}},
	}
}

// Register adds every setting to fs. A set environment variable replaces
// the default; a flag given on the command line wins over both.
func (c *Config) Register(fs *flag.FlagSet, getenv func(string) string) error {
	for _, s := range c.Settings() {
		if v := getenv(s.Env); v != "" {
			var err error
			if l, ok := s.Value.(*listVal); ok {
				err = l.setDefault(v)
			} else {
				err = s.Value.Set(v)
			}
			if err != nil {
				return fmt.Errorf("%s=%q: %w", s.Env, v, err)
			}
		}
		fs.Var(s.Value, s.Flag, s.Usage+" ($"+s.Env+")")
	}
	return nil
}

// Check rejects settings that no flag parser can: enumerations and
// combinations. The model and device settings (Device, KVType) are the
// runner's to check: `ringlm serve` passes them to runner.Options.Check.
func (c *Config) Check() error {
	switch c.LogFormat {
	case "auto", "json", "console":
	default:
		return fmt.Errorf("--log-format must be auto, json or console, got %q", c.LogFormat)
	}
	if _, err := parseOrigins(c.CORSOrigins); err != nil {
		return fmt.Errorf("--cors-origins: %w", err)
	}
	if c.StallTimeout <= 0 || c.ShutdownTimeout < 0 || c.ReadTimeout <= 0 || c.IdleTimeout <= 0 {
		return fmt.Errorf("timeouts must be positive")
	}
	if len(c.Models) > 1 {
		// Each of several models is named by its -m; one name cannot
		// stand for them all.
		if c.ModelName != "" {
			return fmt.Errorf("--model-name names the one model of a single -m; with %d, each is named by its file's base name", len(c.Models))
		}
		// --trace follows one engine from start to shutdown; a switch
		// closes it.
		if c.Trace != "" {
			return fmt.Errorf("--trace records one model's engine: give one -m, or use /debug/trace (--debug)")
		}
	}
	return nil
}

type strVal struct{ p *string }

func (v strVal) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}
func (v strVal) Set(s string) error { *v.p = s; return nil }

// listVal is a flag that may be repeated (-m a -m b). The environment
// variable gives the default as a comma-separated list; the first flag on
// the command line replaces it, as a flag replaces any setting's default.
type listVal struct {
	p       *[]string
	flagged bool
}

func (v *listVal) String() string {
	if v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

func (v *listVal) Set(s string) error {
	if s == "" {
		return fmt.Errorf("empty value")
	}
	if !v.flagged {
		*v.p, v.flagged = nil, true
	}
	*v.p = append(*v.p, s)
	return nil
}

func (v *listVal) setDefault(s string) error {
	var l []string
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			l = append(l, e)
		}
	}
	*v.p = l
	return nil
}

type intVal struct {
	p        *int
	min, max int
}

func (v intVal) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v intVal) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not an integer")
	}
	if n < v.min || n > v.max {
		return fmt.Errorf("must be in [%d, %d]", v.min, v.max)
	}
	*v.p = n
	return nil
}

type boolVal struct{ p *bool }

func (v boolVal) String() string {
	if v.p == nil {
		return "false"
	}
	return strconv.FormatBool(*v.p)
}

func (v boolVal) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("not a boolean")
	}
	*v.p = b
	return nil
}

func (v boolVal) IsBoolFlag() bool { return true }

type durVal struct{ p *time.Duration }

func (v durVal) String() string {
	if v.p == nil {
		return "0s"
	}
	return v.p.String()
}

func (v durVal) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration (e.g. 30s)")
	}
	*v.p = d
	return nil
}
