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
typedef int (*rlm_test_gemm_fn)(uint32_t, uint32_t, uint32_t, const float *, const uint16_t *, float *, uint32_t, uint32_t, double *, char *, size_t);
typedef int (*rlm_test_gemm_q_fn)(uint32_t, const float *, const rlm_matrix *, uint32_t, float *, uint32_t, uint32_t, double *, char *, size_t);
typedef int (*rlm_test_sample_fn)(uint32_t, uint32_t, const uint32_t *, const uint64_t *, const float *, rlm_sample_out *, char *, size_t);

static int tr_probe(void *f, char *err, size_t n) { return ((rlm_probe_fn)f)(err, n); }
static void *tr_host_alloc(void *f, uint64_t bytes, char *err, size_t n) { return ((rlm_host_alloc_fn)f)(bytes, err, n); }
static int tr_host_free(void *f, void *p, char *err, size_t n) { return ((rlm_host_free_fn)f)(p, err, n); }
static rlm_ctx *tr_create(void *f, const rlm_model *m, const rlm_opts *o, char *err, size_t n) { return ((rlm_create_fn)f)(m, o, err, n); }
static int tr_get_info(void *f, rlm_ctx *c, rlm_info *out) { return ((rlm_get_info_fn)f)(c, out); }
static int tr_start(void *f, rlm_ctx *c, void *arena, uint64_t bytes, char *err, size_t n) { return ((rlm_start_fn)f)(c, arena, bytes, err, n); }
static int tr_wait(void *f, rlm_ctx *c, char *err, size_t n) { return ((rlm_wait_fn)f)(c, err, n); }
static int tr_read_logits(void *f, rlm_ctx *c, uint32_t row, float *out, uint32_t cnt, char *err, size_t n) { return ((rlm_read_logits_fn)f)(c, row, out, cnt, err, n); }
static int tr_copy_bandwidth(void *f, rlm_ctx *c, uint64_t bytes, double *gbps, char *err, size_t n) { return ((rlm_copy_bandwidth_fn)f)(c, bytes, gbps, err, n); }
static void tr_destroy(void *f, rlm_ctx *c) { ((rlm_destroy_fn)f)(c); }
static int tr_test_gemm(void *f, uint32_t m, uint32_t n, uint32_t k, const float *x, const uint16_t *w, float *y, uint32_t iters,
                        uint32_t grid, double *ms, char *err, size_t errn) {
	return ((rlm_test_gemm_fn)f)(m, n, k, x, w, y, iters, grid, ms, err, errn);
}
static int tr_test_gemm_q(void *f, uint32_t m, const float *x, const rlm_matrix *parts, uint32_t np, float *y, uint32_t iters,
                          uint32_t grid, double *ms, char *err, size_t errn) {
	return ((rlm_test_gemm_q_fn)f)(m, x, parts, np, y, iters, grid, ms, err, errn);
}
static int tr_test_sample(void *f, uint32_t vocab, uint32_t n, const uint32_t *words, const uint64_t *offs, const float *logits,
                          rlm_sample_out *out, char *err, size_t errn) {
	return ((rlm_test_sample_fn)f)(vocab, n, words, offs, logits, out, err, errn);
}

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
	"runtime"
	"strings"
	"unsafe"

	"ringlm/gguf"
	"ringlm/ringbuf"
	"ringlm/sample"
)

// errLen is the size of the error buffers handed to the library.
const errLen = 1024

// The header and this package must agree on the ABI version.
const _ = uint8(ABI-C.RLM_CUDA_ABI) + uint8(C.RLM_CUDA_ABI-ABI)

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

// Contexts travel as unsafe.Pointer (a C pointer), so that the code using
// them builds without cgo too.

func (l *library) createCtx(d *desc) (unsafe.Pointer, error) {
	var errbuf [errLen]C.char
	c := C.tr_create(l.fnCreate, d.model, d.opts, &errbuf[0], errLen)
	if c == nil {
		return nil, cerr("rlm_create", errbuf[:])
	}
	return unsafe.Pointer(c), nil
}

func (l *library) info(ctx unsafe.Pointer) (Info, error) {
	var in C.rlm_info
	if C.tr_get_info(l.fnGetInfo, (*C.rlm_ctx)(ctx), &in) < 0 {
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
		Kernel:      C.GoString(&in.kernel[0]),
	}, nil
}

