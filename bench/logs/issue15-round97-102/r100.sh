#!/bin/bash
# Round 100: the libraries built by cicc 11.8 + ptxas 12.4 (/opt/mix: nvcc 11.8 with a ptxas wrapper; wgmix: i15-wg2 with
# -DRLM_WG_FORCE assembled for sm_90a, gemm_wg_t in the gate/up product; mainmix: main's source), against main (nvcc 11.8).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
cd kernels/cuda
el "whole suite on wgmix"; RINGLM_CUDA_LIB=/tmp/r/wgmix.so timeout 200 /tmp/r/c.test -test.v > $OUT/suite-wgmix.log 2>&1; echo "rc $?"; grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/suite-wgmix.log | cut -c1-240; grep -c "^--- PASS" $OUT/suite-wgmix.log
bench() { el "-- $1 $2"; env $2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$|Prefill/prompt(128|2048)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
for L in wgmix main mainmix wgmix main mainmix; do bench $L X=1; done
bench wgmix RINGLM_CUDA_WGMMA=0
el done
