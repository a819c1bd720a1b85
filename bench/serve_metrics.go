package bench

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// ServeRecord is what `bench serve` measured for one request. Times are offsets
// from an origin shared by all records of a run (the first send).
type ServeRecord struct {
	Sent time.Duration // the request was handed to the HTTP client
	// Chunks are the arrival times of the streamed chunks that carried
	// text; the first is the first token (TTFT = Chunks[0] − Sent).
	Chunks []time.Duration
	End    time.Duration // the stream ended ([DONE], or the error)

	PromptTokens   int  // usage.prompt_tokens, else the estimate
	PromptReported bool // PromptTokens came from the server's usage
	OutputTokens   int  // usage.completion_tokens, else len(Chunks)
	OutputReported bool // OutputTokens came from the server's usage

	Err string // "" when the request succeeded
}

// OK reports whether the request succeeded.
func (r *ServeRecord) OK() bool { return r.Err == "" }

// TTFT is the time to the first chunk with text; 0 when none came.
func (r *ServeRecord) TTFT() time.Duration {
	if len(r.Chunks) == 0 {
		return 0
	}
	return r.Chunks[0] - r.Sent
}

// ITLs are the gaps between consecutive chunks with text.
func (r *ServeRecord) ITLs() []time.Duration {
	if len(r.Chunks) < 2 {
		return []time.Duration{}
	}
	out := make([]time.Duration, len(r.Chunks)-1)
	for i := range out {
		out[i] = r.Chunks[i+1] - r.Chunks[i]
	}
	return out
}

// Latency is the end-to-end latency (E2EL).
func (r *ServeRecord) Latency() time.Duration { return r.End - r.Sent }

// ServeStats summarises one latency metric in milliseconds.
type ServeStats struct {
	Mean, Median, Std float64
	// Pcts holds one value per percentile asked for, in the same order.
	Pcts []float64
}

// ServeSummary is a run's metrics, as vLLM's benchmark_serving defines them.
type ServeSummary struct {
	Completed, Failed int
	// Duration is from the first send to the last end, in seconds.
	Duration float64
	// TotalInput sums the prompt tokens of completed requests; TotalOutput
	// their output tokens.
	TotalInput, TotalOutput int

	RequestThroughput    float64 // completed / duration
	OutputThroughput     float64 // total output tokens / duration
	TotalTokenThroughput float64 // (input + output tokens) / duration

	// MaxOutputTokensPerS is vLLM's "peak output token throughput": the
	// most chunks with text that completed requests received within one
	// second bucket counted from the first send (a chunk may hold more
	// than one token). MaxConcurrentRequests is the most completed
	// requests active in one such bucket.
	MaxOutputTokensPerS   float64
	MaxConcurrentRequests int
	// MaxInFlight is the most requests in flight at one instant (sent,
	// not yet ended; failed ones too).
	MaxInFlight int

	Percentiles []float64 // the percentiles of each ServeStats' Pcts
	// TTFT, TPOT, ITL and E2EL over completed requests; TPOT only over
	// those with more than one output token; ITL pools every gap of every
	// completed request.
	TTFT, TPOT, ITL, E2EL ServeStats
}