func (l *library) startKernel(ctx unsafe.Pointer, arena unsafe.Pointer, bytes uint64) error {
	var errbuf [errLen]C.char
	if C.tr_start(l.fnStart, (*C.rlm_ctx)(ctx), arena, C.uint64_t(bytes), &errbuf[0], errLen) < 0 {
		return cerr("rlm_start", errbuf[:])
	}
	return nil
}

// waitKernel blocks (in C, on its own thread) until the kernel exits.
func (l *library) waitKernel(ctx unsafe.Pointer) error {
	var errbuf [errLen]C.char
	if C.tr_wait(l.fnWait, (*C.rlm_ctx)(ctx), &errbuf[0], errLen) < 0 {
		return cerr("kernel", errbuf[:])
	}
	return nil
}

func (l *library) readLogits(ctx unsafe.Pointer, row int, dst []float32) error {
	var errbuf [errLen]C.char
	if C.tr_read_logits(l.fnReadLogits, (*C.rlm_ctx)(ctx), C.uint32_t(row), (*C.float)(unsafe.Pointer(unsafe.SliceData(dst))),
		C.uint32_t(len(dst)), &errbuf[0], errLen) < 0 {
		return cerr("rlm_read_logits", errbuf[:])
	}
	return nil
}

func (l *library) copyBW(ctx unsafe.Pointer, bytes uint64) (float64, error) {
	var errbuf [errLen]C.char
	var gbps C.double
	if C.tr_copy_bandwidth(l.fnCopyBandwidth, (*C.rlm_ctx)(ctx), C.uint64_t(bytes), &gbps, &errbuf[0], errLen) < 0 {
		return 0, cerr("rlm_copy_bandwidth", errbuf[:])
	}
	return float64(gbps), nil
}

func (l *library) destroyCtx(ctx unsafe.Pointer) { C.tr_destroy(l.fnDestroy, (*C.rlm_ctx)(ctx)) }

// SampleOut is one row's answer of the kernel's sampler (rlm_test_sample).
type SampleOut struct {
	BadWord int32 // -1: the payload opened; else the BAD_PARAMS word
	Token   int32
	Logprob float32
	Finish  ringbuf.FinishReason
	Top     []sample.TokenLogprob // RLM_TOP_NONE pads left out
}

// optional resolves a test-only entry point of the library.
func (l *library) optional(name string) (unsafe.Pointer, error) {
	cn := C.CString(name)
	fn := C.dlsym(l.handle, cn)
	C.free(unsafe.Pointer(cn))
	if fn == nil {
		return nil, fmt.Errorf("cuda: %s has no %s (rebuild it with `make cuda`)", l.path, name)
	}
	return fn, nil
}

// testGemm runs the tensor-core tile product (rlm_test_gemm): y = bf16(x) ·
// wᵀ for x m×k float32 and w n×k bf16 bits, one block per SM; iters > 0
// also times as many runs and returns the mean in milliseconds.
func (l *library) testGemm(m, n, k int, x []float32, w []uint16, iters int) ([]float32, float64, error) {
	return l.testGemmGrid(m, n, k, x, w, iters, 0)
}

// testGemmGrid is testGemm on a grid of that many blocks (0: one per SM),
// the matrix split into chunks for that grid.
func (l *library) testGemmGrid(m, n, k int, x []float32, w []uint16, iters, grid int) ([]float32, float64, error) {
	fn, err := l.optional("rlm_test_gemm")
	if err != nil {
		return nil, 0, err
	}
	if m <= 0 || n <= 0 || k <= 0 || len(x) != m*k || len(w) != n*k {
		return nil, 0, fmt.Errorf("cuda: testGemm %d×%d×%d with %d and %d values", m, n, k, len(x), len(w))
	}
	y := make([]float32, m*n)
	var ms C.double
	var errbuf [errLen]C.char
	if C.tr_test_gemm(fn, C.uint32_t(m), C.uint32_t(n), C.uint32_t(k), (*C.float)(unsafe.Pointer(&x[0])), (*C.uint16_t)(unsafe.Pointer(&w[0])),
		(*C.float)(unsafe.Pointer(&y[0])), C.uint32_t(iters), C.uint32_t(grid), &ms, &errbuf[0], errLen) < 0 {
		return nil, 0, cerr("rlm_test_gemm", errbuf[:])
	}
	return y, float64(ms), nil
}

// qPart is one part of a stacked block-quantized matrix: rows of k
// columns in typ's GGUF encoding.
type qPart struct {
	typ  gguf.Type
	rows int
	data []byte
}

