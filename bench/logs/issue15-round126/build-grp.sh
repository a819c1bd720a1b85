#!/bin/bash
cd /tmp/g1/src
export MIX_90A=1
N=/opt/mix/bin/nvcc
F="-O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -Xcompiler -fPIC"
$N $F -c -o /tmp/g1/device_q.o device_q.cu > /tmp/g1/device_q.log 2>&1; echo $? > /tmp/g1/done-q
$N $F -c -o /tmp/g1/device_tc.o device_tc.cu > /tmp/g1/device_tc.log 2>&1; echo $? > /tmp/g1/done-tc
$N $F -c -o /tmp/g1/device.o device.cu > /tmp/g1/device.log 2>&1; echo $? > /tmp/g1/done-dev
$N -gencode=arch=compute_90,code=sm_90 -shared -o /tmp/g1/grp.so /tmp/g1/device.o /tmp/g1/device_tc.o /tmp/g1/device_q.o > /tmp/g1/link.log 2>&1; echo $? > /tmp/g1/done-so
$N $F -DRLM_NG=0 -c -o /tmp/g1/device_tc0.o device_tc.cu > /tmp/g1/device_tc0.log 2>&1; echo $? > /tmp/g1/done-tc0
$N -gencode=arch=compute_90,code=sm_90 -shared -o /tmp/g1/ng0.so /tmp/tcm2/device.o /tmp/g1/device_tc0.o /tmp/tcm2/device_q.o > /tmp/g1/link0.log 2>&1; echo $? > /tmp/g1/done-so0
