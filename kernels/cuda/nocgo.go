//go:build !cgo

package cuda

import (
	"errors"
	"unsafe"

	"ringlm/model"
)

// Without cgo there is no dlopen: the device reports itself unavailable
// and everything else builds (CGO_ENABLED=0 binaries run on the CPU).

var errNoCgo = errors.New("cuda: this binary was built without cgo (CGO_ENABLED=0); the CUDA device needs it")

type library struct {
	path    string
	devices int
}

func load([]string) (*library, error) { return nil, errNoCgo }

type desc struct{}

func newDesc(*model.Model, Options) (*desc, error) { return nil, errNoCgo }
func (*desc) free()                                {}

func (*library) hostAlloc(uint64) (unsafe.Pointer, error)                 { return nil, errNoCgo }
func (*library) hostFree(unsafe.Pointer) error                            { return errNoCgo }
func (*library) createCtx(*desc) (unsafe.Pointer, error)                  { return nil, errNoCgo }
func (*library) info(unsafe.Pointer) (Info, error)                        { return Info{}, errNoCgo }
func (*library) startKernel(unsafe.Pointer, unsafe.Pointer, uint64) error { return errNoCgo }
func (*library) waitKernel(unsafe.Pointer) error                          { return errNoCgo }
func (*library) readLogits(unsafe.Pointer, int, []float32) error          { return errNoCgo }
func (*library) copyBW(unsafe.Pointer, uint64) (float64, error)           { return 0, errNoCgo }
func (*library) destroyCtx(unsafe.Pointer)                                {}
