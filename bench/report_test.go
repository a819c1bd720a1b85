package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func rptNear(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func rptNearAll(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !rptNear(a[i], b[i]) {
			return false
		}
	}
	return true
}

func rptLoadRun(t *testing.T, path string) ReportRun {
	t.Helper()
	runs, err := LoadReportRuns(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%s: %d runs", path, len(runs))
	}
	return runs[0]
}

// rptGoodFiles are the well-formed results in testdata.
func rptGoodFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	return append(files, "testdata/multi.jsonl")
}

func rptLoadAll(t *testing.T, files []string) []ReportRun {
	t.Helper()
	var runs []ReportRun
	for _, f := range files {
		rs, err := LoadReportRuns(f)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, rs...)
	}
	LabelRuns(runs, nil)
	return runs
}

// TestReportPerRequestSeries: the distributions come from the per-request
// arrays (seconds → ms), failed requests left out; E2EL is rebuilt as
// TTFT + ΣITL when the file has no per-request latencies and TPOT is
// (E2EL − TTFT) / (output tokens − 1), as vllm computes it.
func TestReportPerRequestSeries(t *testing.T) {
	r := rptLoadRun(t, "testdata/vllm_c4.json")
	if !rptNearAll(r.TTFT, []float64{100, 200, 300, 400}) {
		t.Errorf("TTFT %v", r.TTFT)
	}
	if !rptNearAll(r.ITL, []float64{10, 20, 30, 10, 10, 10, 20, 20, 20, 50, 50, 50}) {
		t.Errorf("ITL %v", r.ITL)
	}
	if !rptNearAll(r.E2EL, []float64{160, 230, 360, 550}) || !r.E2ELRebuilt {
		t.Errorf("E2EL %v (rebuilt %v)", r.E2EL, r.E2ELRebuilt)
	}
	if !rptNearAll(r.TPOT, []float64{20, 10, 20, 50}) {
		t.Errorf("TPOT %v", r.TPOT)
	}
	// vllm writes no "failed": it comes from the errors array.
	if r.Completed != 4 || r.Failed != 1 || !math.IsInf(r.RequestRate, 1) || r.MaxConcurrency != 4 {
		t.Errorf("completed %v failed %v rate %v concurrency %v", r.Completed, r.Failed, r.RequestRate, r.MaxConcurrency)
	}
	// The file's statistics win; missing ones are computed from the
	// arrays; NaN (Python's literal) counts as missing.
	for _, c := range []struct {
		stat, metric string
		want         float64
	}{
		{"mean", "ttft", 250}, {"p99", "ttft", 397}, {"median", "itl", 20},
		{"mean", "tpot", 25}, {"median", "tpot", 20}, {"p99", "tpot", 49.1},
		{"mean", "e2el", 325}, {"median", "e2el", 295}, {"p99", "e2el", 544.3},
		{"std", "itl", rptStd(r.ITL)},
	} {
		if got := r.Stat(c.stat, c.metric); !rptNear(got, c.want) {
			t.Errorf("%s %s = %v, want %v", c.stat, c.metric, got, c.want)
		}
	}
	if !math.IsNaN(r.Stat("p42x", "ttft")) {
		t.Error("unknown statistic not NaN")
	}

	// ringlm's own result file: per-request latencies in its "ringlm" object.
	r = rptLoadRun(t, "testdata/ringlm_c16.json")
	if !rptNearAll(r.E2EL, []float64{50, 65, 90}) || r.E2ELRebuilt {
		t.Errorf("ringlm E2EL %v (rebuilt %v)", r.E2EL, r.E2ELRebuilt)
	}
	if !rptNearAll(r.TPOT, []float64{15, 17.5, 20}) {
		t.Errorf("ringlm TPOT %v", r.TPOT)
	}
	// A file with throughputs missing gets them from the counts.
	r = rptLoadRun(t, "testdata/ringlm_r8.json")
	if !rptNear(r.RequestThroughput, 5) || !rptNear(r.OutputThroughput, 15) || !rptNear(r.TotalThroughput, 65) {
		t.Errorf("derived throughputs %v %v %v", r.RequestThroughput, r.OutputThroughput, r.TotalThroughput)
	}
	if !rptNear(r.Stat("median", "ttft"), 40) || !rptNear(r.Stat("p99", "ttft"), 59.6) {
		t.Errorf("computed TTFT median %v p99 %v", r.Stat("median", "ttft"), r.Stat("p99", "ttft"))
	}
}

