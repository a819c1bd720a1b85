#!/bin/bash
cd /work/main
export MIX_90A=1
N=/opt/mix/bin/nvcc
F="-O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Xcompiler -fPIC"
$N $F -rdc=true -maxrregcount=128 -DRLM_TCSPLIT -c -o /tmp/b122/A.o kernels/cuda/device_tc.cu > /tmp/b122/A.log 2>&1; echo $? > /tmp/b122/done-A
$N $F -rdc=true -maxrregcount=128 -c -o /tmp/b122/B.o kernels/cuda/device_tcm.cu > /tmp/b122/B.log 2>&1; echo $? > /tmp/b122/done-B
$N -gencode=arch=compute_90,code=sm_90 -cudadevrt none -Xcompiler -fPIC -dlink /tmp/b122/A.o /tmp/b122/B.o -o /tmp/b122/dl.o > /tmp/b122/dl.log 2>&1
$N -gencode=arch=compute_90,code=sm_90 -cudadevrt none -shared -o /tmp/b122/split.so /tmp/tcm2/device.o /tmp/b122/A.o /tmp/b122/B.o /tmp/b122/dl.o /tmp/tcm2/device_q.o >> /tmp/b122/dl.log 2>&1; echo $? > /tmp/b122/done-split
$N $F -c -o /tmp/b122/nosplit.o kernels/cuda/device_tc.cu > /tmp/b122/nosplit.log 2>&1; echo $? > /tmp/b122/done-nosplit
$N -gencode=arch=compute_90,code=sm_90 -shared -o /tmp/b122/nosplit.so /tmp/tcm2/device.o /tmp/b122/nosplit.o /tmp/tcm2/device_q.o >> /tmp/b122/dl.log 2>&1; echo $? > /tmp/b122/done-nosplitso
