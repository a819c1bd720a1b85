package httpapi

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// -m repeats; RINGLM_MODEL is a comma-separated default that the first
// -m on the command line replaces, as any flag replaces its variable.
func TestModelsSetting(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "RINGLM_MODEL" {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		env  string
		args []string
		want []string
	}{
		{"", nil, nil},
		{"a.gguf, b.gguf", nil, []string{"a.gguf", "b.gguf"}},
		{"a.gguf,b.gguf", []string{"-m", "c.gguf"}, []string{"c.gguf"}},
		{"", []string{"-m", "c.gguf", "-m", "d.gguf"}, []string{"c.gguf", "d.gguf"}},
	} {
		cfg := DefaultConfig()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if err := cfg.Register(fs, env(c.env)); err != nil {
			t.Fatal(err)
		}
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.Models, c.want) {
			t.Errorf("RINGLM_MODEL=%q %q: models %q, want %q", c.env, c.args, cfg.Models, c.want)
		}
	}

	cfg := DefaultConfig()
	cfg.Models = []string{"a.gguf", "b.gguf"}
	if err := cfg.Check(); err != nil {
		t.Errorf("two models: %v", err)
	}
	cfg.ModelName = "x"
	if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), "--model-name") {
		t.Errorf("--model-name with two models: %v", err)
	}
	cfg.ModelName, cfg.Trace = "", "t.json"
	if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), "--trace") {
		t.Errorf("--trace with two models: %v", err)
	}
}
