package tokenizer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"ringlm/gguf"
)

// The fixtures are vocab-only GGUF files made from the HF tokenizer.json
// files in /work/shared by `go test ./tokenizer -run TestUpdateFixtures
// -update`. Normal test runs read only testdata/tokenizer.
var update = flag.Bool("update", false, "regenerate testdata/tokenizer from /work/shared/testdata/tokenizers")

const (
	fixtureDir = "../testdata/tokenizer"
	sourceDir  = "/work/shared/testdata/tokenizers"
)

var vocabNames = []string{"mistral", "llama3", "qwen3", "gptoss"}

var archOf = map[string]string{"mistral": "llama", "llama3": "llama", "qwen3": "qwen3", "gptoss": "gpt-oss"}

func TestUpdateFixtures(t *testing.T) {
	if !*update {
		t.Skip("run with -update to regenerate the fixtures")
	}
	for _, name := range vocabNames {
		tj := readGzip(t, filepath.Join(sourceDir, name, "tokenizer.json.gz"))
		cfg, err := os.ReadFile(filepath.Join(sourceDir, name, "tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := FromHFJSON(tj, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w := gguf.NewWriter()
		w.Set("general.architecture", gguf.String(archOf[name]))
		w.Set("general.name", gguf.String(name+" vocabulary"))
		for _, kv := range v.Metadata() {
			w.Set(kv.Key, kv.Value)
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if _, err := w.WriteTo(zw); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(fixtureDir, name+".gguf.gz")
		if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", out, buf.Len())
	}
	golden, err := os.ReadFile(filepath.Join(sourceDir, "golden-public.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fixtureDir, "golden-public.jsonl"), golden, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readGzip(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

type fixture struct {
	once  sync.Once
	vocab *Vocab
	tok   *Tokenizer
	err   error
}

var fixtures = map[string]*fixture{}

func init() {
	for _, n := range vocabNames {
		fixtures[n] = &fixture{}
	}
}

// loadVocab reads testdata/tokenizer/<name>.gguf.gz, once per test binary.
func loadVocab(t testing.TB, name string) *Vocab {
	t.Helper()
	fx := fixtures[name]
	fx.once.Do(func() {
		f, err := os.Open(filepath.Join(fixtureDir, name+".gguf.gz"))
		if err != nil {
			fx.err = err
			return
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			fx.err = err
			return
		}
		data, err := io.ReadAll(zr)
		if err != nil {
			fx.err = err
			return
		}
		gf, err := gguf.Parse(data)
		if err != nil {
			fx.err = err
			return
		}
		if fx.vocab, fx.err = FromGGUF(gf); fx.err != nil {
			return
		}
		fx.tok, fx.err = New(fx.vocab)
	})
	if fx.err != nil {
		t.Fatalf("loading %s: %v", name, fx.err)
	}
	return fx.vocab
}

func loadTokenizer(t testing.TB, name string) *Tokenizer {
	t.Helper()
	loadVocab(t, name)
	return fixtures[name].tok
}

type golden struct {
	Vocab   string  `json:"vocab"`
	Text    string  `json:"text"`
	IDs     []int32 `json:"ids"`
	Decoded string  `json:"decoded"`
}

var (
	goldenOnce sync.Once
	goldenAll  []golden
	goldenErr  error
)

func loadGoldens(t testing.TB) []golden {
	t.Helper()
	goldenOnce.Do(func() {
		f, err := os.Open(filepath.Join(fixtureDir, "golden-public.jsonl"))
		if err != nil {
			goldenErr = err
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			var g golden
			if goldenErr = json.Unmarshal(sc.Bytes(), &g); goldenErr != nil {
				return
			}
			goldenAll = append(goldenAll, g)
		}
		goldenErr = sc.Err()
	})
	if goldenErr != nil {
		t.Fatal(goldenErr)
	}
	return goldenAll
}
