package main

import (
	"errors"
	"strings"
	"testing"

	"ringlm/httpapi"
	"ringlm/kernels/cuda"
)

func TestDeviceFlag(t *testing.T) {
	if d := httpapi.DefaultConfig().Device; d != "auto" {
		t.Errorf("serve's default device %q", d)
	}
	m := testModel(t)
	for _, args := range [][]string{
		{"run", "-m", m, "-p", "hi", "--device", "gpu"},
		{"serve", "-m", m, "--port", "0", "--device", "gpu"},
		{"run", "-m", m, "-p", "hi", "--device", "cuda", "--kv-type", "f32"},
		{"serve", "-m", m, "--port", "0", "--device", "cuda", "--kv-type", "f32"},
	} {
		if code, _, e := runCmd(t, args...); code != 2 || !strings.Contains(e, "--") || strings.Count(e, "\n") != 2 || !strings.HasSuffix(e, " -h' for usage.\n") {
			t.Errorf("%v: code %d, stderr %q", args, code, e)
		}
	}
	t.Setenv("RINGLM_DEVICE", "tpu")
	if code, _, e := runCmd(t, "serve", "-m", m, "--port", "0"); code != 2 || !strings.Contains(e, "--device must be") {
		t.Errorf("RINGLM_DEVICE=tpu: code %d, stderr %q", code, e)
	}
	t.Setenv("RINGLM_DEVICE", "cpu")
	code, out, e := runCmd(t, "run", "-m", m, "-p", "hi", "-n", "3", "--temp", "0")
	if code != 0 || out == "" || !strings.Contains(e, "device = cpu") {
		t.Errorf("RINGLM_DEVICE=cpu: code %d, stdout %q, stderr %q", code, out, e)
	}
}

// Without a usable CUDA library --device cuda is one clear line and exit 1;
// with one, run generates on the GPU.
func TestDeviceCUDA(t *testing.T) {
	m := testModel(t)
	avail := cuda.Available()
	if avail == nil {
		code, out, e := runCmd(t, "run", "-m", m, "-p", "hi", "-n", "8", "--temp", "0", "--device", "cuda")
		if code != 0 || out == "" || !strings.Contains(e, "device = cuda (") {
			t.Fatalf("run --device cuda: code %d, stdout %q, stderr %q", code, out, e)
		}
		return
	}
	for _, args := range [][]string{
		{"run", "-m", m, "-p", "hi", "--device", "cuda"},
		{"serve", "-m", m, "--port", "0", "--device", "cuda", "--log-level", "error"},
	} {
		code, _, e := runCmd(t, args...)
		if code != 1 || strings.Count(e, "\n") != 1 || !strings.Contains(e, "--device cuda is not usable: "+avail.Error()) ||
			(errors.Is(avail, cuda.ErrNoLibrary) && !strings.Contains(e, "make cuda")) {
			t.Errorf("%v: code %d, stderr %q", args, code, e)
		}
	}
}
