package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"ringlm/gguf"
	"ringlm/pull"
	"ringlm/pull/hf"
	"ringlm/pull/ollama"
)

// listed is one pulled model, as list prints it.
type listed struct {
	Name     string    `json:"name"`
	ID       string    `json:"id"`     // 12 hex digits: the file's sha256 (HF), the manifest's (Ollama, as ollama list)
	Digest   string    `json:"digest"` // all of it
	Size     int64     `json:"size"`
	Quant    string    `json:"quant"`
	Modified time.Time `json:"modified_at"`
	Source   string    `json:"source"` // hf or ollama
	Path     string    `json:"path"`   // the GGUF file
}

func runList(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("list", `list [--json]

Lists the pulled models: the GGUF files in the Hugging Face cache
($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub) and the models of
the Ollama-layout store ($RINGLM_MODELS, else ~/.ringlm/models), the most
recently pulled first. QUANT is the GGUF header's file type (the file's
name when the header cannot be read).`)
	asJSON := fs.Bool("json", false, "print JSON: {\"models\": [{name, id, digest, size, quant, modified_at, source, path}]}")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	models, err := pulledModels()
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Models []listed `json:"models"`
		}{append([]listed{}, models...)})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tSIZE\tQUANT\tMODIFIED")
	now := time.Now()
	for _, m := range models {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name, m.ID, pull.FormatBytes(m.Size), m.Quant, humanSince(now.Sub(m.Modified)))
	}
	return tw.Flush()
}

// pulledModels are the models of both caches, newest first.
func pulledModels() ([]listed, error) {
	var out []listed
	hub, err := hf.List(hf.Options{})
	if err != nil {
		return nil, err
	}
	for _, m := range hub {
		name := m.Name
		if name == "" { // no shorter name reaches it: the file at its commit does
			name = "hf.co/" + m.Repo + "/" + m.File + "@" + m.Commit
		}
		d := hubDigest(m.Path)
		out = append(out, listed{Name: name, Digest: d, Size: m.Size, Quant: headerQuant(m.Path, m.File), Modified: m.Modified,
			Source: "hf", Path: m.Path})
	}
	store, err := ollama.DefaultStore()
	if err != nil {
		return nil, err
	}
	entries, err := ollama.List(store)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		out = append(out, listed{Name: e.Name.DisplayShort(), Digest: strings.TrimPrefix(e.Digest, "sha256:"), Size: e.Size,
			Quant: headerQuant(e.GGUFPath, e.Name.Tag), Modified: e.Modified, Source: "ollama", Path: e.GGUFPath})
	}
	for i := range out {
		out[i].ID = out[i].Digest[:min(12, len(out[i].Digest))]
	}
	slices.SortStableFunc(out, func(a, b listed) int { return cmp.Or(b.Modified.Compare(a.Modified), cmp.Compare(a.Name, b.Name)) })
	return out, nil
}

// headerQuant is the file type the GGUF header at path says. Opening maps
// the file and parses the header and tensor infos only: no tensor byte is
// read, so listing stays fast however large the models. hint (a file
// name, a tag) names the quantization when the header cannot say.
func headerQuant(path, hint string) string {
	if path != "" {
		if f, err := gguf.Open(path); err == nil {
			q := quantOf(f)
			f.Close()
			if q != "" {
				return q
			}
		}
	}
	return hf.QuantOf(hint)
}
