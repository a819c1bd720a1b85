package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// LibName is the file name of the CUDA device library (`make cuda`).
const LibName = "libringlm_cuda.so"

// ABI is the version of ringlm_cuda.h this package speaks (RLM_CUDA_ABI;
// lib.go checks that they agree); the library checks it in rlm_create.
const ABI = 4

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

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
