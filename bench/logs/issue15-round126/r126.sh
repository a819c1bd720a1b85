#!/bin/bash
# Round 126: the chunk sums in two levels (4 sets of chunks; mma.cuh gemm_ng) and set units for the many-row products
# that whole-K units leave idle (gemm_whole_t: a set's chunks a unit, the sets' sums through L2: a quarter of the
# partial sums). grp: branch i15-grp's first version (device_tc.cu and device_q.cu) linked with main's device.o (the
# tile tests there run main's product); grp2: the whole-K units' set ends in a function of their own (fewer registers
# in the loop), the same sums; tcmod = main's library.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
gunzip -c .carry/ringlm.gz > /tmp/r/ringlm && chmod +x /tmp/r/ringlm
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
cd kernels/cuda
S='TestGreedyMatchesCPU|TestBuiltinModelGreedy|TestLogitsMatchCPU|TestBatchInvariance|TestChunkingInvariance|TestBuiltinPerplexity|TestTileProduct(Matches|BatchInvariant|FewRows|Halves|TwoTilesAWarp|Groups)$|TestSlidingWindowMatchesCPU|TestConformanceDiff|TestDeviceInfo|TestOneLaunch'
for L in grp2; do
  el "subset on $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 200 /tmp/r/c.test -test.v -test.run "$S" > $OUT/suite-$L.log 2>&1; echo "rc $?"
  grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|panic|_test.go" $OUT/suite-$L.log | cut -c1-240 | head -30
  echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-$L.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-$L.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-$L.log) skipped"
done
bench() { el "-- $1 $3"; [ -f /tmp/r/$1.so ] || return; env $3 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$2" -test.benchtime 30x 2>&1 | grep -E "^Benchmark|rror" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2 3; do for L in tcmod grp2; do bench $L "$D" X=1; done; done
for L in tcmod grp2; do bench $L 'Decode/batch(1|16|64|256)$|Prefill/prompt2048$' RINGLM_BENCH_PRESET=qwen2.5-0.5b; done
for L in tcmod grp2; do el "profile $L batch256"; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch256$' -test.benchtime 10x 2>&1 | grep -E '^Benchmark|ringlm cuda profile' | cut -c1-400; done
cd ../..
R=/tmp/r/ringlm
$R synth --preset llama-3.2-1b --type bf16 --seed 1 -o /tmp/1b.gguf > /dev/null || exit 1
for L in tcmod grp2; do
  el "HTTP $L"
  RINGLM_CUDA_LIB=/tmp/r/$L.so $R serve -m /tmp/1b.gguf --device cuda --port 18080 --kv-memory 8192 > $OUT/serve-$L.log 2>&1 &
  for i in $(seq 90); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done
  for c in 256 64; do n=$((4 * c))
    $R bench serve --url http://127.0.0.1:18080 --num-prompts $n --concurrency $c --input-len 128 --output-len 128 --no-progress > $OUT/http-$L-c$c.txt 2>&1
    echo "$L c$c: $(grep -E "Output token throughput|Median TTFT|Successful|Failed" $OUT/http-$L-c$c.txt | tr -s ' ' | paste -sd';')"
  done
  kill %1; wait; echo "errors in the log: $(grep -c '"level":"error"' $OUT/serve-$L.log)"
done
gzip $OUT/*.log
el done
