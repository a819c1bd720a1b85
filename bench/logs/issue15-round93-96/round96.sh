#!/bin/bash
# Issue 15 round 96: how long ptxas (nvcc 13, sm_90a + compute_90) takes over device.cu's module: main's, and the branch's
# with gemm_wg_t inlined (RLM_WG_INLINE; the not-inlined build ran past 600 s in round 93).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
A="-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90"
( s=$(date +%s); cd .carry/mainsrc && timeout 560 nvcc -O3 -std=c++17 $A -Xcompiler -fPIC -c -o /tmp/main.o kernels/cuda/device.cu > $OUT/build-main.log 2>&1; echo "main rc $? in $(( $(date +%s) - s )) s" ) &
( s=$(date +%s); timeout 560 nvcc -O3 -std=c++17 $A -DRLM_WG_INLINE -Xptxas -v -Xcompiler -fPIC -c -o /tmp/wg.o kernels/cuda/device.cu > $OUT/build-wg.log 2>&1; echo "wg-inline rc $? in $(( $(date +%s) - s )) s" ) &
wait
grep -c C7510 $OUT/build-wg.log
grep -A2 "Compiling entry function '_ZN.*persistent" $OUT/build-wg.log | grep -E 'Used|spill' | head -4
el done
