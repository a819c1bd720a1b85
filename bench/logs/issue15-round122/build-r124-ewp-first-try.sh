#!/bin/bash
cd /work/main
export MIX_90A=1
N=/opt/mix/bin/nvcc
F="-O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Xcompiler -fPIC"
$N $F -rdc=true -maxrregcount=128 -DRLM_TCSPLIT_EWP -c -o /tmp/b122/Be.o kernels/cuda/device_tcm.cu > /tmp/b122/Be.log 2>&1; echo $? > /tmp/b122/done-Be
$N $F -rdc=true -maxrregcount=128 -DRLM_TCSPLIT_EWP -DRLM_GEMM_INLINE -c -o /tmp/b122/Bei.o kernels/cuda/device_tcm.cu > /tmp/b122/Bei.log 2>&1; echo $? > /tmp/b122/done-Bei
$N $F -ewp -DRLM_TCSPLIT -DRLM_TCSPLIT_EWP -c -o /tmp/b122/Ae.o kernels/cuda/device_tc.cu > /tmp/b122/Ae.log 2>&1; echo $? > /tmp/b122/done-Ae
for b in Be Bei; do
$N -gencode=arch=compute_90,code=sm_90 -cudadevrt none -Xcompiler -fPIC -dlink /tmp/b122/Ae.o /tmp/b122/$b.o -o /tmp/b122/dl-$b.o > /tmp/b122/dl-$b.log 2>&1
$N -gencode=arch=compute_90,code=sm_90 -cudadevrt none -shared -o /tmp/b122/ewp-$b.so /tmp/tcm2/device.o /tmp/b122/Ae.o /tmp/b122/$b.o /tmp/b122/dl-$b.o /tmp/tcm2/device_q.o >> /tmp/b122/dl-$b.log 2>&1; echo $? > /tmp/b122/done-ewp-$b
done
