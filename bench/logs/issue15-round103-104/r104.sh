#!/bin/bash
# Round 104: attention's block path with Q in shared memory (blkq: phase_attn_blk_hd not inlined; blkqi: inlined into the
# persistent kernel), against mainmix (all cicc 11.8 + ptxas 12.4). Tests, then decode and prefill alternating twice.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
for L in blkq blkqi; do el "new tests on $L"; RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 150 /tmp/r/c.test -test.v -test.run 'TestAttentionBlockPath|TestChunkingInvariance|TestSlidingWindow' > $OUT/new-$L.log 2>&1; echo "rc $?"; grep -E "^--- |^FAIL|^ok|^PASS|panic" $OUT/new-$L.log | cut -c1-200; done
bench() { el "-- $1 $2"; env $2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$3" -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
P='Prefill/prompt(128|512|2048)$'
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2; do bench blkq X=1 "$D"; bench blkqi X=1 "$D"; bench blkq RINGLM_CUDA_ATTN_BLOCK=2 "$P"; bench mainmix X=1 "$D"; done
for L in blkq blkqi; do el "profile prefill 2048 $L"; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'Prefill/prompt2048$' -test.benchtime 5x > $OUT/prof-$L.log 2>&1; grep -E 'µs/step' $OUT/prof-$L.log | head -1; done
el "whole suite on blkq"; RINGLM_CUDA_LIB=/tmp/r/blkq.so timeout 200 /tmp/r/c.test -test.v > $OUT/suite-blkq.log 2>&1; echo "rc $?"; grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/suite-blkq.log | cut -c1-240; grep -c "^--- PASS" $OUT/suite-blkq.log
el done