func TestReportPercentile(t *testing.T) {
	xs := []float64{4, 1, 3, 2}
	for _, c := range [][2]float64{{0, 1}, {50, 2.5}, {100, 4}, {25, 1.75}, {99, 3.97}} {
		if got := rptPercentile(xs, c[0]); !rptNear(got, c[1]) {
			t.Errorf("p%v = %v, want %v", c[0], got, c[1])
		}
	}
	if !slices.Equal(xs, []float64{4, 1, 3, 2}) {
		t.Error("rptPercentile sorted its input")
	}
	if !math.IsNaN(rptPercentile(nil, 50)) {
		t.Error("percentile of nothing")
	}
}

// TestReportCDF: the step function through every sorted value, ties jumping at
// once; with more values than points, every point still lies on the
// exact empirical function.
func TestReportCDF(t *testing.T) {
	x, y := CDF([]float64{3, 1, 2, 2, math.NaN()}, 0)
	if !rptNearAll(x, []float64{1, 1, 2, 2, 3, 3}) || !rptNearAll(y, []float64{0, 0.25, 0.25, 0.75, 0.75, 1}) {
		t.Fatalf("CDF: x %v y %v", x, y)
	}
	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = float64((i * 7919) % 1000) // 0…999, shuffled
	}
	x, y = CDF(xs, 10)
	if len(x) != 2*10+1 || x[0] != 0 || y[0] != 0 || x[len(x)-1] != 999 || y[len(y)-1] != 1 {
		t.Fatalf("downsampled CDF: %d points, first (%v, %v), last (%v, %v)", len(x), x[0], y[0], x[len(x)-1], y[len(y)-1])
	}
	for i := 2; i < len(x); i += 2 { // the upper end of each jump
		if want := (x[i] + 1) / 1000; !rptNear(y[i], want) {
			t.Errorf("point (%v, %v): the CDF there is %v", x[i], y[i], want)
		}
	}
	if x, y := CDF(nil, 0); x != nil || y != nil {
		t.Error("CDF of nothing")
	}
}

// TestReportCDFSeriesFromArrays: the TTFT distribution plot draws each run's
// per-request values, mapped onto the plot.
func TestReportCDFSeriesFromArrays(t *testing.T) {
	runs := rptLoadAll(t, []string{"testdata/vllm_c4.json"})
	p := rptCDFPlot(runs, "ttft", ReportOptions{})
	if p == nil || len(p.Series) != 1 {
		t.Fatal("no TTFT plot")
	}
	s := p.Series[0]
	if !rptNearAll(s.X, []float64{100, 100, 200, 200, 300, 300, 400, 400}) || !rptNearAll(s.Y, []float64{0, 0.25, 0.25, 0.5, 0.5, 0.75, 0.75, 1}) {
		t.Fatalf("series x %v y %v", s.X, s.Y)
	}
	if p.X.Min != 0 || p.X.Max != 400 || p.Y.Min != 0 || p.Y.Max != 1 {
		t.Fatalf("axes %v…%v, %v…%v", p.X.Min, p.X.Max, p.Y.Min, p.Y.Max)
	}
	pts := svgPolyline(t, p.SVG(), "vllm_c4")
	x0, y0, x1, y1 := p.area()
	for i := range s.X {
		wantX := x0 + s.X[i]/400*(x1-x0)
		wantY := y1 - s.Y[i]*(y1-y0)
		if pts[i] != svgCoord(wantX)+","+svgCoord(wantY) {
			t.Errorf("point %d: %s, want %s,%s", i, pts[i], svgCoord(wantX), svgCoord(wantY))
		}
	}
	// Log x: from the decade below the smallest value.
	p = rptCDFPlot(runs, "ttft", ReportOptions{LogX: true})
	if !p.X.Log || p.X.Min != 100 || p.X.Max != 1000 {
		t.Fatalf("log axis %v %v…%v", p.X.Log, p.X.Min, p.X.Max)
	}
}

