#!/bin/bash
# GPU host, repo root, .carry/ringlm carried: ringlm serve on the CUDA device
# (Llama-3.2-1B-shaped BF16 synthetic), driven by ringlm bench serve at
# concurrency 1, 16, 64; a 3 s /debug/trace window; bench report of the runs.
# Each run draws new prompts (no --seed): a repeated seed resends prompts the
# server's prefix cache holds, and the run is faster for it.
set -x
make cuda > $OUT/build.log 2>&1 || exit 1
R=.carry/ringlm
$R synth --preset llama-3.2-1b --type bf16 --seed 1 -o /tmp/1b.gguf > /dev/null || exit 1
$R serve -m /tmp/1b.gguf --device cuda --debug --port 18080 --kv-memory 8192 > /tmp/serve.log 2>&1 &
for i in $(seq 60); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done
for c in 1 16 64; do
  n=$((c < 16 ? 32 : 4 * c))
  $R bench serve --url http://127.0.0.1:18080 --num-prompts $n --concurrency $c --input-len 128 --output-len 128 --no-progress --result-file $OUT/gpu-1b-c$c.json > $OUT/gpu-1b-c$c.txt 2>&1
  grep -E "Output token throughput|Median TTFT|Median TPOT|P99 ITL|Successful|Failed" $OUT/gpu-1b-c$c.txt
done
( sleep 1; curl -s 'localhost:18080/debug/trace?seconds=3' -o $OUT/trace.json ) &
$R bench serve --url http://127.0.0.1:18080 --num-prompts 64 --concurrency 16 --input-len 64 --output-len 64 --no-progress > /dev/null 2>&1
wait %2 2>/dev/null; sleep 1
python3 -c "import json;d=json.load(open('$OUT/trace.json'));ev=d['traceEvents'];print(len(ev),'trace events;', sum(1 for e in ev if e.get('name')=='decode'),'decode spans;', d.get('metadata',{}))" 
kill %1; wait
grep -c '"level":"error"' /tmp/serve.log
$R bench report $OUT/gpu-1b-c*.json -o $OUT/report.html && ls -la $OUT
