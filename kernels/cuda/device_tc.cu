// device_tc.cu: the persistent kernel again, for the models whose products
// and attention run on the tensor cores (the default), as a module of its
// own without the CUDA-core phases (state.cuh kTcmod). ptxas ties the
// register assignment of a module's functions together: beside the
// CUDA-core attention and phases, the tensor-core attention and products
// spilled more inside their loops, and batch 64 and 256 ran 3-4% slower
// (issue 15, bench/RESULTS.md).
// host.cuh (in device.cu's module) launches its kernel, through
// rlm_tcmod_kernel and rlm_tcmod_gbar; device.cu's kernel, with every path,
// runs RINGLM_CUDA_GEMV=1, RINGLM_CUDA_ATTN=cores and the shapes the
// tensor-core code does not take. make cuda builds it unless CUDA_TC=0.
#define RLM_TCMOD 1
#include "device.cu"
