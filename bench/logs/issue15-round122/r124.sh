#!/bin/bash
# Round 124: round 123's split with device_tc.cu built -ewp (extensible whole program: the kernel and the few-row
# products compiled as a whole program, as the default build, with calls to device_tcm.cu's entry points left to the
# device link) and device_tcm.cu as relocatable code. ewpB: both; ewpB2: the same device_tc.o with device_tcm.cu built
# -DRLM_WHOLE_FILL=2. gemm_t's last-block flag is __syncthreads_or (no static shared variable: nvlink cannot link one
# into an -ewp kernel). nosplit: round 123's whole build (without the flag change). tcmod: main's library.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S='TestGreedyMatchesCPU|TestBuiltinModelGreedy|TestLogitsMatchCPU|TestBatchInvariance|TestChunkingInvariance|TestBuiltinPerplexity|TestTileProduct(Matches|BatchInvariant|FewRows|Halves|TwoTilesAWarp)$|TestSlidingWindowMatchesCPU|TestConformanceDiff|TestDeviceInfo|TestOneLaunch'
for L in ewpB ewpB2; do [ -f /tmp/r/$L.so ] || continue
  el "subset on $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 200 /tmp/r/c.test -test.v -test.run "$S" > $OUT/suite-$L.log 2>&1; echo "rc $?"
  grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|panic" $OUT/suite-$L.log | cut -c1-200 | head -20
  echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-$L.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-$L.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-$L.log) skipped"
done
bench() { el "-- $1 $3"; [ -f /tmp/r/$1.so ] || return; env $3 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$2" -test.benchtime 30x 2>&1 | grep -E "^Benchmark|rror" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2; do for L in tcmod ewpB ewpB2 nosplit; do bench $L "$D" X=1; done; done
for L in tcmod ewpB ewpB2 nosplit; do bench $L 'Decode/batch(1|16|64|256)$|Prefill/prompt2048$' RINGLM_BENCH_PRESET=qwen2.5-0.5b; done
for L in tcmod ewpB; do for b in 'Decode/batch1$' 'Decode/batch64$' 'Prefill/prompt2048$'; do el "profile $L $b"; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench "$b" -test.benchtime 5x 2>&1 | grep -E '^Benchmark|ringlm cuda profile' | cut -c1-400; done; done
el "full suite on ewpB"; RINGLM_CUDA_LIB=/tmp/r/ewpB.so timeout 300 /tmp/r/c.test -test.v > $OUT/full-ewpB.log 2>&1; echo "rc $?"
grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|panic" $OUT/full-ewpB.log | cut -c1-200 | head -20
echo "top-level: $(grep -c -- '^--- PASS' $OUT/full-ewpB.log) passed, $(grep -c -- '^--- FAIL' $OUT/full-ewpB.log) failed, $(grep -c -- '^--- SKIP' $OUT/full-ewpB.log) skipped"
gzip $OUT/*.log
el done
