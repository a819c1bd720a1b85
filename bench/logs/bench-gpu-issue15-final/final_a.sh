#!/bin/bash
# issue 15, final round A: make cuda (nvcc 13, sm_90a) and the side-by-side table against the gpt-fast-style peer
PEERS=gptfast BUDGET_S=530 OUT=$OUT/bench bash bench/peers/run_all.sh .carry/ringlm .carry/cuda.test > /dev/null 2>&1
cp kernels/cuda/libringlm_cuda.so $OUT/ 2>/dev/null
tail -45 $OUT/bench/run.log
