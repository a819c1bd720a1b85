#!/bin/bash
# Round 123: the tensor-core module compiled apart (relocatable device code): device_tc.cu (the kernel, the few-row
# products, attention) and device_tcm.cu (the products of many rows), device-linked. split: both; split2: the same
# device_tc.o with device_tcm.cu built with -DRLM_WHOLE_FILL=2 (a change to the many-row products only: batch 1 and 16
# run the same machine code as split). nosplit: this branch's source (the epilogues as named types, gemm_many) built
# whole as before. tcmod: main's library. Subset on split and split2, then decode and prefill alternating twice, Qwen,
# profiles, the whole suite on split.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S='TestGreedyMatchesCPU|TestBuiltinModelGreedy|TestLogitsMatchCPU|TestBatchInvariance|TestChunkingInvariance|TestBuiltinPerplexity|TestTileProduct(Matches|BatchInvariant|FewRows|Halves|TwoTilesAWarp)$|TestSlidingWindowMatchesCPU|TestConformanceDiff|TestDeviceInfo|TestOneLaunch'
for L in split split2; do [ -f /tmp/r/$L.so ] || continue
  el "subset on $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 200 /tmp/r/c.test -test.v -test.run "$S" > $OUT/suite-$L.log 2>&1; echo "rc $?"
  grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|panic" $OUT/suite-$L.log | cut -c1-200 | head -20
  echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-$L.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-$L.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-$L.log) skipped"
done
bench() { el "-- $1 $3"; [ -f /tmp/r/$1.so ] || return; env $3 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$2" -test.benchtime 30x 2>&1 | grep -E "^Benchmark|rror" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2; do for L in tcmod split split2 nosplit; do bench $L "$D" X=1; done; done
for L in tcmod split split2 nosplit; do bench $L 'Decode/batch(1|16|64|256)$|Prefill/prompt2048$' RINGLM_BENCH_PRESET=qwen2.5-0.5b; done
for L in tcmod split; do for b in 'Decode/batch1$' 'Decode/batch64$' 'Prefill/prompt2048$'; do el "profile $L $b"; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench "$b" -test.benchtime 5x 2>&1 | grep -E '^Benchmark|ringlm cuda profile' | cut -c1-400; done; done
el "full suite on split"; RINGLM_CUDA_LIB=/tmp/r/split.so timeout 300 /tmp/r/c.test -test.v > $OUT/full-split.log 2>&1; echo "rc $?"
grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|panic" $OUT/full-split.log | cut -c1-200 | head -20
echo "top-level: $(grep -c -- '^--- PASS' $OUT/full-split.log) passed, $(grep -c -- '^--- FAIL' $OUT/full-split.log) failed, $(grep -c -- '^--- SKIP' $OUT/full-split.log) skipped"
gzip $OUT/*.log
el done
