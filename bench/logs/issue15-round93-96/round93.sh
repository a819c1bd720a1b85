#!/bin/bash
# Issue 15 round 93: the warpgroup product (gemm_wg_t, wgmma + bulk copies) built with nvcc 13 for sm_90a;
# tile tests, tile benches and decode/prefill with RINGLM_CUDA_WGMMA=1 against =0 (the same library), whole-kernel tests.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
left() { [ $(( $(date +%s) - T0 )) -lt $1 ]; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
el build
make -s cuda CUDA_FLAGS="-Xptxas -v" > $OUT/make.log 2>&1; rc=$?
el "make rc $rc"
if [ $rc != 0 ]; then grep -v 'Compiling entry\|Function properties\|bytes stack frame\|Used [0-9]* registers\|^ptxas info *: Compiling' $OUT/make.log | tail -40; exit 1; fi
grep -A3 'gemm_wg_t' $OUT/make.log | grep -E 'spill|Used' | sort | uniq -c | head -20
gzip -c kernels/cuda/libringlm_cuda.so > $OUT/wg.so.gz
gunzip -c .carry/cudawg.test.gz > /tmp/c.test && chmod +x /tmp/c.test
cd kernels/cuda
el tile-tests
timeout 150 /tmp/c.test -test.run 'TestTileProduct(Warpgroup|Matches|BatchInvariant|FewRows|Halves|TwoTiles)' -test.v > $OUT/tile-tests.log 2>&1; echo "rc $?"
grep -E '^(=== RUN|--- |PASS|FAIL|ok)|largest|_test.go' $OUT/tile-tests.log | grep -v '=== RUN' | head -40
for W in 1 0; do
  left 420 || break
  el "tile bench WGMMA=$W"
  RINGLM_CUDA_WGMMA=$W timeout 90 /tmp/c.test -test.run '^$' -test.bench 'TileProduct/(gateup|down|qkv|o)/M(64|256|2048)$' -test.benchtime 20x > $OUT/tile-bench-$W.log 2>&1
  grep -E '^Benchmark' $OUT/tile-bench-$W.log | awk '{print $1, $3, $4}'
done
for W in 1 0; do
  left 480 || break
  el "decode/prefill WGMMA=$W"
  RINGLM_CUDA_WGMMA=$W timeout 100 /tmp/c.test -test.run '^$' -test.bench 'Decode/batch(1|64|256)$|Prefill/prompt(128|2048)$' -test.benchtime 30x > $OUT/dp-$W.log 2>&1
  grep -E '^Benchmark' $OUT/dp-$W.log | cut -c1-200
done
if left 520; then
  el "whole-kernel tests, RINGLM_CUDA_WG_FILL=0"
  RINGLM_CUDA_WG_FILL=0 timeout $(( 585 - ($(date +%s) - T0) )) /tmp/c.test -test.run 'TestChunkingInvariance|TestBatchInvariance|TestGreedyMatchesCPU|TestLogitsMatchCPU|TestBuiltinPerplexity' -test.v > $OUT/kernel-tests.log 2>&1; echo "rc $?"
  grep -E '^(--- |PASS|FAIL|ok)|_test.go' $OUT/kernel-tests.log | head -40
fi
el done
