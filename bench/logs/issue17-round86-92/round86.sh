#!/bin/bash
# Round 86: the block-quantized types multiplied as their codes (raw1) vs main (qrecmk).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cudaraw.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
suite() { # lib timeout
  el "== CUDA tests (${TESTS:-all}) on $1"
  RINGLM_CUDA_LIB=/tmp/r/$1.so timeout $2 /tmp/r/c.test -test.run "${TESTS:-.}" -test.v > $OUT/suite-$1.log 2>&1; echo "rc $?"
  grep -E "^--- (FAIL|SKIP)|^    --- FAIL|panic|^FAIL|^ok|^PASS|Error|error" $OUT/suite-$1.log | cut -c1-240
  echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-$1.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-$1.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-$1.log) skipped"
  grep -E "diff:|PPL|largest error|perplexity" $OUT/suite-$1.log | sort | uniq -c | sort -rn | head -12 | cut -c1-200
}
TESTS='TileProductQuant|GreedyMatchesCPU|LogitsMatchCPU|Chunking|Perplex' suite raw1 240
bench() { el "-- $1 $2"; RINGLM_BENCH_MIX=$2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 90 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\/step|weight-GB/) printf " %s %s", $(i-1), $(i); print ""}'; }
for L in qrecmk raw1 qrecmk raw1; do bench $L Q4_K_M; done
benchT() { el "-- $1 type $2"; RINGLM_BENCH_TYPE=$2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|64)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\/step/) printf " %s %s", $(i-1), $(i); print ""}'; }
for T in q6_k q4_0; do for L in qrecmk raw1; do benchT $L $T; done; done
benchT raw1 bf16
for L in qrecmk raw1; do el "-- tile $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 90 /tmp/r/c.test -test.run '^$' -test.bench 'TileProductQuant/(Q4_K|Q6_K|Q4_0)/gateup/M(1|16|64|256)$' 2>&1 | grep -E "^Benchmark" | awk '{printf "%-50s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /µs|GB/) printf " %s %s", $(i-1), $(i); print ""}'; done
el done
