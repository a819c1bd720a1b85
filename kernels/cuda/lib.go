package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include "ringlm_cuda.h"

// The library is opened at run time, so every call goes through a function
// pointer from dlsym; these trampolines make the calls (cgo cannot call a
// C function pointer directly). Nothing here needs the CUDA toolkit.

typedef int (*rlm_probe_fn)(char *, size_t);
typedef void *(*rlm_host_alloc_fn)(uint64_t, char *, size_t);
typedef int (*rlm_host_free_fn)(void *, char *, size_t);
typedef rlm_ctx *(*rlm_create_fn)(const rlm_model *, const rlm_opts *, char *, size_t);
typedef int (*rlm_get_info_fn)(rlm_ctx *, rlm_info *);
typedef int (*rlm_start_fn)(rlm_ctx *, void *, uint64_t, char *, size_t);
typedef int (*rlm_wait_fn)(rlm_ctx *, char *, size_t);
typedef int (*rlm_read_logits_fn)(rlm_ctx *, uint32_t, float *, uint32_t, char *, size_t);
typedef int (*rlm_copy_bandwidth_fn)(rlm_ctx *, uint64_t, double *, char *, size_t);
typedef void (*rlm_destroy_fn)(rlm_ctx *);

static int tr_probe(void *f, char *err, size_t n) { return ((rlm_probe_fn)f)(err, n); }
static void *tr_host_alloc(void *f, uint64_t bytes, char *err, size_t n) { return ((rlm_host_alloc_fn)f)(bytes, err, n); }
static int tr_host_free(void *f, void *p, char *err, size_t n) { return ((rlm_host_free_fn)f)(p, err, n); }
static rlm_ctx *tr_create(void *f, const rlm_model *m, const rlm_opts *o, char *err, size_t n) { return ((rlm_create_fn)f)(m, o, err, n); }
static int tr_get_info(void *f, rlm_ctx *c, rlm_info *out) { return ((rlm_get_info_fn)f)(c, out); }
static int tr_start(void *f, rlm_ctx *c, void *arena, uint64_t bytes, char *err, size_t n) { return ((rlm_start_fn)f)(c, arena, bytes, err, n); }
static int tr_wait(void *f, rlm_ctx *c, char *err, size_t n) { return ((rlm_wait_fn)f)(c, err, n); }
static int tr_query(void *f, rlm_ctx *c, char *err, size_t n) { return ((rlm_wait_fn)f)(c, err, n); }
static int tr_read_logits(void *f, rlm_ctx *c, uint32_t row, float *out, uint32_t cnt, char *err, size_t n) { return ((rlm_read_logits_fn)f)(c, row, out, cnt, err, n); }
static int tr_copy_bandwidth(void *f, rlm_ctx *c, uint64_t bytes, double *gbps, char *err, size_t n) { return ((rlm_copy_bandwidth_fn)f)(c, bytes, gbps, err, n); }
static void tr_destroy(void *f, rlm_ctx *c) { ((rlm_destroy_fn)f)(c); }

// dlopen_now opens a library, or returns NULL with dlerror's text in err.
static void *dlopen_now(const char *path, char *err, size_t n) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h && n > 0) {
		const char *e = dlerror();
		size_t i = 0;
		if (e)
			for (; e[i] && i + 1 < n; i++)
				err[i] = e[i];
		err[i] = 0;
	}
	return h;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// LibName is the file name of the CUDA device library (`make cuda`).
const LibName = "libringlm_cuda.so"

// ABI is the version of ringlm_cuda.h this package was built against
// (RLM_CUDA_ABI); the library checks it in rlm_create.
const ABI = C.RLM_CUDA_ABI

// errLen is the size of the error buffers handed to the library.
const errLen = 1024

// library is an opened libringlm_cuda.so and its functions.
type library struct {
	path    string
	handle  unsafe.Pointer
	devices int // rlm_probe's answer

	fnProbe, fnHostAlloc, fnHostFree, fnCreate, fnGetInfo, fnStart, fnWait, fnQuery,
	fnReadLogits, fnCopyBandwidth, fnDestroy unsafe.Pointer
}

// symbols lists every function of the ABI with where its pointer goes.
func (l *library) symbols() []struct {
	name string
	p    *unsafe.Pointer
} {
	return []struct {
		name string
		p    *unsafe.Pointer
	}{
		{"rlm_probe", &l.fnProbe}, {"rlm_host_alloc", &l.fnHostAlloc}, {"rlm_host_free", &l.fnHostFree},
		{"rlm_create", &l.fnCreate}, {"rlm_get_info", &l.fnGetInfo}, {"rlm_start", &l.fnStart},
		{"rlm_wait", &l.fnWait}, {"rlm_query", &l.fnQuery}, {"rlm_read_logits", &l.fnReadLogits},
		{"rlm_copy_bandwidth", &l.fnCopyBandwidth}, {"rlm_destroy", &l.fnDestroy},
	}
}

