//go:build cgo

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// bf16 rounds f to bfloat16 (to nearest, ties to even), as
// __float2bfloat16_rn does; the bits and the value.
func bf16(f float32) (uint16, float32) {
	b := math.Float32bits(f)
	b += 0x7FFF + (b>>16)&1
	h := uint16(b >> 16)
	return h, math.Float32frombits(uint32(h) << 16)
}

// gemmCase draws x (m×k) and w (n×k, bf16) with a few large and tiny
// values among normal ones.
func gemmCase(r *rand.Rand, m, n, k int) ([]float32, []uint16, []float32) {
	x := make([]float32, m*k)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if r.IntN(100) == 0 {
			x[i] *= 1000
		}
	}
	w := make([]uint16, n*k)
	wf := make([]float32, n*k)
	for i := range w {
		w[i], wf[i] = bf16(float32(r.NormFloat64() * 0.05))
	}
	return x, w, wf
}

// refDot is row i of x (bf16-rounded) · row j of wf in float64, and the
// sum of the products' magnitudes.
func refDot(x, wf []float32, i, j, k int) (ref, mag float64) {
	for kk := range k {
		_, xb := bf16(x[i*k+kk])
		p := float64(xb) * float64(wf[j*k+kk])
		ref += p
		mag += math.Abs(p)
	}
	return ref, mag
}

// gemmRun is a product over a fixed matrix: y (m × its rows) from x (m × k).
type gemmRun func(m int, x []float32) ([]float32, error)

// bf16Run is the product over w (n × k, bf16) on a grid of that many blocks.
func bf16Run(l *library, n, k int, w []uint16, grid int) gemmRun {
	return func(m int, x []float32) ([]float32, error) {
		y, _, err := l.testGemmGrid(m, n, k, x, w, 0, grid)
		return y, err
	}
}

// sameAloneAndAmong checks that row's outputs in all (the product of x's m
// rows) have the bits of the row's product alone (M = 1) and among 37
// other rows of x (at position 21, the others row + 1 + stride·i).
func sameAloneAndAmong(t *testing.T, run gemmRun, x []float32, all []float32, row, m, n, k, stride int) {
	t.Helper()
	alone, err := run(1, x[row*k:(row+1)*k])
	if err != nil {
		t.Fatal(err)
	}
	mix := make([]float32, 0, 37*k)
	for i := range 37 {
		src := (row + 1 + stride*i) % m
		if i == 21 {
			src = row
		}
		mix = append(mix, x[src*k:(src+1)*k]...)
	}
	among, err := run(37, mix)
	if err != nil {
		t.Fatal(err)
	}
	for j := range n {
		a, b, d := math.Float32bits(all[row*n+j]), math.Float32bits(alone[j]), math.Float32bits(among[21*n+j])
		if a != b || a != d {
			t.Fatalf("%dx%d row %d column %d: %v among %d, %v alone, %v among 37", n, k, row, j, all[row*n+j], m, alone[j], among[21*n+j])
		}
	}
}

// TestTileProductMatches: the tensor-core tile product is the float64
// product of the bf16-rounded inputs up to float32 accumulation, for K of
// one to 32 steps a warp, M from 1 to 300, N not a whole number of tiles.
func TestTileProductMatches(t *testing.T) {
	needGPU(t)
	l, err := lib()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ m, n, k int }{{1, 72, 256}, {37, 200, 896}, {300, 64, 2048}, {5, 24, 8192}, {16, 8, 32}} {
		t.Run(fmt.Sprintf("%dx%dx%d", c.m, c.n, c.k), func(t *testing.T) {
			x, w, wf := gemmCase(r, c.m, c.n, c.k)
			y, _, err := l.testGemm(c.m, c.n, c.k, x, w, 0)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i := range c.m {
				for j := range c.n {
					ref, mag := refDot(x, wf, i, j, c.k)
					e := math.Abs(float64(y[i*c.n+j])-ref) / (mag + 1e-30)
					worst = max(worst, e)
					if e > 1e-5 {
						t.Fatalf("y[%d][%d] = %v, want %v (error %.3g of the magnitude %.3g)", i, j, y[i*c.n+j], ref, e, mag)
					}
				}
			}
			t.Logf("largest error %.3g of the products' magnitude", worst)
		})
	}
}

