#!/bin/bash
# Round 125: gemm_local_t (a block takes all the chunks of its m16 tiles and sums them itself: no spread barrier, no
# partial sums through L2) up to 16 rows: main's source built with -DRLM_LOCAL_M=16 (local16; main: 1). Round 54 found
# it slower at batch 16 (2.39 -> 2.55 ms); the kernel has changed much since. tcmod is main's library. Subset on
# local16, decode and prefill alternating twice, Qwen, profiles at batch 16.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S='TestGreedyMatchesCPU|TestBuiltinModelGreedy|TestLogitsMatchCPU|TestBatchInvariance|TestChunkingInvariance|TestBuiltinPerplexity|TestTileProduct(Matches|BatchInvariant|FewRows|Halves|TwoTilesAWarp)$|TestSlidingWindowMatchesCPU|TestConformanceDiff|TestDeviceInfo|TestOneLaunch'
for L in local16; do [ -f /tmp/r/$L.so ] || continue
  el "subset on $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 200 /tmp/r/c.test -test.v -test.run "$S" > $OUT/suite-$L.log 2>&1; echo "rc $?"
  grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|panic" $OUT/suite-$L.log | cut -c1-200 | head -20
  echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-$L.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-$L.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-$L.log) skipped"
done
bench() { el "-- $1 $3"; [ -f /tmp/r/$1.so ] || return; env $3 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$2" -test.benchtime 30x 2>&1 | grep -E "^Benchmark|rror" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2; do for L in tcmod local16; do bench $L "$D" X=1; done; done
for L in tcmod local16; do bench $L 'Decode/batch(1|16|64|256)$|Prefill/prompt2048$' RINGLM_BENCH_PRESET=qwen2.5-0.5b; done
for L in tcmod local16; do bench $L 'Decode/batch(1|16|64)$' RINGLM_BENCH_TYPE=q8_0; done
for L in tcmod local16; do for b in 'Decode/batch16$'; do el "profile $L $b"; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench "$b" -test.benchtime 5x 2>&1 | grep -E '^Benchmark|ringlm cuda profile' | cut -c1-400; done; done
gzip $OUT/*.log
el done
