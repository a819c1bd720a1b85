#!/bin/bash
# Round 89: where a decode step goes (RINGLM_CUDA_PROFILE=1: block 0's time per phase) for Q4_K_M on main (qrecmk) and raw2, and BF16 on main.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cudaraw.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
prof() { el "-- $1 ${2:-bf16} batch $3"; RINGLM_CUDA_PROFILE=1 RINGLM_BENCH_MIX=$2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 90 /tmp/r/c.test -test.run '^$' -test.bench "Decode/batch$3\$" -test.benchtime 30x > $OUT/prof-$1-${2:-bf16}-$3.log 2>&1; grep -E "^Benchmark|profile" $OUT/prof-$1-${2:-bf16}-$3.log | tail -8 | cut -c1-400; }
for B in 1 64; do prof qrecmk Q4_K_M $B; prof raw2 Q4_K_M $B; prof qrecmk "" $B; done
el done
