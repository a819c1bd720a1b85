#!/bin/bash
# Round 88: the QANY ring in 16 stages of 256 bytes (mainS, rawS) against 8 of 512 (qrecmk = main, raw2); pure Q4_K and Q4_0 models only (their blocks are 256 bytes).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cudaraw.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
benchT() { el "-- $1 type $2"; RINGLM_BENCH_TYPE=$2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark|FAIL|panic" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\/step|weight-GB/) printf " %s %s", $(i-1), $(i); print ""}'; }
for T in q4_k q4_0; do for L in qrecmk mainS raw2 rawS qrecmk mainS; do benchT $L $T; done; done
for L in mainS rawS; do el "-- tile $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'TileProductQuant/(Q4_K|Q4_0)/gateup/M(1|16|64)$' 2>&1 | grep -E "^Benchmark" | awk '{printf "%-50s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /µs|GB/) printf " %s %s", $(i-1), $(i); print ""}'; done
el "-- greedy q4_0 on rawS"; RINGLM_CUDA_LIB=/tmp/r/rawS.so timeout 60 /tmp/r/c.test -test.run 'GreedyMatchesCPU/tiny-llama-q4_0' 2>&1 | tail -3
el done
