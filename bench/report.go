package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"ringlm/internal/cli"
)

// `ringlm bench report`: one self-contained HTML page (inline CSS and
// SVG, no script) comparing serving benchmark results side by side. It
// reads `ringlm bench serve` result files and `vllm bench serve` ones
// (the same field names); every field may be missing.

// ReportRun is one benchmark result. Numbers the file does not have are
// NaN; a request rate of "inf" is +Inf.
type ReportRun struct {
	File   string // the file it came from
	Index  int    // its position in the file (files may hold several results)
	InFile int    // how many results the file holds
	Label  string
	Order  int // position among all runs: picks the colour
	Fields map[string]json.RawMessage

	Backend, Model, Date string

	NumPrompts, RequestRate, Burstiness, MaxConcurrency, Duration float64
	Completed, Failed, TotalInput, TotalOutput                    float64
	RequestThroughput, OutputThroughput, TotalThroughput          float64

	// Per successful request, in milliseconds: from the per-request
	// arrays (ttfts, itls, output_lens, errors; e2els when present, else
	// E2EL = TTFT + the sum of the request's ITLs).
	TTFT, TPOT, E2EL []float64
	ITL              []float64 // every inter-token gap of every successful request
	// E2ELRebuilt: E2EL came from TTFT + ΣITL (the file had no e2els).
	E2ELRebuilt bool

	stats map[string]float64 // summary statistics: from the file, else computed
}

// Metrics the report shows, as named in the result files' keys
// (mean_ttft_ms, p99_itl_ms, …).
var reportMetrics = []string{"ttft", "tpot", "itl", "e2el"}

var reportMetricNames = map[string]string{"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}

// Stat is a summary statistic ("mean", "median", "std", "p90", "p99", …)
// of a metric in ms: the file's value, else computed from the
// per-request arrays (percentiles interpolated linearly between closest
// ranks, as numpy does), else NaN.
func (r *ReportRun) Stat(stat, metric string) float64 {
	key := stat + "_" + metric + "_ms"
	if v, ok := r.stats[key]; ok {
		return v
	}
	v := math.NaN()
	if xs := r.series(metric); len(xs) > 0 {
		switch stat {
		case "mean":
			v = rptMean(xs)
		case "median":
			v = rptPercentile(xs, 50)
		case "std":
			v = rptStd(xs)
		default:
			if p, err := strconv.ParseFloat(strings.TrimPrefix(stat, "p"), 64); err == nil && strings.HasPrefix(stat, "p") {
				v = rptPercentile(xs, p)
			}
		}
	}
	return v
}

func (r *ReportRun) series(metric string) []float64 {
	switch metric {
	case "ttft":
		return r.TTFT
	case "tpot":
		return r.TPOT
	case "itl":
		return r.ITL
	case "e2el":
		return r.E2EL
	}
	return nil
}

// rptPercentile is the p-th percentile (0–100) of xs with linear
// interpolation between the closest ranks (numpy's default); NaN for no
// values. xs is not modified.
func rptPercentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(rank))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	if lo < 0 {
		return s[0]
	}
	f := rank - float64(lo)
	return s[lo] + f*(s[lo+1]-s[lo])
}

func rptMean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// rptStd is the population standard deviation (numpy's default).
func rptStd(xs []float64) float64 {
	m := rptMean(xs)
	var t float64
	for _, x := range xs {
		t += (x - m) * (x - m)
	}
	return math.Sqrt(t / float64(len(xs)))
}

// ---- reading result files ----

// LoadReportRuns reads a result file: one JSON object (a `bench serve`
// result), several (JSON Lines, as appended results are), or an array of
// them. Python's NaN and Infinity literals are accepted. Errors name the
// file.
func LoadReportRuns(path string) ([]ReportRun, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	runs, err := ParseReportRuns(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range runs {
		runs[i].File, runs[i].InFile = path, len(runs)
	}
	return runs, nil
}

// ParseReportRuns decodes the results in data (see LoadReportRuns).
func ParseReportRuns(data []byte) ([]ReportRun, error) {
	dec := json.NewDecoder(bytes.NewReader(rptPythonJSON(data)))
	dec.UseNumber()
	var objs []map[string]json.RawMessage
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
		switch t := bytes.TrimSpace(v); {
		case len(t) > 0 && t[0] == '{':
			var m map[string]json.RawMessage
			if err := json.Unmarshal(t, &m); err != nil {
				return nil, fmt.Errorf("not valid JSON: %w", err)
			}
			objs = append(objs, m)
		case len(t) > 0 && t[0] == '[':
			var ms []map[string]json.RawMessage
			if err := json.Unmarshal(t, &ms); err != nil {
				return nil, fmt.Errorf("want benchmark result objects, found an array of something else: %w", err)
			}
			objs = append(objs, ms...)
		default:
			return nil, fmt.Errorf("want a JSON object with benchmark results, found %.20s", t)
		}
	}
	if len(objs) == 0 {
		return nil, errors.New("no benchmark result in the file (it is empty)")
	}
	runs := make([]ReportRun, len(objs))
	for i, m := range objs {
		if m == nil {
			return nil, fmt.Errorf("result %d is null", i+1)
		}
		r, err := rptRunFromFields(m)
		if err != nil {
			if len(objs) > 1 {
				err = fmt.Errorf("result %d: %w", i+1, err)
			}
			return nil, err
		}
		r.Index = i
		runs[i] = r
	}
	return runs, nil
}

