package main

import (
	"fmt"
	"io"

	"ringlm/pull"
	"ringlm/pull/hf"
	"ringlm/pull/ollama"
)

func runRm(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("rm", `rm NAME...

Deletes pulled models, as ollama rm does: a Hugging Face name's file from
the HF cache, an Ollama name's manifest from the store. A blob that another
model still uses stays.`)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("expected a model name")
	}
	for _, arg := range pos {
		ref, err := parseName(arg)
		if err != nil {
			return err
		}
		if ref.hub != nil {
			freed, err := hf.Remove(*ref.hub, hf.Options{})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "deleted '%s' (%s freed)\n", arg, pull.FormatBytes(freed))
			continue
		}
		store, err := ollama.DefaultStore()
		if err != nil {
			return err
		}
		if err := ollama.Remove(store, arg); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted '%s'\n", arg)
	}
	return nil
}