var (
	loadOnce sync.Once
	theLib   *library
	loadErr  error
)

// Available reports why the CUDA device cannot be used, or nil if it can:
// the library was found, exports the whole ABI, and rlm_probe sees a GPU.
// The library is loaded once per process; RINGLM_CUDA_LIB is read then.
func Available() error {
	_, err := lib()
	return err
}

// Library is the path of the loaded library ("" until Available succeeds).
func Library() string {
	if l, err := lib(); err == nil {
		return l.path
	}
	return ""
}

// Devices is the number of CUDA devices rlm_probe reported (0 when the
// device is not available).
func Devices() int {
	if l, err := lib(); err == nil {
		return l.devices
	}
	return 0
}

func lib() (*library, error) {
	loadOnce.Do(func() {
		theLib, loadErr = load(libCandidates(os.Getenv("RINGLM_CUDA_LIB"), executableDir(), cwd()))
	})
	return theLib, loadErr
}

func executableDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	return filepath.Dir(exe)
}

func cwd() string {
	d, _ := os.Getwd()
	return d
}

// libCandidates is the search order: $RINGLM_CUDA_LIB, the executable's
// directory, kernels/cuda under the working directory and under the
// module root (the nearest parent holding ringlm's go.mod), then the bare
// name for the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
func libCandidates(env, exeDir, wd string) []string {
	var out []string
	add := func(p string) {
		for _, q := range out {
			if q == p {
				return
			}
		}
		out = append(out, p)
	}
	if env != "" {
		add(env)
	}
	if exeDir != "" {
		add(filepath.Join(exeDir, LibName))
	}
	if wd != "" {
		add(filepath.Join(wd, "kernels", "cuda", LibName))
		if root := moduleRoot(wd); root != "" {
			add(filepath.Join(root, "kernels", "cuda", LibName))
		}
	}
	add(LibName)
	return out
}