// rptPythonJSON rewrites the NaN, Infinity and -Infinity literals that
// Python's json module writes (an empty mean is NaN) outside strings:
// NaN becomes null, ±Infinity the strings "inf" and "-inf".
func rptPythonJSON(data []byte) []byte {
	if !bytes.Contains(data, []byte("NaN")) && !bytes.Contains(data, []byte("Infinity")) {
		return data
	}
	out := make([]byte, 0, len(data)+16)
	inStr := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inStr {
			out = append(out, c)
			switch c {
			case '\\':
				if i+1 < len(data) {
					i++
					out = append(out, data[i])
				}
			case '"':
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
			out = append(out, c)
		case bytes.HasPrefix(data[i:], []byte("NaN")):
			out = append(out, "null"...)
			i += len("NaN") - 1
		case bytes.HasPrefix(data[i:], []byte("-Infinity")):
			out = append(out, `"-inf"`...)
			i += len("-Infinity") - 1
		case bytes.HasPrefix(data[i:], []byte("Infinity")):
			out = append(out, `"inf"`...)
			i += len("Infinity") - 1
		default:
			out = append(out, c)
		}
	}
	return out
}

// rptFieldError says which field has an unexpected type.
func rptFieldError(key, want string, raw json.RawMessage) error {
	return fmt.Errorf("field %q: want %s, found %.40s", key, want, bytes.TrimSpace(raw))
}

// rptParseNum reads a number: a JSON number, a numeric string, "inf" or
// "-inf"; null and "NaN" are NaN.
func rptParseNum(raw json.RawMessage) (float64, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return math.NaN(), true
	}
	var s string
	if t[0] == '"' {
		if json.Unmarshal(t, &s) != nil {
			return 0, false
		}
	} else {
		s = string(t)
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "inf", "+inf", "infinity", "+infinity":
		return math.Inf(1), true
	case "-inf", "-infinity":
		return math.Inf(-1), true
	case "nan", "", "none", "null":
		return math.NaN(), true
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return v, err == nil
}

func rptNumField(m map[string]json.RawMessage, key string) (float64, error) {
	raw, ok := m[key]
	if !ok {
		return math.NaN(), nil
	}
	v, ok := rptParseNum(raw)
	if !ok {
		return 0, rptFieldError(key, "a number", raw)
	}
	return v, nil
}

func rptStrField(m map[string]json.RawMessage, key string) string {
	raw, ok := m[key]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if t := string(bytes.TrimSpace(raw)); t != "null" {
		return t
	}
	return ""
}

func rptNumsField(m map[string]json.RawMessage, key string) ([]float64, bool, error) {
	raw, ok := m[key]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil, false, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, false, rptFieldError(key, "an array of numbers", raw)
	}
	out := make([]float64, len(elems))
	for i, e := range elems {
		v, ok := rptParseNum(e)
		if !ok {
			return nil, false, rptFieldError(fmt.Sprintf("%s[%d]", key, i), "a number", e)
		}
		out[i] = v
	}
	return out, true, nil
}

func rptNumListsField(m map[string]json.RawMessage, key string) ([][]float64, bool, error) {
	raw, ok := m[key]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil, false, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, false, rptFieldError(key, "an array of arrays of numbers", raw)
	}
	out := make([][]float64, len(elems))
	for i, e := range elems {
		sub, _, err := rptNumsField(map[string]json.RawMessage{fmt.Sprintf("%s[%d]", key, i): e}, fmt.Sprintf("%s[%d]", key, i))
		if err != nil {
			return nil, false, err
		}
		out[i] = sub
	}
	return out, true, nil
}

// rptErrorsField reads the per-request error strings ("" = success).
func rptErrorsField(m map[string]json.RawMessage) ([]string, bool, error) {
	raw, ok := m["errors"]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil, false, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, false, rptFieldError("errors", "an array of strings", raw)
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		var s string
		if json.Unmarshal(e, &s) == nil {
			out[i] = s
		} else if t := string(bytes.TrimSpace(e)); t != "null" {
			out[i] = t
		}
	}
	return out, true, nil
}

