package model

import (
	"fmt"
	"unsafe"

	"ringlm/gguf"
)

// DefaultBlockSize is the number of positions in one KV block.
const DefaultBlockSize = 16

// KVPool is a paged KV cache: Blocks blocks of BlockSize positions, per
// layer, for keys and values, in F32 or F16. A sequence addresses it
// through a block table (logical block i of the sequence lives in
// physical block table[i]); the engine's block manager owns allocation.
// Layout per layer and per K/V: [block][position in block][kv head][head
// dim]. (The CUDA device keeps its own F16 pool in GPU memory, ordered
// [layer][block][kv head][position in block][head dim]; the block tables
// that address the two are the same.)
type KVPool struct {
	Type      gguf.Type
	BlockSize int
	Blocks    int
	Layers    int
	KVDim     int
	f32       [][]float32 // 2*Layers slices: K of layer l at 2l, V at 2l+1
	f16       [][]uint16
}

// NewKVPool allocates a pool of blocks for the model's shape.
func NewKVPool(c *Config, typ gguf.Type, blocks, blockSize int) (*KVPool, error) {
	if typ != gguf.TypeF32 && typ != gguf.TypeF16 {
		return nil, fmt.Errorf("model: KV cache type %s not supported (F32, F16)", typ)
	}
	if blocks <= 0 || blockSize <= 0 {
		return nil, fmt.Errorf("model: KV pool of %d blocks of %d positions", blocks, blockSize)
	}
	p := &KVPool{Type: typ, BlockSize: blockSize, Blocks: blocks, Layers: c.Layers, KVDim: c.KVDim()}
	n := blocks * blockSize * p.KVDim
	for i := 0; i < 2*c.Layers; i++ {
		if typ == gguf.TypeF32 {
			p.f32 = append(p.f32, make([]float32, n))
		} else {
			p.f16 = append(p.f16, make([]uint16, n))
		}
	}
	return p, nil
}

// KVBytesPerBlock is the memory one block takes across all layers.
func KVBytesPerBlock(c *Config, typ gguf.Type, blockSize int) int64 {
	el := int64(4)
	if typ == gguf.TypeF16 {
		el = 2
	}
	return 2 * int64(c.Layers) * int64(blockSize) * int64(c.KVDim()) * el
}

// offset is the element offset of position pos of a sequence.
func (p *KVPool) offset(table []int32, pos int) int {
	return (int(table[pos/p.BlockSize])*p.BlockSize + pos%p.BlockSize) * p.KVDim
}

func (p *KVPool) store(layer int, table []int32, pos int, k, v []float32) {
	o := p.offset(table, pos)
	if p.f32 != nil {
		copy(p.f32[2*layer][o:o+p.KVDim], k)
		copy(p.f32[2*layer+1][o:o+p.KVDim], v)
		return
	}
	kd, vd := p.f16[2*layer][o:o+p.KVDim], p.f16[2*layer+1][o:o+p.KVDim]
	for i := range kd {
		kd[i] = gguf.F32ToF16(k[i])
		vd[i] = gguf.F32ToF16(v[i])
	}
}

// rows appends to dst the address of positions [from, to) of layer's
// keys (kv=0) or values (kv=1), off elements into each position's row.
func (p *KVPool) rows(layer, kv int, table []int32, from, to, off int, dst []*byte) []*byte {
	for pos := from; pos < to; pos++ {
		o := p.offset(table, pos) + off
		if p.f32 != nil {
			dst = append(dst, (*byte)(unsafe.Pointer(&p.f32[2*layer+kv][o])))
		} else {
			dst = append(dst, (*byte)(unsafe.Pointer(&p.f16[2*layer+kv][o])))
		}
	}
	return dst
}

// elemBytes is the size of one element.
func (p *KVPool) elemBytes() int {
	if p.f32 != nil {
		return 4
	}
	return 2
}

// convert reads len(dst) elements at src, an address from rows.
func (p *KVPool) convert(dst []float32, src *byte) {
	b := unsafe.Slice(src, p.elemBytes()*len(dst))
	if p.f32 != nil {
		rowF32(dst, b)
		return
	}
	rowF16(dst, b)
}

// Copy copies block src to block dst in every layer (copy-on-write of a
// shared prefix block).
func (p *KVPool) Copy(dst, src int) {
	n := p.BlockSize * p.KVDim
	for i := range p.f32 {
		copy(p.f32[i][dst*n:(dst+1)*n], p.f32[i][src*n:(src+1)*n])
	}
	for i := range p.f16 {
		copy(p.f16[i][dst*n:(dst+1)*n], p.f16[i][src*n:(src+1)*n])
	}
}
