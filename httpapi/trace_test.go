package httpapi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// traceJSON is the part of a Chrome trace the tests read.
type traceJSON struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Ts   *float64       `json:"ts"`
		Dur  *float64       `json:"dur"`
		Pid  *int           `json:"pid"`
		Tid  *int           `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	Metadata        map[string]any `json:"metadata"`
}

// spans parses a trace and returns, per request thread name, the names
// of its X slices in time order, and the number of device steps. Every
// event must have ph, ts, pid and tid, and X events dur >= 0.
func spans(t *testing.T, body []byte) (map[string][]string, int) {
	t.Helper()
	var tr traceJSON
	if err := json.Unmarshal(body, &tr); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, tail(string(body), 1000))
	}
	if tr.DisplayTimeUnit != "ms" || tr.Metadata["device"] == nil {
		t.Fatalf("displayTimeUnit %q, metadata %v", tr.DisplayTimeUnit, tr.Metadata)
	}
	procs, threads := map[int]string{}, map[[2]int]string{}
	for _, ev := range tr.TraceEvents {
		if ev.Ph == "" || ev.Ts == nil || ev.Pid == nil || ev.Tid == nil || (ev.Ph == "X" && (ev.Dur == nil || *ev.Dur < 0)) {
			t.Fatalf("malformed event %+v", ev)
		}
		if ev.Ph == "M" {
			name, _ := ev.Args["name"].(string)
			if ev.Name == "process_name" {
				procs[*ev.Pid] = name
			} else if ev.Name == "thread_name" {
				threads[[2]int{*ev.Pid, *ev.Tid}] = name
			}
		}
	}
	out := map[string][]string{}
	last := map[string]float64{}
	steps := 0
	for _, ev := range tr.TraceEvents {
		if ev.Ph != "X" {
			continue
		}
		switch procs[*ev.Pid] {
		case "device":
			steps++
		case "requests":
			name := threads[[2]int{*ev.Pid, *ev.Tid}]
			switch ev.Name {
			case "queue", "prefill", "decode": // the top-level slices, one after another
				if len(out[name]) > 0 && *ev.Ts < last[name]-0.0011 {
					t.Fatalf("%s: %s starts at %.3f before the previous slice ends at %.3f", name, ev.Name, *ev.Ts, last[name])
				}
				out[name] = append(out[name], ev.Name)
				last[name] = *ev.Ts + *ev.Dur
			}
		default:
			t.Fatalf("X event of an unnamed process: %+v", ev)
		}
	}
	return out, steps
}

// TestDebugTrace: GET /debug/trace?seconds=1 while requests run answers
// a trace in which the requests that ran inside the window have their
// queue, prefill and decode slices, and the device its steps.
func TestDebugTrace(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Debug = true })
	var stop atomic.Bool
	var wg sync.WaitGroup
	var sent sync.Map
	for c := range 3 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("tr-%d-%d", c, i)
				r := ts.post("/v1/completions", map[string]any{"prompt": "The ring buffer", "max_tokens": 6, "temperature": 0},
					"X-Request-Id", id)
				if r.status != 200 {
					t.Errorf("%s: status %d: %s", id, r.status, r.body)
					return
				}
				sent.Store(id, true)
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // requests are running
	r := ts.do("GET", "/debug/trace?seconds=1", nil)
	stop.Store(true)
	wg.Wait()
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, content type %q: %s", r.status, r.header.Get("Content-Type"), tail(string(r.body), 500))
	}
	tracks, steps := spans(t, r.body)
	if steps == 0 {
		t.Fatal("no device steps in the trace")
	}
	complete := 0
	for name, sl := range tracks {
		if _, ok := sent.Load(name); !ok {
			t.Fatalf("track %q is no request the test sent", name)
		}
		if strings.Join(sl, ",") == "queue,prefill,decode" {
			complete++
		}
	}
	if complete == 0 {
		t.Fatalf("no request with queue, prefill and decode in the window: %v", tracks)
	}
	t.Logf("%d bytes, %d requests (%d whole), %d steps", len(r.body), len(tracks), complete, steps)

	// Windows out of range are refused at once.
	for _, q := range []string{"0", "61", "-1", "x", "NaN"} {
		if r := ts.do("GET", "/debug/trace?seconds="+q, nil); r.status != 400 {
			t.Errorf("seconds=%s: status %d", q, r.status)
		}
	}
	if r := ts.post("/debug/trace", nil); r.status != 405 {
		t.Errorf("POST /debug/trace: status %d", r.status)
	}
}

// TestDebugPprof: Go's profiles under /debug/pprof/ with --debug.
func TestDebugPprof(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Debug = true }, true)
	for path, want := range map[string]string{
		"/debug/pprof/":                   "goroutine",
		"/debug/pprof":                    "goroutine", // redirected to the index
		"/debug/pprof/goroutine?debug=1":  "goroutine profile:",
		"/debug/pprof/heap?debug=1":       "heap profile:",
		"/debug/pprof/cmdline":            "",
		"/debug/pprof/profile?seconds=1":  "",
		"/debug/pprof/trace?seconds=0.05": "",
		"/debug/pprof/threadcreate":       "",
	} {
		r := ts.do("GET", path, nil)
		if r.status != 200 || !strings.Contains(string(r.body), want) || len(r.body) == 0 {
			t.Errorf("%s: status %d, %d bytes, want %q in: %s", path, r.status, len(r.body), want, tail(string(r.body), 300))
		}
	}
	if r := ts.do("GET", "/debug/pprof/nosuch", nil); r.status != 404 {
		t.Errorf("unknown profile: status %d", r.status)
	}
}

// TestDebugOff: without --debug the endpoints do not exist; with
// --api-key they need it.
func TestDebugOff(t *testing.T) {
	ts := startServer(t, nil, true)
	for _, p := range []string{"/debug/trace", "/debug/trace?seconds=1", "/debug/pprof/", "/debug/pprof", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		if r := ts.do("GET", p, nil); r.status != 404 {
			t.Errorf("%s without --debug: status %d", p, r.status)
		}
	}
	ts = startServer(t, func(c *Config) { c.Debug, c.APIKey = true, "k" }, true)
	for _, p := range []string{"/debug/trace?seconds=1", "/debug/pprof/", "/debug/pprof/heap"} {
		if r := ts.do("GET", p, nil); r.status != 401 {
			t.Errorf("%s without the key: status %d", p, r.status)
		}
	}
	if r := ts.do("GET", "/debug/pprof/", nil, "Authorization", "Bearer k"); r.status != 200 {
		t.Errorf("/debug/pprof/ with the key: status %d", r.status)
	}
	// The model is not loaded: a trace has nothing to record.
	if r := ts.do("GET", "/debug/trace?seconds=1", nil, "Authorization", "Bearer k"); r.status != 503 {
		t.Errorf("/debug/trace while loading: status %d", r.status)
	}
}

// TestTraceFile: what `ringlm serve --trace FILE` writes on shutdown.
func TestTraceFile(t *testing.T) {
	ts := startServer(t, nil)
	file := filepath.Join(t.TempDir(), "trace.json")
	tf, err := StartTraceFile(ts.m.Engine, file, 1<<14)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StartTraceFile(ts.m.Engine, filepath.Join(t.TempDir(), "no", "such", "dir"), 1<<14); err == nil {
		t.Fatal("an unwritable path was accepted")
	}
	for i := range 3 {
		r := ts.post("/v1/completions", map[string]any{"prompt": "Once", "max_tokens": 4}, "X-Request-Id", fmt.Sprintf("tf-%d", i))
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	if err := ts.m.Close(); err != nil { // as serve does: the engine stops, then the file is written
		t.Fatal(err)
	}
	n, err := tf.Finish()
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tracks, steps := spans(t, body)
	for i := range 3 {
		if got := strings.Join(tracks[fmt.Sprintf("tf-%d", i)], ","); got != "queue,prefill,decode" {
			t.Errorf("tf-%d: slices %q", i, got)
		}
	}
	if n == 0 || steps == 0 {
		t.Fatalf("%d events, %d steps", n, steps)
	}
}
