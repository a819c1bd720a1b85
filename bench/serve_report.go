package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ServeInfo describes a run for its report and result file.
type ServeInfo struct {
	Date        time.Time
	URL         string
	Endpoint    string // the request path
	Chat        bool
	Model       string
	NumPrompts  int // requests asked for
	Rate        float64
	Burstiness  float64
	Concurrency int // 0: no cap
	Seed        int64
	Dataset     string // "" for random prompts
	InputLen    int    // random prompts' tokens
	// PromptTokenizer is what counted the random prompts' tokens ("" for
	// an estimate); PromptsOffTarget is how many are not InputLen long.
	PromptTokenizer  string
	PromptsOffTarget int
	OutputLen        int
	IgnoreEOS        bool
	Temperature      *float64
	Interrupted      bool
}

// backend is vLLM's name for the request function used.
func (in *ServeInfo) backend() string {
	if in.Chat {
		return "openai-chat"
	}
	return "openai"
}

// WriteServeSummary prints the summary table, vLLM's layout with std added,
// with the percentiles in show (each must be one of s.Percentiles).
func WriteServeSummary(w io.Writer, in *ServeInfo, s *ServeSummary, recs []ServeRecord, show []float64) {
	line := func(name string, v any) {
		switch x := v.(type) {
		case float64:
			fmt.Fprintf(w, "%-40s %-10.2f\n", name, x)
		default:
			fmt.Fprintf(w, "%-40s %-10v\n", name, x)
		}
	}
	fmt.Fprintln(w, centerTitle(" Serving Benchmark Result ", '='))
	line("Successful requests:", s.Completed)
	line("Failed requests:", s.Failed)
	if in.Interrupted {
		line("Not sent (interrupted):", in.NumPrompts-len(recs))
	}
	if in.Concurrency > 0 {
		line("Max request concurrency (configured):", in.Concurrency)
	}
	line("Request rate configured (RPS):", rateText(in.Rate))
	finiteRate := !math.IsInf(in.Rate, 1) && in.Rate > 0
	if finiteRate {
		line("Burstiness (gamma shape):", in.Burstiness)
	}
	if in.Dataset == "" || finiteRate {
		line("Random seed:", in.Seed)
	}
	line("Benchmark duration (s):", s.Duration)
	line("Total input tokens:", s.TotalInput)
	line("Total generated tokens:", s.TotalOutput)
	line("Request throughput (req/s):", s.RequestThroughput)
	line("Output token throughput (tok/s):", s.OutputThroughput)
	line("Peak output token throughput (tok/s):", s.MaxOutputTokensPerS)
	// Two peaks that read alike: vLLM's (completed requests active in
	// the same one-second bucket, so it can exceed the cap) and the exact
	// one (requests sent and not yet ended at one instant).
	line("Peak concurrent requests (1-s buckets):", s.MaxConcurrentRequests)
	line("Peak requests in flight (any instant):", s.MaxInFlight)
	line("Total token throughput (tok/s):", s.TotalTokenThroughput)
	for _, m := range []struct {
		title, short string
		st           *ServeStats
	}{
		{"Time to First Token", "TTFT", &s.TTFT},
		{"Time per Output Token (excl. 1st token)", "TPOT", &s.TPOT},
		{"Inter-token Latency", "ITL", &s.ITL},
		{"End-to-end Latency", "E2EL", &s.E2EL},
	} {
		fmt.Fprintln(w, centerTitle(m.title, '-'))
		line("Mean "+m.short+" (ms):", m.st.Mean)
		line("Median "+m.short+" (ms):", m.st.Median)
		line("Std "+m.short+" (ms):", m.st.Std)
		for _, p := range show {
			line("P"+pctWord(p)+" "+m.short+" (ms):", pctAt(m.st, s.Percentiles, p))
		}
	}
	fmt.Fprintln(w, strings.Repeat("=", 50))

	// Notes that change how the figures read.
	noUsage := 0
	for i := range recs {
		if recs[i].OK() && !recs[i].OutputReported {
			noUsage++
		}
	}
	if noUsage > 0 {
		fmt.Fprintf(w, "note: %d completed requests had no usage from the server; their output tokens are the chunks with text\n", noUsage)
	}
	if s.Failed > 0 {
		counts := map[string]int{}
		for i := range recs {
			if !recs[i].OK() {
				counts[recs[i].Err]++
			}
		}
		msgs := make([]string, 0, len(counts))
		for m := range counts {
			msgs = append(msgs, m)
		}
		sort.Slice(msgs, func(a, b int) bool {
			if counts[msgs[a]] != counts[msgs[b]] {
				return counts[msgs[a]] > counts[msgs[b]]
			}
			return msgs[a] < msgs[b]
		})
		fmt.Fprintf(w, "errors (%d failed requests):\n", s.Failed)
		for i, m := range msgs {
			if i == 5 {
				fmt.Fprintf(w, "  … and %d other messages (see the result file's errors)\n", len(msgs)-5)
				break
			}
			fmt.Fprintf(w, "  %5d× %s\n", counts[m], cutText(m, 200))
		}
	}
}

func centerTitle(s string, fill byte) string {
	const width = 50
	if len(s) >= width {
		return s
	}
	left := (width - len(s)) / 2
	return strings.Repeat(string(fill), left) + s + strings.Repeat(string(fill), width-len(s)-left)
}

