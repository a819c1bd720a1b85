#!/bin/bash
# Round 115: the same bits, fewer waits: chunk_sum's loads 8 chunks at a time before their additions, gstage's float rows
# 2 runs a thread at a time, and (a only) gemm_halves_t at up to 16 rows staging a half's whole range at once (one
# staging instead of four for gate/up). a: all three; b: without the halves change (RLM_HALVES_SGH_SMALL=8). Both are
# device_tc.cu built here, linked with main's device.o and device_q.o; tcmod is main's library. Correctness subset on
# each, then decode and prefill alternating twice, then profiles.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S='TestGreedyMatchesCPU|TestBuiltinModelGreedy|TestLogitsMatchCPU|TestBatchInvariance|TestChunkingInvariance|TestBuiltinPerplexity|TestTileProduct(Matches|BatchInvariant|FewRows|Halves|TwoTilesAWarp)$|TestSlidingWindowMatchesCPU|TestConformanceDiff|TestDeviceInfo|TestOneLaunch'
for L in a b; do [ -f /tmp/r/$L.so ] || continue
  el "subset on $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 200 /tmp/r/c.test -test.v -test.run "$S" > $OUT/suite-$L.log 2>&1; echo "rc $?"
  grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|panic" $OUT/suite-$L.log | cut -c1-200 | head -20
  echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-$L.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-$L.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-$L.log) skipped"
done
bench() { el "-- $1"; [ -f /tmp/r/$1.so ] || return; RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$2" -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2; do for L in tcmod a b; do bench $L "$D"; done; done
for L in a b; do [ -f /tmp/r/$L.so ] || continue; for b in 'Decode/batch16$' 'Decode/batch64$' 'Decode/batch256$'; do el "profile $L $b"; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench "$b" -test.benchtime 5x 2>&1 | grep -E '^Benchmark|ringlm cuda profile' | cut -c1-300; done; done
el done
