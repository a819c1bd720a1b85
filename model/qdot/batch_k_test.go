package qdot

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
)

// refPrepQ4_0 is the preparation of a Q4_0 row as batch_k.go lays it out
// (q40Rec), in Go.
func refPrepQ4_0(p, w []byte, nb int) {
	le := binary.LittleEndian
	for b := range nb {
		blk, r := w[18*b:18*b+18], p[q40Rec*b:q40Rec*(b+1)]
		var s int32
		for j := range 16 {
			lo, hi := int32(blk[2+j]&0xF)-8, int32(blk[2+j]>>4)-8
			r[j], r[j+16] = byte(lo), byte(hi)
			s += lo + hi
		}
		le.PutUint32(r[32:], uint32(-128*s))
		le.PutUint32(r[36:], quietBits(f16(blk)))
	}
}

// refPrepQ5_0 is the preparation of a Q5_0 row as batch_k.go lays it out
// (q50Rec), in Go.
func refPrepQ5_0(p, w []byte, nb int) {
	le := binary.LittleEndian
	for b := range nb {
		blk, r := w[22*b:22*b+22], p[q50Rec*b:q50Rec*(b+1)]
		clear(r)
		qh, qs := u32(blk[2:6]), blk[6:22]
		for j := range 16 {
			lo, hi := fifth(qh, qs, j)
			r[j], r[j+16] = byte(lo-16), byte(hi-16)
		}
		for g := range 8 {
			var s int32
			for _, v := range r[4*g : 4*g+4] {
				s += int32(int8(v))
			}
			le.PutUint32(r[32+4*g:], uint32(-128*s))
		}
		le.PutUint32(r[64:], quietBits(f16(blk)))
	}
}

// quietBits is v's bits, a NaN quieted as VCVTPH2PS leaves it (the
// products it enters are NaN either way).
func quietBits(v float32) uint32 {
	if v != v {
		return math.Float32bits(v) | 1<<22
	}
	return math.Float32bits(v)
}

// refPrepK is the preparation of a K-quant row (super-blocks of bb bytes,
// which decode reads) as batch_k.go lays it out (kRec), in Go.
func refPrepK(p, w []byte, nb, bb int, decode func([]byte, *superBlock)) {
	var sb superBlock
	le := binary.LittleEndian
	for s := range nb {
		decode(w[bb*s:bb*(s+1)], &sb)
		r := p[kRec*s : kRec*(s+1)]
		clear(r)
		order := [8]int{0, 1, 2, 3, 4, 5, 6, 7} // the sub-block at each position
		if sb.hasMins {
			order = [8]int{0, 2, 1, 3, 4, 6, 5, 7}
		}
		for l := range 8 {
			var corr int32
			for pos, j := range order {
				for k := range 4 {
					e := 32*j + l + 8*k
					r[32*pos+4*l+k] = byte(sb.aux[e])
					corr += sb.sc[e/16] * int32(sb.aux[e])
				}
			}
			le.PutUint32(r[256+4*l:], uint32(-128*corr))
			for i := range 8 {
				var scp uint32
				switch {
				case !sb.hasMins:
					scp = pair16(sb.sc[2*i], sb.sc[2*i+1])
				case i < 4:
					scp = pair16(sb.sc[2*order[2*i+1]], sb.sc[2*order[2*i]])
				}
				le.PutUint32(r[288+32*i+4*l:], scp)
			}
			le.PutUint32(r[544+4*l:], quietBits(sb.d))
		}
		if sb.hasMins {
			for i := range 4 {
				le.PutUint32(r[kMins+4*i:], pair16(sb.mins[2*i], sb.mins[2*i+1]))
			}
			le.PutUint32(r[kMins+16:], quietBits(sb.dmin))
		}
	}
}

// TestPrep holds the assembly preparations to the Go ones byte for byte,
// on random rows and rows whose F16 fields run through every pattern.
func TestPrep(t *testing.T) {
	if !useVNNI {
		t.Skip("no AVX-512 VNNI: no batch kernels")
	}
	refs := map[gguf.Type]func(p, w []byte, nb int){
		gguf.TypeQ4_0: refPrepQ4_0,
		gguf.TypeQ5_0: refPrepQ5_0,
		gguf.TypeQ4_K: func(p, w []byte, nb int) { refPrepK(p, w, nb, 144, decodeQ4_K) },
		gguf.TypeQ5_K: func(p, w []byte, nb int) { refPrepK(p, w, nb, 176, decodeQ5_K) },
		gguf.TypeQ6_K: func(p, w []byte, nb int) { refPrepK(p, w, nb, 210, decodeQ6_K) },
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for typ, ref := range refs {
		k, bk := For(typ), batchKernels[typ]
		const nb = 1 << 16
		w := randBlocks(rng, typ, nb)
		for b := range nb / 2 { // every F16 pattern in the first field
			binary.LittleEndian.PutUint16(w[b*k.bytes+map[gguf.Type]int{gguf.TypeQ6_K: 208}[typ]:], uint16(b))
		}
		// One byte off, and an extra record that must stay untouched.
		got := make([]byte, (nb+1)*bk.rec+1)[1:]
		want := make([]byte, len(got))
		src := make([]byte, len(w)+1)[1:]
		copy(src, w)
		bk.prep(got, src, nb)
		ref(want, w, nb)
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("%s: prepared byte %d (block %d, offset %d) = %#x, want %#x", typ, i, i/bk.rec, i%bk.rec, got[i], want[i])
		}
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}
