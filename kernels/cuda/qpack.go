//go:build cgo

package cuda

/*
#include <stdlib.h>
#include <string.h>
#include "qpack.h"

// qp_pack_go packs rows of file bytes (row r at all + off[r], or a zero row
// where off[r] < 0) as rlm_create does: qp_plan, then qp_fill into codes
// and scales allocated here (freed by the caller with free). 0 or
// qp_plan's error, with the offending row in *bad.
static int qp_pack_go(int rows, int cols, const uint8_t *all, const int64_t *off, const uint32_t *typ, qp_tile *tiles,
                      uint8_t **codes, size_t *ncode, uint8_t **scales, size_t *nscale, int *bad) {
	const uint8_t **src = calloc((size_t)rows, sizeof *src);
	if (!src) return -3;
	for (int r = 0; r < rows; r++) src[r] = off[r] < 0 ? NULL : all + off[r];
	int rc = qp_plan(rows, cols, src, typ, tiles, ncode, nscale, bad);
	if (rc == 0) {
		*codes = calloc(*ncode + 1, 1);
		*scales = calloc(*nscale + 1, 1);
		if (!*codes || !*scales) rc = -3;
		else qp_fill(rows, cols, src, tiles, *codes, *scales);
	}
	free((void *)src);
	return rc;
}

// qp_unpack_go dequantizes a packed matrix back into rows × cols floats the
// way the device reads it: per tile, group, half and lane, the run's planes
// (qp_lane_planes) and its row's scale records, then qp_run.
static void qp_unpack_go(int rows, int cols, const qp_tile *tiles, const uint8_t *codes, const uint8_t *scales, float *out) {
	const int groups = cols / 32;
	for (int t = 0; t < (rows + 15) / 16; t++) {
		const qp_tile *T = &tiles[t];
		const int blk = qp_lay_block(T->lay);
		for (int j = 0; j < groups; j++)
			for (int h = 0; h < 2; h++)
				for (int lane = 0; lane < 32; lane++) {
					const int g = lane / 4, q = lane % 4, r = 16 * t + 8 * h + g;
					if (r >= rows) continue;
					uint64_t a;
					uint32_t b;
					qp_lane_planes(T->lay, h, lane, codes + (size_t)T->code16 * 16 + (size_t)j * blk, &a, &b);
					qp_run(qp_lay_type(T->lay, h), a, b, scales + T->sc[h] + (size_t)g * T->stride[h], j, q,
					       out + (size_t)r * cols + 32 * j + 8 * q);
				}
	}
}

// qp_rec_check_go holds qp_rec_load + qp_rec_ab (the records unpacked once a
// super-block) to qp_ab for every group s and lane quarter q of one
// super-block row of type t (file bytes): 0, or -1 with the first
// mismatch in *bad (8 q + s).
static int qp_rec_check_go(uint32_t t, const uint8_t *row, int *bad) {
	uint8_t rec[32] = {0};
	qp_row_scales(t, row, 256, rec);
	for (int q = 0; q < 4; q++) {
		uint32_t w[4];
		float d[2];
		qp_rec_load(t, rec, q, w, d);
		for (int s = 0; s < 8; s++) {
			const qp_ab_t a = qp_ab(t, rec, s, q), b = qp_rec_ab(t, w, d, s);
			if (memcmp(&a.A, &b.A, 4) != 0 || memcmp(&a.B, &b.B, 4) != 0) {
				*bad = 8 * q + s;
				return -1;
			}
		}
	}
	return 0;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"ringlm/gguf"
)

// The packed layout of the block-quantized types (qpack.h), reached from Go
// for tests on the CPU (test files cannot use cgo): the same packing and
// dequantization code the library compiles.

// qpPacked is a matrix in the device's layout.
type qpPacked struct {
	rows, cols    int
	tiles         []C.qp_tile
	codes, scales []byte
	halfTypes     [][2]gguf.Type // each tile's halves' types
}

// qpPack packs rows (nil: a zero row) of the given types and cols columns
// as rlm_create uploads a stack.
func qpPack(cols int, rows [][]byte, types []gguf.Type) (*qpPacked, error) {
	n := len(rows)
	if n == 0 || len(types) != n {
		return nil, fmt.Errorf("qpPack: %d rows, %d types", n, len(types))
	}
	var all []byte
	off := make([]C.int64_t, n)
	typ := make([]C.uint32_t, n)
	for r, b := range rows {
		off[r] = -1
		if b != nil {
			off[r] = C.int64_t(len(all))
			all = append(all, b...)
		}
		typ[r] = C.uint32_t(types[r])
	}
	all = append(all, 0) // never empty
	tiles := make([]C.qp_tile, (n+15)/16)
	var codes, scales *C.uint8_t
	var ncode, nscale C.size_t
	var bad C.int
	rc := C.qp_pack_go(C.int(n), C.int(cols), (*C.uint8_t)(unsafe.Pointer(&all[0])), &off[0], &typ[0], &tiles[0],
		&codes, &ncode, &scales, &nscale, &bad)
	switch rc {
	case 0:
	case -1:
		return nil, fmt.Errorf("qpPack: row %d's type %s differs from its 8-row half's", int(bad), types[bad])
	case -2:
		return nil, fmt.Errorf("qpPack: row %d: type %s is not packed, or %d columns are not whole blocks", int(bad), types[bad], cols)
	default:
		return nil, fmt.Errorf("qpPack: out of C memory")
	}
	defer C.free(unsafe.Pointer(codes))
	defer C.free(unsafe.Pointer(scales))
	p := &qpPacked{rows: n, cols: cols, tiles: tiles,
		codes: C.GoBytes(unsafe.Pointer(codes), C.int(ncode)), scales: C.GoBytes(unsafe.Pointer(scales), C.int(nscale))}
	for _, t := range tiles {
		p.halfTypes = append(p.halfTypes, [2]gguf.Type{gguf.Type(C.qp_lay_type(t.lay, 0)), gguf.Type(C.qp_lay_type(t.lay, 1))})
	}
	return p, nil
}

// unpack dequantizes every run of p as the device does (qp_run), row-major.
func (p *qpPacked) unpack() []float32 {
	out := make([]float32, p.rows*p.cols)
	codes, scales := append(p.codes, 0), append(p.scales, 0)
	C.qp_unpack_go(C.int(p.rows), C.int(p.cols), &p.tiles[0], (*C.uint8_t)(unsafe.Pointer(&codes[0])),
		(*C.uint8_t)(unsafe.Pointer(&scales[0])), (*C.float)(unsafe.Pointer(&out[0])))
	return out
}

// vramBytes is the layout's VRAM bytes for p (codes, scales and tile
// records), to compare with the file's.
func (p *qpPacked) vramBytes() int {
	return len(p.codes) + len(p.scales) + len(p.tiles)*int(unsafe.Sizeof(C.qp_tile{}))
}

// qpRecCheck reports the first group s and lane quarter q of a super-block
// row (file bytes, 256 columns) of a K-quant type whose A or B from the
// records unpacked once a super-block (qp_rec_load, qp_rec_ab) differ from
// qp_ab's; ok when none does.
func qpRecCheck(typ gguf.Type, row []byte) (s, q int, ok bool) {
	var bad C.int
	if C.qp_rec_check_go(C.uint32_t(typ), (*C.uint8_t)(unsafe.Pointer(&row[0])), &bad) == 0 {
		return 0, 0, true
	}
	return int(bad) % 8, int(bad) / 8, false
}
