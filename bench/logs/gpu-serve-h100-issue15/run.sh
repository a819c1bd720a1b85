#!/bin/bash
# issue 15, final round B: the whole CUDA test suite, then HTTP (128 in / 128 out) with the library of round A
set -u
R=$PWD; export RINGLM_CUDA_LIB=$R/.carry/lib/final.so
mkdir -p /tmp/bin && gunzip -c .carry/ringlm.gz > /tmp/bin/ringlm && gunzip -c .carry/cuda.test.gz > /tmp/bin/cuda.test && chmod +x /tmp/bin/*
( cd kernels/cuda && timeout 280 /tmp/bin/cuda.test -test.v -test.timeout 270s > $OUT/cuda-tests.log 2>&1; echo "cuda tests rc $?" )
grep -E "^(--- |ok|FAIL|PASS|panic)" $OUT/cuda-tests.log | sort | uniq -c | sort -rn | head -40
B=/tmp/bin/ringlm
$B synth --preset llama-3.2-1b --type bf16 --seed 1 -o /tmp/1b.gguf > /dev/null || exit 1
$B serve -m /tmp/1b.gguf --device cuda --port 18080 --kv-memory 16384 > /tmp/serve.log 2>&1 &
for i in $(seq 90); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done
for c in 1 64 256; do
  n=$((c < 16 ? 32 : 2 * c))
  timeout 120 $B bench serve --url http://127.0.0.1:18080 --num-prompts $n --concurrency $c --input-len 128 --output-len 128 --seed 1 --no-progress --result-file $OUT/gpu-1b-c$c.json > $OUT/gpu-1b-c$c.txt 2>&1
  echo "== concurrency $c"; grep -E "Output token throughput|Median TTFT|Median TPOT|Successful|Failed" $OUT/gpu-1b-c$c.txt
done
kill %1; wait
grep -c '"level":"error"' /tmp/serve.log
echo "== done $SECONDS s"