// SummarizeServe computes the summary of recorded requests. It is a pure
// function of its arguments.
func SummarizeServe(recs []ServeRecord, percentiles []float64) ServeSummary {
	s := ServeSummary{Percentiles: slices.Clone(percentiles)}
	var ttfts, tpots, itls, e2els []float64
	first, last := time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	for i := range recs {
		r := &recs[i]
		first, last = min(first, r.Sent), max(last, r.End)
		if !r.OK() {
			s.Failed++
			continue
		}
		s.Completed++
		s.TotalInput += r.PromptTokens
		s.TotalOutput += r.OutputTokens
		ttft, lat := r.TTFT(), r.Latency()
		ttfts = append(ttfts, msOf(ttft))
		e2els = append(e2els, msOf(lat))
		if r.OutputTokens > 1 {
			tpots = append(tpots, msOf(lat-ttft)/float64(r.OutputTokens-1))
		}
		for _, g := range r.ITLs() {
			itls = append(itls, msOf(g))
		}
	}
	if len(recs) > 0 {
		s.Duration = (last - first).Seconds()
	}
	if s.Duration > 0 {
		s.RequestThroughput = float64(s.Completed) / s.Duration
		s.OutputThroughput = float64(s.TotalOutput) / s.Duration
		s.TotalTokenThroughput = float64(s.TotalInput+s.TotalOutput) / s.Duration
	}
	s.TTFT = serveStats(ttfts, percentiles)
	s.TPOT = serveStats(tpots, percentiles)
	s.ITL = serveStats(itls, percentiles)
	s.E2EL = serveStats(e2els, percentiles)
	s.MaxOutputTokensPerS, s.MaxConcurrentRequests = servePeaks(recs)
	s.MaxInFlight = maxInFlight(recs)
	return s
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// serveStats is numpy's mean, median, std (population) and percentile (linear)
// of xs; all zero for no values, as vLLM's `np.mean(xs or 0)` gives.
func serveStats(xs []float64, percentiles []float64) ServeStats {
	st := ServeStats{Pcts: make([]float64, len(percentiles))}
	if len(xs) == 0 {
		return st
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	sum := 0.0
	for _, x := range sorted {
		sum += x
	}
	st.Mean = sum / float64(len(sorted))
	v := 0.0
	for _, x := range sorted {
		v += (x - st.Mean) * (x - st.Mean)
	}
	st.Std = math.Sqrt(v / float64(len(sorted)))
	st.Median = ServePercentile(sorted, 50)
	for i, p := range percentiles {
		st.Pcts[i] = ServePercentile(sorted, p)
	}
	return st
}

// ServePercentile is numpy.percentile's default ("linear") method over sorted
// values: rank p/100 × (n−1), interpolated between the two closest ranks.
// It returns 0 for no values.
func ServePercentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := p / 100 * float64(n-1)
	lo := int(math.Floor(rank))
	lo = max(0, min(lo, n-1))
	hi := min(lo+1, n-1)
	frac := rank - float64(lo)
	if frac <= 0 || hi == lo {
		return sorted[lo]
	}
	return sorted[lo] + (sorted[hi]-sorted[lo])*frac
}

// servePeaks is vLLM's max_output_tokens_per_s and max_concurrent_requests:
// completed requests' chunks and active spans counted in one-second
// buckets from the first completed request's send.
func servePeaks(recs []ServeRecord) (float64, int) {
	var start, end time.Duration
	n := 0
	for i := range recs {
		r := &recs[i]
		if !r.OK() {
			continue
		}
		if n == 0 || r.Sent < start {
			start = r.Sent
		}
		if n == 0 || r.End > end {
			end = r.End
		}
		n++
	}
	if n == 0 {
		return 0, 0
	}
	buckets := int(math.Ceil((end - start).Seconds())) + 1
	tokens := make([]int, buckets)
	active := make([]int, buckets)
	bucket := func(t time.Duration) int { return int((t - start).Seconds()) }
	for i := range recs {
		r := &recs[i]
		if !r.OK() {
			continue
		}
		for _, c := range r.Chunks {
			if b := bucket(c); b >= 0 && b < buckets {
				tokens[b]++
			}
		}
		for b := bucket(r.Sent); b <= bucket(r.End) && b < buckets; b++ {
			active[b]++
		}
	}
	return float64(slices.Max(tokens)), slices.Max(active)
}

// maxInFlight sweeps the requests' [Sent, End) spans; an end at the same
// instant as a send comes first.
func maxInFlight(recs []ServeRecord) int {
	type edge struct {
		t     time.Duration
		delta int
	}
	edges := make([]edge, 0, 2*len(recs))
	for i := range recs {
		edges = append(edges, edge{recs[i].Sent, 1}, edge{recs[i].End, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.t != b.t {
			return cmp.Compare(a.t, b.t)
		}
		return cmp.Compare(a.delta, b.delta)
	})
	n, peak := 0, 0
	for _, e := range edges {
		n += e.delta
		peak = max(peak, n)
	}
	return peak
}
