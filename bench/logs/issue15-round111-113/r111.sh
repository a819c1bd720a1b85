#!/bin/bash
# Round 111: the persistent kernel at 256 threads a block (255 registers a thread instead of 128): t256 (shared memory
# sized for 8 warps) and t256s (RLM_SMEM_WARPS=16: the same shared memory as main's), both device.cu + device_tc.cu,
# against main's tensor-core module (tcmod, cc68815's source). Correctness subset on each, then BF16 decode and prefill
# alternating twice, profiles at batch 64.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S='TestGreedyMatchesCPU|TestBuiltinModelGreedy|TestLogitsMatchCPU|TestBatchInvariance|TestChunkingInvariance|TestBuiltinPerplexity|TestTileProduct(Matches|BatchInvariant|FewRows|Halves|TwoTilesAWarp)$|TestSlidingWindowMatchesCPU|TestConformanceDiff|TestDeviceInfo|TestOneLaunch'
for L in t256 t256s; do [ -f /tmp/r/$L.so ] || continue
  el "subset on $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 170 /tmp/r/c.test -test.v -test.run "$S" > $OUT/suite-$L.log 2>&1; echo "rc $?"
  grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|^PASS|panic|grid|threads" $OUT/suite-$L.log | cut -c1-200 | head -20
  echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-$L.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-$L.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-$L.log) skipped"
done
bench() { el "-- $1 $2"; [ -f /tmp/r/$1.so ] || return; env $2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$3" -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2; do for L in tcmod t256 t256s; do bench $L X=1 "$D"; done; done
for L in tcmod t256 t256s; do [ -f /tmp/r/$L.so ] || continue; for b in 'Decode/batch1$' 'Decode/batch64$' 'Prefill/prompt2048$'; do el "profile $L $b"; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench "$b" -test.benchtime 5x > $OUT/p.log 2>&1; f=$OUT/prof-$L-$(echo $b | tr -dc 'a-z0-9').log; mv $OUT/p.log $f; grep -E '^Benchmark|ringlm cuda profile' $f | cut -c1-300; done; done
el done
