//go:build cgo

package cuda

import (
	"strings"
	"testing"

	"ringlm/gguf"
	"ringlm/model"
	"ringlm/ringbuf"
)

// TestHeadDimLimit: a model whose heads are wider than the kernel's
// attention takes is refused when the device is opened, with both numbers,
// before the library is asked; one at the limit is described.
func TestHeadDimLimit(t *testing.T) {
	m := tiny(t, "llama", gguf.TypeF16)
	o, err := Options{}.normalize(m)
	if err != nil {
		t.Fatal(err)
	}
	with := func(hd int) *model.Model {
		c := m.Config
		c.HeadDim = hd
		return &model.Model{Config: c, Embed: m.Embed, Output: m.Output, OutNorm: m.OutNorm, Layers: m.Layers}
	}
	_, err = newDesc(with(ringbuf.MaxHeadDim+2), o)
	if err == nil || !strings.Contains(err.Error(), "head dimension 130 exceeds 128") {
		t.Fatalf("head dimension %d: %v", ringbuf.MaxHeadDim+2, err)
	}
	if _, err := openWith(fakeLib(t), with(ringbuf.MaxHeadDim*2), Options{}); err == nil || !strings.Contains(err.Error(), "256 exceeds 128") {
		t.Fatalf("Open with head dimension %d: %v", ringbuf.MaxHeadDim*2, err)
	}
	d, err := newDesc(with(ringbuf.MaxHeadDim), o)
	if err != nil {
		t.Fatalf("head dimension %d: %v", ringbuf.MaxHeadDim, err)
	}
	d.free()
}
