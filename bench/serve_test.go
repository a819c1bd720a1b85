package bench

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

const svMS = time.Millisecond

func svNear(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", what, got, want)
	}
}

// scripted is a hand-made run: three requests completed, one failed.
//
//	A: sent 0, chunks 100, 130, 170, end 170; 3 tokens, 10 prompt tokens
//	B: sent 50, chunks 250, 300, end 350; 5 tokens (usage), 20 prompt tokens
//	C: sent 60, chunk 360, end 360; 1 token, 5 prompt tokens
//	D: sent 70, chunk 150, failed at 400
func svScripted() []ServeRecord {
	return []ServeRecord{
		{Sent: 0, Chunks: []time.Duration{100 * svMS, 130 * svMS, 170 * svMS}, End: 170 * svMS, OutputTokens: 3, PromptTokens: 10},
		{Sent: 50 * svMS, Chunks: []time.Duration{250 * svMS, 300 * svMS}, End: 350 * svMS, OutputTokens: 5, PromptTokens: 20, OutputReported: true},
		{Sent: 60 * svMS, Chunks: []time.Duration{360 * svMS}, End: 360 * svMS, OutputTokens: 1, PromptTokens: 5},
		{Sent: 70 * svMS, Chunks: []time.Duration{150 * svMS}, End: 400 * svMS, OutputTokens: 2, PromptTokens: 7, Err: "HTTP 500: boom"},
	}
}

// The summary of a scripted timeline, every figure worked out by hand.
func TestSummarizeScripted(t *testing.T) {
	s := SummarizeServe(svScripted(), []float64{25, 50, 90, 99})
	if s.Completed != 3 || s.Failed != 1 {
		t.Fatalf("completed %d failed %d", s.Completed, s.Failed)
	}
	// Only completed requests count tokens: 10+20+5 in, 3+5+1 out.
	if s.TotalInput != 35 || s.TotalOutput != 9 {
		t.Errorf("tokens in %d out %d", s.TotalInput, s.TotalOutput)
	}
	// First send 0 to last end 400 ms (the failed request's).
	svNear(t, "duration", s.Duration, 0.4)
	svNear(t, "request throughput", s.RequestThroughput, 3/0.4)
	svNear(t, "output throughput", s.OutputThroughput, 9/0.4)
	svNear(t, "total token throughput", s.TotalTokenThroughput, 44/0.4)

	// TTFT: A 100, B 200, C 300.
	svNear(t, "mean TTFT", s.TTFT.Mean, 200)
	svNear(t, "median TTFT", s.TTFT.Median, 200)
	svNear(t, "std TTFT", s.TTFT.Std, math.Sqrt((100*100+0+100*100)/3.0))
	svNear(t, "p25 TTFT", s.TTFT.Pcts[0], 150) // rank 0.5
	svNear(t, "p50 TTFT", s.TTFT.Pcts[1], 200) // rank 1
	svNear(t, "p90 TTFT", s.TTFT.Pcts[2], 280) // rank 1.8: 200 + 0.8×100
	svNear(t, "p99 TTFT", s.TTFT.Pcts[3], 298) // rank 1.98
	// TPOT: A (170−100)/(3−1) = 35, B (300−200)/(5−1) = 25; C has 1 token.
	svNear(t, "mean TPOT", s.TPOT.Mean, 30)
	svNear(t, "median TPOT", s.TPOT.Median, 30)
	svNear(t, "std TPOT", s.TPOT.Std, 5)
	svNear(t, "p90 TPOT", s.TPOT.Pcts[2], 34) // rank 0.9: 25 + 0.9×10
	svNear(t, "p99 TPOT", s.TPOT.Pcts[3], 34.9)
	// ITL: A's gaps 30, 40 and B's 50, pooled; D's are not counted.
	svNear(t, "mean ITL", s.ITL.Mean, 40)
	svNear(t, "median ITL", s.ITL.Median, 40)
	svNear(t, "std ITL", s.ITL.Std, math.Sqrt((100+0+100)/3.0))
	svNear(t, "p90 ITL", s.ITL.Pcts[2], 48)
	svNear(t, "p99 ITL", s.ITL.Pcts[3], 49.8)
	// E2EL: A 170, B 300, C 300.
	mean := 770.0 / 3
	svNear(t, "mean E2EL", s.E2EL.Mean, mean)
	svNear(t, "median E2EL", s.E2EL.Median, 300)
	svNear(t, "std E2EL", s.E2EL.Std, math.Sqrt(((170-mean)*(170-mean)+2*(300-mean)*(300-mean))/3))
	svNear(t, "p25 E2EL", s.E2EL.Pcts[0], 235) // rank 0.5: 170 + 0.5×130
	svNear(t, "p90 E2EL", s.E2EL.Pcts[2], 300)

	// Peaks in one-second buckets from the first completed send: all six
	// chunks of A, B, C and all three completed requests fall in the first.
	if s.MaxOutputTokensPerS != 6 || s.MaxConcurrentRequests != 3 {
		t.Errorf("peaks %v tok/s, %d requests", s.MaxOutputTokensPerS, s.MaxConcurrentRequests)
	}
	// At 70 ms all four are in flight.
	if s.MaxInFlight != 4 {
		t.Errorf("max in flight %d", s.MaxInFlight)
	}
}

