// Package bench owns ringlm's measuring tools: the HTTP load generator
// (`ringlm bench serve`), the in-process engine benchmark (`ringlm bench
// engine`) and the HTML report (`ringlm bench report`). Figures measured
// so far, each with its machine, command and date, are recorded in
// RESULTS.md beside this file; logs of GPU runs are under logs/, the
// scripts that made some of them under scripts/, and the PyTorch peers
// ringlm is compared with under peers/ (Python, run on the GPU host by
// `make bench-gpu`; peers/README.md).
//
// bench serve (serve*.go) loads ringlm or any OpenAI-compatible server and
// measures as `vllm bench serve` does. Streaming requests
// (stream_options.include_usage, ignore_eos) from random-word prompts or a
// JSONL dataset; arrivals gamma-distributed (--rate, --burstiness) and/or
// capped (--concurrency), reproducible from --seed (a new seed each run
// otherwise, printed, so that a second run does not meet the first one's
// prompts in the server's prefix cache). Random prompts are exactly
// --input-len tokens as the server counts them (serve_tokenizer.go: the
// server's POST /tokenize and /detokenize in llama.cpp's or vLLM's shape,
// or --tokenizer FILE.gguf / tokenizer.json; an estimate, with a note,
// when there is neither): words until the text is long enough, cut at a
// token boundary and re-encoded (RandomPrompts). Each request's send
// time, each chunk that carries a token (text, or a completions chunk of
// empty text before the finish, as vLLM's client counts it; role-only chat
// chunks do not start TTFT),
// its end, usage token counts and any error are recorded against an
// injectable clock; SummarizeServe is a pure function from those records
// to vLLM's metrics (TTFT, TPOT = (E2EL − TTFT)/(out − 1), pooled ITL,
// E2EL, throughputs, numpy-linear percentiles, population std).
// --result-file writes vLLM's JSON fields (ttfts, itls, input_lens,
// output_lens, errors, p<N>_<metric>_ms, …) plus a "ringlm" object (url,
// endpoint, seed, input_len_counted_by, e2els, send_times, and the two
// peaks under names that say how they count: vLLM's
// max_concurrent_requests, completed requests active in one-second
// buckets, is also peak_concurrent_requests_1s_buckets, and
// peak_requests_in_flight is the exact most at one instant; the
// configured cap, vLLM's max_concurrency, is also concurrency_cap). ^C
// stops sending, lets requests in flight finish for --grace, then reports.
//
// bench engine (engine.go) times decode and prefill without HTTP on any
// device, loading the model through package runner, on the device clock
// (engine.Config.StepHook). Decode rows add a roofline: bytes per step =
// WeightBytes + B·context·layers·2·kv_heads·head_dim·elem, against copy
// bandwidth measured in the same run (CPU: CPUCopyBandwidth, copy() over
// GOMAXPROCS goroutines; CUDA: cuda.Device.CopyBandwidth on a throwaway
// device, since it must run before the persistent kernel starts), with
// the floor and the distance to it (x-floor).
//
// bench engine --llama-bench (llamabench.go) runs llama.cpp's llama-bench
// tests on the same clock, at batch 1: pp N (one request of N random
// prompt tokens, timed from its first step's start to its last step's
// end, after one untimed run) and tg N (N decode steps of a request with
// a one-token prompt), each -r times, with -t threads (GOMAXPROCS, at
// most the process's at start, which sized the CPU device's workers).
// The table has llama-bench's columns and model label (ModelType:
// architecture, general.size_label or gguf-py's label of the parameter
// count, llama.cpp's file type name), t/s as mean ± sample standard
// deviation, then min, median and max; -o json writes llama-bench's JSON
// fields with the per-repetition samples.
//
// bench report (report.go, svg.go) reads `bench serve` and `vllm bench
// serve` result files and writes one self-contained page (inline CSS and
// SVG, no script): a summary table, CDFs of TTFT, TPOT, ITL and E2EL per
// run, output tok/s against max_concurrency, median/p99 TTFT against
// request rate. svg.go is the plot helper (linear/log axes, nice ticks,
// polylines, legends).
package bench
