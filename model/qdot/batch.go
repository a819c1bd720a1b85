package qdot

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"ringlm/gguf"
)

// Products of many rows with many inputs (a prefill, or a decode step of
// many sequences), for Q8_0 weights: each result is Dot's, bit for bit
// (the integer block sums are exact, and the float steps are Dot's, in
// its order), but a kernel with AVX-512 VNNI computes 12 rows × 16 inputs
// at once. Its vector lanes are the inputs: VPDPBUSD multiplies four
// bytes of each of the 16 inputs (a Batch, the activations laid out four
// bytes of an input next to four bytes of the next) by four bytes of one
// row broadcast to every lane, so each lane sums one (row, input) pair's
// block without a horizontal reduction, and the weights are read in place
// from the mapped file. VPDPBUSD takes unsigned bytes on that side, so a
// Batch holds the quants plus 128 and a row block's sum is corrected by
// -128·Σw: computed once per tile of rows by a preparing pass where many
// batches share it (a prefill), and by the batch's own last lane, which
// holds 128 in every byte, where a lone batch of at most 15 inputs would
// not amortize that pass (a decode step).

// BatchInputs is the most inputs a Batch holds.
const BatchInputs = 16

// Batch is up to BatchInputs inputs quantized to Q8_0 or Q8_K, laid out
// for MulBatch (Q8_K: batch_k.go).
type Batch struct {
	n, nb int
	act   gguf.Type // the inputs' type
	// q: for block b, 4-byte group j (elements 32b+4j..+3), input t:
	// q[(8b+j)·64 + 4t + i] = q_t[32b+4j+i] + 128, as an unsigned byte.
	q []byte
	// d: d[16b + t] is input t's scale of block b.
	d []float32
	k kBatch // Q8_K inputs' layout (batch_k.go)
}

// Len is the inputs in the batch.
func (bt *Batch) Len() int { return bt.n }

// Set lays out acts, 1 to BatchInputs inputs quantized to Q8_0 or Q8_K,
// all of one type and length. Anything else is a bug of the caller: it
// panics.
func (bt *Batch) Set(acts []Acts) {
	if len(acts) >= 1 && len(acts) <= BatchInputs && acts[0].typ == gguf.TypeQ8_K {
		bt.setK(acts)
		return
	}
	n := q8Inputs(acts, BatchInputs, "batch")
	bt.n, bt.nb, bt.act = len(acts), n/32, gguf.TypeQ8_0
	if cap(bt.q) < bt.nb*512 {
		bt.q = make([]byte, bt.nb*512)
		bt.d = make([]float32, bt.nb*16)
	}
	bt.q, bt.d = bt.q[:bt.nb*512], bt.d[:bt.nb*16]
	for t := range acts {
		a := &acts[t]
		q := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a.q))), len(a.q))
		for g := range n / 4 { // group g of 4 quants: block g/8, j = g%8
			v := binary.LittleEndian.Uint32(q[4*g:]) ^ 0x80808080
			binary.LittleEndian.PutUint32(bt.q[g*64+4*t:], v)
		}
		for b := range bt.nb {
			bt.d[16*b+t] = a.d[b]
		}
	}
	for t := len(acts); t < BatchInputs; t++ { // lanes no input uses
		// The last lane of a batch of at most 15 sums 128·Σw: the
		// correction, for the kernels without a pass to prepare it.
		v := uint32(0)
		if t == BatchInputs-1 {
			v = 0x80808080
		}
		for g := range n / 4 {
			binary.LittleEndian.PutUint32(bt.q[g*64+4*t:], v)
		}
		for b := range bt.nb {
			bt.d[16*b+t] = 0
		}
	}
}

// q8Inputs returns the length of acts, 1 to most inputs (of a what)
// quantized to Q8_0, all of one length. Anything else is a bug of the
// caller: it panics.
func q8Inputs(acts []Acts, most int, what string) int {
	if len(acts) < 1 || len(acts) > most {
		panic(fmt.Sprintf("qdot: a %s of %d inputs", what, len(acts)))
	}
	return sameInputs(acts, gguf.TypeQ8_0, what)
}

// sameInputs returns the length of acts' inputs, all of type typ and one
// length; anything else is a bug of the caller (what: its name): it panics.
func sameInputs(acts []Acts, typ gguf.Type, what string) int {
	n := acts[0].n
	for i := range acts {
		if acts[i].typ != typ || acts[i].n != n {
			panic(fmt.Sprintf("qdot: %s input %d is %d %s activations, input 0 %d %s", what, i, acts[i].n, acts[i].typ, n, typ))
		}
	}
	return n
}

// batchRows is the rows of a tile of the batch kernel.
const batchRows = 12