// Peaks spread over buckets: chunks at 0.5 s, 1.2 s, 1.4 s, 1.9 s, 2.1 s.
func TestSummarizePeakBuckets(t *testing.T) {
	recs := []ServeRecord{
		{Sent: 0, Chunks: []time.Duration{500 * svMS, 1200 * svMS, 1400 * svMS}, End: 1400 * svMS, OutputTokens: 3},
		{Sent: 1100 * svMS, Chunks: []time.Duration{1900 * svMS, 2100 * svMS}, End: 2100 * svMS, OutputTokens: 2},
	}
	s := SummarizeServe(recs, nil)
	// Bucket 1 (1–2 s) has 1.2, 1.4 and 1.9: 3 chunks; both requests are active in it.
	if s.MaxOutputTokensPerS != 3 || s.MaxConcurrentRequests != 2 || s.MaxInFlight != 2 {
		t.Errorf("peaks %v tok/s, %d requests, %d in flight", s.MaxOutputTokensPerS, s.MaxConcurrentRequests, s.MaxInFlight)
	}
	// Back to back: an end and a send at the same instant are not concurrent.
	recs = []ServeRecord{{Sent: 0, Chunks: []time.Duration{svMS}, End: 10 * svMS}, {Sent: 10 * svMS, Chunks: []time.Duration{11 * svMS}, End: 20 * svMS}}
	if s := SummarizeServe(recs, nil); s.MaxInFlight != 1 {
		t.Errorf("back to back: %d in flight", s.MaxInFlight)
	}
}

// numpy.percentile's default method, checked against values numpy gives.
func TestPercentileLikeNumpy(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{[]float64{15, 20, 35, 40, 50}, 40, 29}, // numpy.percentile([15,20,35,40,50], 40) == 29.0
		{[]float64{1, 2, 3, 4}, 90, 3.7},
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{1, 2, 3, 4}, 0, 1},
		{[]float64{1, 2, 3, 4}, 100, 4},
		{[]float64{7}, 99, 7},
		{nil, 50, 0},
	} {
		svNear(t, "percentile", ServePercentile(c.xs, c.p), c.want)
	}
}

// Nothing completed: zeros, no division by zero, no NaN.
func TestSummarizeNothingCompleted(t *testing.T) {
	if s := SummarizeServe(nil, []float64{99}); s.Completed != 0 || s.Duration != 0 || s.TTFT.Pcts[0] != 0 {
		t.Errorf("empty: %+v", s)
	}
	s := SummarizeServe([]ServeRecord{{Sent: 0, End: 5 * svMS, Err: "x"}}, []float64{99})
	if s.Failed != 1 || s.RequestThroughput != 0 || s.TTFT.Mean != 0 || s.MaxOutputTokensPerS != 0 {
		t.Errorf("all failed: %+v", s)
	}
	if b, err := ServeResultJSON(&ServeInfo{Rate: math.Inf(1), Burstiness: 1}, &s, nil); err != nil || !json.Valid(b) {
		t.Errorf("result JSON of nothing: %v %s", err, b)
	}
}

