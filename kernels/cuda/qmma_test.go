//go:build cgo

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ringlm/gguf"
	"ringlm/quant"
)

// quantRows draws n rows of k columns of type typ (quantized normal values
// and random blocks with random finite scales, alternately) and gives the
// file's bytes and the weights the product multiplies: package quant's
// dequantization rounded to BF16. MXFP4's random E8M0 scales are held to
// 2^-127..2^32: above, a row's products overflow float32 (the device's
// sum is then infinite where the float64 reference is not).
func quantRows(r *rand.Rand, typ gguf.Type, n, k int) ([]byte, []float32) {
	var data []byte
	wf := make([]float32, n*k)
	for i := range n {
		row := qpRow(r, typ, k, i%2)
		if typ == gguf.TypeMXFP4 {
			for b := 0; b < len(row); b += 17 {
				row[b] = min(row[b], 127+32)
			}
		}
		if err := quant.Dequantize(typ, wf[i*k:(i+1)*k], row); err != nil {
			panic(err)
		}
		data = append(data, row...)
	}
	for i := range wf {
		_, wf[i] = bf16(wf[i])
	}
	return data, wf
}

// quantRun is the product over the stacked parts (rlm_test_gemm_q) on a
// grid of that many blocks.
func quantRun(l *library, k int, parts []qPart, grid int) gemmRun {
	return func(m int, x []float32) ([]float32, error) {
		y, _, err := l.testGemmQ(m, k, x, parts, 0, grid)
		return y, err
	}
}

// checkQuantProduct runs parts on 256 input rows and holds the rows in
// check to the float64 product of the rounded inputs and weights wf (1e-5
// of the products' magnitude, as TestTileProductMatches); then every row
// of products of 1, 7, 16, 17 and 64 rows (gemm_local_t, gemm_t in passes
// of 16 and of 64) to the bits it has among 256, and rows of check to
// their bits alone and among 37 others.
func checkQuantProduct(t *testing.T, run gemmRun, r *rand.Rand, wf []float32, n, k int, check []int) {
	t.Helper()
	const m = 256
	x, _, _ := gemmCase(r, m, 1, k)
	all, err := run(m, x)
	if err != nil {
		skipNoQuant(t, err)
		t.Fatal(err)
	}
	worst := 0.0
	for _, i := range check {
		for j := range n {
			ref, mag := refDot(x, wf, i, j, k)
			e := math.Abs(float64(all[i*n+j])-ref) / (mag + 1e-30)
			worst = max(worst, e)
			if !(e <= 1e-5) {
				t.Fatalf("y[%d][%d] = %v, want %v (error %.3g of the magnitude %.3g)", i, j, all[i*n+j], ref, e, mag)
			}
		}
	}
	t.Logf("largest error %.3g of the products' magnitude", worst)
	for _, mm := range []int{1, 7, 16, 17, 64} {
		y, err := run(mm, x[:mm*k])
		if err != nil {
			t.Fatal(err)
		}
		for i := range mm * n {
			if a, b := math.Float32bits(y[i]), math.Float32bits(all[i]); a != b {
				t.Fatalf("y[%d][%d] = %v among %d rows, %v among %d", i/n, i%n, y[i], mm, all[i], m)
			}
		}
	}
	for _, row := range check[:3] {
		sameAloneAndAmong(t, run, x, all, row, m, n, k, 5)
	}
}

// TestTileProductQuant: the tile product over each block-quantized type the
// device keeps at its own width (Q8_0 in that layout too, as a mixed stack
// keeps it), a matrix of partial tiles on the whole grid and a wider one on
// 6 blocks (several units a block, several chunks a unit): the float64
// product of the inputs and of package quant's dequantization, both
// rounded to BF16, within 1e-5 of the products' magnitude, and batch
// invariant at 1 to 256 rows.
func TestTileProductQuant(t *testing.T) {
	needGPU(t)
	l, err := lib()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(31, 32))
	for _, typ := range qpTypes {
		for _, c := range []struct{ n, k, grid int }{{200, 512, 0}, {600, 2048, 6}} {
			t.Run(fmt.Sprintf("%s/%dx%d-grid%d", typ, c.n, c.k, c.grid), func(t *testing.T) {
				data, wf := quantRows(r, typ, c.n, c.k)
				run := quantRun(l, c.k, []qPart{{typ, c.n, data}}, c.grid)
				checkQuantProduct(t, run, r, wf, c.n, c.k, []int{0, 17, 255, 1, 7, 8, 15, 16, 63, 64, 130})
			})
		}
	}
}

// TestTileProductQuantMixed: a stack whose parts differ in type at
// multiples of 8 rows (a tile of IQ4_XS over Q2_K halves, Q8_0 among the
// block types, a last partial tile), as rlm_create stacks QKV and gate/up:
// the same checks as TestTileProductQuant.
func TestTileProductQuantMixed(t *testing.T) {
	needGPU(t)
	l, err := lib()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(33, 34))
	const k = 1024
	var parts []qPart
	var wf []float32
	for _, p := range []struct {
		typ  gguf.Type
		rows int
	}{{gguf.TypeQ4_K, 64}, {gguf.TypeQ6_K, 48}, {gguf.TypeQ8_0, 16}, {gguf.TypeIQ4_XS, 8}, {gguf.TypeQ2_K, 8},
		{gguf.TypeMXFP4, 24}, {gguf.TypeQ5_0, 21}} {
		data, w := quantRows(r, p.typ, p.rows, k)
		parts = append(parts, qPart{p.typ, p.rows, data})
		wf = append(wf, w...)
	}
	n := len(wf) / k
	for _, grid := range []int{0, 3} {
		t.Run(fmt.Sprintf("grid%d", grid), func(t *testing.T) {
			checkQuantProduct(t, quantRun(l, k, parts, grid), r, wf, n, k, []int{3, 40, 200, 0, 16, 17, 99})
		})
	}
}

// BenchmarkTileProductQuant times the tile product over block-quantized
// weights (random blocks: the time does not depend on the values) on
// Llama-3.2-1B's matrices for decode batches and a 256-row pass: weight
// bytes (the file's) per second, to set against the copy bandwidth.
func BenchmarkTileProductQuant(b *testing.B) {
	needGPU(b)
	l, err := lib()
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(35, 36))
	for _, typ := range []gguf.Type{gguf.TypeQ4_0, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeMXFP4} {
		for _, mat := range []struct {
			name string
			n, k int
		}{{"gateup", 16384, 2048}, {"down", 2048, 8192}} {
			var data []byte
			for range mat.n {
				data = append(data, qpRow(r, typ, mat.k, 1)...)
			}
			parts := []qPart{{typ, mat.n, data}}
			for _, m := range []int{1, 16, 64, 256} {
				b.Run(fmt.Sprintf("%s/%s/M%d", typ, mat.name, m), func(b *testing.B) {
					x, _, _ := gemmCase(r, m, 1, mat.k)
					_, ms, err := l.testGemmQ(m, mat.k, x, parts, max(b.N, 20), 0)
					if err != nil {
						skipNoQuant(b, err)
						b.Fatal(err)
					}
					b.ReportMetric(ms*1e3, "µs/product")
					b.ReportMetric(float64(len(data))/(ms*1e-3)/1e9, "weight-GB/s")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
}