// testGemmQ runs the tile product over block-quantized weights
// (rlm_test_gemm_q): y = bf16(x) · wᵀ for x m×k float32 and w the parts
// stacked by rows, uploaded as rlm_create uploads a stack; on a grid of
// that many blocks (0: one per SM); iters > 0 also times as many runs.
func (l *library) testGemmQ(m, k int, x []float32, parts []qPart, iters, grid int) ([]float32, float64, error) {
	fn, err := l.optional("rlm_test_gemm_q")
	if err != nil {
		return nil, 0, fmt.Errorf("cuda: %s was built without the block-quantized types (no rlm_test_gemm_q); make cuda without CUDA_QUANT=0 builds them in", l.path)
	}
	n := 0
	for _, p := range parts {
		n += p.rows
	}
	if m <= 0 || k <= 0 || n == 0 || len(x) != m*k {
		return nil, 0, fmt.Errorf("cuda: testGemmQ %d×%d×%d with %d inputs", m, n, k, len(x))
	}
	// The descriptors in C memory, pointing at the parts' bytes, pinned.
	cm := (*C.rlm_matrix)(C.calloc(C.size_t(len(parts)), C.sizeof_rlm_matrix))
	defer C.free(unsafe.Pointer(cm))
	var pin runtime.Pinner
	defer pin.Unpin()
	cs := unsafe.Slice(cm, len(parts))
	for i, p := range parts {
		if len(p.data) == 0 {
			return nil, 0, fmt.Errorf("cuda: testGemmQ: part %d is empty", i)
		}
		pin.Pin(&p.data[0])
		cs[i] = C.rlm_matrix{data: unsafe.Pointer(&p.data[0]), bytes: C.uint64_t(len(p.data)), _type: C.uint32_t(p.typ),
			rows: C.uint32_t(p.rows), cols: C.uint32_t(k)}
	}
	y := make([]float32, m*n)
	var ms C.double
	var errbuf [errLen]C.char
	if C.tr_test_gemm_q(fn, C.uint32_t(m), (*C.float)(unsafe.Pointer(&x[0])), cm, C.uint32_t(len(parts)),
		(*C.float)(unsafe.Pointer(&y[0])), C.uint32_t(iters), C.uint32_t(grid), &ms, &errbuf[0], errLen) < 0 {
		return nil, 0, cerr("rlm_test_gemm_q", errbuf[:])
	}
	return y, float64(ms), nil
}

// testSample runs the kernel's OPEN_SLOT decoding, sampler and finish rule
// on rows of logits (rlm_test_sample): payloads[i] opens row i's slot,
// logits[i*vocab:] are its logits. For the tests that hold the kernel's
// sampler to package sample's.
func (l *library) testSample(vocab int, payloads [][]uint32, logits []float32) ([]SampleOut, error) {
	fn, err := l.optional("rlm_test_sample")
	if err != nil {
		return nil, err
	}
	n := len(payloads)
	if n == 0 || len(logits) != n*vocab {
		return nil, fmt.Errorf("cuda: testSample of %d rows with %d logits (vocabulary %d)", n, len(logits), vocab)
	}
	offs := make([]uint64, 0, n+1)
	var words []uint32
	for _, p := range payloads {
		offs = append(offs, uint64(len(words)))
		words = append(words, p...)
	}
	offs = append(offs, uint64(len(words)))
	words = append(words, 0) // never empty
	// The C memory holds no Go pointers, so Go memory may be passed.
	out := make([]C.rlm_sample_out, n)
	var errbuf [errLen]C.char
	if C.tr_test_sample(fn, C.uint32_t(vocab), C.uint32_t(n), (*C.uint32_t)(unsafe.Pointer(&words[0])), (*C.uint64_t)(unsafe.Pointer(&offs[0])),
		(*C.float)(unsafe.Pointer(&logits[0])), &out[0], &errbuf[0], errLen) < 0 {
		return nil, cerr("rlm_test_sample", errbuf[:])
	}
	res := make([]SampleOut, n)
	for i, o := range out {
		r := SampleOut{BadWord: int32(o.bad_word), Token: int32(o.token), Logprob: float32(o.logprob), Finish: ringbuf.FinishReason(o.finish)}
		for k := range ringbuf.MaxTop {
			if uint32(o.top_tok[k]) != ringbuf.TopNone {
				r.Top = append(r.Top, sample.TokenLogprob{Token: int32(o.top_tok[k]), Logprob: float32(o.top_lp[k])})
			}
		}
		res[i] = r
	}
	return res, nil
}
