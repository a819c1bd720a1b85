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
// capped (--concurrency), reproducible from --seed. Each request's send
// time, each chunk that carries text (role-only chunks do not start TTFT),
// its end, usage token counts and any error are recorded against an
// injectable clock; SummarizeServe is a pure function from those records
// to vLLM's metrics (TTFT, TPOT = (E2EL − TTFT)/(out − 1), pooled ITL,
// E2EL, throughputs, numpy-linear percentiles, population std).
// --result-file writes vLLM's JSON fields (ttfts, itls, input_lens,
// output_lens, errors, p<N>_<metric>_ms, …) plus a "ringlm" object (url,
// endpoint, seed, e2els, send_times, max_in_flight). ^C stops sending,
// lets requests in flight finish for --grace, then reports.
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
// bench report (report.go, svg.go) reads `bench serve` and `vllm bench
// serve` result files and writes one self-contained page (inline CSS and
// SVG, no script): a summary table, CDFs of TTFT, TPOT, ITL and E2EL per
// run, output tok/s against max_concurrency, median/p99 TTFT against
// request rate. svg.go is the plot helper (linear/log axes, nice ticks,
// polylines, legends).
package bench
