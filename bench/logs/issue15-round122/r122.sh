#!/bin/bash
# Round 122: the tensor-core module with BF16 product instances only (lean: -DRLM_TC_BF16ONLY; F16 and F32 matrices
# converted to BF16 at upload, Q8_0 models on device.cu's kernel). Does the module's code size, with the same hot
# code, cost the BF16 path? tcmod is main's library. Subset on lean, then decode and prefill alternating twice, F16 and
# Qwen2.5-0.5B, profiles, then the whole GPU suite on lean.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S='TestGreedyMatchesCPU|TestBuiltinModelGreedy|TestLogitsMatchCPU|TestBatchInvariance|TestChunkingInvariance|TestBuiltinPerplexity|TestTileProduct(Matches|BatchInvariant|FewRows|Halves|TwoTilesAWarp)$|TestSlidingWindowMatchesCPU|TestConformanceDiff|TestDeviceInfo|TestOneLaunch'
for L in lean; do
  el "subset on $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 200 /tmp/r/c.test -test.v -test.run "$S" > $OUT/suite-$L.log 2>&1; echo "rc $?"
  grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|panic" $OUT/suite-$L.log | cut -c1-200 | head -20
  echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-$L.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-$L.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-$L.log) skipped"
done
bench() { el "-- $1 $3"; [ -f /tmp/r/$1.so ] || return; env $3 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$2" -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2; do for L in tcmod lean; do bench $L "$D" X=1; done; done
for L in tcmod lean; do bench $L 'Decode/batch(1|16|64|256)$|Prefill/prompt2048$' RINGLM_BENCH_PRESET=qwen2.5-0.5b; done
for L in tcmod lean; do bench $L 'Decode/batch(1|64)$' RINGLM_BENCH_TYPE=f16; done
for L in tcmod lean; do for b in 'Decode/batch1$' 'Decode/batch64$' 'Prefill/prompt2048$'; do el "profile $L $b"; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench "$b" -test.benchtime 5x 2>&1 | grep -E '^Benchmark|ringlm cuda profile' | cut -c1-400; done; done
el "full suite on lean"; RINGLM_CUDA_LIB=/tmp/r/lean.so timeout 420 /tmp/r/c.test -test.v > $OUT/full-lean.log 2>&1; echo "rc $?"
grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|panic" $OUT/full-lean.log | cut -c1-200 | head -20
echo "top-level: $(grep -c -- '^--- PASS' $OUT/full-lean.log) passed, $(grep -c -- '^--- FAIL' $OUT/full-lean.log) failed, $(grep -c -- '^--- SKIP' $OUT/full-lean.log) skipped"
gzip $OUT/*.log
el done
