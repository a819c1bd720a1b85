#!/bin/bash
# Round 79: the tile product alone (gemm_check, 16384 x 2048 gate/up) under Nsight Compute: Q4_K against BF16 at 1 and 64 rows; library qfinal (make cuda of main at the merge of i17-qmod).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cudaq4.test.gz > /tmp/r/cudaq4.test && chmod +x /tmp/r/cudaq4.test
cd kernels/cuda
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"
el "tile benches"
RINGLM_CUDA_LIB=/tmp/r/qfinal.so timeout 120 /tmp/r/cudaq4.test -test.run '^$' -test.bench 'TileProductQuant/(Q4_K|Q6_K|Q4_0)/gateup/M(1|16|64)$|TileProduct/gateup/M(1|16|64)$' -test.benchtime 50x 2>&1 | grep -E "^Benchmark|FAIL" | awk '{printf "%-48s", $1; for(i=2;i<=NF;i++) if ($(i) ~ /µs\/product|weight-GB/) printf " %s %s", $(i-1), $(i); print ""}'
[ -z "$NCU" ] && { el "no ncu"; exit 0; }
prof() { # name bench-regexp
  el "ncu $1"
  RINGLM_CUDA_LIB=/tmp/r/qfinal.so timeout 150 $NCU --target-processes all -k regex:gemm_check --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis --section SourceCounters --section LaunchStats --section Occupancy \
    /tmp/r/cudaq4.test -test.run '^$' -test.bench "$2" -test.benchtime 1x > $OUT/ncu-$1.txt 2>&1
  echo "rc $?"; grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Registers Per|ERR|Error|error" $OUT/ncu-$1.txt | head -24
}
prof q4k-m1 'TileProductQuant/Q4_K/gateup/M1$'
prof bf16-m1 'TileProduct/gateup/M1$'
prof q4k-m64 'TileProductQuant/Q4_K/gateup/M64$'
el done
