#!/bin/bash
# Round 113: the branch's binary (a streamed completion has a chunk for every token, also one without text; bench serve
# counts those chunks as vLLM's client does) with main's tensor-core library: the seed whose request failed in round
# 112 (102) and new ones, each concurrency on prompts the server has not seen.
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
  grep -E "Output token throughput|Median TTFT|P99 TTFT|Successful|Failed" $OUT/http-$k-c$c-s$s.txt | tr -s ' ' | paste -sd';'
  grep -A3 "^errors" $OUT/http-$k-c$c-s$s.txt | head -4
}
el serve; RINGLM_CUDA_LIB=/tmp/r/tcmod.so $R serve -m /tmp/1b.gguf --device cuda --port 18080 --kv-memory 8192 > $OUT/serve.log 2>&1 &
for i in $(seq 90); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done
run 1 301; run 64 302; run 256 102; run 256 303; run 256 304
kill %1; wait; echo "errors in the log: $(grep -c '"level":"error"' $OUT/serve.log)"
el done
