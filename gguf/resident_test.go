//go:build linux

package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// OpenResident parses the same file as Open, with tensor data equal byte
// for byte and outside the file's mapping; bad files are errors.
func TestOpenResident(t *testing.T) {
	w := NewWriter()
	w.Set("general.architecture", String("llama"))
	data := make([]byte, 4*64*5)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := w.AddTensor("a.weight", TypeF32, []uint64{64, 5}, data); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "m.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	mapped, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	f, err := OpenResident(p)
	if err != nil {
		t.Fatal(err)
	}
	if arch, _ := f.Architecture(); arch != "llama" || len(f.Tensors) != 1 {
		t.Fatalf("architecture %q, %d tensors", arch, len(f.Tensors))
	}
	ti, ok := f.Tensor("a.weight")
	mt, _ := mapped.Tensor("a.weight")
	if !ok || !bytes.Equal(f.Data(ti), data) || !bytes.Equal(f.Data(ti), mapped.Data(mt)) {
		t.Fatal("tensor data differs from the file's")
	}
	if &f.Data(ti)[0] == &mapped.Data(mt)[0] {
		t.Fatal("the resident copy aliases another mapping")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	whole, _ := os.ReadFile(p)
	short := filepath.Join(dir, "short.gguf")
	if err := os.WriteFile(short, whole[:len(whole)-100], 0o644); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"missing": filepath.Join(dir, "none.gguf"), "directory": dir, "truncated": short} {
		f, err := OpenResident(path)
		if err == nil {
			f.Close()
			t.Errorf("%s: opened", name)
			continue
		}
		if !strings.Contains(err.Error(), filepath.Base(path)) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s: %v (want one line naming the file)", name, err)
		}
		if name == "truncated" && !errors.Is(err, ErrTruncated) {
			t.Errorf("truncated: %v is not ErrTruncated", err)
		}
	}
}
