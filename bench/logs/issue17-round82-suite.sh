#!/bin/bash
# Round 82: the whole suite, listed in full, with the MXFP4 test data held below float32's overflow: on qrecmk (make cuda of branch i17-rec: K-quant records once a super-block) and on qfinal (main); Q4_K_M decode on qrecmk.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cudaq6.test.gz > /tmp/r/cudaq6.test && chmod +x /tmp/r/cudaq6.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
suite() { # lib timeout
  el "== CUDA suite (${TESTS:-all}) on $1"
  RINGLM_CUDA_LIB=/tmp/r/$1.so timeout $2 /tmp/r/cudaq6.test -test.run "${TESTS:-.}" -test.v > $OUT/suite-$1.log 2>&1; echo "rc $?"
  grep -E "^--- (FAIL|SKIP)|^    --- FAIL|panic|^FAIL|^ok|^PASS" $OUT/suite-$1.log | cut -c1-200
  echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-$1.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-$1.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-$1.log) skipped"
  grep -E "diff:|PPL|largest error" $OUT/suite-$1.log | sort | uniq -c | sort -rn | head -8 | cut -c1-160
}
suite qrecmk 200
TESTS='TestTileProductQuant' suite qfinal 60
for L in qrecmk; do el "-- $L Q4_K_M"; RINGLM_BENCH_MIX=Q4_K_M RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 80 /tmp/r/cudaq6.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\/step|weight-GB/) printf " %s %s", $(i-1), $(i); print ""}'; done
el done