// BatchScratch holds MulBatch's per-tile buffers.
type BatchScratch struct {
	corr []int32   // [block][row of the tile]: -128·Σ quants
	dw   []float32 // [block][row of the tile]: the row's scale
	k    kScratch  // the prepared rows of the other types (batch_k.go)
}

// Batched reports whether MulBatch runs a kernel of its own for k in this
// process (Q8_0, and the types of batchKernels, on a CPU with AVX-512
// VNNI); otherwise it loops over Dot, and callers may as well call
// DotRows.
func (k *Kernel) Batched() bool {
	return useVNNI && (k.Weight == gguf.TypeQ8_0 || batchKernels[k.Weight] != nil)
}

// BatchPays reports whether MulBatch runs its kernel for n inputs (a
// lone batch of a type with prepared rows runs DotRows below the inputs
// that pay for the preparation), so that a caller need not lay out
// batches that MulBatch would not read.
func (k *Kernel) BatchPays(n int) bool {
	if bk := batchKernels[k.Weight]; bk != nil && n < bk.minInputs {
		return false
	}
	return k.Batched()
}

// MulBatch sets out[t*ldo + r] to Dot(row r of w, acts[t]) for the rows
// of w (whole rows of the inputs' length) and the inputs acts, which the
// batches bts hold in order (Set with acts[0:16], acts[16:32], …): Dot's
// bits. A tile of rows is read for every batch while it is in cache.
func (k *Kernel) MulBatch(out []float32, ldo int, w []byte, acts []Acts, bts []Batch, s *BatchScratch) {
	if len(bts) == 0 {
		return
	}
	nb := bts[0].nb
	rb := nb * k.bytes
	n := 0
	for i := range bts {
		if bts[i].nb != nb || bts[i].act != bts[0].act || (i < len(bts)-1 && bts[i].n != BatchInputs) {
			panic(fmt.Sprintf("qdot: batch %d of %d inputs × %d blocks among batches of %d blocks", i, bts[i].n, bts[i].nb, nb))
		}
		n += bts[i].n
	}
	if bts[0].act != k.Act || rb == 0 || len(w)%rb != 0 || len(acts) != n {
		panic(fmt.Sprintf("qdot: %s rows of %d bytes against %d inputs in batches of %d blocks", k.Weight, len(w), len(acts), nb))
	}
	rows := len(w) / rb
	if len(out) < (n-1)*ldo+rows {
		panic(fmt.Sprintf("qdot: output of %d for %d rows × %d inputs at stride %d", len(out), rows, n, ldo))
	}
	if !k.BatchPays(n) {
		for t := range acts {
			k.DotRows(out[t*ldo:t*ldo+rows], w, &acts[t])
		}
		return
	}
	if bk := batchKernels[k.Weight]; bk != nil {
		bk.mul(k, out, ldo, w, rows, acts, bts, &s.k)
		return
	}
	if len(bts) == 1 && bts[0].n < BatchInputs { // a lone batch: the correction lane, no preparing pass
		bt := &bts[0]
		mask := uint16(1)<<bt.n - 1
		// Tile i takes rows i, i+q, i+2q, …: twelve long streams for the
		// prefetcher, not twelve short ones.
		q := rows / batchRows
		for i := range q {
			q8LaneVNNI(&w[i*rb], uintptr(q*rb), nb, &bt.q[0], &bt.d[0], &out[i], uintptr(4*ldo), uintptr(4*q), mask)
		}
		for r := q * batchRows; r < rows; r++ {
			q8Lane1VNNI(&w[r*rb], nb, &bt.q[0], &bt.d[0], &out[r], uintptr(4*ldo), mask)
		}
		return
	}
	if cap(s.corr) < nb*batchRows {
		s.corr = make([]int32, nb*batchRows)
		s.dw = make([]float32, nb*batchRows)
	}
	for r := 0; r < rows; r += batchRows {
		nr := min(batchRows, rows-r)
		q8PrepVNNI(&w[r*rb], uintptr(rb), nr, nb, &s.corr[0], &s.dw[0])
		for g := range bts {
			bt := &bts[g]
			o := out[g*BatchInputs*ldo+r:]
			mask := uint16(1)<<bt.n - 1
			if nr == batchRows {
				q8BatchVNNI(&w[r*rb], uintptr(rb), nb, &bt.q[0], &bt.d[0], &s.corr[0], &s.dw[0], &o[0], uintptr(4*ldo), mask)
				continue
			}
			for i := range nr {
				q8Batch1VNNI(&w[(r+i)*rb], nb, &bt.q[0], &bt.d[0], &s.corr[i], &s.dw[i], &o[i], uintptr(4*ldo), mask)
			}
		}
	}
}
