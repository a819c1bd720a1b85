#!/bin/bash
# issue 15 round 19: warp groups' partials in shared memory (attn4): tests, decode b1/b16 against attn3, HTTP with attn4
set -u
R=$PWD; mkdir -p /tmp/bin; gunzip -c .carry/cuda.test.gz > /tmp/bin/cuda.test; gunzip -c .carry/ringlm.gz > /tmp/bin/ringlm; chmod +x /tmp/bin/*; CT=/tmp/bin/cuda.test
cd kernels/cuda
echo "== tests attn4"
RINGLM_CUDA_LIB=$R/.carry/lib/attn4.so timeout 200 $CT -test.v > $OUT/tests-attn4.log 2>&1; echo "rc $?"
grep -E "^(--- |PASS|FAIL|ok)" $OUT/tests-attn4.log | grep -v "^--- PASS" | head; grep -c "^--- PASS" $OUT/tests-attn4.log
RINGLM_CUDA_LIB=$R/.carry/lib/attn4.so timeout 60 $CT -test.run 'TestSlidingWindow' 2>&1 | tail -1
for n in attn4 attn3; do for b in 1 16; do
  echo "== $n decode batch$b"
  RINGLM_CUDA_LIB=$R/.carry/lib/$n.so RINGLM_CUDA_PROFILE=1 timeout 100 $CT -test.run '^$' -test.bench "Decode/batch$b\$" -test.benchtime 200x 2>&1 | grep -E "Benchmark|profile: [0-9]|FAIL|panic" | cut -c1-230
done; done
cd $R
export RINGLM_CUDA_LIB=$R/.carry/lib/attn4.so
B=/tmp/bin/ringlm
$B synth --preset llama-3.2-1b --type bf16 --seed 1 -o /tmp/1b.gguf > /dev/null || exit 1
$B serve -m /tmp/1b.gguf --device cuda --port 18080 --slots 256 --kv-memory 16384 > /tmp/serve.log 2>&1 &
for i in $(seq 90); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done
for c in 1 64 256; do
  n=$((c < 16 ? 32 : 2 * c))
  timeout 120 $B bench serve --url http://127.0.0.1:18080 --num-prompts $n --concurrency $c --input-len 128 --output-len 128 --seed 1 --no-progress --result-file $OUT/gpu-1b-c$c.json > $OUT/gpu-1b-c$c.txt 2>&1
  echo "== http concurrency $c"; grep -E "Output token throughput|Median TTFT|Median TPOT|Successful|Failed" $OUT/gpu-1b-c$c.txt
done
kill %1; wait
echo "errors in serve log: $(grep -c '"level":"error"' /tmp/serve.log)"
echo "== done $SECONDS s"
