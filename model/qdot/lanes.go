package qdot

import "ringlm/internal/fma"

// The eight-lane order of ggml's AVX2 kernels for the 32-element blocks
// (ggml-cpu/arch/x86/quants.c): a block's integer products are summed
// four consecutive elements to an int32 lane (lane l takes elements
// 4l..4l+3, what VPMADDUBSW then VPMADDWD against ones leave), the lanes
// converted to float and fused-multiply-added with the block's scale
// d = dx·dy into float accumulators. ggml keeps one accumulator; here
// block b goes to accumulator b mod 4, so that four FMA chains run side by
// side instead of one waiting on the latency of the last. The four are
// added ((0+1)+(2+3)) and the eight lanes folded as ggml's hsum_float_8:
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
//
// Why not the generic kernels' order (blocks summed in order into one
// float): that is a chain of dependent scalar additions, 8 per 8 blocks,
// which cost the AVX2 kernels about a quarter of their time.

// fmaLanes adds d·lanes[l] to acc[l], one rounding each (VFMADD231PS).
func fmaLanes(acc *[8]float32, d float32, lanes *[8]int32) {
	for l, v := range lanes {
		acc[l] = fma.F32(d, float32(v), acc[l])
	}
}

// foldLanes is the sum of the four accumulators' lanes, in the order above.
func foldLanes(acc *[4][8]float32) float32 {
	var v [8]float32
	for l := range v {
		v[l] = float32(acc[0][l]+acc[1][l]) + float32(acc[2][l]+acc[3][l])
	}
	return float32(float32(v[0]+v[4])+float32(v[2]+v[6])) + float32(float32(v[1]+v[5])+float32(v[3]+v[7]))
}
