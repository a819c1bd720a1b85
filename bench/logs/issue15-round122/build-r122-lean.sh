#!/bin/bash
# $1 = variant name, rest = extra flags
n=$1; shift
cd /work/main
MIX_90A=1 /opt/mix/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 "$@" -Xptxas -v -Xcompiler -fPIC -c -o /tmp/b122/$n.o kernels/cuda/device_tc.cu > /tmp/b122/$n.log 2>&1
echo $? > /tmp/b122/done-$n
