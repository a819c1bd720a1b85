#!/bin/bash
# Round 92: the block-quantized product's many-row passes of 32 rows (qp32; spills of its gemm_t instances 400-520 -> 50-230 bytes) vs main (qrecmk, passes of 64).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cudapre.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
el "tests on qp32"; RINGLM_CUDA_LIB=/tmp/r/qp32.so timeout 100 /tmp/r/c.test -test.run 'TileProductQuant|GreedyMatchesCPU/tiny-(llama-q4_k_m$|qwen2-q6_k)|LogitsMatchCPU/tiny-llama-q4|Chunking' -test.v > $OUT/tests-qp32.log 2>&1; echo "rc $?"; grep -E "^--- |^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/tests-qp32.log | cut -c1-200
bench() { el "-- $1 $2"; RINGLM_BENCH_MIX=$2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$' -test.benchtime 20x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\/step/) printf " %s %s", $(i-1), $(i); print ""}'; }
for L in qp32 qrecmk qp32 qrecmk; do bench $L Q4_K_M; done
el done