// TestTileProductBatchInvariant: a row's result is bitwise the same alone
// (M = 1), at another position among other rows, and among 300.
func TestTileProductBatchInvariant(t *testing.T) {
	needGPU(t)
	l, err := lib()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ n, k int }{{200, 896}, {96, 2048}, {24, 8192}} {
		const m = 300
		x, w, _ := gemmCase(r, m, c.n, c.k)
		all, _, err := l.testGemm(m, c.n, c.k, x, w, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range []int{0, 7, 8, 15, 16, 131, 299} {
			sameAloneAndAmong(t, bf16Run(l, c.n, c.k, w, 0), x, all, row, m, c.n, c.k, 5)
		}
	}
}

// TestTileProductFewRows: products of a few rows (gemm_local_t where the
// library takes them: a block adds its tiles' chunk sums itself; else
// gemm_t), on grids that give a block several units and matrices of 2, 3,
// 5, 11 and 16 chunks (idle warps, partial tiles): every row has the bits it
// has alone and the value of the float64 product of the rounded inputs.
func TestTileProductFewRows(t *testing.T) {
	needGPU(t)
	l, err := lib()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ n, k, grid int }{
		{1040, 512, 2},  // 2 chunks: 8 tiles a unit, the last unit a tile
		{200, 896, 3},   // 3 chunks: 5 tiles a unit, a warp idle
		{520, 1024, 5},  // 5 chunks: 3 tiles a unit
		{96, 2048, 11},  // 11 chunks: a tile a unit, 5 warps idle
		{2048, 2048, 0}, // 16 chunks on the H100's 132 blocks: a tile a unit
	} {
		x, w, wf := gemmCase(r, 9, c.n, c.k)
		alone := make([][]float32, 9)
		for i := range alone {
			if alone[i], _, err = l.testGemmGrid(1, c.n, c.k, x[i*c.k:(i+1)*c.k], w, 0, c.grid); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range []int{1, 2, 3, 8, 9} {
			t.Run(fmt.Sprintf("%dx%dx%d-grid%d", m, c.n, c.k, c.grid), func(t *testing.T) {
				y, _, err := l.testGemmGrid(m, c.n, c.k, x[:m*c.k], w, 0, c.grid)
				if err != nil {
					t.Fatal(err)
				}
				for i := range m {
					for j := range c.n {
						if a, b := math.Float32bits(y[i*c.n+j]), math.Float32bits(alone[i][j]); a != b {
							t.Fatalf("y[%d][%d] = %v among %d rows, %v alone", i, j, y[i*c.n+j], m, alone[i][j])
						}
					}
					for _, j := range []int{0, 7, 8, 15, 16, c.n / 2, c.n - 1} {
						ref, mag := refDot(x, wf, i, j, c.k)
						if e := math.Abs(float64(y[i*c.n+j])-ref) / (mag + 1e-30); e > 1e-5 {
							t.Fatalf("y[%d][%d] = %v, want %v (error %.3g of the magnitude %.3g)", i, j, y[i*c.n+j], ref, e, mag)
						}
					}
				}
			})
		}
	}
}

