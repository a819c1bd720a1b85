#!/bin/bash
# Round 116: issue 15's table in one run on main's kernel (tcmod): Llama-3.2-1B BF16 decode and prefill beside the
# gpt-fast-style peer (bench/peers/run_all.sh), Llama-3.2-1B Q8_0 decode, Qwen2.5-0.5B BF16 decode and prefill beside
# the peer on the same shape (RINGLM_BENCH_PRESET), then HTTP at concurrency 1, 64 and 256.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && gunzip -c .carry/lib/tcmod.so.gz > /tmp/r/tcmod.so
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
gunzip -c .carry/ringlm.gz > /tmp/r/ringlm && chmod +x /tmp/r/ringlm
R=/tmp/r/ringlm L=/tmp/r/tcmod.so
export RINGLM_CUDA_LIB=$L
el "1B BF16 with the peer"
PEERS=gptfast OUT=$OUT/1b BUDGET_S=240 GO_BENCHTIME=100x bash bench/peers/run_all.sh $R /tmp/r/c.test > /dev/null 2>&1
grep -E "^\| (ringlm|gpt-fast)" $OUT/1b/table.md
el "1B Q8_0"
(cd kernels/cuda && RINGLM_BENCH_TYPE=q8_0 timeout 90 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$' -test.benchtime 50x 2>&1 | grep -E "^Benchmark|FAIL" | cut -c1-200)
el "Qwen2.5-0.5B BF16 with the peer"
mkdir -p /tmp/ringlm-peers && $R synth --preset qwen2.5-0.5b --type bf16 --seed 1 -o /tmp/ringlm-peers/qwen-bf16.gguf > /dev/null
RINGLM_BENCH_PRESET=qwen2.5-0.5b GGUF=/tmp/ringlm-peers/qwen-bf16.gguf PEERS=gptfast OUT=$OUT/qwen BUDGET_S=220 GO_BENCHTIME=100x bash bench/peers/run_all.sh $R /tmp/r/c.test > /dev/null 2>&1
grep -E "^Model|^\| (ringlm|gpt-fast)" $OUT/qwen/table.md
el "HTTP"
$R synth --preset llama-3.2-1b --type bf16 --seed 1 -o /tmp/1b.gguf > /dev/null || exit 1
$R serve -m /tmp/1b.gguf --device cuda --port 18080 --kv-memory 8192 > $OUT/serve.log 2>&1 &
for i in $(seq 90); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done
for c in 1 64 256; do n=$((c < 16 ? 32 : 4 * c))
  $R bench serve --url http://127.0.0.1:18080 --num-prompts $n --concurrency $c --input-len 128 --output-len 128 --no-progress > $OUT/http-c$c.txt 2>&1
  echo "c$c: $(grep -E "Output token throughput|Median TTFT|Successful|Failed" $OUT/http-c$c.txt | tr -s ' ' | paste -sd';')"
done
kill %1; wait; echo "errors in the log: $(grep -c '"level":"error"' $OUT/serve.log)"
el done
