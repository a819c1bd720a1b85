// Package testmodel gives tests the tiny synthetic models they load
// (synth's "tiny" shapes with its built-in vocabulary, seed 7), each
// written once per test binary.
package testmodel

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"ringlm/gguf"
	"ringlm/model"
	"ringlm/synth"
)

var (
	mu    sync.Mutex
	dir   string
	paths = map[string]string{}
)

// Path is the file of the tiny model of arch in typ, tiny-test.gguf,
// written on first use.
func Path(t testing.TB, arch string, typ gguf.Type) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	key := arch + "/" + typ.String()
	if p, ok := paths[key]; ok {
		return p
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "ringlm-testmodel")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	shape, err := synth.Lookup("tiny", arch)
	if err != nil {
		t.Fatal(err)
	}
	w, err := synth.Build(synth.Options{Shape: shape, Type: typ, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Every model is "tiny-test.gguf" (the name tests see it served
	// under), each in a folder of its own.
	sub := filepath.Join(dir, arch+"-"+typ.String())
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(sub, "tiny-test.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	paths[key] = p
	return p
}

// Load opens the tiny model of arch in typ; the file stays mapped until
// the test ends.
func Load(t testing.TB, arch string, typ gguf.Type) *model.Model {
	t.Helper()
	return Open(t, Path(t, arch, typ))
}

// Write writes a synthetic model of any shape into the test's temporary
// directory and returns its path.
func Write(t testing.TB, s synth.Shape, typ gguf.Type, seed uint64) string {
	t.Helper()
	w, err := synth.Build(synth.Options{Shape: s, Type: typ, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "model.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Open loads the model at path; the file stays mapped until the test ends.
func Open(t testing.TB, path string) *model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Poison writes a copy of the model at path with every value of its F32
// tensor name set to v (NaN weights: what a broken conversion leaves) into
// the test's temporary directory, and returns the copy's path.
func Poison(t testing.TB, path, name string, v float32) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b) // its tensor views are b itself
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor(name)
	if !ok || ti.Type != gguf.TypeF32 {
		t.Fatalf("testmodel: no F32 tensor %q in %s", name, path)
	}
	d := f.Data(ti)
	for i := 0; i+4 <= len(d); i += 4 {
		binary.LittleEndian.PutUint32(d[i:], math.Float32bits(v))
	}
	p := filepath.Join(t.TempDir(), "poisoned.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Cleanup removes the files written; a TestMain calls it after m.Run.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
	dir, paths = "", map[string]string{}
}
