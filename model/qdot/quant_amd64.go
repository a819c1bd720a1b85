//go:build amd64 && !purego

package qdot

import "ringlm/internal/cpufeat"

// useQuantAVX512 says whether Quantize runs quant_amd64.s for Q8_0.
var useQuantAVX512 = cpufeat.Use >= cpufeat.LevelAVX512

// quantQ8_0AVX512 quantizes the nb blocks of x to Q8_0 as quantize32 does,
// with their pair sums (Acts.pair), up to the first block that holds an
// infinity or a NaN; it returns the blocks done.
//
//go:noescape
func quantQ8_0AVX512(x *float32, q *int8, d *float32, sums *int16, pair *int16, nb int) int
