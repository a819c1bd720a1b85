#!/bin/bash
# Round 106: branch i15-tcmod (device_tc.cu: the tensor-core kernel in a module of its own; tcmod) against main's source
# (main2). The whole CUDA suite on tcmod, then BF16 decode and prefill alternating twice (tcmod also with
# RINGLM_CUDA_TCMOD=0: device.cu's kernel), an F16 model, Q4_K_M, and profiles at prompt 2048.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test  # the branch's (ABI 4)
gunzip -c .carry/cudamain.test.gz > /tmp/r/cm.test && chmod +x /tmp/r/cm.test  # main's (ABI 3), for main2
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
el "whole suite on tcmod"; RINGLM_CUDA_LIB=/tmp/r/tcmod.so timeout 280 /tmp/r/c.test -test.v > $OUT/suite-tcmod.log 2>&1; echo "rc $?"
grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/suite-tcmod.log | cut -c1-240
echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite-tcmod.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite-tcmod.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite-tcmod.log) skipped"
grep -E "^(=== RUN|    ---|--- ).*TestKernelModule|refused:" $OUT/suite-tcmod.log | head -20
bench() { el "-- $1 $2"; [ -f /tmp/r/$1.so ] || return; B=/tmp/r/c.test; [ $1 = main2 ] && B=/tmp/r/cm.test; env $2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 $B -test.run '^$' -test.bench "$3" -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2; do bench main2 X=1 "$D"; bench tcmod X=1 "$D"; done
bench tcmod RINGLM_CUDA_TCMOD=0 "$D"
for L in main2 tcmod; do bench $L RINGLM_BENCH_TYPE=f16 'Decode/batch(1|64)$|Prefill/prompt2048$'; done
for L in main2 tcmod; do el "profile prefill 2048 $L"; B=/tmp/r/c.test; [ $L = main2 ] && B=/tmp/r/cm.test; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 $B -test.run '^$' -test.bench 'Prefill/prompt2048$' -test.benchtime 5x > $OUT/prof-$L.log 2>&1; grep -E 'µs/step' $OUT/prof-$L.log | head -2; done
el done
