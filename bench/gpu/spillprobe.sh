#!/bin/bash
# bench/gpu/spillprobe.sh [NVCC]: ptxas's spill figures for phase_attn_tc_hd<64> in each variant of
# bench/gpu/spillprobe.cu (issue 15). NVCC: nvcc 11.8 by default; with bench/gpu/mixtool.sh's
# /opt/mix/bin/nvcc (MIX_90A=1 is set here) ptxas 12.4 assembles it for sm_90a.
set -eu
cd "$(dirname "$0")/../.."
NVCC=${1:-nvcc}
o=$(mktemp -d); trap 'rm -rf "$o"' EXIT
for p in 0 1 2 3 4 5; do
  MIX_90A=1 $NVCC -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -DPROBE=$p -Ikernels/cuda -Xptxas -v \
    -c -o "$o/p.o" bench/gpu/spillprobe.cu > "$o/log" 2>&1 || { cat "$o/log"; exit 1; }
  printf 'PROBE=%d  ' $p
  grep -A1 'Function properties' "$o/log" | grep -v '^--' | paste - - | grep 'phase_attn_tc_hdILi64' |
    sed -E 's/.*stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads/phase_attn_tc_hd<64>: \1 bytes spill stores, \2 loads/'
done
