#!/bin/bash
# Round 103: attention's block path (branch i15-attnblk, "blk"; cicc 11.8 + ptxas 12.4) against mainmix: the whole
# suite on blk, then decode and prefill, blk with the block path on its rule (auto), off (=0) and in every step (=2).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
el "new tests on blk"; RINGLM_CUDA_LIB=/tmp/r/blk.so timeout 150 /tmp/r/c.test -test.v -test.run 'TestAttentionBlockPath|TestChunkingInvariance|TestSlidingWindow' > $OUT/new-blk.log 2>&1; echo "rc $?"; grep -E "^--- |^    --- |^FAIL|^ok|^PASS|panic" $OUT/new-blk.log | cut -c1-240
bench() { el "-- $1 $2"; env $2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$3" -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
P='Prefill/prompt(128|512|2048)$'
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2; do bench blk X=1 "$D"; bench blk RINGLM_CUDA_ATTN_BLOCK=0 "$D"; bench blk RINGLM_CUDA_ATTN_BLOCK=2 "$P"; bench mainmix X=1 "$D"; done
el "profile prefill 2048"
for v in 1 0; do el "blk ATTN_BLOCK=$v"; RINGLM_CUDA_ATTN_BLOCK=$v RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/blk.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'Prefill/prompt2048$' -test.benchtime 5x > $OUT/prof-$v.log 2>&1; grep -iE 'attn|phase|qkv|step' $OUT/prof-$v.log | tail -20; done
el "whole suite on blk"; RINGLM_CUDA_LIB=/tmp/r/blk.so timeout 240 /tmp/r/c.test -test.v > $OUT/suite-blk.log 2>&1; echo "rc $?"; grep -E "^--- FAIL|^    --- FAIL|^FAIL|^ok|^PASS|panic" $OUT/suite-blk.log | cut -c1-240; grep -c "^--- PASS" $OUT/suite-blk.log
el done