// rptRunFromFields reads a result object. Known fields of the wrong type
// are errors; missing ones stay NaN.
func rptRunFromFields(m map[string]json.RawMessage) (ReportRun, error) {
	r := ReportRun{Fields: m, stats: map[string]float64{}}
	r.Backend, r.Model, r.Date = rptStrField(m, "backend"), rptStrField(m, "model_id"), rptStrField(m, "date")
	if r.Model == "" {
		r.Model = rptStrField(m, "model")
	}
	nums := []struct {
		key string
		dst *float64
	}{
		{"num_prompts", &r.NumPrompts}, {"request_rate", &r.RequestRate}, {"burstiness", &r.Burstiness},
		{"max_concurrency", &r.MaxConcurrency}, {"duration", &r.Duration}, {"completed", &r.Completed},
		{"failed", &r.Failed}, {"total_input_tokens", &r.TotalInput}, {"total_output_tokens", &r.TotalOutput},
		{"request_throughput", &r.RequestThroughput}, {"output_throughput", &r.OutputThroughput},
		{"total_token_throughput", &r.TotalThroughput},
	}
	for _, n := range nums {
		v, err := rptNumField(m, n.key)
		if err != nil {
			return r, err
		}
		*n.dst = v
	}
	for key, raw := range m {
		if !strings.HasSuffix(key, "_ms") {
			continue
		}
		v, ok := rptParseNum(raw)
		if !ok {
			return r, rptFieldError(key, "a number", raw)
		}
		if !math.IsNaN(v) {
			r.stats[key] = v
		}
	}
	if err := r.perRequest(m); err != nil {
		return r, err
	}
	// Counts and throughputs the file left out, from what it has.
	ok := float64(len(r.TTFT))
	if math.IsNaN(r.Completed) && len(r.TTFT) > 0 {
		r.Completed = ok
	}
	if math.IsNaN(r.Failed) {
		if errs, has, _ := rptErrorsField(m); has {
			n := 0
			for _, e := range errs {
				if e != "" {
					n++
				}
			}
			r.Failed = float64(n)
		} else if !math.IsNaN(r.NumPrompts) && !math.IsNaN(r.Completed) {
			r.Failed = r.NumPrompts - r.Completed
		}
	}
	if d := r.Duration; d > 0 {
		if math.IsNaN(r.RequestThroughput) && !math.IsNaN(r.Completed) {
			r.RequestThroughput = r.Completed / d
		}
		if math.IsNaN(r.OutputThroughput) && !math.IsNaN(r.TotalOutput) {
			r.OutputThroughput = r.TotalOutput / d
		}
		if math.IsNaN(r.TotalThroughput) && !math.IsNaN(r.TotalOutput) && !math.IsNaN(r.TotalInput) {
			r.TotalThroughput = (r.TotalInput + r.TotalOutput) / d
		}
	}
	return r, nil
}

// perRequest fills the per-request series (ms) from the arrays. A request
// failed when its error string is not empty or it has no first token
// (vllm leaves a failed request's ttft at 0).
func (r *ReportRun) perRequest(m map[string]json.RawMessage) error {
	ttfts, hasTTFT, err := rptNumsField(m, "ttfts")
	if err != nil {
		return err
	}
	itls, hasITL, err := rptNumListsField(m, "itls")
	if err != nil {
		return err
	}
	outLens, _, err := rptNumsField(m, "output_lens")
	if err != nil {
		return err
	}
	e2els, hasE2EL, err := rptNumsField(m, "e2els")
	if err != nil {
		return err
	}
	if !hasE2EL {
		// `ringlm bench serve` keeps them in its own object.
		var extra map[string]json.RawMessage
		if raw, ok := m["ringlm"]; ok && json.Unmarshal(raw, &extra) == nil {
			if e2els, hasE2EL, err = rptNumsField(extra, "e2els"); err != nil {
				return fmt.Errorf("in the ringlm object: %w", err)
			}
		}
	}
	errs, _, err := rptErrorsField(m)
	if err != nil {
		return err
	}
	if _, _, err := rptNumsField(m, "input_lens"); err != nil {
		return err
	}
	n := max(len(ttfts), len(itls), len(e2els))
	r.E2ELRebuilt = !hasE2EL && hasTTFT && hasITL
	for i := range n {
		if i < len(errs) && errs[i] != "" {
			continue
		}
		ttft := math.NaN()
		if i < len(ttfts) {
			ttft = ttfts[i] * 1e3
		}
		if hasTTFT && !(ttft > 0) {
			continue // no first token: failed
		}
		var gaps []float64
		if i < len(itls) {
			gaps = itls[i]
		}
		sum := 0.0
		for _, g := range gaps {
			if svgFinite(g) {
				r.ITL = append(r.ITL, g*1e3)
				sum += g * 1e3
			}
		}
		e2el := math.NaN()
		switch {
		case i < len(e2els):
			e2el = e2els[i] * 1e3
		case hasTTFT && hasITL:
			e2el = ttft + sum
		}
		if svgFinite(ttft) {
			r.TTFT = append(r.TTFT, ttft)
		}
		if svgFinite(e2el) {
			r.E2EL = append(r.E2EL, e2el)
		}
		// TPOT as vllm computes it: (E2EL − TTFT) / (output tokens − 1).
		decode := math.NaN()
		switch {
		case i < len(e2els) && svgFinite(ttft):
			decode = e2el - ttft
		case hasITL:
			decode = sum
		}
		out := math.NaN()
		switch {
		case i < len(outLens) && svgFinite(outLens[i]):
			out = outLens[i]
		case hasITL:
			out = float64(len(gaps) + 1)
		}
		if out > 1 && svgFinite(decode) {
			r.TPOT = append(r.TPOT, decode/(out-1))
		}
	}
	return nil
}

