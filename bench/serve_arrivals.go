package bench

import (
	"math"
	"math/rand/v2"
	"time"
)

// seededRand is the seeded generator of one purpose (streams differ so that
// changing the arrival process does not change the prompts).
func seededRand(seed int64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), stream))
}

// Generator streams.
const (
	randArrivals = 0x61727269 // "arri"
	randPrompts  = 0x70726f6d // "prom"
)

// ArrivalOffsets returns when each of n requests is due, counted from the
// start, as vLLM's get_request does: the first at once, then gaps drawn
// from a gamma distribution with shape burstiness and scale
// 1/(rate × burstiness), so the mean gap is 1/rate (burstiness 1 is a
// Poisson process; lower is burstier, higher more regular). With rate ≤ 0
// or +Inf every request is due at once.
func ArrivalOffsets(n int, rate, burstiness float64, rng *rand.Rand) []time.Duration {
	out := make([]time.Duration, n)
	if rate <= 0 || math.IsInf(rate, 1) || n == 0 {
		return out
	}
	if burstiness <= 0 {
		burstiness = 1
	}
	theta := 1 / (rate * burstiness)
	t := 0.0
	for i := 1; i < n; i++ {
		t += gammaDraw(rng, burstiness) * theta
		out[i] = time.Duration(t * float64(time.Second))
	}
	return out
}

// gammaDraw draws from Gamma(shape k, scale 1) by Marsaglia and Tsang's
// method (k < 1 through Gamma(k+1) × U^(1/k)).
func gammaDraw(rng *rand.Rand, k float64) float64 {
	if k < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return gammaDraw(rng, k+1) * math.Pow(u, 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x {
			return d * v
		}
		if u > 0 && math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
