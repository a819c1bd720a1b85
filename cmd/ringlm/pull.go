package main

import (
	"context"
	"errors"
	"io"

	"ringlm/pull"
)

// pullSynopsis is pull -h's first lines.
const pullSynopsis = `pull NAME [--json] [--registry URL] [--insecure]

Downloads a model into the cache its name belongs to, as ollama pull does:
  hf.co/{user}/{repo}[:{quant}][@{revision}]   the Hugging Face Hub (the .gguf file
                                               whose name holds the tag, default Q4_K_M),
                                               into the HF cache ($HF_HUB_CACHE, $HF_HOME/hub,
                                               ~/.cache/huggingface/hub); $HF_ENDPOINT, $HF_TOKEN
  hf.co/{user}/{repo}/{file}.gguf              that file
  {model}[:{tag}], {namespace}/{model}[:{tag}], {host}/{namespace}/{model}[:{tag}]
                                               an Ollama registry (registry.ollama.ai), into
                                               $RINGLM_MODELS, else ~/.ringlm/models
                                               (RINGLM_MODELS=~/.ollama/models shares Ollama's)
A pull that is stopped (Ctrl-C, a lost connection, a killed process) keeps what
it has, and the next pull of the name transfers only the rest. What is
already in the cache is not downloaded again. Progress: a bar with speed
and time left on a terminal, else JSON lines as ollama pull streams them.`

func runPull(args []string, stdout, stderr io.Writer) error {
	ctx, which, stop := interruptContext()
	defer stop()
	err := pullCmd(ctx, args, stdout)
	if err != nil && ctx.Err() != nil && !errors.As(err, new(helpRequest)) {
		// The library's line says what was kept; the status says why.
		return interruptedBy{err, which()}
	}
	return err
}

// pullCmd is `ringlm pull` until ctx ends (^C).
func pullCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("pull", pullSynopsis)
	asJSON := fs.Bool("json", false, "print progress as JSON lines (as ollama pull streams them) even on a terminal")
	cfg, err := settingsFlags(fs, "registry", "insecure")
	if err != nil {
		return err
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("expected one model name, got %d arguments", len(pos))
	}
	ref, err := parseName(pos[0])
	if err != nil {
		return err
	}
	f := newFetcher(cfg)
	f.progress = pull.NewProgress(stdout, *asJSON)
	_, err = f.pull(ctx, ref)
	return err
}
