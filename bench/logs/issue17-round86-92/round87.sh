#!/bin/bash
# Round 87: raw2 (codes multiplied raw; Q6_K records loaded 4 bytes at a time) vs main (qrecmk); ncu instruction counts.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cudaraw.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
suite() { # lib timeout
  el "== CUDA tests (${TESTS:-all}) on $1"
  RINGLM_CUDA_LIB=/tmp/r/$1.so timeout $2 /tmp/r/c.test -test.run "${TESTS:-.}" -test.v > $OUT/suite-$1.log 2>&1; echo "rc $?"
  grep -E "^--- (FAIL|SKIP)|^    --- FAIL|panic|^FAIL|^ok|^PASS" $OUT/suite-$1.log | cut -c1-240
  echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-$1.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-$1.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-$1.log) skipped"
  grep -E "largest error|relative|max err" $OUT/suite-$1.log | sort | uniq -c | sort -rn | head -12 | cut -c1-200
}
TESTS='TileProductQuant|GreedyMatchesCPU|LogitsMatchCPU|Chunking|Perplex' suite raw2 240
bench() { el "-- $1 $2"; RINGLM_BENCH_MIX=$2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 90 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\/step|weight-GB/) printf " %s %s", $(i-1), $(i); print ""}'; }
for L in raw2 qrecmk raw2; do bench $L Q4_K_M; done
benchT() { el "-- $1 type $2"; RINGLM_BENCH_TYPE=$2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|64)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\/step/) printf " %s %s", $(i-1), $(i); print ""}'; }
benchT raw2 q6_k
el "-- tile raw2"; RINGLM_CUDA_LIB=/tmp/r/raw2.so timeout 90 /tmp/r/c.test -test.run '^$' -test.bench 'TileProductQuant/(Q4_K|Q6_K)/gateup/M(1|16|64|256)$' 2>&1 | grep -E "^Benchmark" | awk '{printf "%-50s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /µs|GB/) printf " %s %s", $(i-1), $(i); print ""}'
NCU=/usr/local/cuda/bin/ncu
prof() { # name lib bench-regexp
  el "ncu $1"
  RINGLM_CUDA_LIB=/tmp/r/$2.so timeout 100 $NCU --target-processes all -k regex:gemm_check --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
    /tmp/r/c.test -test.run '^$' -test.bench "$3" -test.benchtime 1x > $OUT/ncu-$1.txt 2>&1
  echo "rc $?"; grep -E "Duration|DRAM Throughput|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Stall" $OUT/ncu-$1.txt | head -12
}
prof q4k-m1-raw2 raw2 'TileProductQuant/Q4_K/gateup/M1$'
prof q4k-m1-main qrecmk 'TileProductQuant/Q4_K/gateup/M1$'
prof q4_0-m1-raw2 raw2 'TileProductQuant/Q4_0/gateup/M1$'
el done
