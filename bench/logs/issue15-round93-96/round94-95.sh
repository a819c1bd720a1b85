#!/bin/bash
# Issue 15 round 95: bench/gpu/wgtile.cu with the k positions of mma.sync (wg_col/wg_pos) and a kernel of gemm_wg_t alone; ni: not inlined, in: inlined (its kernel then calls nothing).
# gemm_wg_t not inlined (ni) and inlined (in).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1
el build
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o /tmp/wg-ni bench/gpu/wgtile.cu > $OUT/build-ni.log 2>&1 & p1=$!
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -DRLM_WG_INLINE -o /tmp/wg-in bench/gpu/wgtile.cu > $OUT/build-in.log 2>&1 & p2=$!
wait $p1; echo "ni rc $?"; wait $p2; echo "in rc $?"
el built
for v in ni in; do
  grep -E 'C7510|error' $OUT/build-$v.log | cut -c1-220 | sort | uniq -c | head -5
  grep -A2 'gemm_wg_t\|_Z4tileILb1' $OUT/build-$v.log | grep -E 'spill|Used' | sort | uniq -c | head -6
done
for v in ni in; do
  [ -x /tmp/wg-$v ] || continue
  el "run $v"
  timeout 150 /tmp/wg-$v > $OUT/run-$v.log 2>&1; echo "rc $?"
  cat $OUT/run-$v.log
done
el done
