//go:build linux || darwin

package sample

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time of the process so far. Benchmarks report it per
// operation beside wall time, which on a shared machine measures the
// neighbours as much as the code.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
