#!/bin/bash
# Round 110: round 109 on main (its binary and main2), concurrency 256, 64, 256.
# bench/scripts/gpu_serve.sh but on carried libraries: branch i15-tcmod's binary and library (tcmod) at concurrency 1,
# 64, 256 (main2 did not fit the carry: 23k at 256 last measured).
set -u; k=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/ringlm.gz > /tmp/r/ringlm && chmod +x /tmp/r/ringlm
/tmp/r/ringlm synth --preset llama-3.2-1b --type bf16 --seed 1 -o /tmp/1b.gguf > /dev/null || exit 1
serve() { # binary lib concurrencies...
  local R=$1 L=$2; shift 2
  el "serve $R $L"
  RINGLM_CUDA_LIB=/tmp/r/$L.so $R serve -m /tmp/1b.gguf --device cuda --port 18080 --kv-memory 8192 > $OUT/serve-$L.log 2>&1 &
  for i in $(seq 90); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done
  for c in "$@"; do
    n=$((c < 16 ? 32 : 4 * c))
    k=$((k + 1)); el "$L concurrency $c"
    $R bench serve --url http://127.0.0.1:18080 --num-prompts $n --concurrency $c --input-len 128 --output-len 128 --seed 1 --no-progress --result-file $OUT/http-$L-$c-$k.json > $OUT/http-$L-$c-$k.txt 2>&1
    grep -E "Output token throughput|Median TTFT|Median TPOT|Successful|Failed" $OUT/http-$L-$c-$k.txt
  done
  kill %1; wait
  echo "errors in the log: $(grep -c '"level":"error"' $OUT/serve-$L.log)"; grep -i "kernel\|cuda" $OUT/serve-$L.log | head -3 | cut -c1-300
}
serve /tmp/r/ringlm main2 256 64 256

el done