// TestTileProductHalves: products of two chunks at 2 to 64 rows on grids
// where their whole-K units would leave blocks idle take units of 128
// weight rows with the block's halves on the two chunks (gemm_halves_t),
// the last unit partial: every row has the bits it has alone (one row) and
// among 37 others, and the value of the float64 product of the rounded
// inputs; and at 100 rows (two passes, whole-K units) the same.
func TestTileProductHalves(t *testing.T) {
	needGPU(t)
	l, err := lib()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, c := range []struct{ m, n, k, grid int }{
		{64, 1040, 512, 10}, // 9 units of 128 rows, the last a tile
		{2, 600, 1024, 6},   // passes of 16 rows from 2 rows on
		{9, 1040, 512, 10},
		{16, 600, 1024, 6},
		{17, 600, 1024, 6}, // a pass of 17 rows
		{40, 600, 1024, 6},
		{100, 600, 1024, 6}, // two passes: whole-K units
	} {
		t.Run(fmt.Sprintf("%dx%dx%d-grid%d", c.m, c.n, c.k, c.grid), func(t *testing.T) {
			x, w, wf := gemmCase(r, c.m, c.n, c.k)
			all, _, err := l.testGemmGrid(c.m, c.n, c.k, x, w, 0, c.grid)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range []int{0, 7, 8, 16, c.m / 2, c.m - 1} {
				if row >= c.m {
					continue
				}
				sameAloneAndAmong(t, bf16Run(l, c.n, c.k, w, c.grid), x, all, row, c.m, c.n, c.k, 3)
				for _, j := range []int{0, 1, 8, 15, 127, 128, c.n - 1} {
					ref, mag := refDot(x, wf, row, j, c.k)
					if e := math.Abs(float64(all[row*c.n+j])-ref) / (mag + 1e-30); e > 1e-5 {
						t.Fatalf("y[%d][%d] = %v, want %v (error %.3g of the magnitude %.3g)", row, j, all[row*c.n+j], ref, e, mag)
					}
				}
			}
		})
	}
}

// TestTileProductTwoTilesAWarp: on grids small enough that products of
// one chunk take units of two tiles a warp at many rows (gemm_whole2_t),
// with a partial last pass and partial tiles, every row has the bits it
// has alone (the 1-row product) and among 37 others, and the value of the
// float64 product of the rounded inputs.
func TestTileProductTwoTilesAWarp(t *testing.T) {
	needGPU(t)
	l, err := lib()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct{ m, n, k, grid int }{
		{200, 1040, 256, 8},  // 3 tile pairs, the last of 16 rows
		{130, 2048, 1024, 4}, // 4 tile pairs, a pass of 2 rows
		{300, 1000, 512, 2},  // the second tile pair partial inside a warp's tiles
	} {
		t.Run(fmt.Sprintf("%dx%dx%d-grid%d", c.m, c.n, c.k, c.grid), func(t *testing.T) {
			x, w, wf := gemmCase(r, c.m, c.n, c.k)
			all, _, err := l.testGemmGrid(c.m, c.n, c.k, x, w, 0, c.grid)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range []int{0, 7, 8, 63, 64, 129, c.m - 1} {
				sameAloneAndAmong(t, bf16Run(l, c.n, c.k, w, c.grid), x, all, row, c.m, c.n, c.k, 3)
				// And the value: the float64 product of the rounded inputs.
				for _, j := range []int{0, 1, 8, 15, 16, 511, c.n - 1} {
					ref, mag := refDot(x, wf, row, j, c.k)
					if e := math.Abs(float64(all[row*c.n+j])-ref) / (mag + 1e-30); e > 1e-5 {
						t.Fatalf("y[%d][%d] = %v, want %v (error %.3g of the magnitude %.3g)", row, j, all[row*c.n+j], ref, e, mag)
					}
				}
			}
		})
	}
}

// BenchmarkTileProduct times the tile product on Llama-3.2-1B's matrices
// (gate and up stacked, down, QKV, output projection) for a decode batch
// of M rows and a 2048-token prefill: weight bytes per second, against the
// copy bandwidth.
func BenchmarkTileProduct(b *testing.B) {
	needGPU(b)
	l, err := lib()
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, mat := range []struct {
		name string
		n, k int
	}{{"gateup", 16384, 2048}, {"down", 2048, 8192}, {"qkv", 3072, 2048}, {"o", 2048, 2048}} {
		_, w, _ := gemmCase(r, 1, mat.n, mat.k)
		for _, m := range []int{1, 4, 8, 16, 64, 256, 2048} {
			b.Run(fmt.Sprintf("%s/M%d", mat.name, m), func(b *testing.B) {
				x := make([]float32, m*mat.k)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				_, ms, err := l.testGemm(m, mat.n, mat.k, x, w, max(b.N, 20))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(ms*1e3, "µs/product")
				b.ReportMetric(float64(mat.n*mat.k*2)/(ms*1e-3)/1e9, "weight-GB/s")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
