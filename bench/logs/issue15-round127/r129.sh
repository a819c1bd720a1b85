#!/bin/bash
# Round 129 (twenty-second session): the tensor-core module as a user's `make cuda` builds it, with the device's
# nvcc 13 (sm_90a + compute_90 PTX, the Makefile's flags), linked with main127's device.o and device_q.o (the mix
# toolchain's, carried), against main127 itself: the BF16 decode and prefill run on the tensor-core module only.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && gunzip -c .carry/lib/main127.so.gz > /tmp/r/main127.so
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
for o in device device_q; do gunzip -c .carry/obj/$o.o.gz > /tmp/r/$o.o; done
A="-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90"
el "device_tc.cu with nvcc 13"
nvcc -O3 -std=c++17 $A -Xcompiler -fPIC -c -o /tmp/r/device_tc.o kernels/cuda/device_tc.cu > $OUT/device_tc.log 2>&1; echo "rc $?"
nvcc $A -shared -o /tmp/r/tc13.so /tmp/r/device.o /tmp/r/device_tc.o /tmp/r/device_q.o > $OUT/link.log 2>&1; echo "link rc $?"
el "benches"
bench() { el "-- $1"; [ -f /tmp/r/$1.so ] || return; (cd kernels/cuda && RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$2" -test.benchtime 30x 2>&1 | grep -E "^Benchmark|rror" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'); }
D='Decode/batch(1|16|64|256)$|Prefill/prompt2048$'
for r in 1 2; do for L in main127 tc13; do bench $L "$D"; done; done
(cd kernels/cuda && RINGLM_CUDA_LIB=/tmp/r/tc13.so timeout 60 /tmp/r/c.test -test.v -test.run 'TestDeviceInfo|TestGreedyMatchesCPU$' 2>&1 | grep -E '^(--- |ok|PASS|FAIL)|kernel' | head -8)
el done
