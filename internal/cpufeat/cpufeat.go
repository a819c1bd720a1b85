// Package cpufeat says which instruction-set extensions the assembly
// kernels of this process may use. It is decided once, at init, so every
// package that dispatches on it (model, model/qdot) takes the same path:
// the Go and assembly kernels never mix within a process.
package cpufeat
