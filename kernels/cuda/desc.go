package cuda

/*
#include <stdlib.h>
#include "ringlm_cuda.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"unsafe"

	"ringlm/gguf"
	"ringlm/model"
	"ringlm/quant"
	"ringlm/ringbuf"
)

// desc holds the rlm_model, rlm_layer and rlm_opts descriptors of one
// rlm_create call, all in C memory. Matrices point straight at the weights
// (the GGUF mapping, or Go memory pinned for the call); every float vector
// (norms, biases, rope factors) is copied into C memory, as cgo requires for
// Go-heap data that C memory points to. free releases it all once
// rlm_create returned: the library has copied everything to VRAM by then.
type desc struct {
	model  *C.rlm_model
	layers *C.rlm_layer
	opts   *C.rlm_opts
	nLayer int
	allocs []unsafe.Pointer
	pin    runtime.Pinner
	cfg    model.Config
}

// readTypes are the weight types the CUDA device reads, in the order its
// refusal names them: the float types and Q8_0, then the block types it
// keeps at their own width (qpack.h).
var readTypes = []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_1,
	gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
	gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4}

// The ABI's type ids are ggml's, which package gguf's are: a difference
// would not compile (a negative constant converted to uint8).
const (
	_ = uint8(gguf.TypeQ4_0-C.RLM_TYPE_Q4_0) + uint8(C.RLM_TYPE_Q4_0-gguf.TypeQ4_0)
	_ = uint8(gguf.TypeQ4_1-C.RLM_TYPE_Q4_1) + uint8(C.RLM_TYPE_Q4_1-gguf.TypeQ4_1)
	_ = uint8(gguf.TypeQ5_0-C.RLM_TYPE_Q5_0) + uint8(C.RLM_TYPE_Q5_0-gguf.TypeQ5_0)
	_ = uint8(gguf.TypeQ5_1-C.RLM_TYPE_Q5_1) + uint8(C.RLM_TYPE_Q5_1-gguf.TypeQ5_1)
	_ = uint8(gguf.TypeQ8_0-C.RLM_TYPE_Q8_0) + uint8(C.RLM_TYPE_Q8_0-gguf.TypeQ8_0)
	_ = uint8(gguf.TypeQ2_K-C.RLM_TYPE_Q2_K) + uint8(C.RLM_TYPE_Q2_K-gguf.TypeQ2_K)
	_ = uint8(gguf.TypeQ3_K-C.RLM_TYPE_Q3_K) + uint8(C.RLM_TYPE_Q3_K-gguf.TypeQ3_K)
	_ = uint8(gguf.TypeQ4_K-C.RLM_TYPE_Q4_K) + uint8(C.RLM_TYPE_Q4_K-gguf.TypeQ4_K)
	_ = uint8(gguf.TypeQ5_K-C.RLM_TYPE_Q5_K) + uint8(C.RLM_TYPE_Q5_K-gguf.TypeQ5_K)
	_ = uint8(gguf.TypeQ6_K-C.RLM_TYPE_Q6_K) + uint8(C.RLM_TYPE_Q6_K-gguf.TypeQ6_K)
	_ = uint8(gguf.TypeIQ4_NL-C.RLM_TYPE_IQ4_NL) + uint8(C.RLM_TYPE_IQ4_NL-gguf.TypeIQ4_NL)
	_ = uint8(gguf.TypeIQ4_XS-C.RLM_TYPE_IQ4_XS) + uint8(C.RLM_TYPE_IQ4_XS-gguf.TypeIQ4_XS)
	_ = uint8(gguf.TypeMXFP4-C.RLM_TYPE_MXFP4) + uint8(C.RLM_TYPE_MXFP4-gguf.TypeMXFP4)
	_ = uint8(gguf.TypeF32-C.RLM_TYPE_F32) + uint8(C.RLM_TYPE_F32-gguf.TypeF32)
	_ = uint8(gguf.TypeF16-C.RLM_TYPE_F16) + uint8(C.RLM_TYPE_F16-gguf.TypeF16)
	_ = uint8(gguf.TypeBF16-C.RLM_TYPE_BF16) + uint8(C.RLM_TYPE_BF16-gguf.TypeBF16)
)

// cType maps a weight type to the ABI's ids (ggml's, so the id itself).
func cType(t gguf.Type) (C.uint32_t, bool) {
	if slices.Contains(readTypes, t) {
		return C.uint32_t(t), true
	}
	return 0, false
}

func newDesc(m *model.Model, o Options) (d *desc, err error) {
	c := &m.Config
	if c.Layers != len(m.Layers) || c.Layers <= 0 || c.Dim <= 0 || c.Vocab <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 {
		return nil, fmt.Errorf("cuda: model config %d layers (%d loaded), dim %d, vocab %d, %d/%d heads of %d is incomplete",
			c.Layers, len(m.Layers), c.Dim, c.Vocab, c.Heads, c.KVHeads, c.HeadDim)
	}
	// The kernel refuses it too (rlm_create), but only after the weights
	// were described; this says which limit, in the limit's own words.
	if c.HeadDim > ringbuf.MaxHeadDim {
		return nil, fmt.Errorf("cuda: the model's head dimension %d exceeds %d, the largest the CUDA device supports (ringbuf.MaxHeadDim)",
			c.HeadDim, ringbuf.MaxHeadDim)
	}
	if c.RopeFactor != nil && len(c.RopeFactor) != c.RopeDim/2 {
		return nil, fmt.Errorf("cuda: %d rope factors for rope dimension %d", len(c.RopeFactor), c.RopeDim)
	}
	d = &desc{nLayer: c.Layers, cfg: *c}
	defer func() {
		if err != nil {
			d.free()
			d = nil
		}
	}()
	d.model = (*C.rlm_model)(d.calloc(1, C.sizeof_rlm_model))
	d.layers = (*C.rlm_layer)(d.calloc(c.Layers, C.sizeof_rlm_layer))
	d.opts = (*C.rlm_opts)(d.calloc(1, C.sizeof_rlm_opts))

	cm := d.model
	cm.abi = C.RLM_CUDA_ABI
	cm.n_layer = C.uint32_t(c.Layers)
	cm.dim = C.uint32_t(c.Dim)
	cm.n_head = C.uint32_t(c.Heads)
	cm.n_kv_head = C.uint32_t(c.KVHeads)
	cm.head_dim = C.uint32_t(c.HeadDim)
	cm.ffn = C.uint32_t(c.FFN)
	cm.vocab = C.uint32_t(c.Vocab)
	cm.rope_dim = C.uint32_t(c.RopeDim)
	if c.Rope == model.RopeNeox {
		cm.rope_neox = 1
	}
	cm.rope_base = C.float(c.RopeBase)
	scale := c.RopeScale
	if scale == 0 {
		scale = 1
	}
	cm.rope_scale = C.float(scale)
	cm.norm_eps = C.float(c.NormEps)
	// Positions are int32 on the device: a wider window never cuts.
	if w := c.SlidingWindow; w > 0 && w <= math.MaxInt32 {
		cm.window = C.uint32_t(w)
	}
	cm.rope_factor = d.floats(c.RopeFactor)
	if err := d.mat(&cm.embed, &m.Embed); err != nil {
		return d, err
	}
	if err := d.mat(&cm.output, &m.Output); err != nil {
		return d, err
	}
	if cm.embed.data == nil || cm.output.data == nil {
		return d, fmt.Errorf("cuda: the model has no token embedding or output head")
	}
	cm.out_norm = d.floats(m.OutNorm)
	cm.layers = d.layers
	layers := unsafe.Slice(d.layers, c.Layers)
	for i := range m.Layers {
		L, cl := &m.Layers[i], &layers[i]
		cl.attn_norm = d.floats(L.AttnNorm)
		cl.ffn_norm = d.floats(L.FFNNorm)
		cl.q_bias = d.floats(L.QB)
		cl.k_bias = d.floats(L.KB)
		cl.v_bias = d.floats(L.VB)
		for _, p := range []struct {
			dst *C.rlm_matrix
			src *model.Matrix
		}{{&cl.q, &L.Q}, {&cl.k, &L.K}, {&cl.v, &L.V}, {&cl.out, &L.Out}, {&cl.gate, &L.Gate}, {&cl.up, &L.Up}, {&cl.down, &L.Down}} {
			if err := d.mat(p.dst, p.src); err != nil {
				return d, fmt.Errorf("%w (layer %d)", err, i)
			}
		}
		if cl.attn_norm == nil || cl.ffn_norm == nil || cl.q.data == nil || cl.out.data == nil || cl.up.data == nil || cl.down.data == nil {
			return d, fmt.Errorf("cuda: layer %d lacks a norm or a projection", i)
		}
	}

	co := d.opts
	co.device = C.int32_t(o.Device)
	co.slots = C.uint32_t(o.Slots)
	co.block_size = C.uint32_t(o.BlockSize)
	co.max_blocks_per_slot = C.uint32_t(o.BlocksPerSlot())
	co.context = C.uint32_t(o.Context)
	co.max_step_tokens = C.uint32_t(o.MaxStepTokens)
	co.num_blocks = C.uint32_t(o.NumBlocks)
	co.kv_max_bytes = C.uint64_t(o.KVMaxBytes)
	co.kv_type = C.RLM_TYPE_F16
	co.grid_blocks = C.uint32_t(o.GridBlocks)
	co.trap_step = C.uint32_t(o.TrapStep)
	return d, nil
}

func (d *desc) calloc(n, size int) unsafe.Pointer {
	p := C.calloc(C.size_t(n), C.size_t(size))
	if p == nil {
		panic("cuda: out of C memory")
	}
	d.allocs = append(d.allocs, p)
	return p
}

// floats copies v into C memory (nil for an absent vector).
func (d *desc) floats(v []float32) *C.float {
	if len(v) == 0 {
		return nil
	}
	p := d.calloc(len(v), 4)
	copy(unsafe.Slice((*float32)(p), len(v)), v)
	return (*C.float)(p)
}

// mat describes a weight matrix in place. Its bytes stay where they are:
// normally the GGUF mapping (not Go memory); Go memory is pinned until
// free, which cgo allows C memory to point to.
func (d *desc) mat(dst *C.rlm_matrix, m *model.Matrix) error {
	*dst = C.rlm_matrix{}
	if len(m.Data) == 0 {
		return nil
	}
	t, ok := cType(m.Type)
	if !ok {
		return fmt.Errorf("cuda: tensor %q has type %s; the CUDA device reads %s", m.Name, m.Type, quant.Names(readTypes))
	}
	p := unsafe.Pointer(unsafe.SliceData(m.Data))
	d.pin.Pin(p)
	dst.data = p
	dst.bytes = C.uint64_t(len(m.Data))
	dst._type = t
	dst.rows = C.uint32_t(m.Rows)
	dst.cols = C.uint32_t(m.Cols)
	return nil
}

// free releases the descriptors (idempotent).
func (d *desc) free() {
	d.pin.Unpin()
	for _, p := range d.allocs {
		C.free(p)
	}
	d.allocs = nil
	d.model, d.layers, d.opts = nil, nil, nil
}

// Views of the descriptors in Go types, for tests of the conversion
// (test files cannot use cgo).

type matView struct {
	Data             unsafe.Pointer
	Bytes            uint64
	Type, Rows, Cols uint32
}

type vecView struct {
	Ptr  unsafe.Pointer
	Vals []float32
}

type layerView struct {
	AttnNorm, FFNNorm, QBias, KBias, VBias vecView
	Q, K, V, Out, Gate, Up, Down           matView
}

type optsView struct {
	Device                                                       int32
	Slots, BlockSize, MaxBlocksPerSlot, MaxStepTokens, NumBlocks uint32
	KVMaxBytes                                                   uint64
	KVType, GridBlocks                                           uint32
}

type modelView struct {
	ABI, Layers, Dim, Heads, KVHeads, HeadDim, FFN, Vocab, RopeDim, RopeNeox, Window uint32
	RopeBase, RopeScale, NormEps                                                     float32
	RopeFactor, OutNorm                                                              vecView
	Embed, Output                                                                    matView
	LayerViews                                                                       []layerView
	Opts                                                                             optsView
}

func viewMat(m *C.rlm_matrix) matView {
	return matView{Data: unsafe.Pointer(m.data), Bytes: uint64(m.bytes), Type: uint32(m._type), Rows: uint32(m.rows), Cols: uint32(m.cols)}
}

func viewVec(p *C.float, n int) vecView {
	if p == nil {
		return vecView{}
	}
	return vecView{Ptr: unsafe.Pointer(p), Vals: append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(p)), n)...)}
}

// inC reports whether p is one of the desc's C allocations.
func (d *desc) inC(p unsafe.Pointer) bool {
	for _, a := range d.allocs {
		if a == p {
			return true
		}
	}
	return false
}

func (d *desc) view() modelView {
	cm, c := d.model, &d.cfg
	q, kv := c.Heads*c.HeadDim, c.KVDim()
	v := modelView{ABI: uint32(cm.abi), Layers: uint32(cm.n_layer), Dim: uint32(cm.dim), Heads: uint32(cm.n_head),
		KVHeads: uint32(cm.n_kv_head), HeadDim: uint32(cm.head_dim), FFN: uint32(cm.ffn), Vocab: uint32(cm.vocab),
		RopeDim: uint32(cm.rope_dim), RopeNeox: uint32(cm.rope_neox), Window: uint32(cm.window), RopeBase: float32(cm.rope_base),
		RopeScale: float32(cm.rope_scale), NormEps: float32(cm.norm_eps),
		RopeFactor: viewVec(cm.rope_factor, c.RopeDim/2), OutNorm: viewVec(cm.out_norm, c.Dim),
		Embed: viewMat(&cm.embed), Output: viewMat(&cm.output)}
	for _, cl := range unsafe.Slice(cm.layers, d.nLayer) {
		v.LayerViews = append(v.LayerViews, layerView{
			AttnNorm: viewVec(cl.attn_norm, c.Dim), FFNNorm: viewVec(cl.ffn_norm, c.Dim),
			QBias: viewVec(cl.q_bias, q), KBias: viewVec(cl.k_bias, kv), VBias: viewVec(cl.v_bias, kv),
			Q: viewMat(&cl.q), K: viewMat(&cl.k), V: viewMat(&cl.v), Out: viewMat(&cl.out),
			Gate: viewMat(&cl.gate), Up: viewMat(&cl.up), Down: viewMat(&cl.down)})
	}
	o := d.opts
	v.Opts = optsView{Device: int32(o.device), Slots: uint32(o.slots), BlockSize: uint32(o.block_size),
		MaxBlocksPerSlot: uint32(o.max_blocks_per_slot), MaxStepTokens: uint32(o.max_step_tokens),
		NumBlocks: uint32(o.num_blocks), KVMaxBytes: uint64(o.kv_max_bytes), KVType: uint32(o.kv_type),
		GridBlocks: uint32(o.grid_blocks)}
	return v
}
