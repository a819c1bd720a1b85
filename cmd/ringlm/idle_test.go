package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeIdleCPU measures what an idle `ringlm serve` costs: the CPU
// time of all its threads (procCPU) and their voluntary context switches
// (wake-ups) over a window in which no request runs, once after start
// and once after a request; and the latency of a request after idleness
// beside the next one's. It logs the figures (bench/RESULTS.md keeps
// them) and asserts nothing about time: a busy machine moves them. Opt
// in with RINGLM_IDLE_TEST=1; RINGLM_IDLE_SECONDS sets the window
// (default 30), RINGLM_IDLE_BIN a `make build` binary to measure
// (default: this test binary run as ringlm, which is the same program).
//
//	RINGLM_IDLE_TEST=1 go test -run TestServeIdleCPU -v -timeout 5m ./cmd/ringlm
func TestServeIdleCPU(t *testing.T) {
	if os.Getenv("RINGLM_IDLE_TEST") != "1" {
		t.Skip("set RINGLM_IDLE_TEST=1 to measure an idle server (takes twice RINGLM_IDLE_SECONDS and 30 s more)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	window := 30 * time.Second
	if v := os.Getenv("RINGLM_IDLE_SECONDS"); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s <= 0 {
			t.Fatalf("RINGLM_IDLE_SECONDS=%q: want a positive number of seconds", v)
		}
		window = time.Duration(s * float64(time.Second))
	}
	bin, env := os.Args[0], append(os.Environ(), "RINGLM_TEST_MAIN=1")
	if b := os.Getenv("RINGLM_IDLE_BIN"); b != "" {
		bin, env = b, os.Environ()
	}
	// The built-in model on the CPU: what `ringlm serve` runs on a fresh
	// clone without a GPU.
	cmd := exec.Command(bin, "serve", "--port", "0", "--device", "cpu", "--log-format", "json")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	base := "http://" + waitListening(t, stderr)
	waitHealthy(t, base)

	const settle = 2 * time.Second // let start-up (or the request) finish
	time.Sleep(settle)
	cpu, sw := idleWindow(t, pid, window)
	t.Logf("idle after start: %.3f%% of a core, %.1f wake-ups/s over %v", cpu, sw, window)

	first := complete(t, base)
	warm := complete(t, base)
	t.Logf("first request after %v idle: %v; the next one (warm): %v", window+settle, first, warm)

	time.Sleep(settle)
	cpu, sw = idleWindow(t, pid, window)
	t.Logf("idle after a request: %.3f%% of a core, %.1f wake-ups/s over %v", cpu, sw, window)

	// One pair says little on a shared machine: the medians of 15 pairs,
	// each a request after 1 s of idleness and one right after it.
	const pairs = 15
	var idle, next []time.Duration
	for range pairs {
		time.Sleep(time.Second)
		idle = append(idle, complete(t, base))
		next = append(next, complete(t, base))
	}
	t.Logf("one-token request, median of %d: after 1 s idle %v, right after another %v", pairs, median(idle), median(next))
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// idleWindow returns the CPU time of process pid over d as a percentage
// of one core, and its threads' voluntary context switches per second.
func idleWindow(t *testing.T, pid int, d time.Duration) (cpuPct, switchesPerSec float64) {
	t.Helper()
	c0, s0 := procCPU(t, pid), procSwitches(t, pid)
	t0 := time.Now()
	time.Sleep(d)
	c1, s1 := procCPU(t, pid), procSwitches(t, pid)
	el := time.Since(t0)
	return 100 * (c1 - c0).Seconds() / el.Seconds(), float64(s1-s0) / el.Seconds()
}

// procCPU is the CPU time of the whole process: the sum of its threads'
// run time in nanoseconds (/proc/PID/task/*/schedstat) where the kernel
// keeps it, which resolves the few milliseconds an idle window costs;
// else utime+stime (/proc/PID/stat), in USER_HZ ticks of 10 ms. Go's
// threads live as long as the process, so the sum loses nothing.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	if tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid)); len(tasks) > 0 {
		var ns int64
		ok := true
		for _, p := range tasks {
			b, err := os.ReadFile(p)
			if err != nil {
				continue // the thread exited
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				ok = false
				break
			}
			v, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				ok = false
				break
			}
			ns += v
		}
		if ok {
			return time.Duration(ns)
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name may hold spaces: the fields follow its ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procSwitches sums voluntary_ctxt_switches over the process's threads:
// each is a thread that went to sleep and was woken, so an idle process
// that polls shows it as switches per second.
func procSwitches(t *testing.T, pid int) int64 {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("/proc/%d/task: %v", pid, err)
	}
	var n int64
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += k
			}
		}
	}
	return n
}

// waitListening reads the server's JSON log until it names its address,
// then keeps draining it so the server never blocks on a full pipe.
func waitListening(t *testing.T, r io.Reader) string {
	t.Helper()
	sc := bufio.NewScanner(r)
	addr := make(chan string, 1)
	go func() {
		found := false
		for sc.Scan() {
			var l struct{ Addr string }
			if !found && json.Unmarshal(sc.Bytes(), &l) == nil && l.Addr != "" {
				found = true
				addr <- l.Addr
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("the server exited before it listened")
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("the server named no address within 30 s")
	}
	return ""
}

func waitHealthy(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not healthy within 60 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// complete sends a one-token completion (its latency is the time to the
// first token, and the HTTP round trip) and returns how long it took.
// Each request dials anew, so the first pays no more than the next.
func complete(t *testing.T, base string) time.Duration {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	body := `{"prompt":"package main\n\nfunc main() {","max_tokens":1,"temperature":0}`
	t0 := time.Now()
	resp, err := c.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: %d %s", resp.StatusCode, b)
	}
	return d
}
