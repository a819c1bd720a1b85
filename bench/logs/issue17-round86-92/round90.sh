#!/bin/bash
# Round 90: gemm_local_t loads a block-quantized tile's record before staging its inputs (pre1) vs main (qrecmk).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cudapre.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
el "tests on pre1"; RINGLM_CUDA_LIB=/tmp/r/pre1.so timeout 150 /tmp/r/c.test -test.run 'TileProductQuant|GreedyMatchesCPU/tiny-llama-q4|LogitsMatchCPU/tiny-llama-q4|Chunking' -test.v > $OUT/tests-pre1.log 2>&1; echo "rc $?"; grep -E "^--- |^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/tests-pre1.log | cut -c1-200
bench() { el "-- $1 $2"; RINGLM_BENCH_MIX=$2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 90 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\/step/) printf " %s %s", $(i-1), $(i); print ""}'; }
for L in pre1 qrecmk pre1 qrecmk; do bench $L Q4_K_M; done
el "-- profile pre1 b1"; RINGLM_CUDA_PROFILE=1 RINGLM_BENCH_MIX=Q4_K_M RINGLM_CUDA_LIB=/tmp/r/pre1.so timeout 90 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch1$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark|profile" | cut -c1-300
el done
