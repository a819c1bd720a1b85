#!/bin/bash
# Round 98: gemm_wg_t (wgmma, both operands by bulk copies, inputs written by the phases in its layout) in the persistent kernel.
# Libraries: main (nvcc 11.8, kernels/cuda/libringlm_cuda.so), wg (branch i15-wg2, nvcc 12.4).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
cp kernels/cuda/libringlm_cuda.so /tmp/r/main.so
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
el "whole suite on wg"; RINGLM_CUDA_LIB=/tmp/r/wg.so timeout 240 /tmp/r/c.test -test.v > $OUT/suite-wg.log 2>&1; echo "rc $?"; grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|^PASS|panic|TestConformanceDiff" $OUT/suite-wg.log | cut -c1-240; grep -c "^--- PASS" $OUT/suite-wg.log
bench() { el "-- $1 $2"; env $2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$|Prefill/prompt(128|2048)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
for L in wg main wg; do bench $L X=1; done
bench wg RINGLM_CUDA_WGMMA=0
el done
timeout 120 .carry/wgtile > $OUT/wgtile.log 2>&1; tail -32 $OUT/wgtile.log | cut -c1-200