// HasRate and HasConcurrency say whether the run was limited that way.
func (r *ReportRun) HasRate() bool { return !math.IsNaN(r.RequestRate) && r.RequestRate > 0 }

func (r *ReportRun) HasConcurrency() bool { return svgFinite(r.MaxConcurrency) && r.MaxConcurrency > 0 }

// group is the series a run belongs to in the load plots: its backend
// and model, or with by "dir" the directory of its file.
func (r *ReportRun) group(by string) string {
	if by == "dir" {
		return filepath.Base(filepath.Dir(r.File))
	}
	switch {
	case r.Backend != "" && r.Model != "":
		return r.Backend + " · " + r.Model
	case r.Backend != "":
		return r.Backend
	case r.Model != "":
		return r.Model
	}
	return "runs"
}

// ---- the page ----

// ReportOptions say how the page is drawn.
type ReportOptions struct {
	Title     string
	LogX      bool      // latency CDFs on a log x axis
	Generated time.Time // shown in the page (zero: not shown)
	// SeriesBy groups runs into the load plots' series: "model" (the
	// default: backend and model_id) or "dir" (the result file's
	// directory, e.g. results/vllm and results/ringlm).
	SeriesBy string
	// CDFPoints caps the points of one CDF line: larger series are drawn
	// through that many evenly spaced ranks (default 1000).
	CDFPoints int
}

// CDF returns the empirical distribution function of xs as a step line:
// (x₁, 0), (x₁, 1/n), (x₂, 1/n), (x₂, 2/n), … (xₙ, 1), sorted. With more
// than maxPoints values it steps through maxPoints evenly spaced ranks
// (each point still exactly on the function). Non-finite values are
// dropped.
func CDF(xs []float64, maxPoints int) (x, y []float64) {
	s := make([]float64, 0, len(xs))
	for _, v := range xs {
		if svgFinite(v) {
			s = append(s, v)
		}
	}
	if len(s) == 0 {
		return nil, nil
	}
	slices.Sort(s)
	n := len(s)
	if maxPoints <= 0 {
		maxPoints = 1000
	}
	levels := min(n, maxPoints)
	x, y = append(x, s[0]), append(y, 0.0)
	prev := 0.0
	for k := 1; k <= levels; k++ {
		idx := (k*n+levels-1)/levels - 1 // ceil(k·n/levels) − 1
		// Ties: the function jumps at the last of equal values.
		for idx+1 < n && s[idx+1] == s[idx] {
			idx++
		}
		f := float64(idx+1) / float64(n)
		if f == prev {
			continue
		}
		x, y = append(x, s[idx], s[idx]), append(y, prev, f)
		prev = f
	}
	// The first vertical segment starts at (x₁, 0): drop the duplicate.
	if len(x) > 2 && x[1] == x[0] && y[1] == y[0] {
		x, y = x[1:], y[1:]
	}
	return x, y
}