// TestReportLoadPlots: throughput against concurrency per backend and model,
// and TTFT against rate with "inf" one step right of the finite rates.
func TestReportLoadPlots(t *testing.T) {
	runs := rptLoadAll(t, rptGoodFiles(t))
	p := rptConcurrencyPlot(runs, "model")
	if p == nil {
		t.Fatal("no concurrency plot")
	}
	series := map[string]PlotSeries{}
	for _, s := range p.Series {
		series[s.Name] = s
	}
	if s := series["vllm · m"]; !rptNearAll(s.X, []float64{2, 8}) || !rptNearAll(s.Y, []float64{10.5, 30.25}) {
		t.Errorf("vllm · m: %v %v", s.X, s.Y)
	}
	if s := series["openai-chat · tiny"]; !rptNearAll(s.X, []float64{16}) || !rptNearAll(s.Y, []float64{18}) {
		t.Errorf("openai-chat · tiny: %v %v", s.X, s.Y)
	}
	if len(p.Series) != 3 || !p.X.Log {
		t.Errorf("%d series, log x %v", len(p.Series), p.X.Log)
	}
	// A tick at every concurrency measured.
	var ticks []float64
	for _, tk := range p.X.Ticks {
		ticks = append(ticks, tk.V)
	}
	if !slices.Equal(ticks, []float64{2, 4, 8, 16}) {
		t.Errorf("concurrency ticks %v", ticks)
	}

	p = rptRatePlot(runs, "model")
	if p == nil {
		t.Fatal("no rate plot")
	}
	// Finite rates 1, 2, 8 → axis 0…8 in steps of 2; inf at 10.
	if p.X.Min != 0 || p.X.Max != 11 {
		t.Errorf("rate axis %v…%v", p.X.Min, p.X.Max)
	}
	last := p.X.Ticks[len(p.X.Ticks)-1]
	if last.V != 10 || last.Label != "inf" {
		t.Errorf("last rate tick %+v", last)
	}
	// Runs limited by concurrency at a single rate each are the
	// throughput plot's: vllm_c4, ringlm_c16 and both of multi.jsonl.
	if len(p.Series) != 2 || !strings.Contains(p.Note, "4 runs") || !strings.Contains(p.Note, "inf") {
		t.Errorf("%d rate series, note %q", len(p.Series), p.Note)
	}
	series = map[string]PlotSeries{}
	for _, s := range p.Series {
		series[s.Name] = s
	}
	med, p99 := series["openai-chat · tiny median"], series["openai-chat · tiny p99"]
	if !rptNearAll(med.X, []float64{2, 8, 10}) || !rptNearAll(med.Y, []float64{20, 40, 30}) || !rptNearAll(p99.Y, []float64{29.8, 59.6, 39.8}) {
		t.Errorf("tiny median %v %v, p99 %v", med.X, med.Y, p99.Y)
	}
	if p99.Dash == "" || p99.Color != med.Color {
		t.Errorf("p99 style %q %q vs median %q", p99.Color, p99.Dash, med.Color)
	}
	pts := svgPolyline(t, p.SVG(), "openai-chat · tiny median")
	px, py, _ := p.Point(10, 30)
	if pts[2] != svgCoord(px)+","+svgCoord(py) {
		t.Errorf("inf point %s, want %s,%s", pts[2], svgCoord(px), svgCoord(py))
	}

	// Only "inf" (and only single-rate series: all drawn): the axis
	// still has a place for it.
	only := rptLoadAll(t, []string{"testdata/vllm_c4.json"})
	if p := rptRatePlot(only, "model"); p == nil || len(p.X.Ticks) != 1 || p.X.Ticks[0].Label != "inf" {
		t.Errorf("inf-only rate plot %+v", p)
	}
	// Series by directory.
	if p := rptConcurrencyPlot(runs, "dir"); p == nil || len(p.Series) != 1 || p.Series[0].Name != "testdata" {
		t.Errorf("series by dir: %+v", p)
	}
}

