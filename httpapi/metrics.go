package httpapi

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"ringlm/engine"
)

// metrics are the server's Prometheus collectors, in a registry of the
// server's own (tests start many servers in one process) with Go's runtime
// and the process's collectors beside them. Names follow vLLM's (vllm:* →
// ringlm:*) where they mean the same thing, and the ones vLLM also has are
// exported under vLLM's name too (vllmAliases), so that dashboards and
// routers written for vLLM read ringlm unchanged.
type metrics struct {
	reg  *prometheus.Registry
	page fasthttp.RequestHandler

	ttft, itl, e2e, queue, step *prometheus.HistogramVec
	finished                    *prometheus.CounterVec
	http                        *prometheus.CounterVec

	// cur is the served model's series; until SetModel binds one it is
	// detached (observed, never exported).
	cur atomic.Pointer[modelMetrics]

	mu     sync.Mutex
	byCode map[httpKey]prometheus.Counter
	models map[string]*modelMetrics // by name, bound once each
}

// modelMetrics are the series of one model (label model_name), resolved
// once so that the request path observes without a label lookup.
type modelMetrics struct {
	name                        string
	ttft, itl, e2e, queue, step prometheus.Observer
	finished                    map[string]prometheus.Counter // by finish reason
	promptTokens                atomic.Uint64
}

type httpKey struct {
	route  string
	status int
}

// finishReasons are created at zero with the model's series, so that a
// rate() over them starts at the first scrape. "abort" is a request whose
// client went away, as vLLM names it.
var finishReasons = []string{"stop", "length", "abort", "cancelled", "error"}

// vllmAliases maps a ringlm metric to the vLLM names it is also exported
// under. vLLM 0.10 renamed gpu_cache_usage_perc to kv_cache_usage_perc;
// routers such as the Gateway API inference extension read one or the
// other depending on their version, so both are there.
var vllmAliases = map[string][]string{
	"ringlm:num_requests_running":        {"vllm:num_requests_running"},
	"ringlm:num_requests_waiting":        {"vllm:num_requests_waiting"},
	"ringlm:kv_cache_usage_perc":         {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
	"ringlm:prompt_tokens_total":         {"vllm:prompt_tokens_total"},
	"ringlm:generation_tokens_total":     {"vllm:generation_tokens_total"},
	"ringlm:prefix_cache_queries_total":  {"vllm:prefix_cache_queries_total"},
	"ringlm:prefix_cache_hits_total":     {"vllm:prefix_cache_hits_total"},
	"ringlm:num_preemptions_total":       {"vllm:num_preemptions_total"},
	"ringlm:request_success_total":       {"vllm:request_success_total"},
	"ringlm:time_to_first_token_seconds": {"vllm:time_to_first_token_seconds"},
	"ringlm:inter_token_latency_seconds": {"vllm:inter_token_latency_seconds"},
	"ringlm:e2e_request_latency_seconds": {"vllm:e2e_request_latency_seconds"},
	"ringlm:request_queue_time_seconds":  {"vllm:request_queue_time_seconds"},
}

const modelLabel = "model_name"

// Bucket bounds follow vLLM's for the metrics that share its names.
func newMetrics(s *Server) *metrics {
	hist := func(name, help string, bounds ...float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: bounds}, []string{modelLabel})
	}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		ttft: hist("ringlm:time_to_first_token_seconds", "Time from arrival to the first generated token.",
			0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560),
		itl: hist("ringlm:inter_token_latency_seconds", "Time between consecutive tokens of a request, as the engine received them.",
			0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
			0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80),
		e2e: hist("ringlm:e2e_request_latency_seconds", "Time from arrival to the end of a request (for an aborted one, until its client went away).",
			0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680),
		queue: hist("ringlm:request_queue_time_seconds", "Time from arrival to the first admission to a slot.",
			0.001, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680),
		step: hist("ringlm:step_time_seconds", "Device time of one engine step.",
			0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ringlm:request_success_total",
			Help: "Finished requests by finish reason (abort: the client went away)."}, []string{modelLabel, "finished_reason"}),
		http: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ringlm:http_requests_total",
			Help: "HTTP requests by route and status."}, []string{"route", "code"}),
		byCode: map[httpKey]prometheus.Counter{},
		models: map[string]*modelMetrics{},
	}
	m.reg.MustRegister(m.ttft, m.itl, m.e2e, m.queue, m.step, m.finished, m.http, engineCollector{s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.cur.Store(detached())

	h := promhttp.HandlerFor(aliasGatherer{m.reg}, promhttp.HandlerOpts{
		// One collector failing (the process one on an unusual system)
		// should not take the others off the page.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      promLogger{s.log},
	})
	m.page = fasthttpadaptor.NewFastHTTPHandler(h)
	return m
}

// detached returns series that belong to no registry: observations before
// a model is bound go nowhere rather than under an empty model name.
func detached() *modelMetrics {
	mm := &modelMetrics{finished: map[string]prometheus.Counter{}}
	mm.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "detached"})
	mm.itl, mm.e2e, mm.queue, mm.step = mm.ttft, mm.ttft, mm.ttft, mm.ttft
	for _, r := range finishReasons {
		mm.finished[r] = prometheus.NewCounter(prometheus.CounterOpts{Name: "detached"})
	}
	return mm
}

