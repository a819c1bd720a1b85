package httpapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"ringlm/kernels/cuda"
	"ringlm/ringbuf"
)

func TestCheckDevice(t *testing.T) {
	for _, d := range []string{"", "auto", "cpu", "cuda"} {
		if err := CheckDevice(d); err != nil {
			t.Errorf("%q: %v", d, err)
		}
	}
	if err := CheckDevice("gpu"); err == nil || !strings.Contains(err.Error(), "--device") {
		t.Errorf("gpu: %v", err)
	}
	c := DefaultConfig()
	if c.Device != "auto" {
		t.Errorf("default device %q", c.Device)
	}
	c.Device, c.KVType = "cuda", "f32"
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "f16") {
		t.Errorf("cuda with an f32 KV cache: %v", err)
	}
	c.Device = "tpu"
	if err := c.Check(); err == nil {
		t.Error("--device tpu accepted")
	}
}

func loadWith(t *testing.T, device string) (*Model, string, error) {
	t.Helper()
	cfg := testConfig()
	cfg.Model, cfg.Device = tinyModel(t), device
	logs := &syncBuffer{}
	m, err := Load(LoadOptions{Config: cfg, Allocator: ringbuf.HeapAllocator{}, Log: zerolog.New(logs)})
	if m != nil {
		t.Cleanup(func() { m.Close() })
	}
	return m, logs.String(), err
}

func TestLoadDevice(t *testing.T) {
	m, _, err := loadWith(t, "cpu")
	if err != nil || m.Engine.DeviceName() != "cpu" {
		t.Fatalf("--device cpu: %v", err)
	}
	cpuFP := m.Fingerprint

	avail := cuda.Available()
	m, logs, err := loadWith(t, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if avail != nil {
		if m.Engine.DeviceName() != "cpu" || !strings.Contains(logs, "device auto") || !strings.Contains(logs, "not usable") {
			t.Errorf("auto without CUDA: device %s, logs %s", m.Engine.DeviceName(), logs)
		}
		if m.Fingerprint != cpuFP {
			t.Error("fingerprint differs between auto (on the CPU) and cpu")
		}
		// --device cuda without a library is one clear line.
		_, _, err := loadWith(t, "cuda")
		if err == nil {
			t.Fatal("--device cuda loaded without CUDA")
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "--device cuda is not usable: "+avail.Error()) || strings.Contains(msg, "\n") ||
			(errors.Is(avail, cuda.ErrNoLibrary) && !strings.Contains(msg, "make cuda")) {
			t.Errorf("--device cuda without CUDA: %q", msg)
		}
		return
	}
	if !strings.HasPrefix(m.Engine.DeviceName(), "cuda (") || m.Fingerprint == cpuFP {
		t.Errorf("auto with CUDA: device %s, fingerprint %s (cpu %s)", m.Engine.DeviceName(), m.Fingerprint, cpuFP)
	}
}
