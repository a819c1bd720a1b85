package model

import (
	"runtime"
	"syscall"
)

// yield lets other goroutines run, and other processes: a spinning
// helper on a machine whose cores are all taken would otherwise spend
// the time slice the step's own work needs.
func yield() {
	runtime.Gosched()
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
