package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `ringlm bench serve` against `ringlm serve` on the tiny model: every
// request completes with exactly its max_tokens (ignore_eos), the prompts
// are --input-len tokens by the server's /tokenize, and the server's usage
// gives the prompt lengths.
func TestBenchServeAgainstServer(t *testing.T) {
	model := tinyGGUF(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrCh := make(chan string, 1)
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, []string{"-m", model, "--port", "0", "--device", "cpu", "--slots", "4", "--kv-blocks", "128",
			"--log-format", "json", "--log-level", "warn"}, logs, func(addr string) { addrCh <- addr }, nil)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	var base string
	select {
	case a := <-addrCh:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("serve returned early: %v\n%s", err, logs.String())
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %v\n%s", err, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	for _, endpoint := range []string{"/v1/completions", "/v1/chat/completions"} {
		res := filepath.Join(t.TempDir(), "result.json")
		code, out, errOut := runCmd(t, "bench", "serve", "--url", base, "--endpoint", endpoint, "--num-prompts", "8", "--concurrency", "4",
			"--input-len", "16", "--output-len", "8", "--result-file", res)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s\n%s", endpoint, code, out, errOut, logs.String())
		}
		b, err := os.ReadFile(res)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Completed      int         `json:"completed"`
			Failed         int         `json:"failed"`
			TotalInput     int         `json:"total_input_tokens"`
			TotalOutput    int         `json:"total_output_tokens"`
			InputLens      []int       `json:"input_lens"`
			MaxConcurrency int         `json:"max_concurrency"`
			OutputLens     []int       `json:"output_lens"`
			TTFTs          []float64   `json:"ttfts"`
			ITLs           [][]float64 `json:"itls"`
			Errors         []string    `json:"errors"`
			MeanTPOT       float64     `json:"mean_tpot_ms"`
			Ringlm         struct {
				FromServer  int    `json:"input_lens_from_server"`
				MaxInFlight int    `json:"peak_requests_in_flight"`
				CountedBy   string `json:"input_len_counted_by"`
			} `json:"ringlm"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if v.Completed != 8 || v.Failed != 0 || v.TotalOutput != 64 || v.MaxConcurrency != 4 {
			t.Errorf("%s: completed %d failed %d output tokens %d\n%s", endpoint, v.Completed, v.Failed, v.TotalOutput, b)
		}
		// Prompt lengths come from the server's usage: 16 tokens, BOS
		// included (chat adds its template's).
		if v.Ringlm.FromServer != 8 || v.Ringlm.CountedBy != "the server's /tokenize" || !strings.Contains(errOut, "exactly 16 tokens each") {
			t.Errorf("%s: %d input lengths from the server, counted by %q\n%s", endpoint, v.Ringlm.FromServer, v.Ringlm.CountedBy, errOut)
		}
		for i, n := range v.InputLens {
			if endpoint == "/v1/completions" && n != 16 || n < 16 {
				t.Errorf("%s: request %d: %d prompt tokens, --input-len 16", endpoint, i, n)
			}
		}
		if v.Ringlm.MaxInFlight > 4 {
			t.Errorf("%s: %d requests in flight with --concurrency 4", endpoint, v.Ringlm.MaxInFlight)
		}
		if len(v.OutputLens) != 8 || len(v.TTFTs) != 8 || len(v.ITLs) != 8 || len(v.Errors) != 8 || v.MeanTPOT <= 0 {
			t.Errorf("%s: per-request arrays: %s", endpoint, b)
		}
		// An inter-token latency per streamed event after the first: a
		// request whose tokens were all sampled before its first event
		// was written has none (the tiny model decodes 8 tokens in well
		// under a millisecond), but not every request can.
		itls := 0
		for i := range v.TTFTs {
			if v.OutputLens[i] != 8 || v.TTFTs[i] <= 0 || v.Errors[i] != "" || len(v.ITLs[i]) >= v.OutputLens[i] {
				t.Errorf("%s: request %d: %d tokens, ttft %v, itls %v, error %q", endpoint, i, v.OutputLens[i], v.TTFTs[i], v.ITLs[i], v.Errors[i])
			}
			itls += len(v.ITLs[i])
		}
		if itls == 0 {
			t.Errorf("%s: no request has an inter-token latency: %s", endpoint, b)
		}
		if !strings.Contains(out, "Serving Benchmark Result") || !strings.Contains(out, "Successful requests:                     8") {
			t.Errorf("%s: summary:\n%s", endpoint, out)
		}
	}
}

func TestBenchUsage(t *testing.T) {
	if code, _, errOut := runCmd(t, "bench"); code != 2 || !strings.Contains(errOut, "serve") {
		t.Errorf("no subcommand: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "bench", "nope"); code != 2 || !strings.Contains(errOut, `unknown subcommand "nope"`) {
		t.Errorf("unknown subcommand: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "bench", "serve", "--num-prompts", "3"); code != 2 || !strings.Contains(errOut, "--url is required") {
		t.Errorf("no url: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "bench", "serve", "--url", "http://127.0.0.1:1", "--rate", "-1"); code != 2 || !strings.Contains(errOut, "--rate") {
		t.Errorf("bad rate: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "bench", "serve", "-h"); code != 0 || !strings.Contains(errOut, "--url URL") {
		t.Errorf("-h: %d %q", code, errOut)
	}
	// A llama-bench value the engine bench refuses: one line and the
	// pointer to -h, nothing on stdout.
	if code, out, errOut := runCmd(t, "bench", "engine", "-m", tinyGGUF(t), "--device", "cpu", "-p", "0"); code != 2 || out != "" ||
		!strings.HasPrefix(errOut, "ringlm bench engine: -p 0:") || !strings.Contains(errOut, "'ringlm bench engine -h'") || strings.Count(errOut, "\n") != 2 {
		t.Errorf("-p 0: %d %q %q", code, out, errOut)
	}
	if code, out, _ := runCmd(t, "bench", "help"); code != 0 || !strings.Contains(out, "report") {
		t.Errorf("bench help: %d %q", code, out)
	}
	if code, out, _ := runCmd(t, "help"); code != 0 || !strings.Contains(out, "bench") {
		t.Errorf("help does not list bench: %q", out)
	}
}

// A bench subcommand's own exit status reaches the binary's (bench serve
// exits 130 when interrupted, 1 when nothing completed).
func TestBenchExitStatus(t *testing.T) {
	saved := benchCommands[0].main
	defer func() { benchCommands[0].main = saved }()
	for _, want := range []int{1, 130} {
		benchCommands[0].main = func(args []string, stdout, stderr io.Writer) int { return want }
		code, _, errOut := runCmd(t, "bench", benchCommands[0].name)
		if code != want || strings.Count(errOut, "\n") != 1 {
			t.Errorf("subcommand status %d: binary %d, stderr %q", want, code, errOut)
		}
	}
}
