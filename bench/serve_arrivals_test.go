package bench

import (
	"math"
	"slices"
	"testing"
)

// Gaps have mean 1/rate whatever the burstiness, and a coefficient of
// variation 1/sqrt(burstiness): 1 for Poisson, more when burstier, less
// when more regular.
func TestArrivalGaps(t *testing.T) {
	const n, rate = 40001, 8.0
	cvs := map[float64]float64{}
	for _, b := range []float64{0.25, 1, 4} {
		offs := ArrivalOffsets(n, rate, b, seededRand(42, randArrivals))
		if offs[0] != 0 {
			t.Fatalf("the first request is due at %v", offs[0])
		}
		var sum, sq float64
		for i := 1; i < n; i++ {
			g := (offs[i] - offs[i-1]).Seconds()
			if g < 0 {
				t.Fatalf("burstiness %v: negative gap at %d", b, i)
			}
			sum += g
			sq += g * g
		}
		m := sum / (n - 1)
		sd := math.Sqrt(sq/(n-1) - m*m)
		cv := sd / m
		cvs[b] = cv
		if math.Abs(m-1/rate) > 0.03/rate {
			t.Errorf("burstiness %v: mean gap %.5f s, want %.5f", b, m, 1/rate)
		}
		if want := 1 / math.Sqrt(b); math.Abs(cv-want) > 0.1*want {
			t.Errorf("burstiness %v: coefficient of variation %.3f, want %.3f", b, cv, want)
		}
	}
	if !(cvs[0.25] > cvs[1] && cvs[1] > cvs[4]) {
		t.Errorf("variation does not fall as burstiness rises: %v", cvs)
	}
}

// The same seed gives the same schedule; no rate means all at once.
func TestArrivalOffsetsSeeded(t *testing.T) {
	a := ArrivalOffsets(100, 5, 1, seededRand(7, randArrivals))
	b := ArrivalOffsets(100, 5, 1, seededRand(7, randArrivals))
	c := ArrivalOffsets(100, 5, 1, seededRand(8, randArrivals))
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Errorf("seeding: same %v, different %v", slices.Equal(a, b), !slices.Equal(a, c))
	}
	if !slices.IsSorted(a) {
		t.Errorf("offsets go back in time")
	}
	for _, r := range []float64{math.Inf(1), 0} {
		for _, d := range ArrivalOffsets(10, r, 1, seededRand(1, randArrivals)) {
			if d != 0 {
				t.Fatalf("rate %v: a request due at %v", r, d)
			}
		}
	}
	// Mean gap 1/rate holds for the gamma draw itself at shapes < 1.
	rng := seededRand(3, randArrivals)
	sum := 0.0
	for range 20000 {
		sum += gammaDraw(rng, 0.5)
	}
	if m := sum / 20000; math.Abs(m-0.5) > 0.03 {
		t.Errorf("Gamma(0.5) mean %.4f, want 0.5", m)
	}
}
