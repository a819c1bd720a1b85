#!/bin/bash
# Round 99: gemm_wg_t for the gate/up product only (wgc: ptxas keeps its wgmma pipelined), the kernel printf moved to the host; against main (nvcc 11.8).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
el "wgtile"; timeout 100 .carry/wgtile > $OUT/wgtile.log 2>&1; grep -E "^M " $OUT/wgtile.log | cut -c1-150 | tail -28; tail -1 $OUT/wgtile.log
cd kernels/cuda
el "whole suite on wgc"; RINGLM_CUDA_LIB=/tmp/r/wgc.so timeout 200 /tmp/r/c.test -test.v > $OUT/suite-wg.log 2>&1; echo "rc $?"; grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/suite-wg.log | cut -c1-240; grep -c "^--- PASS" $OUT/suite-wg.log
bench() { el "-- $1 $2"; env $2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$|Prefill/prompt(128|2048)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark|profile" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
for L in wgc main wgc main; do bench $L X=1; done
bench wgc RINGLM_CUDA_WGMMA=0
el "profile wgc"; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/wgc.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(64|256)$|Prefill/prompt2048$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark|profile" | cut -c1-300
el done
