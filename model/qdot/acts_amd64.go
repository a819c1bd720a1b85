//go:build amd64 && !purego

package qdot

import "ringlm/internal/cpufeat"

// useAVX512 says whether Quantize runs the AVX-512 quantizers
// (acts_amd64.s) for Q8_0 and Q8_K.
var useAVX512 = cpufeat.Use >= cpufeat.LevelAVX512

// quantQ8_0AVX512 is quantize32 over nb blocks of x, with Acts.pair.
//
//go:noescape
func quantQ8_0AVX512(x *float32, q *int8, d *float32, sums *int16, pair *int16, nb int)

// quantQ8_KAVX512 is quantize256 over nb super-blocks of x, with
// Acts.reorder's qp and pair.
//
//go:noescape
func quantQ8_KAVX512(x *float32, q *int8, d *float32, bsums *int16, qp *int8, pair *int16, nb int)
