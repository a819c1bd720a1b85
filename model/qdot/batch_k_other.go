//go:build !amd64 || purego

package qdot

// No batch kernels here (useVNNI is false): batchKernels stays empty and
// these are never called.

func runQ5_0(*byte, uintptr, int, *Batch, *float32, uintptr, uint16, *float32) {
	panic("qdot: no batch kernel")
}
func runQ4_0(*byte, uintptr, int, *Batch, *float32, uintptr, uint16, *float32) {
	panic("qdot: no batch kernel")
}
func runK4(*byte, uintptr, int, *Batch, *float32, uintptr, uint16, *float32) {
	panic("qdot: no batch kernel")
}
func runQ6_K(*byte, uintptr, int, *Batch, *float32, uintptr, uint16, *float32) {
	panic("qdot: no batch kernel")
}

func prepQ4_0([]byte, []byte, int) { panic("qdot: no batch kernel") }
func prepQ5_0([]byte, []byte, int) { panic("qdot: no batch kernel") }
func prepQ4_K([]byte, []byte, int) { panic("qdot: no batch kernel") }
func prepQ5_K([]byte, []byte, int) { panic("qdot: no batch kernel") }
func prepQ6_K([]byte, []byte, int) { panic("qdot: no batch kernel") }
