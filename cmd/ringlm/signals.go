package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// interruptContext returns a context that ends at the first SIGINT or
// SIGTERM; which then says which signal it was. stop gives the signals
// their default action back.
func interruptContext() (ctx context.Context, which func() os.Signal, stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got os.Signal = os.Interrupt
	go func() {
		select {
		case s := <-sigs:
			mu.Lock()
			got = s
			mu.Unlock()
			cancel()
		case <-ctx.Done():
		}
	}()
	which = func() os.Signal {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	return ctx, which, func() { signal.Stop(sigs); cancel() }
}

// interrupted is a command stopped by SIGINT or SIGTERM. It exits with
// 128 + the signal's number, as a shell reports a process the signal
// killed (130 for ^C).
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string { return "interrupted" }

func (e interrupted) ExitCode() int { return exitStatus(e.sig) }

func exitStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 130
}

// interruptedBy is a command's error after a signal stopped it (a pull
// that says what it kept): the error's line, and 128 + the signal's
// number as the status.
type interruptedBy struct {
	err error
	sig os.Signal
}

func (e interruptedBy) Error() string { return e.err.Error() }

func (e interruptedBy) Unwrap() error { return e.err }

func (e interruptedBy) ExitCode() int { return exitStatus(e.sig) }
