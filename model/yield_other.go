//go:build !linux

package model

import "runtime"

// yield lets other goroutines run.
func yield() { runtime.Gosched() }
