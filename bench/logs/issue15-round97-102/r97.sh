#!/bin/bash
# Round 97: gemm_wg2_t (both operands by bulk copies, full/empty mbarriers) against mma.sync and gemm_wg_t, standalone.
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 400 .carry/wgtile2 2>&1 | tee $OUT/round97-wgtile2.log
