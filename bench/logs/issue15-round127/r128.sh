#!/bin/bash
# Round 128 (twenty-second session): (1) the whole GPU suite again with this session's test binary, where
# TestSlidingWindowMatchesCPU's file sorts before trap_test.go; (2) `make cuda` as a user runs it, with the device's
# nvcc 13 (sm_90a + compute_90 PTX), timed; (3) if it finishes, its library against main127 (the mix toolchain's build
# of the same source), decode and prefill, alternating.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && gunzip -c .carry/lib/main127.so.gz > /tmp/r/main127.so
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
nvcc --version | tail -2
el "make cuda (nvcc 13), in the background"
( s=$(date +%s); timeout 440 make cuda > $OUT/make-cuda.log 2>&1; echo "rc $? after $(( $(date +%s) - s )) s" >> $OUT/make-cuda.log ) &
MK=$!
el "the whole GPU suite on main127"
(cd kernels/cuda && RINGLM_CUDA_LIB=/tmp/r/main127.so timeout 300 /tmp/r/c.test -test.v > $OUT/suite.log 2>&1; echo "rc $?")
grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/suite.log | cut -c1-200 | head -20
echo "top-level: $(grep -c -- '^--- PASS' $OUT/suite.log) passed, $(grep -c -- '^--- FAIL' $OUT/suite.log) failed, $(grep -c -- '^--- SKIP' $OUT/suite.log) skipped"
grep -E -- '^--- (PASS|SKIP): (TestSlidingWindowMatchesCPU|TestRestartChild|TestTrapFileLast)' $OUT/suite.log
el "waiting for make cuda"
wait $MK; tail -3 $OUT/make-cuda.log
[ -f kernels/cuda/libringlm_cuda.so ] && cp kernels/cuda/libringlm_cuda.so /tmp/r/nvcc13.so
bench() { el "-- $1"; [ -f /tmp/r/$1.so ] || return; (cd kernels/cuda && RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$2" -test.benchtime 30x 2>&1 | grep -E "^Benchmark|rror" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'); }
D='Decode/batch(1|16|64|256)$|Prefill/prompt2048$'
for r in 1 2; do for L in main127 nvcc13; do bench $L "$D"; done; done
gzip $OUT/suite.log
el done