// bind creates the series of the model named name (or finds them: a
// model served again after a switch keeps its series) and makes them
// current.
func (m *metrics) bind(name string) *modelMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mm, ok := m.models[name]; ok {
		m.cur.Store(mm)
		return mm
	}
	mm := &modelMetrics{name: name, finished: map[string]prometheus.Counter{},
		ttft: m.ttft.WithLabelValues(name), itl: m.itl.WithLabelValues(name), e2e: m.e2e.WithLabelValues(name),
		queue: m.queue.WithLabelValues(name), step: m.step.WithLabelValues(name)}
	for _, r := range finishReasons {
		mm.finished[r] = m.finished.WithLabelValues(name, r)
	}
	m.models[name] = mm
	m.cur.Store(mm)
	return mm
}

// StepHook observes engine step times; pass it as engine.Config.StepHook.
func (s *Server) StepHook() func(step uint64, entries int, startNS, endNS uint64) {
	return func(_ uint64, _ int, startNS, endNS uint64) {
		if endNS >= startNS {
			s.met.cur.Load().step.Observe(time.Duration(endNS - startNS).Seconds())
		}
	}
}

// observeEnd records a finished engine request. end stands in for the
// timeline's end when the engine has not ended it yet (an abort).
func (mm *modelMetrics) observeEnd(tl engine.Timeline, finish string, end time.Time) {
	if !tl.FirstToken.IsZero() {
		mm.ttft.Observe(seconds(tl.FirstToken.Sub(tl.Arrival)))
	}
	if !tl.Scheduled.IsZero() {
		mm.queue.Observe(seconds(tl.Scheduled.Sub(tl.Arrival)))
	}
	if !tl.End.IsZero() {
		end = tl.End
	}
	if !end.IsZero() && !tl.Arrival.IsZero() {
		mm.e2e.Observe(seconds(end.Sub(tl.Arrival)))
	}
	c, ok := mm.finished[finish]
	if !ok {
		// Not a reason the server gives; counted as an error rather than
		// growing a label set from an unexpected value.
		c = mm.finished["error"]
	}
	c.Inc()
}

func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// request counts one HTTP answer. The counters are kept by (route, status)
// so that the path to them formats no status code and hashes no labels.
func (m *metrics) request(route string, status int) {
	k := httpKey{route, status}
	m.mu.Lock()
	c, ok := m.byCode[k]
	if !ok {
		c = m.http.WithLabelValues(route, strconv.Itoa(status))
		m.byCode[k] = c
	}
	m.mu.Unlock()
	c.Inc()
}

