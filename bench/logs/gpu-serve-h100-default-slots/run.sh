#!/bin/bash
# issue 15: HTTP with the default slots (256 on CUDA now), 128 in / 128 out; library: whole3 (nvcc 11.8, the current source)
set -u
R=$PWD; export RINGLM_CUDA_LIB=$R/.carry/lib/whole3.so
mkdir -p /tmp/bin && gunzip -c .carry/ringlm.gz > /tmp/bin/ringlm && chmod +x /tmp/bin/ringlm
B=/tmp/bin/ringlm
$B synth --preset llama-3.2-1b --type bf16 --seed 1 -o /tmp/1b.gguf > /dev/null || exit 1
$B serve -m /tmp/1b.gguf --device cuda --port 18080 --kv-memory 16384 > /tmp/serve.log 2>&1 &
for i in $(seq 90); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done
curl -s localhost:18080/health; echo
for c in 1 64 256; do
  n=$((c < 16 ? 32 : 2 * c))
  timeout 100 $B bench serve --url http://127.0.0.1:18080 --num-prompts $n --concurrency $c --input-len 128 --output-len 128 --seed 1 --no-progress > $OUT/gpu-1b-default-c$c.txt 2>&1
  echo "== http concurrency $c"; grep -E "Output token throughput|Median TTFT|Median TPOT|Failed" $OUT/gpu-1b-default-c$c.txt
done
kill %1; wait
echo "errors in serve log: $(grep -c '"level":"error"' /tmp/serve.log)"
echo "== done $SECONDS s"
