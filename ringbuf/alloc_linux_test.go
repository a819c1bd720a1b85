package ringbuf

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

func TestMmapAllocatorMlockRefused(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("mlock is used on Linux only")
	}
	for _, errno := range []syscall.Errno{syscall.ENOMEM, syscall.EPERM} {
		a := NewMmapAllocator()
		a.mlock = func([]byte) error { return errno }
		b, err := a.Alloc(3 << 20)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] = 1 // usable
		w := a.Warning()
		if a.Locked() || !strings.HasPrefix(w, "could not lock 3 MiB of ring memory (RLIMIT_MEMLOCK=") ||
			!strings.Contains(w, errno.Error()) || !strings.HasSuffix(w, "; continuing unlocked") {
			t.Errorf("%v: Locked %v, warning %q", errno, a.Locked(), w)
		}
		if err := a.Free(b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMmapAllocatorRlimit runs a child test process that lowers
// RLIMIT_MEMLOCK to 64 KiB (and drops CAP_IPC_LOCK from its thread, which
// root has) before it allocates 4 MiB.
func TestMmapAllocatorRlimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("mlock is used on Linux only")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMmapAllocatorRlimitChild$", "-test.v")
	cmd.Env = append(os.Environ(), "RINGBUF_MLOCK_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, res, ok := bytes.Cut(out, []byte("RESULT "))
	if !ok {
		t.Fatalf("child printed no result:\n%s", out)
	}
	res, _, _ = bytes.Cut(res, []byte("\n"))
	switch r := string(res); {
	case strings.HasPrefix(r, "skip"):
		t.Skip(r)
	case r != "unlocked could not lock 4 MiB of ring memory (RLIMIT_MEMLOCK=64 KiB): cannot allocate memory; continuing unlocked":
		t.Fatalf("child: %s", r)
	}
}

func TestMmapAllocatorRlimitChild(t *testing.T) {
	if os.Getenv("RINGBUF_MLOCK_CHILD") != "1" {
		t.Skip("run by TestMmapAllocatorRlimit")
	}
	runtime.LockOSThread() // capabilities are per thread: mlock must run on this one
	resource := 8          // RLIMIT_MEMLOCK
	if strings.HasPrefix(runtime.GOARCH, "mips") {
		resource = 9
	}
	lim := syscall.Rlimit{Cur: 64 << 10, Max: 64 << 10}
	if err := syscall.Setrlimit(resource, &lim); err != nil {
		fmt.Println("RESULT skip: setrlimit:", err)
		return
	}
	if err := dropIPCLock(); err != nil {
		fmt.Println("RESULT skip: capset:", err)
		return
	}
	a := NewMmapAllocator()
	b, err := a.Alloc(4 << 20)
	if err != nil {
		fmt.Println("RESULT alloc failed:", err)
		return
	}
	if a.Locked() {
		fmt.Println("RESULT skip: mlock succeeded despite RLIMIT_MEMLOCK")
		return
	}
	fmt.Println("RESULT unlocked", a.Warning())
	a.Free(b)
}

// dropIPCLock removes CAP_IPC_LOCK from the calling thread's effective set.
func dropIPCLock() error {
	const capIPCLock = 14
	hdr := struct {
		version uint32
		pid     int32
	}{version: 0x20080522} // _LINUX_CAPABILITY_VERSION_3
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return e
	}
	data[0].effective &^= 1 << capIPCLock
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return e
	}
	return nil
}
