#!/bin/bash
# Round 91: two groups a step for the common block-quantized types (pair1: gemm_group_q2, the same bits) vs main (qrecmk).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cudapre.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
el "tests on pair1"; RINGLM_CUDA_LIB=/tmp/r/pair1.so timeout 150 /tmp/r/c.test -test.run 'TileProductQuant|GreedyMatchesCPU/tiny-(llama-q4|llama-mxfp4|qwen2-q)|LogitsMatchCPU/tiny-(llama-q4|llama-mxfp4|qwen2-q)|Chunking' -test.v > $OUT/tests-pair1.log 2>&1; echo "rc $?"; grep -E "^--- |^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/tests-pair1.log | cut -c1-200
bench() { el "-- $1 $2"; RINGLM_BENCH_MIX=$2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 90 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\/step/) printf " %s %s", $(i-1), $(i); print ""}'; }
for L in pair1 qrecmk pair1 qrecmk; do bench $L Q4_K_M; done
for L in pair1 qrecmk; do el "-- tile $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'TileProductQuant/(Q4_K|Q6_K)/gateup/M(1|16|64)$' 2>&1 | grep -E "^Benchmark" | awk '{printf "%-50s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /µs/) printf " %s %s", $(i-1), $(i); print ""}'; done
el done
