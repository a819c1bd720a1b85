#!/bin/bash
# issue 15 (2026-11-24, sixth session): with an nvcc 11.8 library (w2n.so) of c78ce62's kernel source (bed3c96 has the same kernel): the CUDA suite, decode and prefill, then the peer table and HTTP 128 in / 128 out with the default slots (256 on CUDA)
set -u
R=$PWD; gunzip -f .carry/lib/w2n.so.gz; export RINGLM_CUDA_LIB=$R/.carry/lib/w2n.so
mkdir -p /tmp/bin && gunzip -c .carry/ringlm.gz > /tmp/bin/ringlm && gunzip -c .carry/cuda.test.gz > /tmp/bin/cuda.test && chmod +x /tmp/bin/*
CT=/tmp/bin/cuda.test
(cd kernels/cuda
echo "== tests w2n"
timeout 170 $CT -test.v > $OUT/tests-w2n.log 2>&1; echo "rc $?"
grep -E "^(--- |PASS|FAIL|ok|panic)" $OUT/tests-w2n.log | grep -v "^--- PASS" | head; grep -c "^--- PASS" $OUT/tests-w2n.log
grep -E "^        --- FAIL|max logprob|rlm_test_gemm" $OUT/tests-w2n.log | head -8
echo "-- w2n"; timeout 120 $CT -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | cut -c1-170)
PEERS=gptfast BUDGET_S=330 OUT=$OUT/bench bash bench/peers/run_all.sh /tmp/bin/ringlm /tmp/bin/cuda.test > /dev/null 2>&1
sed -n '/== .* table/,$p' $OUT/bench/run.log | grep -E "^\| ringlm|prefill|Floor"
B=/tmp/bin/ringlm
$B serve -m /tmp/ringlm-peers/llama-3.2-1b-bf16.gguf --device cuda --port 18080 --kv-memory 16384 > /tmp/serve.log 2>&1 &
for i in $(seq 90); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done
for c in 1 64 256; do
  n=$((c < 16 ? 32 : 2 * c))
  timeout 100 $B bench serve --url http://127.0.0.1:18080 --num-prompts $n --concurrency $c --input-len 128 --output-len 128 --seed 1 --no-progress > $OUT/gpu-1b-default-c$c.txt 2>&1
  echo "== http concurrency $c"; grep -E "Output token throughput|Median TTFT|Median TPOT|Failed" $OUT/gpu-1b-default-c$c.txt
done
kill %1; wait
echo "errors in serve log: $(grep -c '"level":"error"' /tmp/serve.log)"
echo "== done $SECONDS s"
