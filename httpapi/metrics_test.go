package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"ringlm/engine"
)

// scrape reads /metrics with the parser Prometheus itself and the Gateway
// API inference extension use, holding names to the legacy character set
// that every scraper accepts.
func scrape(t testing.TB, ts *testServer) map[string]*dto.MetricFamily {
	t.Helper()
	r := ts.do("GET", "/metrics", nil)
	if r.status != 200 {
		t.Fatalf("/metrics: %d %s", r.status, r.body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return mfs
}

// sampleValue is the value of family name's sample whose labels include
// the given name/value pairs: a gauge's or counter's value, a histogram's
// count. ok is false when there is no such sample.
func sampleValue(mfs map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// flat renders a family's samples one per line, sorted, to compare two
// families sample by sample.
func flat(mf *dto.MetricFamily) string {
	var lines []string
	for _, m := range mf.Metric {
		var ls []string
		for _, lp := range m.Label {
			ls = append(ls, lp.GetName()+"="+lp.GetValue())
		}
		sort.Strings(ls)
		key := strings.Join(ls, ",")
		switch {
		case m.Gauge != nil:
			lines = append(lines, fmt.Sprintf("%s %v", key, m.Gauge.GetValue()))
		case m.Counter != nil:
			lines = append(lines, fmt.Sprintf("%s %v", key, m.Counter.GetValue()))
		case m.Histogram != nil:
			lines = append(lines, fmt.Sprintf("%s count=%d sum=%v", key, m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()))
			for _, b := range m.Histogram.Bucket {
				lines = append(lines, fmt.Sprintf("%s le=%v %d", key, b.GetUpperBound(), b.GetCumulativeCount()))
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// The page comes from client_golang: Go's runtime and the process are on
// it, and every metric vLLM also has is there under vLLM's name with the
// same samples.
func TestMetricsLibraryAndVLLMNames(t *testing.T) {
	ts := startServer(t, nil)
	ts.post("/v1/completions", map[string]any{"prompt": "The ring", "max_tokens": 5})
	mfs := scrape(t, ts)

	want := []string{"go_goroutines", "go_gc_duration_seconds", "go_memstats_heap_alloc_bytes", "go_info"}
	if runtime.GOOS == "linux" { // the process collector reads /proc
		want = append(want, "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds")
	}
	for _, name := range want {
		if mfs[name] == nil {
			t.Errorf("missing %s", name)
		}
	}
	if v, _ := sampleValue(mfs, "go_goroutines"); v < 1 {
		t.Errorf("go_goroutines = %v", v)
	}

	for name, aliases := range vllmAliases {
		mf := mfs[name]
		if mf == nil {
			t.Errorf("missing %s", name)
			continue
		}
		for _, alias := range aliases {
			a := mfs[alias]
			switch {
			case a == nil:
				t.Errorf("missing %s (alias of %s)", alias, name)
			case a.GetType() != mf.GetType():
				t.Errorf("%s is a %v, %s a %v", alias, a.GetType(), name, mf.GetType())
			case flat(a) != flat(mf):
				t.Errorf("%s differs from %s:\n%s\n--\n%s", alias, name, flat(a), flat(mf))
			}
		}
	}
	mn := ts.m.Name
	if v, _ := sampleValue(mfs, "vllm:request_success_total", "model_name", mn, "finished_reason", "length"); v != 1 {
		t.Errorf("vllm:request_success_total{finished_reason=length} = %v", v)
	}
	for _, r := range []string{"stop", "abort"} {
		if v, ok := sampleValue(mfs, "vllm:request_success_total", "model_name", mn, "finished_reason", r); !ok || v != 0 {
			t.Errorf("vllm:request_success_total{finished_reason=%s} = %v, %v; want a 0 from the start", r, v, ok)
		}
	}
	if v, _ := sampleValue(mfs, "vllm:generation_tokens_total", "model_name", mn); v != 5 {
		t.Errorf("vllm:generation_tokens_total = %v", v)
	}
	if v, _ := sampleValue(mfs, "ringlm:http_requests_total", "route", "/v1/completions", "code", "200"); v != 1 {
		t.Errorf("ringlm:http_requests_total{/v1/completions,200} = %v", v)
	}
}

// The gauges a gateway routes on (vLLM's running and waiting requests and
// KV-cache usage) follow the engine.
func TestMetricsGatewaySignals(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Slots = 1 })
	mn := ts.m.Name
	gauges := func() (running, waiting, usage, gpuUsage, used, total float64) {
		mfs := scrape(t, ts)
		running, _ = sampleValue(mfs, "vllm:num_requests_running", "model_name", mn)
		waiting, _ = sampleValue(mfs, "vllm:num_requests_waiting", "model_name", mn)
		usage, _ = sampleValue(mfs, "vllm:kv_cache_usage_perc", "model_name", mn)
		gpuUsage, _ = sampleValue(mfs, "vllm:gpu_cache_usage_perc", "model_name", mn)
		used, _ = sampleValue(mfs, "ringlm:kv_blocks_used", "model_name", mn)
		total, _ = sampleValue(mfs, "ringlm:kv_blocks_total", "model_name", mn)
		return
	}
	a := ts.openStream("/execute", map[string]any{"prompt": strings.Repeat("the ring ", 40), "max_tokens": 1000, "ignore_eos": true})
	defer a.close()
	a.next()
	b := ts.openStream("/execute", map[string]any{"prompt": "b", "max_tokens": 1000, "ignore_eos": true})
	defer b.close()
	b.next()
	waitFor(t, "one waiting", func() bool { return ts.m.Engine.Stats().Waiting == 1 })

	running, waiting, usage, gpuUsage, used, total := gauges()
	if running != 1 || waiting != 1 {
		t.Errorf("running %v, waiting %v; want 1 and 1", running, waiting)
	}
	if usage <= 0 || usage > 1 || gpuUsage != usage || total != 256 || used < 1 {
		t.Errorf("KV usage %v (gpu_cache_usage_perc %v), blocks %v of %v", usage, gpuUsage, used, total)
	}
	// Read together with the blocks (one Stats call): a consistent page.
	if math.Abs(usage-used/total) > 1e-12 {
		t.Errorf("usage %v != %v/%v", usage, used, total)
	}

	a.close()
	b.close()
	waitNoLeaks(t, ts)
	running, waiting, usage, _, _, _ = gauges()
	if running != 0 || waiting != 0 || usage != 0 {
		t.Errorf("idle: running %v, waiting %v, usage %v", running, waiting, usage)
	}
	// Both clients hung up: one running, one queued.
	if v, _ := sampleValue(scrape(t, ts), "vllm:request_success_total", "model_name", mn, "finished_reason", "abort"); v != 2 {
		t.Errorf("aborted requests %v, want 2", v)
	}
}

// A request whose client hangs up is counted with finish reason abort, as
// vLLM counts it: streaming (the write fails) and not (the watchdog sees
// the socket close).
func TestMetricsAbort(t *testing.T) {
	ts := startServer(t, nil)
	mn := ts.m.Name
	counts := func() (abort, length, e2e, gone499 float64) {
		mfs := scrape(t, ts)
		abort, _ = sampleValue(mfs, "ringlm:request_success_total", "model_name", mn, "finished_reason", "abort")
		length, _ = sampleValue(mfs, "ringlm:request_success_total", "model_name", mn, "finished_reason", "length")
		if v, _ := sampleValue(mfs, "vllm:request_success_total", "model_name", mn, "finished_reason", "abort"); v != abort {
			t.Errorf("vllm:request_success_total{abort} = %v, ringlm's %v", v, abort)
		}
		e2e, _ = sampleValue(mfs, "vllm:e2e_request_latency_seconds", "model_name", mn)
		gone499, _ = sampleValue(mfs, "ringlm:http_requests_total", "route", "/v1/completions", "code", "499")
		return
	}
	long := map[string]any{"prompt": "The ring", "max_tokens": 1000, "ignore_eos": true, "stream": true}

	// Streaming: the first token arrives, then the client closes the
	// connection with about a thousand tokens still to come.
	s := ts.openStream("/v1/completions", long)
	if ev, ok := s.next(); !ok || !strings.Contains(ev.data, `"text"`) {
		t.Fatalf("first event %+v, %v", ev, ok)
	}
	s.close()
	waitNoLeaks(t, ts)
	if abort, length, e2e, _ := counts(); abort != 1 || length != 0 || e2e != 1 {
		t.Errorf("after a streaming hang-up: abort %v, length %v, e2e observations %v; want 1, 0, 1", abort, length, e2e)
	}

	// Not streaming: nothing is written before the end; the client gives
	// up while the request runs.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		js := `{"prompt":"The ring","max_tokens":1000,"ignore_eos":true}`
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/completions", strings.NewReader(js))
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	waitFor(t, "the request to run", func() bool { return ts.m.Engine.Stats().Running > 0 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the request finished before the client gave up")
	}
	waitNoLeaks(t, ts)
	// The access line and the 499 come after the engine request ended.
	waitFor(t, "the 499", func() bool { _, _, _, g := counts(); return g == 1 })
	if abort, length, e2e, _ := counts(); abort != 2 || length != 0 || e2e != 2 {
		t.Errorf("after a non-streaming hang-up: abort %v, length %v, e2e observations %v; want 2, 0, 2", abort, length, e2e)
	}

	// A finished request is not an abort.
	ts.post("/v1/completions", map[string]any{"prompt": "The ring", "max_tokens": 3})
	if abort, length, _, _ := counts(); abort != 2 || length != 1 {
		t.Errorf("after a finished request: abort %v, length %v", abort, length)
	}
}

// The watchdog cancels a job whose client hung up, but the engine may end
// the request before the job's reader sees the cancelled context: the
// reader then finds a cancelled stream, which is still an abort (not an
// error) and still ends the job as a hang-up (a 499, no answer).
func TestAbortSeenAfterTheEngineEnded(t *testing.T) {
	ts := startServer(t, nil)
	var rq genRequest
	if err := parseBody([]byte(`{"prompt":"The ring","max_tokens":1000,"ignore_eos":true}`), &rq); err != nil {
		t.Fatal(err)
	}
	l, apiErr := ts.s.use(context.Background(), "")
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	defer l.release()
	j, apiErr := ts.s.newJob(l, kindCompletion, &rq, &req{id: "r", start: time.Now(), route: "/v1/completions", log: ts.s.log})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	j.ctx, j.cancel = contextWithCancelCause()
	if err := j.submit(); err != nil {
		t.Fatal(err)
	}
	untrack := ts.s.track(j)
	j.abort(errClientGone) // what the watchdog does
	<-j.choices[0].st.Done()
	err := j.run(collector{j})
	untrack()
	if !errors.Is(err, errClientGone) || j.choices[0].finish != "abort" {
		t.Fatalf("run: %v, finish %q; want the client's hang-up and abort", err, j.choices[0].finish)
	}
	j.gone(err) // as generate does: nothing is counted twice
	mfs := scrape(t, ts)
	for reason, want := range map[string]float64{"abort": 1, "error": 0} {
		if v, _ := sampleValue(mfs, "vllm:request_success_total", "model_name", ts.m.Name, "finished_reason", reason); v != want {
			t.Errorf("%s: %v, want %v", reason, v, want)
		}
	}
}

// HEAD answers like GET, and the page is gzip-compressed for scrapers that
// ask (Prometheus does): promhttp's content negotiation, through the adaptor.
func TestMetricsHeadAndGzip(t *testing.T) {
	ts := startServer(t, nil)
	if r := ts.do("HEAD", "/metrics", nil); r.status != 200 || len(r.body) != 0 {
		t.Errorf("HEAD /metrics: %d, %d bytes", r.status, len(r.body))
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("%d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
}

// The request path's metric updates: one inter-token observation per
// streamed token, and per request its end (TTFT, queue, e2e, finish
// reason) and its access count. None may allocate.
func BenchmarkMetricsPerToken(b *testing.B) {
	s := New(testConfig(), zerolog.Nop())
	s.met.bind("m")
	mm := s.met.cur.Load()
	b.ReportAllocs()
	for i := range b.N {
		mm.itl.Observe(seconds(time.Duration(i&1023) * time.Microsecond))
	}
}

func BenchmarkMetricsPerRequest(b *testing.B) {
	s := New(testConfig(), zerolog.Nop())
	s.met.bind("m")
	mm := s.met.cur.Load()
	t0 := time.Now()
	tl := engine.Timeline{Arrival: t0, Scheduled: t0.Add(time.Millisecond), FirstToken: t0.Add(20 * time.Millisecond), End: t0.Add(time.Second)}
	b.ReportAllocs()
	for range b.N {
		mm.observeEnd(tl, "length", time.Time{})
		s.met.request("/v1/completions", 200)
	}
}

// A scrape of the whole page through the adaptor: Go and process
// collectors, the engine's one Stats call, the vLLM aliases.
func BenchmarkMetricsScrape(b *testing.B) {
	ts := startServer(b, nil)
	ts.post("/v1/completions", map[string]any{"prompt": "The ring", "max_tokens": 5})
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/metrics")
	b.ReportAllocs()
	for range b.N {
		ctx.Response.Reset()
		ts.s.metricsPage(&ctx, nil)
	}
	b.ReportMetric(float64(len(ctx.Response.Body())), "bytes/page")
}