// moduleRoot walks up from dir to the directory whose go.mod declares
// module ringlm, or returns "".
func moduleRoot(dir string) string {
	for d := dir; ; {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && declaresRinglm(b) {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

func declaresRinglm(gomod []byte) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" && strings.Trim(f[1], `"`) == "ringlm" {
			return true
		}
	}
	return false
}

// ErrNoLibrary is wrapped when libringlm_cuda.so is found nowhere.
var ErrNoLibrary = errors.New("cuda: " + LibName + " not found")

// load opens the first candidate that exists and resolves the ABI. A path
// that exists but does not load (a missing libcudart, a wrong ELF class)
// is reported rather than skipped: it is almost certainly the library the
// user meant.
func load(candidates []string) (*library, error) {
	var errbuf [errLen]C.char
	var tried []string
	for _, p := range candidates {
		bare := !strings.ContainsRune(p, '/')
		if !bare {
			if _, err := os.Stat(p); err != nil {
				tried = append(tried, p)
				continue
			}
		}
		cp := C.CString(p)
		h := C.dlopen_now(cp, &errbuf[0], errLen)
		C.free(unsafe.Pointer(cp))
		if h == nil {
			msg := C.GoString(&errbuf[0])
			if bare {
				// The loader's own search found nothing (or something
				// unusable): report it with the paths tried.
				tried = append(tried, p+" (dynamic loader: "+msg+")")
				continue
			}
			return nil, fmt.Errorf("cuda: cannot load %s: %s", p, msg)
		}
		return resolve(p, unsafe.Pointer(h))
	}
	return nil, fmt.Errorf("%w (tried %s); `make cuda` builds it (needs nvcc), or set RINGLM_CUDA_LIB to its path",
		ErrNoLibrary, strings.Join(tried, ", "))
}

// resolve finds every function of the ABI in the opened library and asks
// it for devices.
func resolve(path string, h unsafe.Pointer) (*library, error) {
	l := &library{path: path, handle: h}
	var missing []string
	for _, s := range l.symbols() {
		cn := C.CString(s.name)
		*s.p = C.dlsym(h, cn)
		C.free(unsafe.Pointer(cn))
		if *s.p == nil {
			missing = append(missing, s.name)
		}
	}
	if len(missing) > 0 {
		C.dlclose(h)
		return nil, fmt.Errorf("cuda: %s does not match ringlm_cuda.h ABI %d: missing %s (rebuild it with `make cuda`)",
			path, ABI, strings.Join(missing, ", "))
	}
	var errbuf [errLen]C.char
	n := C.tr_probe(l.fnProbe, &errbuf[0], errLen)
	if n <= 0 {
		msg := C.GoString(&errbuf[0])
		if msg == "" {
			msg = "no CUDA device"
		}
		// The handle stays open: a library may not survive dlclose once
		// it has touched the CUDA driver.
		return nil, fmt.Errorf("cuda: %s: %s", path, oneLine(msg))
	}
	l.devices = int(n)
	return l, nil
}

// cerr turns a library error buffer into a Go error.
func cerr(fn string, buf []C.char) error {
	msg := C.GoString(&buf[0])
	if msg == "" {
		msg = "failed (no message)"
	}
	return fmt.Errorf("cuda: %s: %s", fn, oneLine(msg))
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// The calls below are the only places Go enters the library.

func (l *library) hostAlloc(bytes uint64) (unsafe.Pointer, error) {
	var errbuf [errLen]C.char
	p := C.tr_host_alloc(l.fnHostAlloc, C.uint64_t(bytes), &errbuf[0], errLen)
	if p == nil {
		return nil, cerr("rlm_host_alloc", errbuf[:])
	}
	return p, nil
}

func (l *library) hostFree(p unsafe.Pointer) error {
	var errbuf [errLen]C.char
	if C.tr_host_free(l.fnHostFree, p, &errbuf[0], errLen) < 0 {
		return cerr("rlm_host_free", errbuf[:])
	}
	return nil
}

func (l *library) createCtx(m *C.rlm_model, o *C.rlm_opts) (*C.rlm_ctx, error) {
	var errbuf [errLen]C.char
	c := C.tr_create(l.fnCreate, m, o, &errbuf[0], errLen)
	if c == nil {
		return nil, cerr("rlm_create", errbuf[:])
	}
	return c, nil
}

func (l *library) info(c *C.rlm_ctx) (Info, error) {
	var in C.rlm_info
	if C.tr_get_info(l.fnGetInfo, c, &in) < 0 {
		return Info{}, errors.New("cuda: rlm_get_info failed")
	}
	return Info{
		Name:        C.GoString(&in.name[0]),
		SMCount:     int(in.sm_count),
		GridBlocks:  int(in.grid_blocks),
		Threads:     int(in.threads),
		NumBlocks:   int(in.num_blocks),
		WeightBytes: uint64(in.weight_bytes),
		KVBytes:     uint64(in.kv_bytes),
		WorkBytes:   uint64(in.work_bytes),
		FreeBytes:   uint64(in.free_bytes),
		TotalBytes:  uint64(in.total_bytes),
		Launches:    uint64(in.launches),
	}, nil
}

func (l *library) startKernel(c *C.rlm_ctx, arena unsafe.Pointer, bytes uint64) error {
	var errbuf [errLen]C.char
	if C.tr_start(l.fnStart, c, arena, C.uint64_t(bytes), &errbuf[0], errLen) < 0 {
		return cerr("rlm_start", errbuf[:])
	}
	return nil
}

// waitKernel blocks (in C, on its own thread) until the kernel exits.
func (l *library) waitKernel(c *C.rlm_ctx) error {
	var errbuf [errLen]C.char
	if C.tr_wait(l.fnWait, c, &errbuf[0], errLen) < 0 {
		return cerr("kernel", errbuf[:])
	}
	return nil
}

// queryKernel: running true while the kernel runs; err after a failure.
func (l *library) queryKernel(c *C.rlm_ctx) (running bool, err error) {
	var errbuf [errLen]C.char
	switch r := C.tr_query(l.fnQuery, c, &errbuf[0], errLen); {
	case r > 0:
		return true, nil
	case r == 0:
		return false, nil
	default:
		return false, cerr("kernel", errbuf[:])
	}
}

func (l *library) readLogits(c *C.rlm_ctx, row int, dst []float32) error {
	var errbuf [errLen]C.char
	if C.tr_read_logits(l.fnReadLogits, c, C.uint32_t(row), (*C.float)(unsafe.Pointer(unsafe.SliceData(dst))),
		C.uint32_t(len(dst)), &errbuf[0], errLen) < 0 {
		return cerr("rlm_read_logits", errbuf[:])
	}
	return nil
}

func (l *library) copyBW(c *C.rlm_ctx, bytes uint64) (float64, error) {
	var errbuf [errLen]C.char
	var gbps C.double
	if C.tr_copy_bandwidth(l.fnCopyBandwidth, c, C.uint64_t(bytes), &gbps, &errbuf[0], errLen) < 0 {
		return 0, cerr("rlm_copy_bandwidth", errbuf[:])
	}
	return float64(gbps), nil
}

func (l *library) destroyCtx(c *C.rlm_ctx) { C.tr_destroy(l.fnDestroy, c) }
