#!/bin/bash
# make cuda (nvcc 13, sm_90a + compute_90 PTX); the library comes back under $OUT
s=$SECONDS; make -s cuda > $OUT/make-cuda.log 2>&1; echo "make cuda rc $? in $((SECONDS - s)) s"
cp kernels/cuda/libringlm_cuda.so $OUT/ && ls -la $OUT
