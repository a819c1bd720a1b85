#!/bin/bash
# Round 102: where wgmix2's few-row cost comes from: v1 = wgmix2 with the gate/up phase's gemm not taking gemm_wg_t
# (gemm<true, false>: everything else of the branch kept), against wgmix2 and mainmix (all cicc 11.8 + ptxas 12.4).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
bench() { el "-- $1 $2"; env $2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$|Prefill/prompt2048$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
for L in v1 wgmix2 mainmix v1 wgmix2 mainmix; do bench $L X=1; done
el done
