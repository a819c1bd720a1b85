#!/bin/bash
# Round 117: where a step's time goes per phase, over every block (RINGLM_CUDA_PROFILE=2, main's tensor-core kernel
# built with -DRLM_PROF_BLOCKS: the blocks' mean work, the slowest block's, the barrier after the last arrival), for
# Llama-3.2-1B and Qwen2.5-0.5B BF16 at batch 1, 16, 64, 256: what the Qwen row's fixed costs a phase are made of.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && gunzip -c .carry/lib/pb.so.gz > /tmp/r/pb.so
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
for P in llama-3.2-1b qwen2.5-0.5b; do for b in 1 16 64 256; do
  el "$P batch $b"
  RINGLM_BENCH_PRESET=$P RINGLM_CUDA_PROFILE=2 RINGLM_CUDA_LIB=/tmp/r/pb.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench "Decode/batch$b\$" -test.benchtime 10x 2>&1 | grep -E '^Benchmark|ringlm cuda profile' | sed 's/ringlm cuda profile: //' | cut -c1-220
done; done
el "llama-3.2-1b prompt 2048"
RINGLM_CUDA_PROFILE=2 RINGLM_CUDA_LIB=/tmp/r/pb.so timeout 60 /tmp/r/c.test -test.run '^$' -test.bench 'Prefill/prompt2048$' -test.benchtime 3x 2>&1 | grep -E '^Benchmark|ringlm cuda profile' | sed 's/ringlm cuda profile: //' | cut -c1-220
el done