// WriteReport renders the runs as one HTML page.
func WriteReport(w io.Writer, runs []ReportRun, o ReportOptions) error {
	if o.Title == "" {
		o.Title = "ringlm benchmark report"
	}
	for i := range runs {
		runs[i].Order = i
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n", svgEsc(o.Title), reportCSS)
	fmt.Fprintf(&b, "<h1>%s</h1>\n<p class=\"meta\">%d run", svgEsc(o.Title), len(runs))
	if len(runs) != 1 {
		b.WriteString("s")
	}
	files := map[string]bool{}
	for _, r := range runs {
		files[r.File] = true
	}
	fmt.Fprintf(&b, " from %d file", len(files))
	if len(files) != 1 {
		b.WriteString("s")
	}
	if !o.Generated.IsZero() {
		fmt.Fprintf(&b, ", generated %s", svgEsc(o.Generated.Format("2006-01-02 15:04:05 MST")))
	}
	b.WriteString(".</p>\n")

	b.WriteString("<h2>Summary</h2>\n")
	rptWriteSummary(&b, runs)

	b.WriteString("<h2>Latency distributions</h2>\n<div class=\"plots\">\n")
	for _, m := range reportMetrics {
		rptWriteCDF(&b, runs, m, o)
	}
	b.WriteString("</div>\n")

	b.WriteString("<h2>Throughput and load</h2>\n<div class=\"plots\">\n")
	rptWriteConcurrencyPlot(&b, runs, o.SeriesBy)
	rptWriteRatePlot(&b, runs, o.SeriesBy)
	b.WriteString("</div>\n")

	b.WriteString("<h2>Runs</h2>\n")
	rptWriteDetails(&b, runs)
	b.WriteString(reportNotes)
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

const reportCSS = `
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; margin: 24px 32px; color: #1d1d1f; background: #fafafa; }
h1 { font-size: 24px; margin: 0 0 4px 0; }
h2 { font-size: 18px; margin: 28px 0 10px 0; border-bottom: 1px solid #d0d0d0; padding-bottom: 4px; }
p.meta { color: #555555; margin: 0 0 8px 0; font-size: 13px; }
.tablewrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12px; background: #ffffff; }
th, td { padding: 3px 6px; border: 1px solid #dddddd; white-space: nowrap; }
td.wrap { white-space: normal; max-width: 220px; overflow-wrap: anywhere; }
th { background: #eef1f5; font-weight: 600; }
th.group { text-align: center; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.label { font-weight: 600; }
tr:nth-child(even) td { background: #f7f9fb; }
span.swatch { display: inline-block; width: 14px; height: 4px; margin: 0 6px 3px 0; vertical-align: middle; border-radius: 1px; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; }
.plotbox { background: #ffffff; border: 1px solid #dddddd; padding: 4px; }
svg.plot { display: block; font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
.skipped { width: 640px; min-height: 60px; background: #ffffff; border: 1px dashed #bbbbbb; padding: 12px; color: #555555; font-size: 13px; box-sizing: border-box; }
.skipped b { color: #1d1d1f; }
.bad { color: #b00020; font-weight: 600; }
ul.notes { font-size: 13px; color: #444444; max-width: 1100px; }
`

const reportNotes = `<h2>Notes</h2>
<ul class="notes">
<li>Summary statistics are the result file's own (mean_ttft_ms, p99_itl_ms, …) when it has them; otherwise they are computed from the per-request arrays (percentiles interpolated linearly between closest ranks, as numpy does). A dash: neither is there.</li>
<li>TTFT: time to first token. TPOT: time per output token after the first, per request. ITL: every gap between consecutive token chunks of every request. E2EL: end-to-end latency of a request; rebuilt as TTFT + the sum of its ITLs when the file has no per-request latencies (vllm's files do not).</li>
<li>Distribution plots use successful requests only (an empty error and a first token). Rate "inf" sends every request at once; it is drawn to the right of the finite rates.</li>
</ul>
`

func rptNum(v float64, dec int) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// rptCount prints a count (no decimals when whole).
func rptCount(v float64) string {
	if svgFinite(v) && v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return rptNum(v, 2)
}

// rptMS prints a latency in ms with 3 significant decimals at most.
func rptMS(v float64) string {
	a := math.Abs(v)
	switch {
	case !svgFinite(v):
		return rptNum(v, 0)
	case a >= 1000:
		return rptNum(v, 0)
	case a >= 100:
		return rptNum(v, 1)
	}
	return rptNum(v, 2)
}

func rptSwatch(i int) string {
	c, _ := SeriesStyle(i)
	return `<span class="swatch" style="background:` + c + `"></span>`
}

func rptWriteSummary(b *strings.Builder, runs []ReportRun) {
	b.WriteString("<div class=\"tablewrap\"><table class=\"summary\">\n<thead>\n<tr><th rowspan=\"2\">run</th><th rowspan=\"2\">backend</th><th rowspan=\"2\">model</th>")
	b.WriteString("<th rowspan=\"2\">rate<br/>req/s</th><th rowspan=\"2\">max<br/>conc.</th><th rowspan=\"2\">completed</th><th rowspan=\"2\">failed</th>")
	b.WriteString("<th rowspan=\"2\">req/s</th><th rowspan=\"2\">output<br/>tok/s</th>")
	for _, m := range reportMetrics {
		fmt.Fprintf(b, "<th colspan=\"3\" class=\"group\">%s ms</th>", reportMetricNames[m])
	}
	b.WriteString("</tr>\n<tr>")
	for range reportMetrics {
		b.WriteString("<th>mean</th><th>median</th><th>p99</th>")
	}
	b.WriteString("</tr>\n</thead>\n<tbody>\n")
	for i, r := range runs {
		fmt.Fprintf(b, "<tr><td class=\"label\">%s%s</td><td>%s</td><td class=\"wrap\">%s</td>", rptSwatch(i), svgEsc(r.Label), svgEsc(r.Backend), svgEsc(r.Model))
		rate := "–"
		if !math.IsNaN(r.RequestRate) {
			rate = rptNum(r.RequestRate, 2)
			if svgFinite(r.RequestRate) && r.RequestRate == math.Trunc(r.RequestRate) {
				rate = rptNum(r.RequestRate, 0)
			}
		}
		conc := "–"
		if r.HasConcurrency() {
			conc = rptCount(r.MaxConcurrency)
		}
		failed := rptCount(r.Failed)
		if r.Failed > 0 {
			failed = `<span class="bad">` + failed + `</span>`
		}
		fmt.Fprintf(b, "<td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>", rate, conc, rptCount(r.Completed), failed)
		fmt.Fprintf(b, "<td class=\"num\">%s</td><td class=\"num\">%s</td>", rptNum(r.RequestThroughput, 2), rptNum(r.OutputThroughput, 1))
		for _, m := range reportMetrics {
			for _, s := range []string{"mean", "median", "p99"} {
				fmt.Fprintf(b, "<td class=\"num\">%s</td>", rptMS(r.Stat(s, m)))
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table></div>\n")
}

func rptWriteDetails(b *strings.Builder, runs []ReportRun) {
	b.WriteString("<div class=\"tablewrap\"><table class=\"details\">\n<thead><tr><th>run</th><th>file</th><th>date</th><th>prompts</th><th>burstiness</th><th>duration s</th>")
	b.WriteString("<th>input tokens</th><th>output tokens</th><th>total tok/s</th><th>TTFT / ITL samples</th></tr></thead>\n<tbody>\n")
	for i, r := range runs {
		file := r.File
		if r.InFile > 1 {
			file += fmt.Sprintf(" (result %d)", r.Index+1)
		}
		fmt.Fprintf(b, "<tr><td class=\"label\">%s%s</td><td>%s</td><td>%s</td>", rptSwatch(i), svgEsc(r.Label), svgEsc(file), svgEsc(r.Date))
		fmt.Fprintf(b, "<td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>", rptCount(r.NumPrompts), rptNum(r.Burstiness, 2), rptNum(r.Duration, 2))
		fmt.Fprintf(b, "<td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>", rptCount(r.TotalInput), rptCount(r.TotalOutput), rptNum(r.TotalThroughput, 1))
		fmt.Fprintf(b, "<td class=\"num\">%d / %d</td></tr>\n", len(r.TTFT), len(r.ITL))
	}
	b.WriteString("</tbody>\n</table></div>\n")
}

func rptSkipped(b *strings.Builder, title, why string) {
	fmt.Fprintf(b, "<div class=\"skipped\"><b>%s</b>: not drawn. %s</div>\n", svgEsc(title), svgEsc(why))
}

func rptPlotBox(b *strings.Builder, p *Plot) {
	b.WriteString("<div class=\"plotbox\">\n")
	b.WriteString(p.SVG())
	b.WriteString("</div>\n")
}

// rptCDFPlot builds the CDF plot of one metric (nil: no run has values).
func rptCDFPlot(runs []ReportRun, metric string, o ReportOptions) *Plot {
	name := reportMetricNames[metric]
	p := &Plot{ID: "cdf-" + metric, Title: name + " distribution", X: PlotAxis{Label: name + " (ms)", Log: o.LogX},
		Y: PlotAxis{Label: "fraction of requests", Min: 0, Max: 1}}
	if metric == "itl" {
		p.Y.Label = "fraction of token gaps"
	}
	var all []float64
	for _, r := range runs {
		xs := r.series(metric)
		if len(xs) == 0 {
			continue
		}
		x, y := CDF(xs, o.CDFPoints)
		c, d := SeriesStyle(r.Order)
		p.Series = append(p.Series, PlotSeries{Name: r.Label, X: x, Y: y, Color: c, Dash: d})
		all = append(all, x...)
	}
	if len(p.Series) == 0 {
		return nil
	}
	p.X.AutoAxis(all, true)
	return p
}

func rptWriteCDF(b *strings.Builder, runs []ReportRun, metric string, o ReportOptions) {
	p := rptCDFPlot(runs, metric, o)
	if p == nil {
		rptSkipped(b, reportMetricNames[metric]+" distribution", "No run has per-request "+reportMetricNames[metric]+" values (ttfts, itls arrays).")
		return
	}
	rptPlotBox(b, p)
}

// rptGroupRuns splits runs by backend and model, in order of first
// appearance.
func rptGroupRuns(runs []ReportRun, by string, keep func(*ReportRun) bool) (names []string, groups map[string][]*ReportRun) {
	groups = map[string][]*ReportRun{}
	for i := range runs {
		r := &runs[i]
		if !keep(r) {
			continue
		}
		g := r.group(by)
		if _, ok := groups[g]; !ok {
			names = append(names, g)
		}
		groups[g] = append(groups[g], r)
	}
	return names, groups
}

// rptConcurrencyPlot: output tok/s against max_concurrency, a series per
// backend and model (nil: no run has both).
func rptConcurrencyPlot(runs []ReportRun, by string) *Plot {
	names, groups := rptGroupRuns(runs, by, func(r *ReportRun) bool { return r.HasConcurrency() && svgFinite(r.OutputThroughput) })
	if len(names) == 0 {
		return nil
	}
	p := &Plot{ID: "conc", Title: "Output throughput vs concurrency", X: PlotAxis{Label: "max concurrency (requests)"},
		Y: PlotAxis{Label: "output tokens/s"}}
	var xs, ys []float64
	for gi, g := range names {
		rs := groups[g]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].MaxConcurrency < rs[j].MaxConcurrency })
		s := PlotSeries{Name: g, Markers: true}
		s.Color, s.Dash = SeriesStyle(gi)
		for _, r := range rs {
			s.X, s.Y = append(s.X, r.MaxConcurrency), append(s.Y, r.OutputThroughput)
		}
		xs, ys = append(xs, s.X...), append(ys, s.Y...)
		p.Series = append(p.Series, s)
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	distinct := slices.Compact(slices.Sorted(slices.Values(xs)))
	if lo > 0 && hi/lo >= 8 {
		// Concurrencies are usually powers of two: a log axis with a tick
		// at every one measured.
		p.X.Log = true
		p.X.Min, p.X.Max = lo/math.Pow(hi/lo, 0.05), hi*math.Pow(hi/lo, 0.05)
		if len(distinct) <= 12 {
			for _, v := range distinct {
				p.X.Ticks = append(p.X.Ticks, PlotTick{V: v, Label: svgFmtTick(v, 1)})
			}
		} else {
			p.X.Ticks = svgLogTicks(p.X.Min, p.X.Max)
		}
	} else {
		p.X.AutoAxis(xs, true)
	}
	p.Y.AutoAxis(ys, true)
	return p
}

func rptWriteConcurrencyPlot(b *strings.Builder, runs []ReportRun, by string) {
	if p := rptConcurrencyPlot(runs, by); p != nil {
		rptPlotBox(b, p)
		return
	}
	rptSkipped(b, "Output throughput vs concurrency", "No run has both max_concurrency and output_throughput (runs without a concurrency limit have max_concurrency null).")
}

// rptRatePlot: median and p99 TTFT against request_rate, two series per
// backend and model and concurrency limit (nil: no run has a rate and a
// TTFT). Series with a single rate are left out when others have
// several (runs at "inf" with different concurrencies are the
// throughput plot's). "inf" sits one tick step right of the largest
// finite rate.
func rptRatePlot(runs []ReportRun, by string) *Plot {
	var names []string
	groups := map[string][]*ReportRun{}
	for i := range runs {
		r := &runs[i]
		if !r.HasRate() || !svgFinite(r.Stat("median", "ttft")) || !svgFinite(r.Stat("p99", "ttft")) {
			continue
		}
		name := r.group(by)
		if r.HasConcurrency() {
			name += fmt.Sprintf(" (conc %s)", rptCount(r.MaxConcurrency))
		}
		if _, ok := groups[name]; !ok {
			names = append(names, name)
		}
		groups[name] = append(groups[name], r)
	}
	if len(names) == 0 {
		return nil
	}
	distinctRates := func(rs []*ReportRun) int {
		seen := map[float64]bool{}
		for _, r := range rs {
			seen[r.RequestRate] = true
		}
		return len(seen)
	}
	swept := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return distinctRates(groups[n]) < 2 })
	left := 0
	if len(swept) > 0 {
		for _, n := range names {
			if !slices.Contains(swept, n) {
				left += len(groups[n])
			}
		}
		names = swept
	}
	p := &Plot{ID: "rate", Title: "TTFT vs request rate", X: PlotAxis{Label: "request rate (req/s)"},
		Y: PlotAxis{Label: "TTFT (ms)"}}
	var finiteRates, ys []float64
	hasInf := false
	for _, g := range names {
		for _, r := range groups[g] {
			if math.IsInf(r.RequestRate, 1) {
				hasInf = true
			} else {
				finiteRates = append(finiteRates, r.RequestRate)
			}
			ys = append(ys, r.Stat("median", "ttft"), r.Stat("p99", "ttft"))
		}
	}
	infX := math.NaN()
	if len(finiteRates) > 0 {
		lo, hi, step := svgNiceRange(0, slices.Max(finiteRates), 5)
		p.X.Min, p.X.Max = lo, hi
		p.X.Ticks = (&PlotAxis{Min: lo, Max: hi}).ticks()
		if hasInf {
			infX = hi + step
			p.X.Max = hi + 1.5*step
		}
	} else {
		infX, p.X.Min, p.X.Max = 1, 0, 2
	}
	var notes []string
	if hasInf {
		p.X.Ticks = append(p.X.Ticks, PlotTick{V: infX, Label: "inf"})
		notes = append(notes, "inf: every request sent at once")
	}
	if left > 0 {
		notes = append(notes, fmt.Sprintf("%d runs not shown: one rate per concurrency limit (see the throughput plot)", left))
	}
	p.Note = strings.Join(notes, "; ")
	xOf := func(r *ReportRun) float64 {
		if math.IsInf(r.RequestRate, 1) {
			return infX
		}
		return r.RequestRate
	}
	for si, g := range names {
		rs := groups[g]
		sort.SliceStable(rs, func(i, j int) bool { return xOf(rs[i]) < xOf(rs[j]) })
		c, _ := SeriesStyle(si)
		med := PlotSeries{Name: g + " median", Color: c, Markers: true}
		p99 := PlotSeries{Name: g + " p99", Color: c, Dash: "7 4", Markers: true}
		for _, r := range rs {
			med.X, med.Y = append(med.X, xOf(r)), append(med.Y, r.Stat("median", "ttft"))
			p99.X, p99.Y = append(p99.X, xOf(r)), append(p99.Y, r.Stat("p99", "ttft"))
		}
		p.Series = append(p.Series, med, p99)
	}
	// Tail latencies can be orders of magnitude above the median: a log
	// axis then keeps both readable.
	pos := slices.DeleteFunc(slices.Clone(ys), func(v float64) bool { return !(v > 0) })
	if len(pos) > 0 && slices.Max(pos)/slices.Min(pos) >= 50 {
		p.Y.Log = true
	}
	p.Y.AutoAxis(ys, true)
	return p
}

func rptWriteRatePlot(b *strings.Builder, runs []ReportRun, by string) {
	if p := rptRatePlot(runs, by); p != nil {
		rptPlotBox(b, p)
		return
	}
	rptSkipped(b, "TTFT vs request rate", "No run has a request_rate together with median and p99 TTFT.")
}

// ---- command line ----

type rptLabels []string

func (l *rptLabels) String() string { return strings.Join(*l, ",") }
func (l *rptLabels) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		*l = append(*l, strings.TrimSpace(s))
	}
	return nil
}

