//go:build !amd64 || purego

package model

// The portable path: no assembly on this architecture (or built with the
// purego tag). Same entry points as simd_amd64.go.

// simdKernel names the kernels this process uses.
const simdKernel = "go"

// tileKernels: none, every product takes the Go path.
func (m *Matrix) tileKernels() ([]tileKernel, int, bool) { return nil, 0, false }

// kvTileKernels, kvPVKernels: none, attention takes the Go path.
func kvTileKernels(*KVPool, int) ([]tileKernel, int)  { return nil, 0 }
func kvPVKernels(*KVPool, int) ([]pvKernel, int, int) { return nil, 0, 0 }
func pvWidth(*KVPool, int) int                        { return 4 }

func softmax(x []float32, scale float32) { softmaxGo(x, scale) }
func swiglu(out, gate, up []float32)     { swigluGo(out, gate, up) }

func rowF32(dst []float32, src []byte)  { rowF32Go(dst, src) }
func rowF16(dst []float32, src []byte)  { rowF16Go(dst, src) }
func rowBF16(dst []float32, src []byte) { rowBF16Go(dst, src) }
func rowQ8_0(dst []float32, src []byte) { rowQ8_0Go(dst, src) }
