package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"ringlm/engine"
	"ringlm/kernels"
	"ringlm/kernels/null"
	"ringlm/ringbuf"
)

// nullDevice is a Go device for the server tests: the executor speaks the
// ring protocol, tokens are the null device's, and forward (when set)
// decides what a step costs or whether it fails.
type nullDevice struct {
	*kernels.Device
	vocab   int
	forward func([]kernels.Entry) error
}

func newNullDevice(name string, vocab, blocks, slots int, forward func([]kernels.Entry) error) *nullDevice {
	d := &nullDevice{vocab: vocab, forward: forward}
	d.Device = kernels.NewDevice(name, d, slots, blocks)
	return d
}

func (d *nullDevice) Vocab() int     { return d.vocab }
func (d *nullDevice) BlockSize() int { return engine.DefaultBlockSize }
func (d *nullDevice) Forward(batch []kernels.Entry) error {
	if d.forward == nil {
		return nil
	}
	return d.forward(batch)
}
func (d *nullDevice) Pick(_ int, seed uint64, pos int) int32 { return null.Token(seed, pos, d.vocab) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestLoad: many concurrent streaming clients on loopback, some of which
// hang up mid-stream. The others must all finish without error; nothing
// may leak; and the HTTP layer's added latency per token (the client's
// receive time minus the engine's time for the token, one monotonic clock)
// is reported. Run with RINGLM_HTTP_LOAD=1 (see bench/RESULTS.md).
func TestLoad(t *testing.T) {
	if os.Getenv("RINGLM_HTTP_LOAD") == "" {
		t.Skip("set RINGLM_HTTP_LOAD=1 to run the HTTP load test")
	}
	clients := envInt("RINGLM_LOAD_CLIENTS", 200)
	tokens := envInt("RINGLM_LOAD_TOKENS", 256)
	stepMS := envInt("RINGLM_LOAD_STEP_MS", 20)
	dropPct := envInt("RINGLM_LOAD_DROP_PCT", 20)

	v, tok := tinyTokenizer(t)
	cfg := testConfig()
	cfg.Slots = clients + 8
	cfg.MaxChoices = 1
	blocks := clients * ((tokens+64)/16 + 2)
	logs := &syncBuffer{}
	s := New(cfg, zerolog.New(logs).Level(zerolog.WarnLevel))
	// A fixed time per step: the host side sees what a GPU decoding a large
	// batch looks like (tokens for every sequence at once, every few
	// milliseconds), while the CPU stays free for the HTTP layer measured.
	step := time.Duration(stepMS) * time.Millisecond
	dev := newNullDevice("paced-null", len(v.Tokens), blocks, cfg.Slots,
		func([]kernels.Entry) error { time.Sleep(step); return nil })
	eng, err := engine.New(engine.Config{Slots: cfg.Slots, NumBlocks: blocks, Context: 4096, Vocab: len(v.Tokens),
		TokenBudget: 4096, Allocator: ringbuf.HeapAllocator{}, EOS: []int32{v.EOS}, StepHook: s.StepHook()}, dev)
	if err != nil {
		t.Fatal(err)
	}
	ts := serveModel(t, s, &Model{Engine: eng, Tokenizer: tok, Name: "paced", Context: 4096, Fingerprint: "fp_load"}, logs)

	type result struct {
		lat     []int64 // ns per token event: client receive − engine time
		own     []int64 // client receive − HTTP layer's receive from the stream
		wake    []int64 // HTTP layer's receive from the stream − engine time
		tokens  int
		finish  string
		err     error
		dropped bool
	}
	results := make([]result, clients)
	goroutinesBefore := runtime.NumGoroutine()
	var wg sync.WaitGroup
	addr := strings.TrimPrefix(ts.url, "http://")
	t0 := time.Now()
	for i := range clients {
		drop := i*100/clients < dropPct
		dropAt := 0
		if drop {
			dropAt = 5 + rand.IntN(tokens/2)
		}
		wg.Go(func() {
			r := &results[i]
			r.dropped = drop
			r.lat = make([]int64, 0, tokens)
			r.err = loadClient(addr, i, tokens, func(event, data []byte, now int64) bool {
				switch string(event) {
				case "token":
					eng, ok1 := field(data, `"t_engine_ns":`)
					http, ok2 := field(data, `"t_http_ns":`)
					if ok1 && ok2 {
						r.lat = append(r.lat, now-eng)
						r.own = append(r.own, now-http)
						r.wake = append(r.wake, http-eng)
						r.tokens++
					}
				case "end":
					r.finish = string(data)
				case "error":
					r.finish = "error: " + string(data)
				}
				if drop && r.tokens >= dropAt {
					r.finish = "dropped"
					return false
				}
				return r.finish == ""
			})
		})
	}
	wg.Wait()
	wall := time.Since(t0)

	var all, own, wake []int64
	errs := 0
	for i, r := range results {
		all = append(all, r.lat...)
		own = append(own, r.own...)
		wake = append(wake, r.wake...)
		if r.dropped {
			continue
		}
		if r.err != nil || r.tokens != tokens || !strings.Contains(r.finish, `"length"`) {
			errs++
			if errs <= 5 {
				t.Errorf("client %d: %d tokens, finish %q, err %v", i, r.tokens, r.finish, r.err)
			}
		}
	}
	if errs > 0 {
		t.Errorf("%d of %d kept clients failed", errs, clients-clients*dropPct/100)
	}
	waitNoLeaks(t, ts)
	goroutinesAfter := runtime.NumGoroutine()

	pcts := func(xs []int64) string {
		if len(xs) == 0 {
			return "none"
		}
		slices.Sort(xs)
		at := func(p float64) time.Duration { return time.Duration(xs[min(len(xs)-1, int(float64(len(xs))*p))]) }
		return fmt.Sprintf("p50 %v  p90 %v  p99 %v  p99.9 %v  max %v", at(0.5), at(0.9), at(0.99), at(0.999), at(1))
	}
	st := eng.Stats()
	t.Logf("clients %d (%d%% hang up mid-stream), %d tokens each, device step %d ms, GOMAXPROCS %d, %s",
		clients, dropPct, tokens, stepMS, runtime.GOMAXPROCS(0), runtime.Version())
	t.Logf("wall %.2fs, token events received %d (%.0f/s), engine steps %d, generated %d, failed clients %d",
		wall.Seconds(), len(all), float64(len(all))/wall.Seconds(), st.Steps, st.GeneratedTokens, errs)
	t.Logf("engine token time → client receive (total):        %s", pcts(all))
	t.Logf("stream hand-off → client receive (HTTP layer own): %s", pcts(own))
	t.Logf("engine token time → stream hand-off (wake-up):     %s", pcts(wake))
	t.Logf("KV blocks used after: %d; running requests: %d; goroutines before %d, after %d (idle fasthttp workers and engine)",
		st.Blocks.Used, s.Active(), goroutinesBefore, goroutinesAfter)
	if limit := envInt("RINGLM_LOAD_P99_US", 0); limit > 0 {
		slices.Sort(own)
		if p99 := time.Duration(own[len(own)*99/100]); p99 > time.Duration(limit)*time.Microsecond {
			t.Errorf("HTTP layer p99 %v over %d µs", p99, limit)
		}
	}
}

// loadClient is a lean HTTP/1.1 SSE client, as a load generator should be
// (net/http's client costs more CPU per event than the server measured
// here): one connection, the request written by hand, the chunked body
// decoded in place. on gets every event with the monotonic receive time
// and returns false to hang up.
func loadClient(addr string, i, tokens int, on func(event, data []byte, now int64) bool) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	body := fmt.Sprintf(`{"prompt":"The ring buffer number %d","max_tokens":%d,"ignore_eos":true,"seed":%d}`, i, tokens, i)
	if _, err := fmt.Fprintf(conn, "POST /execute HTTP/1.1\r\nHost: load\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		return err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	status, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.Contains(status, []byte(" 200 ")) {
		return fmt.Errorf("status %q", status)
	}
	for { // headers
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
	}
	var pending, event []byte // SSE text carried across chunks
	for {
		sizeLine, err := br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("reading a chunk size: %w", err)
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(sizeLine)), 16, 64)
		if err != nil {
			return fmt.Errorf("chunk size %q", sizeLine)
		}
		if size == 0 {
			return fmt.Errorf("stream ended without an end event")
		}
		now := int64(time.Since(epoch))
		if int(size)+2 <= br.Size() {
			chunk, err := br.Peek(int(size) + 2)
			if err != nil {
				return err
			}
			pending = append(pending, chunk[:size]...)
			br.Discard(int(size) + 2)
		} else {
			chunk := make([]byte, size+2)
			if _, err := io.ReadFull(br, chunk); err != nil {
				return err
			}
			pending = append(pending, chunk[:size]...)
		}
		off := 0
		for {
			nl := bytes.IndexByte(pending[off:], '\n')
			if nl < 0 {
				break
			}
			line := pending[off : off+nl]
			switch {
			case bytes.HasPrefix(line, []byte("event: ")):
				event = append(event[:0], line[7:]...)
			case bytes.HasPrefix(line, []byte("data: ")):
				if !on(event, line[6:], now) {
					return nil
				}
			}
			off += nl + 1
		}
		pending = pending[:copy(pending, pending[off:])]
	}
}

// field reads an integer field of a token event without decoding JSON.
func field(data []byte, key string) (int64, bool) {
	k := bytes.Index(data, []byte(key))
	if k < 0 {
		return 0, false
	}
	rest := data[k+len(key):]
	e := bytes.IndexAny(rest, ",}")
	if e < 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(string(rest[:e]), 10, 64)
	return ns, err == nil
}
