package gguf

import (
	"fmt"
	"io"
	"syscall"
	"unsafe"
)

// hugePage is the size of a transparent huge page on x86-64 and arm64
// Linux; OpenResident aligns its copy to it.
const hugePage = 2 << 20

// OpenResident reads the file at path into anonymous memory instead of
// mapping it, and parses it there: tensors are views into that copy,
// read-only once it is filled. The memory is asked for as transparent huge
// pages (madvise; the kernel's settings decide), so streaming the weights
// takes a TLB entry per 2 MiB instead of per 4 KiB: the CPU device's
// decode, which reads every weight once a token, runs some percent faster
// (bench/RESULTS.md). It costs the file's size in private memory and the
// time to read it; Open shares the page cache instead.
func OpenResident(path string) (*File, error) {
	fh, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	n := (int(size) + hugePage - 1) &^ (hugePage - 1)
	mem, err := syscall.Mmap(-1, 0, n+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %d bytes of memory: %w", path, n, err)
	}
	off := 0
	if a := int(uintptr(unsafe.Pointer(&mem[0])) & (hugePage - 1)); a != 0 {
		off = hugePage - a
	}
	// Without transparent huge pages (or with them off) this fails and the
	// copy lives in ordinary pages.
	_ = syscall.Madvise(mem[off:off+n], syscall.MADV_HUGEPAGE)
	data := mem[off : off+int(size)]
	if _, err := io.ReadFull(fh, data); err != nil {
		syscall.Munmap(mem)
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			err = fmt.Errorf("%w: the file shrank while it was read", ErrTruncated)
		}
		return nil, fmt.Errorf("gguf: reading %s: %w", path, err)
	}
	if err := syscall.Mprotect(mem, syscall.PROT_READ); err != nil {
		syscall.Munmap(mem)
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		syscall.Munmap(mem)
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	f.unmap = func() error { return syscall.Munmap(mem) }
	return f, nil
}
