// device_q.cu: the persistent kernel again, with the block-quantized
// product (RLM_TYPE_QANY, qpack.h), as a module of its own. ptxas compiles
// each translation unit as a whole program: here the kernel with the QANY
// instances (about 21 minutes with nvcc 11.8), while device.cu's module,
// the one every other model runs, stays exactly as it is without them
// (about 5 minutes, in parallel). host.cuh (in device.cu's module) launches
// this module's kernel, through rlm_qmod_kernel and rlm_qmod_gbar, for a
// model that has block-quantized weights. Built by make cuda CUDA_QUANT=1.
#define RLM_QMOD 1
#define RLM_QANY 1
#include "device.cu"