// rptParseHTML checks that the page is well-formed (strict XML: every
// element closed, every attribute quoted, text escaped) and counts its
// elements.
func rptParseHTML(t *testing.T, page string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict = true
	d.AutoClose = nil
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			line, col := d.InputPos()
			t.Fatalf("page is not well-formed at %d:%d: %v", line, col, err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			counts[e.Name.Local]++
			depth++
		case xml.EndElement:
			depth--
		}
	}
	if depth != 0 {
		t.Fatalf("unbalanced elements: depth %d", depth)
	}
	return counts
}

func TestReportPage(t *testing.T) {
	runs := rptLoadAll(t, rptGoodFiles(t))
	var buf bytes.Buffer
	if err := WriteReport(&buf, runs, ReportOptions{Title: "A & B", Generated: time.Unix(0, 0).UTC()}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	counts := rptParseHTML(t, page)
	// 4 distributions + throughput vs concurrency + TTFT vs rate.
	if counts["svg"] != 6 || counts["table"] != 2 || counts["script"] != 0 {
		t.Errorf("elements: %v", counts)
	}
	for _, bad := range []string{"<script", "http://", "https://", "@import", "url(http"} {
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("page contains %q: not self-contained", bad)
		}
	}
	if !strings.Contains(page, "<h1>A &amp; B</h1>") {
		t.Error("title not escaped")
	}
	// One summary row per run, labelled by file name (#k within a file).
	for _, label := range []string{"vllm_c4", "ringlm_c16", "ringlm_r2", "ringlm_r8", "multi#1", "multi#2"} {
		if !strings.Contains(page, "</span>"+label+"</td>") {
			t.Errorf("no summary row for %s", label)
		}
	}
	if counts["tr"] != 2+len(runs)+1+len(runs) {
		t.Errorf("%d table rows for %d runs", counts["tr"], len(runs))
	}
}

// TestReportOneRun: a single run without concurrency or rate draws its
// distributions and says why the load plots are missing.
func TestReportOneRun(t *testing.T) {
	runs := rptLoadAll(t, []string{"testdata/ringlm_r2.json"})
	runs[0].RequestRate = math.NaN()
	var buf bytes.Buffer
	if err := WriteReport(&buf, runs, ReportOptions{LogX: true}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	counts := rptParseHTML(t, page)
	if counts["svg"] != 4 {
		t.Errorf("%d plots, want the 4 distributions", counts["svg"])
	}
	for _, s := range []string{"Output throughput vs concurrency</b>: not drawn", "TTFT vs request rate</b>: not drawn", "(log scale)"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}

	// A result with no per-request arrays at all: a table row, notes
	// for every plot.
	runs, err := ParseReportRuns([]byte(`{"backend": "x", "completed": 3, "mean_ttft_ms": 12.5}`))
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := WriteReport(&buf, runs, ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	if counts := rptParseHTML(t, buf.String()); counts["svg"] != 0 || !strings.Contains(buf.String(), "12.50") {
		t.Errorf("arrays-free run: %v", counts)
	}
}

// TestReportMalformed: each bad file is refused with an error naming it.
func TestReportMalformed(t *testing.T) {
	for file, want := range map[string]string{
		"testdata/bad/truncated.json": "not valid JSON",
		"testdata/bad/wrongtype.json": `field "ttfts"`,
		"testdata/bad/notobject.json": "want a JSON object",
		"testdata/bad/empty.json":     "empty",
		"testdata/bad/missing.json":   "no such file",
	} {
		_, err := LoadReportRuns(file)
		if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want the file name and %q", file, err, want)
		}
		var stdout, stderr bytes.Buffer
		out := filepath.Join(t.TempDir(), "r.html")
		if code := ReportMain([]string{"testdata/vllm_c4.json", file, "-o", out}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), file) {
			t.Errorf("ReportMain with %s: exit %d, stderr %q", file, code, stderr.String())
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("ReportMain with %s wrote a page", file)
		}
	}
}

