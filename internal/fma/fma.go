// Package fma is a fused multiply-add of float32 values in portable Go,
// rounded once as the hardware's VFMADD rounds it. The Go kernels of
// package model and model/qdot use it so that they give the bits of the
// assembly kernels, which fuse every multiply-add: Go's compiler fuses
// x*y+z only on some architectures, and math.FMA rounds a float32 sum
// twice (to float64, then to float32) where the hardware rounds once.
package fma

import "math"

// F32 is a·b+c rounded once to float32 (to nearest, ties to even). a·b
// is exact in float64 (48 significant bits); the sum is rounded to
// float64 by round-to-odd (TwoSum gives its exact error; an inexact
// result is moved to its odd neighbour), which float64's 29 spare bits
// make innocuous for the final rounding to float32. The conversion of the
// product keeps a compiler from fusing it with the sum.
func F32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b))
	cf := float64(c)
	s := p + cf
	if math.IsInf(s, 0) || s != s {
		return float32(s)
	}
	z := s - p
	t := (p - (s - z)) + (cf - z)
	if bits := math.Float64bits(s); t != 0 && bits&1 == 0 {
		if (t > 0) == (s > 0) {
			bits++
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}
