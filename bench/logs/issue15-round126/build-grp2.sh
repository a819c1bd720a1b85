#!/bin/bash
cd /tmp/g2/src
export MIX_90A=1
N=/opt/mix/bin/nvcc
F="-O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Xcompiler -fPIC"
$N $F -c -o /tmp/g2/device_tc.o device_tc.cu > /tmp/g2/device_tc.log 2>&1; echo $? > /tmp/g2/done-tc
$N -gencode=arch=compute_90,code=sm_90 -shared -o /tmp/g2/grp2.so /tmp/tcm2/device.o /tmp/g2/device_tc.o /tmp/g1/device_q.o > /tmp/g2/link.log 2>&1; echo $? > /tmp/g2/done-so
