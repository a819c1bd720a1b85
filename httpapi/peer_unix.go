//go:build linux || darwin || freebsd || netbsd || openbsd

package httpapi

import (
	"net"
	"syscall"
)

// peerClosed peeks at the socket without consuming anything: a readable
// end of stream (or a reset) means the client hung up. Pipelined request
// bytes leave it open. A client that only half-closes its sending side
// counts as gone, as it does for llama.cpp's server.
func peerClosed(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	// Control, not Read: Read refuses to run once fasthttp's read deadline
	// for the request has passed, which long generations outlive.
	err = raw.Control(func(fd uintptr) {
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK || rerr == syscall.EINTR:
		case rerr != nil:
			closed = true
		case n == 0:
			closed = true
		}
	})
	return closed || err != nil
}