// The result file: vLLM's names and units, per-request arrays in request
// order, percentile keys, and the ringlm object.
func TestServeResultJSON(t *testing.T) {
	recs := svScripted()
	pcts := WithDefaultPercentiles([]float64{99.9, 50, 99})
	if want := []float64{50, 90, 99, 99.9}; !svFloatsEq(pcts, want) {
		t.Fatalf("percentiles %v, want %v", pcts, want)
	}
	s := SummarizeServe(recs, pcts)
	in := &ServeInfo{Date: time.Date(2026, 11, 23, 14, 5, 6, 0, time.UTC), URL: "http://h/v1/completions", Endpoint: "/v1/completions",
		Model: "m", NumPrompts: 4, Rate: math.Inf(1), Burstiness: 1, Seed: 9}
	b, err := ServeResultJSON(in, &s, recs)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Date           string    `json:"date"`
		Backend        string    `json:"backend"`
		ModelID        string    `json:"model_id"`
		RequestRate    any       `json:"request_rate"`
		MaxConcurrency any       `json:"max_concurrency"`
		Duration       float64   `json:"duration"`
		Completed      int       `json:"completed"`
		Failed         int       `json:"failed"`
		TotalOut       int       `json:"total_output_tokens"`
		InputLens      []int     `json:"input_lens"`
		OutputLens     []int     `json:"output_lens"`
		TTFTs          []float64 `json:"ttfts"`
		ITLs           [][]float64
		Errors         []string `json:"errors"`
		P999TTFT       float64  `json:"p99.9_ttft_ms"`
		P90TPOT        float64  `json:"p90_tpot_ms"`
		MedianITL      float64  `json:"median_itl_ms"`
		MeanE2EL       float64  `json:"mean_e2el_ms"`
		Ringlm         struct {
			Seed   int64     `json:"seed"`
			URL    string    `json:"url"`
			E2ELs  []float64 `json:"e2els"`
			Sends  []float64 `json:"send_times"`
			InFlit int       `json:"peak_requests_in_flight"`
			Peak1s int       `json:"peak_concurrent_requests_1s_buckets"`
			Cap    any       `json:"concurrency_cap"`
			Count  string    `json:"input_len_counted_by"`
		} `json:"ringlm"`
		PeakVLLM int `json:"max_concurrent_requests"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if v.Date != "20261123-140506" || v.Backend != "openai" || v.ModelID != "m" || v.RequestRate != "inf" || v.MaxConcurrency != nil ||
		v.Completed != 3 || v.Failed != 1 || v.TotalOut != 9 {
		t.Errorf("header fields: %s", b)
	}
	svNear(t, "duration", v.Duration, 0.4)
	if !svIntsEq(v.InputLens, []int{10, 20, 5, 7}) || !svIntsEq(v.OutputLens, []int{3, 5, 1, 0}) {
		t.Errorf("input_lens %v output_lens %v", v.InputLens, v.OutputLens)
	}
	if !svFloatsEq(v.TTFTs, []float64{0.1, 0.2, 0.3, 0.08}) {
		t.Errorf("ttfts %v", v.TTFTs)
	}
	if len(v.ITLs) != 4 || !svFloatsEq(v.ITLs[0], []float64{0.03, 0.04}) || !svFloatsEq(v.ITLs[1], []float64{0.05}) || v.ITLs[2] == nil || len(v.ITLs[2]) != 0 {
		t.Errorf("itls %v", v.ITLs)
	}
	if !strings.Contains(string(b), `"itls": [[`) || !strings.Contains(string(b), `[]`) {
		t.Errorf("itls are not lists: %s", b)
	}
	if len(v.Errors) != 4 || v.Errors[0] != "" || v.Errors[3] != "HTTP 500: boom" {
		t.Errorf("errors %q", v.Errors)
	}
	svNear(t, "p99.9 TTFT", v.P999TTFT, 299.8) // rank 1.998
	svNear(t, "p90 TPOT", v.P90TPOT, 34)
	svNear(t, "median ITL", v.MedianITL, 40)
	svNear(t, "mean E2EL", v.MeanE2EL, 770.0/3)
	if v.Ringlm.Seed != 9 || v.Ringlm.URL != in.URL || !svFloatsEq(v.Ringlm.E2ELs, []float64{0.17, 0.3, 0.3, 0.33}) ||
		!svFloatsEq(v.Ringlm.Sends, []float64{0, 0.05, 0.06, 0.07}) || v.Ringlm.InFlit != 4 || v.Ringlm.Peak1s != v.PeakVLLM ||
		v.PeakVLLM != s.MaxConcurrentRequests || v.Ringlm.Cap != nil || v.Ringlm.Count != "estimate" {
		t.Errorf("ringlm object: %+v", v.Ringlm)
	}

	// A rate and a cap are numbers.
	in.Rate, in.Concurrency, in.Chat = 2.5, 8, true
	b, _ = ServeResultJSON(in, &s, recs)
	var w map[string]any
	if err := json.Unmarshal(b, &w); err != nil || w["request_rate"] != 2.5 || w["max_concurrency"] != 8.0 || w["backend"] != "openai-chat" ||
		path(w, "ringlm", "concurrency_cap") != 8.0 {
		t.Errorf("rate/cap: %v %v %v %v %v", err, w["request_rate"], w["max_concurrency"], w["backend"], w["ringlm"])
	}
	// The tokenizer that counted random prompts; nothing for a dataset.
	in.PromptTokenizer, in.PromptsOffTarget = "tok.gguf", 2
	b, _ = ServeResultJSON(in, &s, recs)
	if json.Unmarshal(b, &w); path(w, "ringlm", "input_len_counted_by") != "tok.gguf" || path(w, "ringlm", "prompts_off_input_len") != 2.0 {
		t.Errorf("prompt counting: %v", w["ringlm"])
	}
	in.Dataset = "d.jsonl"
	b, _ = ServeResultJSON(in, &s, recs)
	if json.Unmarshal(b, &w); path(w, "ringlm", "input_len_counted_by") != "" {
		t.Errorf("dataset: %v", w["ringlm"])
	}
}

// The printed table has every section and the asked-for percentiles.
func TestWriteServeSummary(t *testing.T) {
	recs := svScripted()
	show := []float64{50, 99.9}
	s := SummarizeServe(recs, WithDefaultPercentiles(show))
	var b strings.Builder
	WriteServeSummary(&b, &ServeInfo{Rate: 4, Burstiness: 0.5, Concurrency: 2, NumPrompts: 4, Seed: 77}, &s, recs, show)
	out := b.String()
	for _, want := range []string{
		"============ Serving Benchmark Result ============",
		"Successful requests:                     3",
		"Failed requests:                         1",
		"Max request concurrency (configured):    2",
		"Request rate configured (RPS):           4",
		"Random seed:                             77",
		// The peaks say how they are counted.
		"Peak concurrent requests (1-s buckets):  " + strconv.Itoa(s.MaxConcurrentRequests) + " ",
		"Peak requests in flight (any instant):   " + strconv.Itoa(s.MaxInFlight) + " ",
		"Benchmark duration (s):                  0.40",
		"Total generated tokens:                  9",
		"Request throughput (req/s):              7.50",
		"Mean TTFT (ms):                          200.00",
		"P99.9 TTFT (ms):                         299.80",
		"P50 TPOT (ms):                           30.00",
		"Mean ITL (ms):                           40.00",
		"Median E2EL (ms):                        300.00",
		"-----Time per Output Token (excl. 1st token)------",
		"1× HTTP 500: boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "P90 TTFT") {
		t.Errorf("printed a percentile not asked for:\n%s", out)
	}
	for _, vague := range []string{"Peak concurrent requests:", "Max requests in flight:", "Maximum request concurrency:"} {
		if strings.Contains(out, vague) {
			t.Errorf("unqualified label %q:\n%s", vague, out)
		}
	}
}

// path walks decoded JSON objects.
func path(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func svFloatsEq(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

func svIntsEq(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
