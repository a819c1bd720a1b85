package sample

import (
	"math"
	"testing"
)

// Chi-square goodness of fit, computed here rather than taken from a table
// so that any number of bins and any significance level can be tested.

// gammaQ is the regularized upper incomplete gamma function Q(a, x): a
// series for P = 1-Q below x = a+1, a continued fraction (modified Lentz)
// above, where each converges fast.
func gammaQ(a, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(a)
	front := math.Exp(a*math.Log(x) - x - lg)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 10000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if term < sum*1e-16 {
				break
			}
		}
		return 1 - front*sum
	}
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	return front * h
}

// chiSquareCritical is the value that a chi-square variable with df degrees
// of freedom exceeds with probability alpha.
func chiSquareCritical(df int, alpha float64) float64 {
	lo, hi := 0.0, float64(df)+100*math.Sqrt(float64(df))+100
	for range 200 {
		mid := (lo + hi) / 2
		if gammaQ(float64(df)/2, mid/2) > alpha {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// chiSquare is the statistic of observed counts against expected
// probabilities (which sum to 1).
func chiSquare(counts []int, probs []float64) float64 {
	n := 0
	for _, c := range counts {
		n += c
	}
	var x2 float64
	for i, c := range counts {
		e := probs[i] * float64(n)
		x2 += (float64(c) - e) * (float64(c) - e) / e
	}
	return x2
}

func TestChiSquareCritical(t *testing.T) {
	// Published table values (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.4)
	// at alpha = 0.001 and 0.05.
	for _, c := range []struct {
		df    int
		alpha float64
		want  float64
	}{
		{1, 0.001, 10.828},
		{11, 0.001, 31.264},
		{15, 0.001, 37.697},
		{100, 0.001, 149.449},
		{10, 0.05, 18.307},
	} {
		if got := chiSquareCritical(c.df, c.alpha); math.Abs(got-c.want) > 0.002 {
			t.Errorf("critical(df=%d, alpha=%v) = %.4f, want %.3f", c.df, c.alpha, got, c.want)
		}
	}
}
