#!/bin/bash
# Round 127 (issue 15, twenty-second session): where issues 15 and 17 end. main's library built from HEAD (main127),
# the whole GPU suite on it, then issue 15's table in one run as round 116 took it (the 1B BF16 and Qwen2.5-0.5B BF16
# beside the gpt-fast-style peer, the 1B Q8_0), issue 17's Q4_K_M decode, and HTTP at concurrency 1, 64 and 256.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && gunzip -c .carry/lib/main127.so.gz > /tmp/r/main127.so
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
gunzip -c .carry/ringlm.gz > /tmp/r/ringlm && chmod +x /tmp/r/ringlm
R=/tmp/r/ringlm L=/tmp/r/main127.so
export RINGLM_CUDA_LIB=$L
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
el "the whole GPU suite"
(cd kernels/cuda && timeout 420 /tmp/r/c.test -test.v > $OUT/suite.log 2>&1; echo "rc $?")
grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/suite.log | cut -c1-200 | head -20
echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite.log) skipped"
grep -- '^--- SKIP' -A1 $OUT/suite.log | head -8
el "1B BF16 with the peer"
PEERS=gptfast OUT=$OUT/1b BUDGET_S=240 GO_BENCHTIME=100x bash bench/peers/run_all.sh $R /tmp/r/c.test > /dev/null 2>&1
grep -E "^\| (ringlm|gpt-fast)" $OUT/1b/table.md
el "1B Q8_0"
(cd kernels/cuda && RINGLM_BENCH_TYPE=q8_0 timeout 90 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$' -test.benchtime 50x 2>&1 | grep -E "^Benchmark|FAIL" | cut -c1-200)
el "1B Q4_K_M (issue 17)"
(cd kernels/cuda && RINGLM_BENCH_MIX=Q4_K_M timeout 120 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$' -test.benchtime 50x 2>&1 | grep -E "^Benchmark|FAIL" | cut -c1-200)
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
gzip $OUT/*.log
el done
