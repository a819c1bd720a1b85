package httpapi

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"ringlm/engine"
)

// histogram is a Prometheus histogram that observers update with atomics
// only: the inter-token one is hit once per streamed token.
type histogram struct {
	bounds []float64 // upper bounds in seconds, ascending
	counts []atomic.Uint64
	sumNS  atomic.Uint64
	total  atomic.Uint64
}

func newHistogram(bounds ...float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds))}
}

func (h *histogram) observe(d time.Duration) {
	if d < 0 {
		d = 0
	}
	sec := d.Seconds()
	// Buckets are few; a linear scan beats a binary search here.
	for i, b := range h.bounds {
		if sec <= b {
			h.counts[i].Add(1)
			break
		}
	}
	h.sumNS.Add(uint64(d))
	h.total.Add(1)
}

// metrics are the server's own counters; engine gauges are read at scrape.
type metrics struct {
	ttft, itl, e2e, queue, step *histogram

	promptTokens atomic.Uint64

	mu       sync.Mutex
	finished map[string]uint64 // by finish reason
	http     map[httpKey]uint64
}

type httpKey struct {
	route  string
	status int
}

// Bucket bounds follow vLLM's for the metrics that share its names.
func newMetrics() *metrics {
	return &metrics{
		ttft: newHistogram(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560),
		itl: newHistogram(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
			0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80),
		e2e:      newHistogram(0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680),
		queue:    newHistogram(0.001, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680),
		step:     newHistogram(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
		finished: map[string]uint64{},
		http:     map[httpKey]uint64{},
	}
}

// StepHook observes engine step times; pass it as engine.Config.StepHook.
func (s *Server) StepHook() func(step uint64, entries int, startNS, endNS uint64) {
	return func(_ uint64, _ int, startNS, endNS uint64) {
		if endNS >= startNS {
			s.met.step.observe(time.Duration(endNS - startNS))
		}
	}
}

func (m *metrics) observeEnd(tl engine.Timeline, finish string) {
	if !tl.FirstToken.IsZero() {
		m.ttft.observe(tl.FirstToken.Sub(tl.Arrival))
	}
	if !tl.Scheduled.IsZero() {
		m.queue.observe(tl.Scheduled.Sub(tl.Arrival))
	}
	if !tl.End.IsZero() {
		m.e2e.observe(tl.End.Sub(tl.Arrival))
	}
	m.mu.Lock()
	m.finished[finish]++
	m.mu.Unlock()
}

func (m *metrics) request(route string, status int) {
	m.mu.Lock()
	m.http[httpKey{route, status}]++
	m.mu.Unlock()
}

// exposition renders the Prometheus text format (version 0.0.4). Names
// follow vLLM's (vllm:* → ringlm:*) where they mean the same thing.
func (s *Server) exposition(b []byte) []byte {
	m := s.met
	label := ""
	if md := s.model.Load(); md != nil {
		label = `model_name=` + strconv.Quote(md.Name)
		st := md.Engine.Stats()
		total := st.Blocks.Free + st.Blocks.Used + st.Blocks.Idle
		b = gauge(b, "ringlm:num_requests_running", "Requests on the device (engine slots in use).", label, float64(st.Running))
		b = gauge(b, "ringlm:num_requests_waiting", "Requests queued for a slot or KV blocks.", label, float64(st.Waiting))
		b = gauge(b, "ringlm:kv_blocks_used", "KV cache blocks held by running requests.", label, float64(st.Blocks.Used))
		b = gauge(b, "ringlm:kv_blocks_free", "KV cache blocks allocatable now (free + idle cached prefixes).", label, float64(st.Blocks.Free+st.Blocks.Idle))
		b = gauge(b, "ringlm:kv_blocks_total", "KV cache blocks in the pool.", label, float64(total))
		usage := 0.0
		if total > 0 {
			usage = float64(st.Blocks.Used) / float64(total)
		}
		b = gauge(b, "ringlm:kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).", label, usage)
		b = counter(b, "ringlm:generation_tokens_total", "Tokens generated.", label, float64(st.GeneratedTokens))
		b = counter(b, "ringlm:prompt_tokens_computed_total", "Prompt tokens computed on the device (cached prefixes excluded, recomputes included).", label, float64(st.PromptTokens))
		b = counter(b, "ringlm:prefix_cache_hits_total", "Prompt tokens served from the prefix cache.", label, float64(st.CachedTokens))
		b = counter(b, "ringlm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", label, float64(m.promptTokens.Load()))
		b = counter(b, "ringlm:num_preemptions_total", "Requests preempted for KV memory (recomputed later).", label, float64(st.Preemptions))
		b = counter(b, "ringlm:engine_steps_total", "Device steps executed.", label, float64(st.Steps))
	}
	b = counter(b, "ringlm:prompt_tokens_total", "Prompt tokens of submitted requests.", label, float64(m.promptTokens.Load()))
	b = hist(b, "ringlm:time_to_first_token_seconds", "Time from arrival to the first generated token.", label, m.ttft)
	b = hist(b, "ringlm:inter_token_latency_seconds", "Time between consecutive tokens of a request, as the engine received them.", label, m.itl)
	b = hist(b, "ringlm:e2e_request_latency_seconds", "Time from arrival to the end of a request.", label, m.e2e)
	b = hist(b, "ringlm:request_queue_time_seconds", "Time from arrival to the first admission to a slot.", label, m.queue)
	b = hist(b, "ringlm:step_time_seconds", "Device time of one engine step.", label, m.step)

	m.mu.Lock()
	reasons := make([]string, 0, len(m.finished))
	for k := range m.finished {
		reasons = append(reasons, k)
	}
	slices.Sort(reasons)
	b = header(b, "ringlm:request_success_total", "Finished requests by finish reason.", "counter")
	for _, r := range reasons {
		b = promSample(b, "ringlm:request_success_total", join(label, `finished_reason=`+strconv.Quote(r)), float64(m.finished[r]))
	}
	keys := make([]httpKey, 0, len(m.http))
	for k := range m.http {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b httpKey) int {
		if a.route != b.route {
			if a.route < b.route {
				return -1
			}
			return 1
		}
		return a.status - b.status
	})
	b = header(b, "ringlm:http_requests_total", "HTTP requests by route and status.", "counter")
	for _, k := range keys {
		b = promSample(b, "ringlm:http_requests_total", `route=`+strconv.Quote(k.route)+`,code="`+strconv.Itoa(k.status)+`"`, float64(m.http[k]))
	}
	m.mu.Unlock()
	return b
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

func header(b []byte, name, help, typ string) []byte {
	b = append(b, "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, help...)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, typ...)
	return append(b, '\n')
}

func promSample(b []byte, name, labels string, v float64) []byte {
	b = append(b, name...)
	if labels != "" {
		b = append(b, '{')
		b = append(b, labels...)
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = promFloat(b, v)
	return append(b, '\n')
}

func promFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func gauge(b []byte, name, help, labels string, v float64) []byte {
	return promSample(header(b, name, help, "gauge"), name, labels, v)
}

func counter(b []byte, name, help, labels string, v float64) []byte {
	return promSample(header(b, name, help, "counter"), name, labels, v)
}

func hist(b []byte, name, help, labels string, h *histogram) []byte {
	b = header(b, name, help, "histogram")
	var cum uint64
	for i, bound := range h.bounds {
		cum += h.counts[i].Load()
		b = promSample(b, name+"_bucket", join(labels, `le="`+strconv.FormatFloat(bound, 'g', -1, 64)+`"`), float64(cum))
	}
	// Read total after the buckets: an observation racing with the scrape
	// then never makes +Inf smaller than the last bucket.
	total := max(h.total.Load(), cum)
	b = promSample(b, name+"_bucket", join(labels, `le="+Inf"`), float64(total))
	b = promSample(b, name+"_sum", labels, time.Duration(h.sumNS.Load()).Seconds())
	return promSample(b, name+"_count", labels, float64(total))
}