// engineCollector reads the engine's gauges and counters at scrape time,
// from one Stats call.
type engineCollector struct{ s *Server }

func engineDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{modelLabel}, nil)
}

var (
	descRunning  = engineDesc("ringlm:num_requests_running", "Requests on the device (engine slots in use).")
	descWaiting  = engineDesc("ringlm:num_requests_waiting", "Requests queued for a slot or KV blocks.")
	descKVUsed   = engineDesc("ringlm:kv_blocks_used", "KV cache blocks held by running requests.")
	descKVFree   = engineDesc("ringlm:kv_blocks_free", "KV cache blocks allocatable now (free + idle cached prefixes).")
	descKVTotal  = engineDesc("ringlm:kv_blocks_total", "KV cache blocks in the pool.")
	descKVUsage  = engineDesc("ringlm:kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).")
	descGen      = engineDesc("ringlm:generation_tokens_total", "Tokens generated.")
	descComputed = engineDesc("ringlm:prompt_tokens_computed_total", "Prompt tokens computed on the device (cached prefixes excluded, recomputes included).")
	descHits     = engineDesc("ringlm:prefix_cache_hits_total", "Prompt tokens served from the prefix cache.")
	descQueries  = engineDesc("ringlm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.")
	descPreempt  = engineDesc("ringlm:num_preemptions_total", "Requests preempted for KV memory (recomputed later).")
	descSteps    = engineDesc("ringlm:engine_steps_total", "Device steps executed.")
	descPrompt   = engineDesc("ringlm:prompt_tokens_total", "Prompt tokens of submitted requests.")
)

func (engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRunning, descWaiting, descKVUsed, descKVFree, descKVTotal, descKVUsage,
		descGen, descComputed, descHits, descQueries, descPreempt, descSteps, descPrompt} {
		ch <- d
	}
}

func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	l := c.s.current()
	if l == nil {
		return
	}
	defer l.release()
	md := l.m
	st := md.Engine.Stats()
	prompt := float64(l.met.promptTokens.Load())
	total := st.Blocks.Free + st.Blocks.Used + st.Blocks.Idle
	usage := 0.0
	if total > 0 {
		usage = float64(st.Blocks.Used) / float64(total)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, md.Name)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, md.Name)
	}
	gauge(descRunning, float64(st.Running))
	gauge(descWaiting, float64(st.Waiting))
	gauge(descKVUsed, float64(st.Blocks.Used))
	gauge(descKVFree, float64(st.Blocks.Free+st.Blocks.Idle))
	gauge(descKVTotal, float64(total))
	gauge(descKVUsage, usage)
	counter(descGen, float64(st.GeneratedTokens))
	counter(descComputed, float64(st.PromptTokens))
	counter(descHits, float64(st.CachedTokens))
	counter(descQueries, prompt)
	counter(descPreempt, float64(st.Preemptions))
	counter(descSteps, float64(st.Steps))
	counter(descPrompt, prompt)
}

// aliasGatherer adds the vLLM names of vllmAliases: each alias is the
// same family (the same samples) under another name, so nothing is
// observed twice on the request path.
type aliasGatherer struct{ g prometheus.Gatherer }

func (a aliasGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := a.g.Gather()
	for _, mf := range mfs {
		for _, alias := range vllmAliases[mf.GetName()] {
			mfs = append(mfs, &dto.MetricFamily{Name: &alias, Help: mf.Help, Type: mf.Type, Unit: mf.Unit, Metric: mf.Metric})
		}
	}
	slices.SortFunc(mfs, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return mfs, err
}

// promLogger routes promhttp's errors (a collector that failed) to the log.
type promLogger struct{ log zerolog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn().Str("component", "metrics").Msg(fmt.Sprint(v...)) }

func (s *Server) metricsPage(ctx *fasthttp.RequestCtx, _ *req) { s.met.page(ctx) }
