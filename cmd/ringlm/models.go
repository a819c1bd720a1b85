package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"ringlm/gguf"
	"ringlm/httpapi"
	"ringlm/pull"
	"ringlm/pull/hf"
	"ringlm/pull/ollama"
	"ringlm/quantize"
	"ringlm/sample"
)

// A model argument (-m, or the NAME of run, show, pull and rm) is, in
// this order: an existing file, a Hugging Face name (hf.co/...: the HF
// cache, pull/hf), or an Ollama name (llama3.2, ns/model:tag,
// host/ns/model:tag: the Ollama-layout store, pull/ollama). The file is
// checked first, so that ./llama3.2 or a file named llama3.2 in the
// working directory stays a file. An argument that is written as a path
// (ends in .gguf, or starts with /, ./, ../ or ~/) is only ever a file.
type modelRef struct {
	arg    string
	file   string // a file, or "" for the built-in model when arg is ""
	hub    *hf.Name
	oll    *ollama.Name
	isName bool
}

// parseModelRef reads a model argument; "" is the built-in model.
func parseModelRef(arg string) (modelRef, error) {
	if arg == "" {
		return modelRef{}, nil
	}
	_, err := os.Stat(arg)
	if err == nil || (looksLikePath(arg) && !hf.IsName(arg)) {
		return modelRef{arg: arg, file: arg}, err // the stat's error names the file
	}
	return parseName(arg)
}

// parseName reads a model name (pull and rm take no files).
func parseName(arg string) (modelRef, error) {
	if hf.IsName(arg) {
		n, err := hf.ParseName(arg)
		if err != nil {
			return modelRef{}, err
		}
		return modelRef{arg: arg, hub: &n, isName: true}, nil
	}
	n, err := ollama.ParseName(arg)
	if err != nil || looksLikePath(arg) {
		return modelRef{}, fmt.Errorf("%q is neither a file nor a model name (hf.co/{user}/{repo}[:{quant}], or an Ollama name such as llama3.2 or {namespace}/{model}:{tag})", arg)
	}
	return modelRef{arg: arg, oll: &n, isName: true}, nil
}

// looksLikePath reports an argument written as a file's path, which no
// Ollama name is.
func looksLikePath(arg string) bool {
	return strings.HasSuffix(strings.ToLower(arg), ".gguf") || filepath.IsAbs(arg) || arg == "." || arg == ".." || arg == "~" ||
		strings.HasPrefix(arg, "./") || strings.HasPrefix(arg, "../") || strings.HasPrefix(arg, "~/")
}

// fetcher finds the models names stand for, downloading them when asked
// to: the settings the commands share (--offline, --registry,
// --insecure).
type fetcher struct {
	offline  bool
	registry string // Ollama names: a base URL standing for the name's host
	insecure bool   // Ollama names: plain HTTP
	// progress receives the download's events; nil: none.
	progress func(pull.Event)
	// note, when set, says that a name is being pulled because it is not
	// in the cache (run and serve pull on first use).
	note func(name string)
}

// settingsFlags registers on fs the settings of serve's table that flags
// name, read from their environment variables as serve reads them, so
// that run and pull take --offline, --registry and --insecure as serve
// does; the returned config holds their values once fs is parsed.
func settingsFlags(fs *flag.FlagSet, flags ...string) (*httpapi.Config, error) {
	cfg := new(httpapi.Config)
	*cfg = httpapi.DefaultConfig()
	for _, s := range cfg.Settings() {
		if !slices.Contains(flags, s.Flag) {
			continue
		}
		if v := os.Getenv(s.Env); v != "" {
			if err := s.Value.Set(v); err != nil {
				return nil, usagef("%s=%q: %v", s.Env, v, err)
			}
		}
		fs.Var(s.Value, s.Flag, s.Usage+" ($"+s.Env+")")
	}
	return cfg, nil
}

// newFetcher is the fetcher of the settings in cfg.
func newFetcher(cfg *httpapi.Config) fetcher {
	return fetcher{offline: cfg.Offline, registry: cfg.Registry, insecure: cfg.Insecure}
}

// source is where ref's model is without downloading anything when it
// is there (a file, or a pulled name: no network, no hashing, so that
// starting by name is as fast as by file), else after pulling it, unless
// offline.
func (f fetcher) source(ctx context.Context, ref modelRef) (modelSource, error) {
	if !ref.isName {
		return modelSource{Path: ref.file}, nil
	}
	src, err := f.cached(ref)
	if !errors.Is(err, pull.ErrNotFound) {
		return src, err
	}
	if f.offline {
		return modelSource{}, notPulled(ref, " and --offline is set")
	}
	if f.note != nil {
		f.note(ref.arg)
	}
	return f.pull(ctx, ref)
}

