package qdot

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkDot times one row dotted with quantized activations, for each
// type at the widths of a small and a large model, in the implementation
// this process runs (impl=avx2 or go) and in Go. The rows cycle through a
// 32 MiB matrix so that they come from memory as in a decode step.
func BenchmarkDot(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, typ := range Types() {
		k := For(typ)
		for _, cols := range []int{896, 2048, 4864, 8192} {
			if cols%k.block != 0 { // 896 is no row of the 256-element types
				continue
			}
			nb := blocksFor(typ, cols)
			rowBytes := nb * k.bytes
			rows := (32 << 20) / rowBytes
			w := randBlocks(rng, typ, nb*rows)
			var a Acts
			a.Quantize(k.Act, randActs(rng, cols))
			impls := []struct {
				name string
				dot  func([]byte, *Acts) float32
			}{{"go", k.goDot}}
			if k.Impl() != "go" {
				impls = append([]struct {
					name string
					dot  func([]byte, *Acts) float32
				}{{k.Impl(), k.asmDot}}, impls...)
			}
			for _, im := range impls {
				b.Run(fmt.Sprintf("%s/cols=%d/%s", typ, cols, im.name), func(b *testing.B) {
					b.SetBytes(int64(rowBytes))
					var s float32
					r := 0
					for b.Loop() {
						s += im.dot(w[r*rowBytes:(r+1)*rowBytes], &a)
						if r++; r == rows {
							r = 0
						}
					}
					_ = s
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/row")
				})
			}
		}
	}
}
