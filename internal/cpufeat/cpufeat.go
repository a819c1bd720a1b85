// Package cpufeat says which instruction-set extensions the assembly
// kernels of this process may use. It is decided once, at init, so every
// package that dispatches on it (model, model/qdot) takes the same path.
// The kernels of every level give the same bits (each package's doc says
// in which order they sum), so the choice is one of speed only.
//
// RINGLM_CPU=go, avx2 or avx512 caps the level below what the machine
// has, to compare the kernels on one machine (a level the machine lacks
// is not taken).
package cpufeat

import "os"

// Level is a set of vector extensions the kernels are written for.
type Level int

const (
	// Go: the portable kernels, no assembly.
	Go Level = iota
	// LevelAVX2: AVX2 with FMA and F16C.
	LevelAVX2
	// LevelAVX512: AVX-512 F, BW, DQ and VL, with the AVX2 set.
	LevelAVX512
)

func (l Level) String() string {
	switch l {
	case LevelAVX2:
		return "avx2"
	case LevelAVX512:
		return "avx512"
	}
	return "go"
}

// Detected is the widest level this CPU and OS support.
var Detected = detect()

// Use is the level the kernels of this process run: Detected, or the
// lower one RINGLM_CPU names.
var Use = capped(Detected, os.Getenv("RINGLM_CPU"))

// AVX2 reports whether the kernels use AVX2 (Use ≥ LevelAVX2).
var AVX2 = Use >= LevelAVX2

// VNNI reports whether the AVX-512 kernels may use the VNNI integer dot
// products (VPDPBUSD): Use is LevelAVX512 and the CPU has AVX512_VNNI.
var VNNI = Use >= LevelAVX512 && hasVNNI

func capped(l Level, env string) Level {
	for _, c := range []Level{Go, LevelAVX2, LevelAVX512} {
		if env == c.String() {
			return min(l, c)
		}
	}
	return l
}
