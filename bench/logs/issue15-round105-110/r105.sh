#!/bin/bash
# Round 105: the tensor-core kernel without the CUDA-core phases in its module (notc: phase_attn, phase_qkv, phase_residual,
# phase_ffn_up, phase_head cut out of device.cu and device_q.cu), against main's source (main2), both built here by
# bench/gpu/mixtool.sh's nvcc; wgn: branch i15-wg2 (gate/up on wgmma) with the same cut. Tests, then BF16 decode and
# prefill alternating twice, Q4_K_M decode alternating twice, profiles at prompt 2048.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
T='GreedyMatchesCPU|LogitsMatchCPU|Chunking|Perplex|BatchInvariance|TileProductQuant|SlidingWindow'
tst() { el "tests on $1 ($2)"; RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 150 /tmp/r/c.test -test.v -test.run "$2" > $OUT/tests-$1.log 2>&1; echo "rc $?"; grep -E "^--- |^FAIL|^ok|^PASS|panic" $OUT/tests-$1.log | cut -c1-200; }
tst notc "$T"
# wgn's module is linked with notc's device_q.o (main's Dev layout): BF16 tests only.
tst wgn 'TestChunkingInvariance|TestBatchInvariance'
bench() { el "-- $1 $2"; [ -f /tmp/r/$1.so ] || return; env $2 RINGLM_CUDA_LIB=/tmp/r/$1.so timeout 100 /tmp/r/c.test -test.run '^$' -test.bench "$3" -test.benchtime 30x 2>&1 | grep -E "^Benchmark" | awk '{printf "%-36s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /ms\// || $(i) ~ /tok\/s/) printf " %s %s", $(i-1), $(i); print ""}'; }
D='Decode/batch(1|16|64|256)$|Prefill/prompt(128|512|2048)$'
for r in 1 2; do bench main2 X=1 "$D"; bench notc X=1 "$D"; bench wgn X=1 "$D"; done
for r in 1 2; do for L in main2 notc; do bench $L RINGLM_BENCH_MIX=Q4_K_M 'Decode/batch(1|16|64|256)$'; done; done
for L in main2 notc wgn; do el "profile prefill 2048 $L"; RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'Prefill/prompt2048$' -test.benchtime 5x > $OUT/prof-$L.log 2>&1; grep -E 'µs/step' $OUT/prof-$L.log | head -2; done
for L in main2 notc; do el "profile Q4_K_M batch 1 $L"; RINGLM_BENCH_MIX=Q4_K_M RINGLM_CUDA_PROFILE=1 RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch1$' -test.benchtime 30x > $OUT/profq-$L.log 2>&1; grep -E 'µs/step' $OUT/profq-$L.log | head -3; done
el done
