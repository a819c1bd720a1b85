package main

import (
	"os"
	"testing"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/pull/ollama"
	"ringlm/pull/pulltest"
	"ringlm/synth"
)

// BenchmarkStart is `ringlm run MODEL -p x -n 1 --offline` to its first
// token, with one ~51 MB Q8_0 model (48M parameters) given as a file, by
// its Hugging Face name and by its Ollama name, both pulled beforehand:
// a name is resolved from the cache without the network and without
// hashing, so it starts as fast as the file (bench/RESULTS.md).
func BenchmarkStart(b *testing.B) {
	shape, err := synth.Lookup("tiny", "llama")
	if err != nil {
		b.Fatal(err)
	}
	shape.Dim, shape.Layers, shape.HeadDim, shape.FFN = 512, 16, 64, 1408
	path := testmodel.Write(b, shape, gguf.TypeQ8_0, 1)
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	e := newPullEnv(b)
	e.hub.Push("bench/Start-GGUF", map[string][]byte{"start-Q8_0.gguf": data})
	e.reg.Push("library/start", "latest", pulltest.Layer{MediaType: ollama.MediaTypeModel, Data: data})
	for _, name := range []string{"hf.co/bench/Start-GGUF:Q8_0", "start"} {
		if code, _, errOut := runCmd(b, "pull", name); code != 0 {
			b.Fatalf("pull %s: %s", name, errOut)
		}
	}
	b.Logf("model: %d bytes, %d parameters", len(data), shape.Params(512))
	for _, c := range []struct{ name, arg string }{{"file", path}, {"hf", "hf.co/bench/Start-GGUF:Q8_0"}, {"ollama", "start"}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if code, _, errOut := runCmd(b, "run", c.arg, "-p", "x", "-n", "1", "--temp", "0", "--verbose=false", "--offline"); code != 0 {
					b.Fatalf("run %s: %s", c.arg, errOut)
				}
			}
		})
	}
}

// BenchmarkResolve is the part of a start by name that a start by file
// does not have: the name parsed and found in its cache (the HF cache's
// refs and snapshot; the Ollama store's manifest and small layers, whose
// sha256 is checked).
func BenchmarkResolve(b *testing.B) {
	e := newPullEnv(b)
	e.hub.Push("bench/Resolve-GGUF", map[string][]byte{"resolve-Q8_0.gguf": e.gguf})
	e.pushOllama("library/resolve", "latest")
	for _, c := range []struct{ name, arg string }{{"hf", "hf.co/bench/Resolve-GGUF:Q8_0"}, {"ollama", "resolve"}} {
		if code, _, errOut := runCmd(b, "pull", c.arg); code != 0 {
			b.Fatalf("pull %s: %s", c.arg, errOut)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				ref, err := parseModelRef(c.arg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := (fetcher{offline: true}).source(b.Context(), ref); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
