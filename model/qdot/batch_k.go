package qdot

import (
	"encoding/binary"

	"ringlm/gguf"
)

// Batch kernels for the types whose rows must be decoded before VNNI can
// multiply them: Q4_0 and Q5_0 (against Q8_0 batches) and Q4_K, Q5_K,
// Q6_K (against Q8_K batches). Each result is Dot's, bit for bit: the
// integer lanes of Dot's kernel are exact whatever the grouping, and the
// float steps are Dot's, in its order and with its operands in the same
// places (so that a NaN keeps the payload Dot gives it), with the vector
// lanes as the inputs: every float operation of one (row, input) pair is
// one lane's.
//
// A tile of rows is first prepared (in assembly: decoded to signed bytes
// in the order the kernel reads them, with the integer corrections and
// scales beside them), then multiplied by every batch of the call while
// it is in cache. The inputs sit in the unsigned operand of VPDPBUSD as
// q+128, so each lane of a row block carries a correction of
// -128·Σ(scale·w) over its elements, computed by the preparation. A lone
// batch of fewer inputs than the preparation pays for (minInputs) runs
// DotRows instead.
//
// Q4_0 sums a block's integer products into one lane per input, as the
// Q8_0 kernel does, and adds (float(sumi)·dw)·dx to the result block by
// block.
//
// Q5_0 keeps ggml's AVX2 order (lanes.go): per block eight int32 lanes
// of four consecutive elements, each fused-multiply-added with d into
// one of four accumulators by block mod 4. The kernel runs the blocks of
// one accumulator after another, so that only it (8 lanes × 3 rows) lives
// in registers, and folds the four as it goes.
//
// The K-quants sum in eight lanes, lane l taking the elements e ≡ l
// (mod 8) of a super-block (kquants.go). The batch holds, for lane l and
// sub-block j (32 elements), the four elements 32j+l+8k (k < 4) of each
// input in one dword, and the prepared row the same four weights: one
// VPDPBUSD gives 16 inputs' sums of a lane in a sub-block. Q4_K and Q5_K
// scale per sub-block: two sub-blocks' sums (each < 2^15) are packed into
// the words of one dword (the first shifted by 16) and VPDPWSSD multiplies
// them by their two scales into the lane. Q6_K scales per 16 elements, so
// the four bytes of a dword hold two scale groups: VPMADDUBSW sums each
// pair into a word, and VPDPWSSD applies the pair of scales. The kernel
// takes a super-block at a time, its eight lanes in turn (12 rows × 16
// inputs of one lane's integer sums in registers, the lanes' float sums in
// scratch), and adds the lanes to the result in lane order at the end, as
// Dot does; the mins (Q4_K, Q5_K) are summed first, as Dot's sumf.

// kScratch holds the prepared rows of a tile and the kernels' scratch.
type kScratch struct {
	p   []byte
	tmp []float32
	out []float32 // a short tile's outputs
}

// batchKernel is the batch kernel of a type with prepared rows.
type batchKernel struct {
	rows int // rows of a tile
	// minInputs is the fewest inputs of a lone batch (a decode step) for
	// which preparing the rows pays; below, DotRows is faster.
	minInputs int
	rec       int // bytes of one prepared row block
	tmp       int // float32s of the kernel's scratch (0: none)
	// prep prepares a row of nb blocks w into p (nb·rec bytes).
	prep func(p, w []byte, nb int)
	// run multiplies the rows prepared at p (ldp bytes apart) by the batch
	// into out (input t of row r at out + r·4 + t·ldo bytes), for the
	// inputs of mask.
	run func(p *byte, ldp uintptr, nb int, bt *Batch, out *float32, ldo uintptr, mask uint16, tmp *float32)
}

// mul is MulBatch for k, bk's type, once the arguments are checked and
// the inputs are enough to pay for the preparation (BatchPays).
func (bk *batchKernel) mul(k *Kernel, out []float32, ldo int, w []byte, rows int, acts []Acts, bts []Batch, s *kScratch) {
	nb := bts[0].nb
	rb := len(w) / rows
	ldp := nb * bk.rec
	s.p = grow(s.p, bk.rows*ldp)
	var tmp *float32
	if bk.tmp > 0 {
		s.tmp = grow(s.tmp, bk.tmp)
		tmp = &s.tmp[0]
	}
	for r0 := 0; r0 < rows; r0 += bk.rows {
		nr := min(bk.rows, rows-r0)
		for i := range nr {
			bk.prep(s.p[i*ldp:(i+1)*ldp], w[(r0+i)*rb:(r0+i+1)*rb], nb)
		}
		clear(s.p[nr*ldp:])
		for g := range bts {
			bt := &bts[g]
			mask := uint16(1)<<bt.n - 1
			o := out[g*BatchInputs*ldo+r0:]
			if nr == bk.rows {
				bk.run(&s.p[0], uintptr(ldp), nb, bt, &o[0], uintptr(4*ldo), mask, tmp)
				continue
			}
			s.out = grow(s.out, BatchInputs*bk.rows)
			bk.run(&s.p[0], uintptr(ldp), nb, bt, &s.out[0], uintptr(4*bk.rows), mask, tmp)
			for t := range bt.n {
				copy(o[t*ldo:t*ldo+nr], s.out[t*bk.rows:])
			}
		}
	}
}

