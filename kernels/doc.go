// Package kernels owns the device side of the ring protocol
// (ringbuf/PROTOCOL.md) for devices written in Go: Executor consumes
// submit records in order, keeps the per-slot state the protocol puts on
// the device (open/finished, position, last token, sampler, EOS and stop
// ids, token limit, block table), runs each STEP as one batch through a
// Backend, samples the entries that ask for it (package sample), applies
// the finish rules and writes TOKEN (with TOP_LOGPROBS after it when
// asked), SKIPPED and ERROR records and one STEP_DONE with device
// timestamps. Device wraps an Executor and a Backend as an engine.Device.
// Limits are the sizes a device answers by (Context, MaxStepTokens).
//
// Records that answer nothing (a successful OPEN or GRANT) are released
// with the next one that does, and completions are published once per
// answering record, so a step costs one release store on each ring.
// Doorbell channels wake either side, buffered so that a signal sent
// while the other side looks is kept, never lost. The executor parks on
// Notify with no timer when the submit ring is empty, so an idle device
// costs no CPU: a host must Notify after every publish.
//
// The devices:
//   - kernels/cpu: the Backend is the reference forward pass of package
//     model over its paged KV pool.
//   - kernels/null: instant tokens without a model (a Picker), to measure
//     the scheduler and the rings alone.
//   - kernels/cuda: the persistent CUDA kernel (kernels/cuda/device.cu and
//     the .cuh files it includes, built by `make cuda` into
//     libringlm_cuda.so and loaded at run time with dlopen, so go build
//     never needs CUDA). It does not use the Executor: its leader,
//     exec.cuh, implements the same state machine on the GPU.
//
// kernels/conformance is the protocol's test suite: the same scripted
// scenarios on every device, and a record-by-record comparison of two
// devices' completion streams (the CUDA kernel against the CPU device).
package kernels