// ReportMain is `ringlm bench report FILE... [-o report.html]`: it
// returns the exit status (0, 1 for an error, 2 for bad usage).
func ReportMain(args []string, stdout, stderr io.Writer) int {
	fs := cli.Quiet(flag.NewFlagSet("bench report", flag.ContinueOnError))
	out := fs.String("o", "report.html", "output HTML file (- for stdout)")
	title := fs.String("title", "", "page title (default: ringlm benchmark report)")
	logX := fs.Bool("log-x", false, "draw the latency distributions on a log x axis")
	seriesBy := fs.String("series", "model", "what a line of the throughput and rate plots is: model (backend and model_id) or dir (the result file's directory)")
	var labels rptLabels
	fs.Var(&labels, "label", "labels of the runs in order, comma-separated or repeated (default: the file names)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: ringlm bench report RESULT.json... [-o report.html] [--label A,B,...] [--title T] [--log-x] [--series model|dir]")
		fmt.Fprintln(w, "\nOne self-contained HTML page comparing `ringlm bench serve` or `vllm bench serve` results.\n\nflags:")
		fs.PrintDefaults()
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "ringlm bench report: "+format+"\n", a...)
		return code
	}
	files, err := cli.Parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		cli.PrintUsage(fs, stdout)
		return 0
	}
	if err != nil {
		return fail(2, "%v", err)
	}
	var paths []string
	for _, f := range files {
		if _, err := os.Stat(f); err != nil && strings.ContainsAny(f, "*?[") {
			m, gerr := filepath.Glob(f)
			if gerr != nil {
				return fail(2, "bad pattern %q: %v", f, gerr)
			}
			if len(m) == 0 {
				return fail(1, "%s: no file matches", f)
			}
			paths = append(paths, m...)
			continue
		}
		paths = append(paths, f)
	}
	if len(paths) == 0 {
		return fail(2, "no result files given (ringlm bench report results/*.json -o report.html)")
	}
	var runs []ReportRun
	for _, p := range paths {
		rs, err := LoadReportRuns(p)
		if err != nil {
			return fail(1, "%v", err)
		}
		runs = append(runs, rs...)
	}
	if *seriesBy != "model" && *seriesBy != "dir" {
		return fail(2, "--series must be model or dir, got %q", *seriesBy)
	}
	if len(labels) > len(runs) {
		return fail(2, "%d labels for %d runs", len(labels), len(runs))
	}
	LabelRuns(runs, labels)
	var w io.Writer = stdout
	var f *os.File
	if *out != "-" {
		if f, err = os.Create(*out); err != nil {
			return fail(1, "%v", err)
		}
		w = f
	}
	err = WriteReport(w, runs, ReportOptions{Title: *title, LogX: *logX, SeriesBy: *seriesBy, Generated: time.Now()})
	if f != nil {
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		return fail(1, "%v", err)
	}
	if *out != "-" {
		fmt.Fprintf(stdout, "wrote %s: %s from %s\n", *out, rptPlural(len(runs), "run"), rptPlural(len(paths), "file"))
	}
	return 0
}

func rptPlural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// LabelRuns names the runs: the given labels in order, then the file's
// base name without .json (with #k for the k-th result of a file that
// holds several); repeated names get " (2)", " (3)", ….
func LabelRuns(runs []ReportRun, labels []string) {
	seen := map[string]int{}
	for i := range runs {
		r := &runs[i]
		if i < len(labels) && labels[i] != "" {
			r.Label = labels[i]
		} else {
			base := filepath.Base(r.File)
			r.Label = strings.TrimSuffix(base, filepath.Ext(base))
			if r.InFile > 1 {
				r.Label += fmt.Sprintf("#%d", r.Index+1)
			}
		}
		seen[r.Label]++
		if n := seen[r.Label]; n > 1 {
			r.Label += fmt.Sprintf(" (%d)", n)
		}
	}
}
