package httpapi

import (
	"context"
	"net"
	"sync"
	"time"
)

// watchEvery is how often a running request checks its client.
const watchEvery = 100 * time.Millisecond

func contextWithCancelCause() (context.Context, context.CancelCauseFunc) {
	return context.WithCancelCause(context.Background())
}

// watch cancels the job when its client hangs up while nothing is being
// written (a queued or prefilling request, a non-streaming one), or when a
// streaming client has accepted nothing for StallTimeout. The returned
// func stops the watchdog and waits for it, so conn is not touched after
// the caller returns.
func (j *job) watch(conn net.Conn) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		stall := j.s.cfg.StallTimeout
		for {
			select {
			case <-quit:
				return
			case <-j.ctx.Done():
				return
			case <-t.C:
			}
			// A stream that wrote lately would have seen a hang-up in its
			// write; peeking costs a system call per request per tick.
			recent := int64(time.Since(epoch)) - j.wrote.Load()
			if conn != nil && recent > int64(watchEvery) && peerClosed(conn) {
				j.log.Debug().Msg("client closed the connection")
				j.abort(errClientGone)
				return
			}
			if since := j.flushing.Load(); since != 0 && time.Duration(int64(time.Since(epoch))-since) > stall {
				j.log.Warn().Dur("stalled", stall).Msg("client reads nothing: dropping it")
				j.abort(errStalled)
				if conn != nil {
					// Unblocks fasthttp's write to the socket, which then
					// closes the pipe our writer is blocked on.
					_ = conn.SetWriteDeadline(time.Now())
				}
				return
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}
