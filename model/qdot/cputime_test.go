//go:build linux || darwin

package qdot

import (
	"syscall"
	"time"
)

// cpuTime is the process's CPU time: BenchmarkMulBatch reports it beside
// the wall clock, which on a shared machine measures the neighbours too.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
