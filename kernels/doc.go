// Package kernels groups the devices that speak the ring protocol:
// kernels/cpu (Go), kernels/cuda (CUDA C++ loaded at run time with dlopen,
// so go build never needs CUDA) and kernels/null (instant completions for
// scheduler benchmarks). Filled by the engine and CUDA issues.
package kernels
