#!/bin/bash
# Round 101: wgmix2 = wgmix with the runs' code left out of the gate/up instance (gemm_wg_t<false>) and pack_wg's copy for
# gate/up only, against mainmix (both cicc 11.8 + ptxas 12.4).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
el "whole suite on wgmix2"; RINGLM_CUDA_LIB=/tmp/r/wgmix2.so timeout 200 /tmp/r/c.test -test.v > $OUT/suite-wgmix2.log 2>&1; echo "rc $?"; grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/suite-wgmix2.log | cut -c1-240; grep -c "^--- PASS" $OUT/suite-wgmix2.log
bench() { el "-- $1 $2"; env $2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch(1|16|64|256)$|Prefill/prompt(128|2048)$' -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
for L in wgmix2 mainmix wgmix2 mainmix; do bench $L X=1; done
el done