func TestReportMain(t *testing.T) {
	out := filepath.Join(t.TempDir(), "report.html")
	var stdout, stderr bytes.Buffer
	// Flags before and after the files, a glob the shell did not expand.
	code := ReportMain([]string{"--title", "T", "testdata/ringlm_*.json", "testdata/vllm_c4.json", "-o", out, "--label", "one,two", "--label", "three"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rptParseHTML(t, string(page))
	for _, s := range []string{">one</td>", ">two</td>", ">three</td>", ">vllm_c4</td>"} {
		if !bytes.Contains(page, []byte(s)) {
			t.Errorf("page lacks %q", s)
		}
	}
	if !strings.Contains(stdout.String(), "5 runs") {
		t.Errorf("stdout %q", stdout.String())
	}
	for _, args := range [][]string{
		{},     // no files
		{"-o"}, // flag without value
		{"--series", "x", "testdata/vllm_c4.json"},
		{"--label", "a,b", "testdata/vllm_c4.json"}, // more labels than runs
	} {
		stderr.Reset()
		if code := ReportMain(args, io.Discard, &stderr); code != 2 {
			t.Errorf("%q: exit %d (%s), want 2", args, code, stderr.String())
		}
	}
	if code := ReportMain([]string{"testdata/nothing*.json"}, io.Discard, &stderr); code != 1 {
		t.Errorf("unmatched glob: exit %d", code)
	}
	stdout.Reset()
	stderr.Reset()
	if code := ReportMain([]string{"-h"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "usage: ringlm bench report") || stderr.Len() != 0 {
		t.Errorf("-h: exit %d, stdout %q, stderr %q; want the usage on stdout", code, stdout.String(), stderr.String())
	}
	stderr.Reset()
	if code := ReportMain([]string{"x.json", "--log-x=maybe"}, io.Discard, &stderr); code != 2 || stderr.String() != "ringlm bench report: invalid boolean value \"maybe\" for -log-x: parse error\n" {
		t.Errorf("bad flag value: exit %d, stderr %q; want 2 and one line", code, stderr.String())
	}
}

func TestReportLabels(t *testing.T) {
	runs := []ReportRun{{File: "a/x.json", InFile: 1}, {File: "b/x.json", InFile: 1}, {File: "m.jsonl", InFile: 2}, {File: "m.jsonl", Index: 1, InFile: 2}}
	LabelRuns(runs, []string{"", "mine"})
	var got []string
	for _, r := range runs {
		got = append(got, r.Label)
	}
	if want := []string{"x", "mine", "m#1", "m#2"}; !slices.Equal(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
	LabelRuns(runs, nil)
	got = got[:0]
	for _, r := range runs {
		got = append(got, r.Label)
	}
	if want := []string{"x", "x (2)", "m#1", "m#2"}; !slices.Equal(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
}

func TestReportPythonJSON(t *testing.T) {
	in := `{"a": NaN, "b": [Infinity, -Infinity], "s": "NaN Infinity \" NaN", "c": 1}`
	runs, err := ParseReportRuns([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	f := runs[0].Fields
	if string(f["a"]) != "null" || string(f["b"]) != `["inf", "-inf"]` || string(f["s"]) != `"NaN Infinity \" NaN"` {
		t.Errorf("rewritten: %s %s %s", f["a"], f["b"], f["s"])
	}
}
