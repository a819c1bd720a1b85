#!/bin/bash
# Round 112: is the "slower first run at 256" a warm-up or the prefix cache? Rounds 107-110 passed --seed 1 to every run,
# so later runs sent prompts the server had cached. Here: main's binary and tensor-core library (tcmod), a fresh server,
# runs with new seeds and with a repeated seed, the prefix-cache counters from /metrics after each; then a server with
# --prefix-cache=false.
set -u; k=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/ringlm.gz > /tmp/r/ringlm && chmod +x /tmp/r/ringlm
R=/tmp/r/ringlm
$R synth --preset llama-3.2-1b --type bf16 --seed 1 -o /tmp/1b.gguf > /dev/null || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
run() { # concurrency seed
  local c=$1 s=$2; n=$((c < 16 ? 32 : 4 * c)); k=$((k + 1))
  el "run $k: concurrency $c, seed $s, $n prompts"
  $R bench serve --url http://127.0.0.1:18080 --num-prompts $n --concurrency $c --input-len 128 --output-len 128 --seed $s --no-progress --result-file $OUT/http-$k-c$c-s$s.json > $OUT/http-$k-c$c-s$s.txt 2>&1
  grep -E "Output token throughput|Median TTFT|Failed" $OUT/http-$k-c$c-s$s.txt | tr -s ' ' | paste -sd';'
  curl -s localhost:18080/metrics | grep -E "^ringlm:prefix_cache_(queries|hits)_total" | paste -sd' '
}
start() { el "serve $*"; RINGLM_CUDA_LIB=/tmp/r/tcmod.so $R serve -m /tmp/1b.gguf --device cuda --port 18080 --kv-memory 8192 "$@" > $OUT/serve-$k.log 2>&1 &
  for i in $(seq 90); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done; }
stop() { kill %1; wait; echo "errors in the log: $(grep -c '"level":"error"' $OUT/serve-*.log | paste -sd' ')"; }
start
run 256 101; run 256 102; run 256 101; run 64 103; run 64 103; run 1 104; run 256 105
stop
start --prefix-cache=false
run 256 201; run 256 201; run 64 202; run 1 203
stop
el done
