#!/bin/bash
cd /work/docs
export MIX_90A=1
N=/opt/mix/bin/nvcc
F="-O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Xcompiler -fPIC"
for m in 16 8; do
$N $F -DRLM_LOCAL_M=$m -c -o /tmp/b122/local$m.o kernels/cuda/device_tc.cu > /tmp/b122/local$m.log 2>&1; echo $? > /tmp/b122/done-local$m
$N -gencode=arch=compute_90,code=sm_90 -shared -o /tmp/b122/local$m.so /tmp/tcm2/device.o /tmp/b122/local$m.o /tmp/tcm2/device_q.o >> /tmp/b122/local$m.log 2>&1; echo $? > /tmp/b122/done-local$m-so
done
