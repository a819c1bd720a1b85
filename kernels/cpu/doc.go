// Package cpu will be the CPU device: a goroutine that polls the submit
// ring and runs steps with the reference forward over the paged KV cache.
package cpu