// batchKernels are the types with prepared rows, on a CPU with VNNI.
var batchKernels = map[gguf.Type]*batchKernel{}

func init() {
	if !useVNNI {
		return
	}
	batchKernels[gguf.TypeQ4_0] = &batchKernel{rows: 12, minInputs: 3, rec: q40Rec, prep: prepQ4_0, run: runQ4_0}
	batchKernels[gguf.TypeQ5_0] = &batchKernel{rows: 3, minInputs: 5, rec: q50Rec, tmp: 2 * 3 * 8 * 16, prep: prepQ5_0, run: runQ5_0}
	batchKernels[gguf.TypeQ4_K] = &batchKernel{rows: 12, minInputs: 5, rec: kRec, tmp: 9 * 12 * 16, prep: prepQ4_K, run: runK4}
	batchKernels[gguf.TypeQ5_K] = &batchKernel{rows: 12, minInputs: 5, rec: kRec, tmp: 9 * 12 * 16, prep: prepQ5_K, run: runK4}
	batchKernels[gguf.TypeQ6_K] = &batchKernel{rows: 12, minInputs: 6, rec: kRec, tmp: 9 * 12 * 16, prep: prepQ6_K, run: runQ6_K}
}

// A prepared Q4_0 block (q40Rec bytes): the 32 quants less 8 as int8,
// the correction -128·Σ of them (int32), the F16 scale as float32.
const q40Rec = 40

// A prepared Q5_0 block (q50Rec bytes): the 32 quants less 16 as int8,
// then eight int32 corrections -128·Σ of each four, then the F16 scale
// as float32.
const q50Rec = 72

// A prepared K-quant super-block (kRec bytes): at 32p + 4l, the dword of
// lane l of the sub-block at position p (elements 32j+l+8k, k < 4, as
// int8, of sub-block j: for Q4_K and Q5_K, whose nibbles come so, j =
// 0, 2, 1, 3, 4, 6, 5, 7 at positions 0-7, for Q6_K j = p); at 256 + 4l
// lane l's correction -128·Σ scale·w (int32); at 288 + 32i + 4l, the same
// for every l, the scales of pair i as words for VPDPWSSD (Q4_K, Q5_K:
// i < 4, the pair of positions 2i, 2i+1, the second's scale in the low
// word; Q6_K: i < 8, sub-block i's groups 2i (low) and 2i+1); at 544 +
// 4l the F16 d as float32; at kMins the mins as words, at kMins+16 the
// F16 dmin as float32 (Q4_K, Q5_K; zero for Q6_K). A lane's pass reads
// the rows at an offset of 4l, so every offset above is a constant.
const (
	kMins = 576
	kRec  = 608
)

// pair16 is a dword of two int16 words, lo in the low one.
func pair16(lo, hi int32) uint32 { return uint32(uint16(lo)) | uint32(uint16(hi))<<16 }

// kBatch is Q8_K inputs laid out for the K-quant kernels: q, for
// super-block s, lane l, sub-block j, input t: q[((8s + l)·8 + j)·64 + 4t + k] =
// q_t[256s+32j+l+8k] + 128 (k < 4), as an unsigned byte; d[16s + t] input
// t's scale; bs[(4s + i)·16 + t] the word pair of its sums of quants
// 64i..64i+31 (low word) and 64i+32..64i+63 (high), against the pairs of
// mins.
type kBatch struct {
	q  []byte
	d  []float32
	bs []int32
}

// setK lays out Q8_K inputs in bt.k.
func (bt *Batch) setK(acts []Acts) {
	n := sameInputs(acts, gguf.TypeQ8_K, "batch")
	nb := n / 256
	bt.n, bt.nb, bt.act = len(acts), nb, gguf.TypeQ8_K
	kb := &bt.k
	kb.q, kb.d, kb.bs = grow(kb.q, nb*4096), grow(kb.d, nb*16), grow(kb.bs, nb*64)
	for t := range BatchInputs {
		if t >= len(acts) { // lanes no input uses
			for g := range nb * 64 {
				binary.LittleEndian.PutUint32(kb.q[64*g+4*t:], 0)
			}
			for g := range nb * 4 {
				kb.bs[16*g+t] = 0
			}
			for s := range nb {
				kb.d[16*s+t] = 0
			}
			continue
		}
		a := &acts[t]
		for s := range nb {
			q := a.q[256*s : 256*s+256]
			for l := range 8 {
				o := ((8*s+l)*8)*64 + 4*t
				for j := range 8 {
					e := 32*j + l
					v := uint32(uint8(q[e])) | uint32(uint8(q[e+8]))<<8 | uint32(uint8(q[e+16]))<<16 | uint32(uint8(q[e+24]))<<24
					binary.LittleEndian.PutUint32(kb.q[o+64*j:], v^0x80808080)
				}
			}
			kb.d[16*s+t] = a.d[s]
			bs := a.sums[16*s : 16*s+16]
			for i := range 4 {
				lo := int32(bs[4*i]) + int32(bs[4*i+1])
				hi := int32(bs[4*i+2]) + int32(bs[4*i+3])
				kb.bs[16*(4*s+i)+t] = int32(pair16(lo, hi))
			}
		}
	}
}
