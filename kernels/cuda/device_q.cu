// device_q.cu: the persistent kernel again, with the block-quantized
// product (RLM_TYPE_QANY, qpack.h), as a module of its own: ptxas compiles
// each translation unit as a whole program, so device.cu's module, the one
// every other model runs, stays exactly as it is without them. This one is
// lean (state.cuh kQmod: BF16 and QANY products only, the tensor-core
// phases only; under a minute of ptxas with nvcc 11.8). host.cuh (in
// device.cu's module) launches its kernel, through rlm_qmod_kernel and
// rlm_qmod_gbar, for a model that has block-quantized weights. make cuda
// builds it unless CUDA_QUANT=0.
#define RLM_QMOD 1
#define RLM_QANY 1
#include "device.cu"
