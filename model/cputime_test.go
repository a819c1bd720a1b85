//go:build linux || darwin

package model

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time of the process so far: the decode benchmarks
// report it per step beside wall time, which on a shared machine measures
// the neighbours as much as the code.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
