//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// signalOnFirstLine sends this process SIGINT when the first progress
// line arrives, and holds the writer (the goroutine writing the file)
// until the signal has had time to cancel the run.
type signalOnFirstLine struct {
	once sync.Once
	buf  lockedBuffer
	err  error
}

func (s *signalOnFirstLine) Write(p []byte) (int, error) {
	s.once.Do(func() {
		s.err = syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(200 * time.Millisecond)
	})
	return s.buf.Write(p)
}

// ^C during quantize stops it at the next chunk: exit 130, and neither
// OUT nor OUT.tmp is left.
func TestQuantizeInterrupt(t *testing.T) {
	in := synthF16(t, "qwen2")
	out := filepath.Join(t.TempDir(), "out.gguf")
	var stdout lockedBuffer
	stderr := &signalOnFirstLine{}
	code := run([]string{"quantize", in, out, "q8_0", "--threads", "1"}, &stdout, stderr)
	if stderr.err != nil {
		t.Fatal(stderr.err)
	}
	e := stderr.buf.String()
	if code != 130 || stdout.String() != "" || !strings.HasSuffix(e, "\nringlm quantize: interrupted\n") {
		t.Fatalf("exit %d, stdout %q, stderr ...%q; want 130 and the interruption", code, stdout.String(), e[max(0, len(e)-200):])
	}
	for _, p := range []string{out, out + ".tmp"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("an interrupted run left %s", p)
		}
	}
}
