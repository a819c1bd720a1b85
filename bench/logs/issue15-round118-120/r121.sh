#!/bin/bash
# Round 121: is round 118's cost of a second copy of the step in instruction fetch? Nsight Compute's warp states
# (application replay: each pass a fresh run) on the persistent kernel at batch 1, main's library (tcmod) against s1b.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
cd kernels/cuda
NCU=/usr/local/cuda/bin/ncu; [ -x $NCU ] || NCU=$(command -v ncu)
echo "ncu: $NCU"
for L in tcmod s1b; do
  el "ncu $L"
  RINGLM_CUDA_LIB=/tmp/r/$L.so timeout 200 $NCU --target-processes all -k regex:persistent --launch-count 1 \
    --replay-mode application --section WarpStateStats --section SchedulerStats --section InstructionStats \
    /tmp/r/c.test -test.run '^$' -test.bench 'Decode/batch1$' -test.benchtime 30x > $OUT/ncu-$L.txt 2>&1
  echo "rc $?"; grep -E "Duration|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Stall|Warp Cycles Per Executed|ms/step" $OUT/ncu-$L.txt | head -20
done
el done