func rateText(r float64) string {
	if r <= 0 || math.IsInf(r, 1) {
		return "inf"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// pctWord writes a percentile as vLLM names its keys: 99, 99.9.
func pctWord(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) }

// jsonKV is one member of an ordered JSON object.
type jsonKV struct {
	k string
	v any
}

// jsonObject is a JSON object that keeps its members' order.
type jsonObject []jsonKV

func (o jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.k, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// ServeResultJSON is the result file: vLLM's field names and meanings, the
// per-request arrays in request order (the requests sent), and a "ringlm"
// object with what vLLM does not write. Every percentile of s is written
// as p<N>_<metric>_ms.
func ServeResultJSON(in *ServeInfo, s *ServeSummary, recs []ServeRecord) ([]byte, error) {
	var rate any = "inf"
	if in.Rate > 0 && !math.IsInf(in.Rate, 1) {
		rate = in.Rate
	}
	var maxConc any
	if in.Concurrency > 0 {
		maxConc = in.Concurrency
	}
	n := len(recs)
	inputLens, outputLens := make([]int, n), make([]int, n)
	ttfts, e2els, sends := make([]float64, n), make([]float64, n), make([]float64, n)
	itls := make([][]float64, n)
	errs := make([]string, n)
	reported := 0
	for i := range recs {
		r := &recs[i]
		inputLens[i] = r.PromptTokens
		if r.PromptReported {
			reported++
		}
		if r.OK() {
			outputLens[i] = r.OutputTokens
		}
		ttfts[i] = r.TTFT().Seconds()
		e2els[i] = r.Latency().Seconds()
		sends[i] = r.Sent.Seconds()
		gaps := r.ITLs()
		itls[i] = make([]float64, len(gaps))
		for j, g := range gaps {
			itls[i][j] = g.Seconds()
		}
		errs[i] = r.Err
	}
	o := jsonObject{
		{"date", in.Date.Format("20060102-150405")},
		{"backend", in.backend()},
		{"model_id", in.Model},
		{"num_prompts", in.NumPrompts},
		{"request_rate", rate},
		{"burstiness", in.Burstiness},
		{"max_concurrency", maxConc},
		{"duration", s.Duration},
		{"completed", s.Completed},
		{"failed", s.Failed},
		{"total_input_tokens", s.TotalInput},
		{"total_output_tokens", s.TotalOutput},
		{"request_throughput", s.RequestThroughput},
		{"output_throughput", s.OutputThroughput},
		{"total_token_throughput", s.TotalTokenThroughput},
		{"max_output_tokens_per_s", s.MaxOutputTokensPerS},
		{"max_concurrent_requests", s.MaxConcurrentRequests},
		{"input_lens", inputLens},
		{"output_lens", outputLens},
		{"ttfts", ttfts},
		{"itls", itls},
		{"errors", errs},
	}
	for _, m := range []struct {
		name string
		st   *ServeStats
	}{{"ttft", &s.TTFT}, {"tpot", &s.TPOT}, {"itl", &s.ITL}, {"e2el", &s.E2EL}} {
		o = append(o, jsonKV{"mean_" + m.name + "_ms", m.st.Mean}, jsonKV{"median_" + m.name + "_ms", m.st.Median},
			jsonKV{"std_" + m.name + "_ms", m.st.Std})
		for i, p := range s.Percentiles {
			o = append(o, jsonKV{"p" + pctWord(p) + "_" + m.name + "_ms", m.st.Pcts[i]})
		}
	}
	var temp any
	if in.Temperature != nil {
		temp = *in.Temperature
	}
	extra := jsonObject{
		{"url", in.URL},
		{"endpoint", in.Endpoint},
		{"seed", in.Seed},
		{"dataset", in.Dataset},
		{"input_len", in.InputLen},
		{"input_len_counted_by", promptCounter(in)},
		{"prompts_off_input_len", in.PromptsOffTarget},
		{"output_len", in.OutputLen},
		{"ignore_eos", in.IgnoreEOS},
		{"temperature", temp},
		{"interrupted", in.Interrupted},
		{"sent", n},
		{"percentiles", s.Percentiles},
		{"input_lens_from_server", reported},
		// Clear names beside vLLM's max_concurrency (the configured cap)
		// and max_concurrent_requests (its one-second buckets).
		{"concurrency_cap", maxConc},
		{"peak_concurrent_requests_1s_buckets", s.MaxConcurrentRequests},
		{"peak_requests_in_flight", s.MaxInFlight},
		{"send_times", sends},
		{"e2els", e2els},
	}
	o = append(o, jsonKV{"ringlm", extra})
	return o.lines()
}

// promptCounter names what counted the prompts' tokens in the result
// file: the tokenizer, "estimate", or "" for a dataset.
func promptCounter(in *ServeInfo) string {
	switch {
	case in.Dataset != "":
		return ""
	case in.PromptTokenizer == "":
		return "estimate"
	}
	return in.PromptTokenizer
}

// lines writes the object with one member a line and each value compact
// (per-request arrays stay on one line).
func (o jsonObject) lines() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, m := range o {
		k, _ := json.Marshal(m.k)
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.k, err)
		}
		b.WriteString("  ")
		b.Write(k)
		b.WriteString(": ")
		b.Write(v)
		if i < len(o)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}")
	return b.Bytes(), nil
}

// WithDefaultPercentiles is asked with 90 and 99 added, sorted and
// without repeats: the percentiles a result file always has.
func WithDefaultPercentiles(asked []float64) []float64 {
	out := append([]float64{90, 99}, asked...)
	sort.Float64s(out)
	return slices.Compact(out)
}

// pctAt is st's value at percentile p, which must be one of computed.
func pctAt(st *ServeStats, computed []float64, p float64) float64 {
	return st.Pcts[slices.Index(computed, p)]
}