// notPulled is the error for a name that is not in its cache, saying
// how to get it.
func notPulled(ref modelRef, why string) error {
	return fmt.Errorf("%s is not pulled%s: run 'ringlm pull %s' first", ref.arg, why, ref.arg)
}

// cached finds a pulled name; pull.ErrNotFound when it is not there.
func (f fetcher) cached(ref modelRef) (modelSource, error) {
	return f.find(context.Background(), ref, false)
}

// pull asks the Hub or the registry for ref and downloads what the cache
// lacks.
func (f fetcher) pull(ctx context.Context, ref modelRef) (modelSource, error) {
	return f.find(ctx, ref, true)
}

// find is ref's model in its cache, brought there first when download
// is set.
func (f fetcher) find(ctx context.Context, ref modelRef, download bool) (modelSource, error) {
	var err error
	if ref.hub != nil {
		var path string
		if download {
			path, err = hf.Pull(ctx, *ref.hub, hf.Options{Transfer: pull.Options{Progress: f.progress}})
		} else {
			path, err = hf.Resolve(*ref.hub, hf.Options{})
		}
		if err != nil {
			return modelSource{}, err
		}
		return modelSource{Path: path, Digest: hubDigest(path)}, nil
	}
	store, err := ollama.DefaultStore()
	if err != nil {
		return modelSource{}, err
	}
	var m *ollama.Model
	if download {
		m, err = ollama.Pull(ctx, ref.arg, ollama.Options{Store: store, Registry: f.registry, Insecure: f.insecure, Progress: f.progress})
	} else {
		m, err = ollama.Open(store, *ref.oll)
	}
	if err != nil {
		return modelSource{}, err
	}
	return ollamaSource(m)
}

// hubDigest is the sha256 of a file in the HF cache, read from the name
// of the blob its snapshot link points to: no byte of the file is read.
// "" when the snapshot holds the file itself.
func hubDigest(path string) string {
	target, err := os.Readlink(path)
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

// ollamaParams are the params an Ollama model may set that ringlm uses:
// SampleParams's and num_ctx.
var ollamaParams = []string{"temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "presence_penalty",
	"frequency_penalty", "seed", "num_predict", "stop", "num_ctx"}

// ollamaSource is a pulled Ollama model as run and serve load it: its
// GGUF file, and its template and params layers as the chat template and
// the sampling defaults.
func ollamaSource(m *ollama.Model) (modelSource, error) {
	for _, l := range m.Manifest.Layers {
		if l.MediaType == ollama.MediaTypeAdapter {
			// The weights without their adapter are another model.
			return modelSource{}, fmt.Errorf("%s has a LoRA adapter layer, which ringlm cannot apply", m.Name.DisplayShort())
		}
	}
	src := modelSource{Path: m.GGUFPath, Digest: strings.TrimPrefix(m.Digest, "sha256:"), Name: m.Name.DisplayShort(), Ollama: m}
	var err error
	if src.Chat, err = m.ChatTemplate(); err != nil {
		return src, err
	}
	p, err := m.SampleParams(sample.Defaults())
	if err != nil {
		return src, err
	}
	_, seeded := m.Params["seed"]
	if seeded {
		seed, _ := m.Params["seed"].(float64)
		seeded = seed >= 0 // Ollama's -1 is "random"
	}
	src.Defaults = &httpapi.Defaults{Params: p, Seeded: seeded}
	if src.Context, err = m.NumCtx(); err != nil {
		return src, err
	}
	for _, k := range slices.Sorted(maps.Keys(m.Params)) {
		if !slices.Contains(ollamaParams, k) {
			src.Ignored = append(src.Ignored, k)
		}
	}
	return src, nil
}

// ignoredNote is the line that says which of a model's params ringlm
// has no use for; "" when there are none.
func ignoredNote(src modelSource) string {
	if len(src.Ignored) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: ignoring the model's parameters %s (ringlm's sampler has no such option)", src.Name, strings.Join(src.Ignored, ", "))
}

// pullNote is fetcher.note for run and serve: a line saying why a start
// downloads.
func pullNote(w io.Writer, cmd string) func(string) {
	return func(name string) {
		fmt.Fprintf(w, "ringlm %s: %s is not pulled yet; pulling it (--offline refuses)\n", cmd, name)
	}
}

// quantOf is the quantization a GGUF file's header says
// (general.file_type, as llama.cpp names the mixes: Q4_K_M, Q8_0, F16),
// "" when it says none that is known.
func quantOf(f *gguf.File) string {
	ft, err := f.Uint32("general.file_type")
	if err != nil {
		return ""
	}
	if mix, ok := quantize.ParseMix(fmt.Sprint(ft)); ok {
		return mix.Name
	}
	return ""
}
