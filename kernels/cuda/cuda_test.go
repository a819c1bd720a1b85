//go:build cgo

package cuda

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"ringlm/engine"
	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/kernels/conformance"
	"ringlm/kernels/cpu"
	"ringlm/model"
	"ringlm/quantize"
	"ringlm/ringbuf"
	"ringlm/sample"
	"ringlm/synth"
)

// Tests that need a GPU call needGPU first: without libringlm_cuda.so or a
// device they skip, so `make test` passes on machines without CUDA. The
// others run everywhere: the loader's errors, options, the Go→C model
// descriptors, and the whole cgo path against testdata/fakelib.c, a
// stand-in library with a host-thread "kernel", compiled here with gcc.

func needGPU(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip("CUDA device not available: " + err.Error())
	}
	if trapped.Load() {
		t.Skip("this process's CUDA context died in TestFaultAndRestart's trap (sticky); run this test in a process of its own (-test.run)")
	}
}

// trapped is set once TestFaultAndRestart has made the kernel trap: a
// fault is sticky for the process, so GPU tests after it cannot run here.
// trap_test.go sorts after every other test file, so a full run reaches it
// last.
var trapped atomic.Bool

// ---- loader ----

func TestLoadNotFound(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a", LibName), filepath.Join(dir, "b", LibName)
	_, err := load([]string{a, b})
	if !errors.Is(err, ErrNoLibrary) {
		t.Fatalf("err = %v, want ErrNoLibrary", err)
	}
	msg := err.Error()
	for _, want := range []string{a, b, "make cuda", "RINGLM_CUDA_LIB"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not mention %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "cuda: ") {
		t.Errorf("not one line prefixed cuda: %q", msg)
	}
}

func TestLoadBareName(t *testing.T) {
	_, err := load([]string{"libringlm_cuda_not_installed_anywhere.so"})
	if !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), "dynamic loader") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadNotALibrary(t *testing.T) {
	p := filepath.Join(t.TempDir(), LibName)
	if err := os.WriteFile(p, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := load([]string{p, "libc.so.6"})
	if err == nil || errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), "cannot load "+p) {
		t.Fatalf("err = %v, want the dlopen failure of %s", err, p)
	}
}

func TestLibCandidates(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module ringlm\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wd := filepath.Join(root, "httpapi", "sub")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	got := libCandidates("/opt/x/lib.so", "/usr/local/bin", wd)
	want := []string{"/opt/x/lib.so", "/usr/local/bin/" + LibName, filepath.Join(wd, "kernels/cuda", LibName),
		filepath.Join(root, "kernels/cuda", LibName), LibName}
	if !slices.Equal(got, want) {
		t.Fatalf("candidates\n got %q\nwant %q", got, want)
	}
	// No env, no module: the executable's directory, the working directory, the loader.
	got = libCandidates("", "/bin", "/")
	if !slices.Equal(got, []string{"/bin/" + LibName, "/kernels/cuda/" + LibName, LibName}) {
		t.Fatalf("got %q", got)
	}
	// A go.mod of another module is not ringlm's root.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644)
	if r := moduleRoot(other); r != "" && r == other {
		t.Fatalf("moduleRoot took %s", r)
	}
}

func TestAvailableIsOneLine(t *testing.T) {
	err := Available()
	if err == nil {
		t.Logf("CUDA available: %s, %d device(s)", Library(), Devices())
		return
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "cuda: ") {
		t.Fatalf("Available: %q", msg)
	}
	if Library() != "" || Devices() != 0 {
		t.Fatal("Library/Devices set without a library")
	}
}

// pkgDir finds this package's directory: the working directory under
// `go test`, kernels/cuda under the module root for a carried test binary.
func pkgDir() string {
	if _, err := os.Stat("testdata/fakelib.c"); err == nil {
		return "."
	}
	wd, _ := os.Getwd()
	if root := moduleRoot(wd); root != "" {
		d := filepath.Join(root, "kernels", "cuda")
		if _, err := os.Stat(filepath.Join(d, "testdata/fakelib.c")); err == nil {
			return d
		}
	}
	return ""
}

func cc(t *testing.T, out, src string, extra ...string) {
	t.Helper()
	gcc := os.Getenv("CC")
	if gcc == "" {
		gcc = "gcc"
	}
	if _, err := exec.LookPath(gcc); err != nil {
		t.Skip("no C compiler for the stand-in library")
	}
	args := append([]string{"-std=c11", "-D_POSIX_C_SOURCE=200809L", "-O1", "-shared", "-fPIC", "-o", out, src}, extra...)
	if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", gcc, args, err, b)
	}
}

// fakeLib compiles testdata/fakelib.c and loads it.
func fakeLib(t *testing.T) *library {
	t.Helper()
	dir := pkgDir()
	if dir == "" {
		t.Skip("testdata/fakelib.c not found from the working directory")
	}
	out := filepath.Join(t.TempDir(), LibName)
	cc(t, out, filepath.Join(dir, "testdata", "fakelib.c"), "-I", dir, "-lpthread")
	l, err := load([]string{out})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLoadMissingSymbols(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "partial.c")
	os.WriteFile(src, []byte("#include <stddef.h>\nint rlm_probe(char *e, size_t n) { (void)e; (void)n; return 1; }\n"), 0o644)
	out := filepath.Join(dir, LibName)
	cc(t, out, src)
	_, err := load([]string{out})
	if err == nil || !strings.Contains(err.Error(), "does not match ringlm_cuda.h") || !strings.Contains(err.Error(), "rlm_create") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadProbeFails(t *testing.T) {
	t.Setenv("RLM_FAKE_PROBE", "no CUDA device: CUDA driver version is insufficient")
	dir := pkgDir()
	if dir == "" {
		t.Skip("testdata/fakelib.c not found")
	}
	out := filepath.Join(t.TempDir(), LibName)
	cc(t, out, filepath.Join(dir, "testdata", "fakelib.c"), "-I", dir, "-lpthread")
	_, err := load([]string{out})
	if err == nil || !strings.Contains(err.Error(), "driver version is insufficient") || !strings.Contains(err.Error(), out) {
		t.Fatalf("err = %v", err)
	}
}

// ---- options and descriptors ----

// skipNoQuant skips a test or benchmark of the block-quantized types on a
// library built without them (make cuda CUDA_QUANT=0), which refuses them
// with this error.
func skipNoQuant(t testing.TB, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), "built without the block-quantized types") {
		t.Skip(err)
	}
}

// loadSynth loads a synthetic model on the CPU's float path: the GPU keeps
// activations in float32, so its CPU reference does too (the CPU device's
// default for quantized weights, 8-bit activations, would put the
// activations' rounding into every comparison).
func loadSynth(t testing.TB, s synth.Shape, typ gguf.Type, seed uint64) *model.Model {
	t.Helper()
	m := testmodel.Open(t, testmodel.Write(t, s, typ, seed))
	m.SetActivations(model.FloatActivations)
	return m
}

func tiny(t testing.TB, arch string, typ gguf.Type) *model.Model {
	t.Helper()
	s, err := synth.Lookup("tiny", arch)
	if err != nil {
		t.Fatal(err)
	}
	return loadSynth(t, s, typ, 7)
}

func TestOptions(t *testing.T) {
	m := tiny(t, "llama", gguf.TypeF16)
	o, err := Options{}.normalize(m)
	if err != nil {
		t.Fatal(err)
	}
	if o.Slots != DefaultSlots || o.BlockSize != 16 || o.Context != m.Context || o.MaxStepTokens != 512 {
		t.Fatalf("defaults: %+v", o)
	}
	if got := (Options{Context: 33, BlockSize: 16}).BlocksPerSlot(); got != 3 {
		t.Fatalf("BlocksPerSlot = %d, want 3", got)
	}
	for name, bad := range map[string]Options{
		"Slots":         {Slots: -1},
		"BlockSize":     {BlockSize: MaxBlockSize + 1},
		"MaxStepTokens": {MaxStepTokens: -5},
		"NumBlocks":     {NumBlocks: -1},
		"KVMaxBytes":    {KVMaxBytes: -1},
		"GridBlocks":    {GridBlocks: -2},
		"Device":        {Device: -1},
		"Context":       {Context: m.Context + 1},
	} {
		if _, err := bad.normalize(m); err == nil || !strings.Contains(err.Error(), name) || !strings.HasPrefix(err.Error(), "cuda: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func ptrOf(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

func checkMat(t *testing.T, what string, got matView, m *model.Matrix) {
	t.Helper()
	if len(m.Data) == 0 {
		if got.Data != nil || got.Bytes != 0 || got.Rows != 0 {
			t.Errorf("%s: absent matrix described as %+v", what, got)
		}
		return
	}
	want := matView{Data: ptrOf(m.Data), Bytes: uint64(len(m.Data)), Type: uint32(m.Type), Rows: uint32(m.Rows), Cols: uint32(m.Cols)}
	if got != want {
		t.Errorf("%s: %+v, want %+v", what, got, want)
	}
}

func checkVec(t *testing.T, d *desc, what string, got vecView, want []float32) {
	t.Helper()
	if len(want) == 0 {
		if got.Ptr != nil {
			t.Errorf("%s: absent vector has a pointer", what)
		}
		return
	}
	if !slices.Equal(got.Vals, want) {
		t.Errorf("%s: values differ", what)
	}
	if !d.inC(got.Ptr) || got.Ptr == unsafe.Pointer(unsafe.SliceData(want)) {
		t.Errorf("%s: %p is not a C copy", what, got.Ptr)
	}
}

// describe describes m to the library with o normalized (newDesc); freed
// when the test ends.
func describe(t *testing.T, m *model.Model, o Options) *desc {
	t.Helper()
	o, err := o.normalize(m)
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDesc(m, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.free)
	return d
}

func TestDescriptors(t *testing.T) {
	for _, tc := range []struct {
		arch string
		typ  gguf.Type
		neox uint32
	}{{"llama", gguf.TypeF16, 0}, {"qwen2", gguf.TypeBF16, 1}, {"phi3", gguf.TypeQ8_0, 1}} {
		t.Run(tc.arch, func(t *testing.T) {
			m := tiny(t, tc.arch, tc.typ)
			d := describe(t, m, Options{Device: 1, Slots: 7, Context: 1000, MaxStepTokens: 300, NumBlocks: 99, KVMaxBytes: 1 << 33, GridBlocks: 5})
			v := d.view()
			c := &m.Config
			head := []uint32{ABI, uint32(c.Layers), uint32(c.Dim), uint32(c.Heads), uint32(c.KVHeads), uint32(c.HeadDim),
				uint32(c.FFN), uint32(c.Vocab), uint32(c.RopeDim), tc.neox}
			if got := []uint32{v.ABI, v.Layers, v.Dim, v.Heads, v.KVHeads, v.HeadDim, v.FFN, v.Vocab, v.RopeDim, v.RopeNeox}; !slices.Equal(got, head) {
				t.Fatalf("model header %v, want %v", got, head)
			}
			if v.Window != uint32(c.SlidingWindow) || (tc.arch == "phi3") != (v.Window > 0) {
				t.Errorf("window %d, model's %d (phi3 has one)", v.Window, c.SlidingWindow)
			}
			if v.RopeBase != c.RopeBase || v.RopeScale != c.RopeScale || v.NormEps != c.NormEps {
				t.Errorf("rope/eps %v %v %v, want %v %v %v", v.RopeBase, v.RopeScale, v.NormEps, c.RopeBase, c.RopeScale, c.NormEps)
			}
			checkVec(t, d, "rope_factor", v.RopeFactor, c.RopeFactor)
			if tc.arch == "llama" && len(c.RopeFactor) == 0 {
				t.Error("tiny llama should carry rope factors")
			}
			checkVec(t, d, "out_norm", v.OutNorm, m.OutNorm)
			checkMat(t, "embed", v.Embed, &m.Embed)
			checkMat(t, "output", v.Output, &m.Output)
			tied := tc.arch == "qwen2"
			if (v.Output.Data == v.Embed.Data) != tied {
				t.Errorf("output shares the embedding: %v, want %v", v.Output.Data == v.Embed.Data, tied)
			}
			if len(v.LayerViews) != len(m.Layers) {
				t.Fatalf("%d layers described", len(v.LayerViews))
			}
			for i, lv := range v.LayerViews {
				L := &m.Layers[i]
				checkVec(t, d, "attn_norm", lv.AttnNorm, L.AttnNorm)
				checkVec(t, d, "ffn_norm", lv.FFNNorm, L.FFNNorm)
				checkVec(t, d, "q_bias", lv.QBias, L.QB)
				checkVec(t, d, "k_bias", lv.KBias, L.KB)
				checkVec(t, d, "v_bias", lv.VBias, L.VB)
				for _, p := range []struct {
					name string
					got  matView
					src  *model.Matrix
				}{{"q", lv.Q, &L.Q}, {"k", lv.K, &L.K}, {"v", lv.V, &L.V}, {"out", lv.Out, &L.Out},
					{"gate", lv.Gate, &L.Gate}, {"up", lv.Up, &L.Up}, {"down", lv.Down, &L.Down}} {
					checkMat(t, fmt.Sprintf("layer %d %s", i, p.name), p.got, p.src)
				}
				switch tc.arch {
				case "qwen2":
					if lv.QBias.Ptr == nil || lv.VBias.Ptr == nil {
						t.Error("qwen2 biases missing")
					}
				case "phi3":
					q, kv := c.Heads*c.HeadDim, c.KVDim()
					if lv.K.Data != nil || lv.V.Data != nil || lv.Gate.Data != nil || lv.Q.Rows != uint32(q+2*kv) || lv.Up.Rows != uint32(2*c.FFN) {
						t.Errorf("phi3 fused layout: %+v", lv)
					}
				}
			}
			wantOpts := optsView{Device: 1, Slots: 7, BlockSize: 16, MaxBlocksPerSlot: 63, MaxStepTokens: 300, NumBlocks: 99,
				KVMaxBytes: 1 << 33, KVType: 1, GridBlocks: 5}
			if v.Opts != wantOpts {
				t.Errorf("opts %+v, want %+v", v.Opts, wantOpts)
			}
			d.free()
			d.free() // idempotent
		})
	}
}

func TestDescriptorErrors(t *testing.T) {
	m := tiny(t, "llama", gguf.TypeF16)
	o, _ := Options{}.normalize(m)
	layers := slices.Clone(m.Layers)
	layers[1].Down.Type = gguf.TypeIQ2_XXS
	bad := &model.Model{Config: m.Config, Embed: m.Embed, Output: m.Output, OutNorm: m.OutNorm, Layers: layers}
	_, err := newDesc(bad, o)
	for _, want := range []string{"ffn_down", "layer 1", "type IQ2_XXS", "reads F32, F16, BF16, Q8_0, Q4_0", "Q4_K", "Q6_K", "MXFP4"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("IQ2_XXS weights: %v (want %q in it)", err, want)
		}
	}
	// The block types the device keeps at their own width are described
	// with ggml's ids.
	layers[1].Down.Type = gguf.TypeQ4_K
	if d, err := newDesc(bad, o); err != nil || d.view().LayerViews[1].Down.Type != uint32(gguf.TypeQ4_K) {
		t.Fatalf("Q4_K weights: %v", err)
	} else {
		d.free()
	}
	wide := &model.Model{Config: m.Config, Embed: m.Embed, Output: m.Output, OutNorm: m.OutNorm, Layers: m.Layers}
	wide.SlidingWindow = math.MaxInt32 + 1
	if d, err := newDesc(wide, o); err != nil || d.view().Window != 0 {
		t.Fatalf("a window wider than any position: %v; want it described as none", err)
	} else {
		d.free()
	}
	short := &model.Model{Config: m.Config, Embed: m.Embed, Output: m.Output, OutNorm: m.OutNorm, Layers: m.Layers[:2]}
	if _, err := newDesc(short, o); err == nil {
		t.Fatal("a model with fewer layers than its config was described")
	}
	// Weights in Go memory (not a mapping) are pinned for the call.
	heap := &model.Model{Config: m.Config, Output: m.Output, OutNorm: m.OutNorm, Layers: m.Layers}
	heap.Embed = m.Embed
	heap.Embed.Data = slices.Clone(m.Embed.Data)
	d, err := newDesc(heap, o)
	if err != nil {
		t.Fatal(err)
	}
	if d.view().Embed.Data != ptrOf(heap.Embed.Data) {
		t.Fatal("Go-memory matrix not described in place")
	}
	d.free()
}

// ---- the cgo path against the stand-in library ----

func fakeEngine(t *testing.T, l *library, m *model.Model, slots int) (*engine.Engine, *Device) {
	t.Helper()
	dev, err := openWith(l, m, Options{Slots: slots, NumBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Slots: slots, NumBlocks: dev.NumBlocks(), Vocab: m.Vocab, Context: m.Context,
		Allocator: dev.Allocator()}, dev)
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	return e, dev
}

func TestFakeLibraryDevice(t *testing.T) {
	l := fakeLib(t)
	m := tiny(t, "qwen2", gguf.TypeF16)
	dev, err := openWith(l, m, Options{Slots: 4, NumBlocks: 77})
	if err != nil {
		t.Fatal(err)
	}
	if dev.Name() != "cuda (Fake GPU)" || dev.NumBlocks() != 77 || dev.Vocab() != m.Vocab || dev.BlockSize() != 16 {
		t.Fatalf("%s: %d blocks, vocab %d, block size %d", dev.Name(), dev.NumBlocks(), dev.Vocab(), dev.BlockSize())
	}
	info, err := dev.Info()
	if err != nil || info.WeightBytes == 0 || info.Launches != 0 {
		t.Fatalf("info %+v %v", info, err)
	}
	lg := make([]float32, m.Vocab)
	if err := dev.Logits(1, lg); err != nil || lg[3] != 1.5 {
		t.Fatalf("Logits: %v, lg[3] = %v", err, lg[3])
	}
	if err := dev.Logits(0, lg[:10]); err == nil {
		t.Fatal("Logits into a short buffer")
	}
	if err := dev.Logits(9, lg); err == nil || !strings.HasPrefix(err.Error(), "cuda: rlm_read_logits: ") {
		t.Fatalf("Logits of row 9 of 4 slots: %v", err)
	}
	if bw, err := dev.CopyBandwidth(1 << 20); err != nil || bw != 1234.5 {
		t.Fatalf("CopyBandwidth %v %v", bw, err)
	}
	if err := dev.Wait(); err == nil {
		t.Fatal("Wait before Start")
	}
	// An arena from another allocator is refused before anything launches.
	lay, _ := ringbuf.NewLayout(64, 64, 1024)
	heapArena, err := ringbuf.NewArena(ringbuf.HeapAllocator{}, lay)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(heapArena); err == nil || !strings.Contains(err.Error(), "Allocator") {
		t.Fatalf("Start on a Go-heap arena: %v", err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := dev.Info(); err == nil {
		t.Fatal("Info after Close")
	}

	// Through the engine: tokens flow, one launch, a clean stop.
	e, dev := fakeEngine(t, l, m, 4)
	p := sample.Defaults()
	p.Temperature, p.MaxTokens = 0, 25
	var streams []*engine.Stream
	for i := 0; i < 10; i++ {
		s, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{1, int32(i)}, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	for _, s := range streams {
		toks, err := drain(s)
		if err != nil || len(toks) != 25 {
			t.Fatalf("%d tokens, %v", len(toks), err)
		}
	}
	if err := dev.Close(); err == nil {
		t.Fatal("Close while the kernel runs")
	}
	if info, _ := dev.Info(); info.Launches != 1 {
		t.Fatalf("%d launches", info.Launches)
	}
	if err := closeWithin(t, e, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := dev.Fault(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFakeLibraryFault(t *testing.T) {
	l := fakeLib(t)
	m := tiny(t, "llama", gguf.TypeF16)
	t.Setenv("RLM_FAKE_FAULT_AFTER", "5")
	e, dev := fakeEngine(t, l, m, 4)
	p := sample.Defaults()
	p.Temperature, p.MaxTokens = 0, 40
	var streams []*engine.Stream
	for i := 0; i < 6; i++ {
		s, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{1, int32(i)}, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	for _, s := range streams {
		if _, err := drain(s); !errors.Is(err, engine.ErrDevice) {
			t.Errorf("%s: %v, want a device error", s.ID, err)
		}
	}
	if err := dev.Fault(); err == nil || !strings.Contains(err.Error(), "illegal memory access") {
		t.Fatalf("Fault() = %v", err)
	}
	err := closeWithin(t, e, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "illegal memory access") || !strings.HasPrefix(err.Error(), "cuda: ") {
		t.Fatalf("engine.Close = %v, want the kernel's error", err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFakeLibraryCreateError(t *testing.T) {
	l := fakeLib(t)
	m := tiny(t, "llama", gguf.TypeF16)
	t.Setenv("RLM_FAKE_CREATE_ERR", "the model needs 99.00 GiB of GPU memory")
	_, err := openWith(l, m, Options{})
	if err == nil || err.Error() != "cuda: rlm_create: the model needs 99.00 GiB of GPU memory" {
		t.Fatalf("err = %v", err)
	}
}

func TestHostAllocator(t *testing.T) {
	a := newHostAllocator(fakeLib(t))
	b, err := a.Alloc(1000)
	if err != nil || len(b) != 1000 || uintptr(unsafe.Pointer(&b[0]))%ringbuf.Align != 0 {
		t.Fatalf("Alloc: %d bytes, %v", len(b), err)
	}
	if !a.owns(b) || a.owns(b[1:]) || a.owns(make([]byte, 10)) {
		t.Fatal("owns")
	}
	if err := a.Free(make([]byte, 8)); err == nil {
		t.Fatal("Free of foreign memory")
	}
	if err := a.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(b); err == nil {
		t.Fatal("double Free")
	}
	if _, err := a.Alloc(0); err == nil {
		t.Fatal("Alloc(0)")
	}
}

// ---- GPU ----

// cudaEngine opens the device for m and an engine on it; close releases
// both (also at cleanup). Two persistent kernels cannot share a GPU, so a
// test closes one before opening the next.
func cudaEngine(t testing.TB, m *model.Model, cfg engine.Config) (e *engine.Engine, dev *Device, close func()) {
	t.Helper()
	return cudaEngineGrid(t, m, cfg, 0)
}

// cudaEngineGrid is cudaEngine on a kernel of grid blocks (0: one per SM).
func cudaEngineGrid(t testing.TB, m *model.Model, cfg engine.Config, grid int) (e *engine.Engine, dev *Device, close func()) {
	t.Helper()
	if cfg.Slots == 0 {
		cfg.Slots = 64
	}
	if cfg.TokenBudget == 0 {
		cfg.TokenBudget = 512
	}
	dev, err := Open(m, Options{Slots: cfg.Slots, MaxStepTokens: cfg.TokenBudget, Context: m.Context, KVMaxBytes: 2 << 30, GridBlocks: grid})
	if err != nil {
		skipNoQuant(t, err)
		t.Fatal(err)
	}
	cfg.NumBlocks, cfg.BlockSize, cfg.Allocator = dev.NumBlocks(), dev.BlockSize(), dev.Allocator()
	cfg.Vocab, cfg.Context = m.Vocab, m.Context
	e, err = engine.New(cfg, dev)
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	var once sync.Once
	close = func() {
		once.Do(func() {
			if err := e.Close(); err != nil {
				t.Errorf("engine.Close: %v", err)
			}
			if err := dev.Close(); err != nil {
				t.Errorf("Device.Close: %v", err)
			}
		})
	}
	t.Cleanup(close)
	return e, dev, close
}

func cpuEngine(t testing.TB, m *model.Model, slots, blocks int) *engine.Engine {
	t.Helper()
	dev, err := cpu.New(m, gguf.TypeF16, blocks, 16, slots)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Slots: slots, NumBlocks: blocks, Vocab: m.Vocab, Context: m.Context,
		Allocator: ringbuf.HeapAllocator{}}, dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// run submits every request at once and returns each one's tokens.
func run(t testing.TB, e *engine.Engine, reqs []engine.Request) [][]int32 {
	t.Helper()
	streams := make([]*engine.Stream, len(reqs))
	for i, r := range reqs {
		s, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = s
	}
	out := make([][]int32, len(reqs))
	for i, s := range streams {
		toks, err := drain(s)
		if err != nil {
			t.Fatalf("request %d on %s: %v", i, e.DeviceName(), err)
		}
		for _, tk := range toks {
			out[i] = append(out[i], tk.ID)
		}
	}
	return out
}

// prompts returns n prompts of mixed lengths in [1, maxLen]: the second is
// one token, the third maxLen, the rest random.
func prompts(n, vocab, maxLen int, seed uint64) [][]int32 {
	r := rand.New(rand.NewPCG(seed, 2))
	out := make([][]int32, n)
	for i := range out {
		l := 1 + r.IntN(maxLen)
		switch i {
		case 1:
			l = 1
		case 2:
			l = maxLen
		}
		out[i] = make([]int32, l)
		for j := range out[i] {
			out[i][j] = int32(r.IntN(vocab))
		}
	}
	return out
}

// cpuLogits is the reference forward pass (F16 KV, like the GPU's) over
// tokens from position 0: the logits of the last one.
func cpuLogits(t testing.TB, m *model.Model, tokens []int32) []float32 {
	t.Helper()
	nb := (len(tokens) + 15) / 16
	kv, err := model.NewKVPool(&m.Config, gguf.TypeF16, nb, 16)
	if err != nil {
		t.Fatal(err)
	}
	table := make([]int32, nb)
	for i := range table {
		table[i] = int32(i)
	}
	out := make([]float32, m.Vocab)
	if err := m.Forward(kv, []model.Seq{{Tokens: tokens, Pos: 0, Blocks: table, Logits: out}}); err != nil {
		t.Fatal(err)
	}
	return out
}

// gpuLogits runs tokens as a one-token request on an idle engine with
// PipelineDepth 1 and reads the logits its sampling step computed.
func gpuLogits(t testing.TB, e *engine.Engine, dev *Device, tokens []int32) ([]float32, int32) {
	t.Helper()
	if e.Config().PipelineDepth != 1 {
		t.Fatal("gpuLogits needs an engine with PipelineDepth 1")
	}
	p := sample.Defaults()
	p.Temperature, p.MaxTokens = 0, 1
	got := run(t, e, []engine.Request{{Prompt: tokens, Params: p}})
	lg := make([]float32, dev.Vocab())
	if err := dev.Logits(0, lg); err != nil {
		t.Fatal(err)
	}
	return lg, got[0][0]
}

// relErr is max|a-b| / max|b|.
func relErr(a, b []float32) (rel, maxAbs float64) {
	var d, s float64
	for i := range b {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		s = max(s, math.Abs(float64(b[i])))
	}
	return d / s, d
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

type greedyCase struct {
	name    string
	shape   synth.Shape
	typ     gguf.Type
	batches []int
	mix     string // a llama-quantize mix (synth.Options.Mix) in place of typ
	// rules: the mix written by ringlm's quantizer from an F16 file, with
	// these per-tensor types (llama-quantize --output-tensor-type and
	// --token-embedding-type).
	rules *quantize.Rules
}

// load writes the case's model with seed and loads it as loadSynth does.
func (c greedyCase) load(t testing.TB, seed uint64) *model.Model {
	t.Helper()
	if c.mix == "" {
		return loadSynth(t, c.shape, c.typ, seed)
	}
	o := synth.Options{Shape: c.shape, Mix: c.mix, Seed: seed}
	if c.rules != nil {
		o = synth.Options{Shape: c.shape, Type: gguf.TypeF16, Seed: seed}
	}
	w, err := synth.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "model.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	if c.rules != nil {
		mix, ok := quantize.ParseMix(c.mix)
		if !ok {
			t.Fatalf("mix %q", c.mix)
		}
		q := filepath.Join(t.TempDir(), "model-"+c.mix+".gguf")
		if _, err := quantize.Run(context.Background(), p, q, quantize.Options{Mix: mix, Rules: *c.rules}); err != nil {
			t.Fatal(err)
		}
		p = q
	}
	m := testmodel.Open(t, p)
	m.SetActivations(model.FloatActivations)
	return m
}

func greedyCases(t *testing.T) []greedyCase {
	ll, _ := synth.Lookup("tiny", "llama")
	qw, _ := synth.Lookup("tiny", "qwen2")
	ph, _ := synth.Lookup("tiny", "phi3")
	// Wider heads (128) and a wider model than tiny, still cheap on the CPU.
	wide := synth.Shape{Arch: "llama", Name: "wide-llama", Dim: 1024, Layers: 2, Heads: 8, KVHeads: 2, HeadDim: 128,
		FFN: 2816, Context: 2048, RopeBase: 10000, NormEps: 1e-5}
	// Batch 256 where the CPU reference stays cheap (it runs once, at
	// the largest batch: the CPU device is batch invariant).
	all := []int{1, 7, 64, 256}
	f16, f32, q8 := gguf.TypeF16, gguf.TypeF32, gguf.TypeQ8_0
	return []greedyCase{
		{"tiny-llama-f16", ll, gguf.TypeF16, all, "", nil},
		{"tiny-qwen2-bf16", qw, gguf.TypeBF16, all, "", nil},
		{"tiny-phi3-bf16", ph, gguf.TypeBF16, all, "", nil},
		{"tiny-llama-q8_0", ll, gguf.TypeQ8_0, all, "", nil},
		{"wide-llama-bf16", wide, gguf.TypeBF16, []int{1, 7, 64}, "", nil},
		// The block types at their own width (qpack.h): Q4_0; Q4_K_M's
		// mix of Q4_K and Q6_K (attn_v and some ffn_down in Q6_K: QKV
		// stacks of two types); Q6_K with a tied head (the embedding's
		// packed rows are the head's); MXFP4.
		{"tiny-llama-q4_0", ll, gguf.TypeQ4_0, all, "", nil},
		{"tiny-llama-q4_k_m", ll, 0, all, "Q4_K_M", nil},
		{"tiny-qwen2-q6_k", qw, gguf.TypeQ6_K, all, "", nil},
		{"tiny-llama-mxfp4", ll, gguf.TypeMXFP4, all, "", nil},
		// Q4_K_M with an F16 head and an F32 embedding: the block-quantized
		// module multiplies the head in BF16 (converted at upload) and reads
		// the embedding's float rows; with a tied Q8_0 embedding, which that
		// module reads in the block-quantized layout, as the head too.
		{"tiny-llama-q4_k_m-f16-head", ll, 0, all, "Q4_K_M", &quantize.Rules{OutputType: &f16, EmbeddingType: &f32}},
		{"tiny-qwen2-q4_k_m-q8_0-tied", qw, 0, all, "Q4_K_M", &quantize.Rules{OutputType: &q8}},
	}
}

// closeTop is the number of alternatives the closeness rule compares
// (vLLM's tests use 5).
const closeTop = 5

// checkGreedyClose runs reqs greedily (with closeTop alternatives) on the
// CPU reference device once, at the largest batch, and on the GPU at each
// batch size (the first b requests together), and holds every GPU
// continuation to the reference by vLLM's rule (conformance.
// CheckLogprobsClose): equal up to the first divergence, each token there
// among the other side's top 5, not compared after it. Each divergence
// is logged with where it happened.
func checkGreedyClose(t *testing.T, m *model.Model, reqs []engine.Request, batches []int) {
	t.Helper()
	maxB := slices.Max(batches)
	reqs = reqs[:maxB]
	t0 := time.Now()
	ref, err := conformance.Greedy(cpuEngine(t, m, maxB, refBlocks(reqs)), reqs, closeTop)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CPU reference: %d requests in %v", maxB, time.Since(t0).Round(time.Millisecond))
	e, _, closeGPU := cudaEngine(t, m, engine.Config{Slots: maxB})
	defer closeGPU()
	for _, b := range batches {
		t.Run(fmt.Sprintf("batch%d", b), func(t *testing.T) {
			t0 := time.Now()
			got, err := conformance.Greedy(e, reqs[:b], closeTop)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("GPU batch %d: %v", b, time.Since(t0).Round(time.Millisecond))
			for i, s := range got {
				if want := reqs[i].Params.MaxTokens; reqs[i].IgnoreEOS && len(s) != want {
					t.Fatalf("request %d: %d tokens, want %d", i, len(s), want)
				}
			}
			c := conformance.CheckLogprobsClose(t, ref[:b], got, closeTop)
			for _, d := range c.Divergences {
				t.Logf("request %d (prompt %d tokens) diverges at generated token %d", d.Seq, len(reqs[d.Seq].Prompt), d.Pos)
			}
		})
	}
}

// greedyReqs makes a greedy request of n tokens (EOS ignored) per prompt.
func greedyReqs(ps [][]int32, n int) []engine.Request {
	p := sample.Defaults()
	p.MaxTokens = n
	reqs := make([]engine.Request, len(ps))
	for i := range reqs {
		reqs[i] = engine.Request{Prompt: ps[i], Params: p, IgnoreEOS: true}
	}
	return reqs
}

// refBlocks is the KV blocks of 16 positions the CPU reference needs to
// run reqs all at once.
func refBlocks(reqs []engine.Request) int {
	n := 0
	for _, r := range reqs {
		n += (len(r.Prompt)+r.Params.MaxTokens+15)/16 + 1
	}
	return n
}

// TestGreedyMatchesCPU: greedy continuations of 64 tokens on the GPU
// against the CPU reference device (F16 KV) by vLLM's closeness rule
// (checkGreedyClose), at batch 1, 7, 64 and 256 with prompts of 1 to 300
// tokens, for tiny llama, qwen2 and phi3 and a wider llama; tiny models in
// block-quantized types too (Q4_0, Q4_K_M, Q6_K, MXFP4).
func TestGreedyMatchesCPU(t *testing.T) {
	needGPU(t)
	for _, tc := range greedyCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.load(t, 11)
			maxB := slices.Max(tc.batches)
			checkGreedyClose(t, m, greedyReqs(prompts(maxB, m.Vocab, 300, 5), 64), tc.batches)
		})
	}
}

// heldout is testdata/gocoder/heldout.txt: Go source the built-in model
// never saw in training.
func heldout(t *testing.T) string {
	t.Helper()
	wd, _ := os.Getwd()
	root := moduleRoot(wd)
	if root == "" {
		t.Skip("the module root (testdata/gocoder) is not found from the working directory")
	}
	b, err := os.ReadFile(filepath.Join(root, "testdata", "gocoder", "heldout.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBuiltinModelGreedy: the built-in model continues Go code with 64
// greedy tokens on the GPU that are close to the CPU reference's by
// vLLM's rule (checkGreedyClose), at batch 1, 7, 64 and 256: four
// hand-written prompts and windows of 16 to 256 tokens of the held-out
// text.
func TestBuiltinModelGreedy(t *testing.T) {
	needGPU(t)
	m, tok := builtinModel(t)
	texts := []string{
		"package main\n\nimport \"fmt\"\n\n// fib returns the n-th Fibonacci number.\nfunc fib(n int) int {\n",
		"package strings\n\n// Reverse returns s with its runes in reverse order.\nfunc Reverse(s string) string {\n",
		"func (b *Buffer) Write(p []byte) (n int, err error) {\n",
		"// Copyright 2009 The Go Authors. All rights reserved.\n\npackage http\n\nimport (\n",
	}
	held := tok.Encode(heldout(t))
	p := sample.Defaults()
	p.MaxTokens = 64
	var reqs []engine.Request
	for _, s := range texts {
		reqs = append(reqs, engine.Request{Prompt: tok.Encode(s), Params: p, IgnoreEOS: true})
	}
	r := rand.New(rand.NewPCG(15, 1))
	for len(reqs) < 256 {
		n := 16 + r.IntN(241)
		at := r.IntN(len(held) - n)
		reqs = append(reqs, engine.Request{Prompt: held[at : at+n], Params: p, IgnoreEOS: true})
	}
	checkGreedyClose(t, m, reqs, []int{1, 7, 64, 256})
}

// TestLogitsMatchCPU: the logits of a prompt's last token on the GPU are
// within 2e-2 relative error (max|a-b| / max|b|) of the CPU forward pass.
func TestLogitsMatchCPU(t *testing.T) {
	needGPU(t)
	for _, tc := range greedyCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.load(t, 13)
			e, dev, closeGPU := cudaEngine(t, m, engine.Config{Slots: 4, PipelineDepth: 1})
			defer closeGPU()
			for _, n := range []int{1, 17, 250, 600} {
				toks := prompts(1, m.Vocab, n, uint64(n))[0][:0]
				r := rand.New(rand.NewPCG(uint64(n), 3))
				for len(toks) < n {
					toks = append(toks, int32(r.IntN(m.Vocab)))
				}
				gl, tok := gpuLogits(t, e, dev, toks)
				cl := cpuLogits(t, m, toks)
				rel, maxAbs := relErr(gl, cl)
				t.Logf("prompt %3d tokens: max relative error %.3g (max abs %.3g), argmax GPU %d CPU %d", n, rel, maxAbs, argmax(gl), argmax(cl))
				if !(rel <= 2e-2) {
					t.Errorf("prompt of %d tokens: relative error %.3g > 2e-2", n, rel)
				}
				if argmax(gl) != tok {
					t.Errorf("prompt of %d tokens: sampled %d, logits' argmax %d", n, tok, argmax(gl))
				}
			}
		})
	}
}

// TestBatchInvariance: 120 concurrent sampled requests (temperature 0.8,
// top-p 0.9, fixed seeds; some with top-k and penalties) produce exactly
// the tokens each produces alone on the GPU.
func TestBatchInvariance(t *testing.T) {
	needGPU(t)
	m := tiny(t, "llama", gguf.TypeF16)
	const n = 120
	ps := prompts(n, m.Vocab, 200, 17)
	reqs := make([]engine.Request, n)
	for i := range reqs {
		p := sample.Defaults()
		p.Temperature, p.TopP, p.Seed, p.MaxTokens = 0.8, 0.9, uint64(1000+i), 32
		switch i % 3 {
		case 1:
			p.TopK = 40
		case 2:
			p.RepeatPenalty, p.PresencePenalty, p.MinP = 1.1, 0.3, 0.02
		}
		reqs[i] = engine.Request{Prompt: ps[i], Params: p, IgnoreEOS: true}
	}
	e, _, closeGPU := cudaEngine(t, m, engine.Config{Slots: 64})
	defer closeGPU()
	together := run(t, e, reqs)
	same := 0
	for i := range reqs {
		alone := run(t, e, reqs[i:i+1])[0]
		if !slices.Equal(alone, together[i]) {
			t.Errorf("request %d (prompt %d tokens): alone %v\ntogether %v", i, len(ps[i]), alone, together[i])
		} else {
			same++
		}
	}
	t.Logf("%d/%d requests identical alone and in a batch of %d", same, n, n)
}

// TestOneLaunch: the persistent kernel serves 1,000 requests from one launch.
func TestOneLaunch(t *testing.T) {
	needGPU(t)
	m := tiny(t, "qwen2", gguf.TypeF16)
	e, dev, closeGPU := cudaEngine(t, m, engine.Config{Slots: 64})
	defer closeGPU()
	ps := prompts(1000, m.Vocab, 32, 23)
	reqs := make([]engine.Request, len(ps))
	for i := range reqs {
		p := sample.Defaults()
		p.Temperature, p.Seed, p.MaxTokens = 0.8, uint64(i), 8
		reqs[i] = engine.Request{Prompt: ps[i], Params: p, IgnoreEOS: true}
	}
	t0 := time.Now()
	for i, toks := range run(t, e, reqs) {
		if len(toks) != 8 {
			t.Fatalf("request %d: %d tokens", i, len(toks))
		}
	}
	info, err := dev.Info()
	if err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	t.Logf("1000 requests in %v: %d steps, %d launch(es), %s, grid %d × %d threads", time.Since(t0).Round(time.Millisecond),
		st.Steps, info.Launches, info.Name, info.GridBlocks, info.Threads)
	if info.Launches != 1 {
		t.Fatalf("%d kernel launches for 1000 requests, want 1", info.Launches)
	}
}

// TestKernelModule: which module's kernel runs a model (Info.Kernel), and
// that the general kernel, which the default paths no longer run, still
// matches the CPU reference. The default paths run device_tc.cu's kernel,
// a block-quantized model device_q.cu's, RINGLM_CUDA_ATTN=cores and
// RINGLM_CUDA_GEMV=1 device.cu's own (every path); a block-quantized model
// with the CUDA-core attention is refused in one line.
func TestKernelModule(t *testing.T) {
	needGPU(t)
	l, err := lib()
	if err != nil {
		t.Fatal(err)
	}
	_, noTC := l.optional("rlm_tcmod_kernel")
	_, noQ := l.optional("rlm_qmod_kernel")
	tc := "tensor-core"
	if noTC != nil {
		tc = "general" // a library built with CUDA_TC=0
	}
	ll, _ := synth.Lookup("tiny", "llama")
	qw, _ := synth.Lookup("tiny", "qwen2")
	for _, c := range []struct {
		name     string
		g        greedyCase
		env, val string
		want     string // the module
		wantErr  string // or the words of the one-line refusal
		check    bool   // greedy continuations against the CPU reference
	}{
		{"bf16", greedyCase{shape: ll, typ: gguf.TypeBF16}, "", "", tc, "", false},
		{"q8_0", greedyCase{shape: qw, typ: gguf.TypeQ8_0}, "", "", tc, "", false},
		{"tcmod-off", greedyCase{shape: ll, typ: gguf.TypeBF16}, "RINGLM_CUDA_TCMOD", "0", "general", "", false},
		{"attn-cores", greedyCase{shape: ll, typ: gguf.TypeBF16}, "RINGLM_CUDA_ATTN", "cores", "general", "", true},
		{"gemv", greedyCase{shape: qw, typ: gguf.TypeF16}, "RINGLM_CUDA_GEMV", "1", "general", "", true},
		{"q4_k_m", greedyCase{shape: ll, mix: "Q4_K_M"}, "", "", "block-quantized", "", false},
		{"q4_k_m-attn-cores", greedyCase{shape: ll, mix: "Q4_K_M"}, "RINGLM_CUDA_ATTN", "cores", "", "tensor-core attention only", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.g.mix != "" && noQ != nil {
				t.Skip("the library has no block-quantized module (CUDA_QUANT=0)")
			}
			if c.env != "" {
				t.Setenv(c.env, c.val)
			}
			m := c.g.load(t, 5)
			dev, err := Open(m, Options{Slots: 8, KVMaxBytes: 64 << 20})
			if c.wantErr != "" {
				if err == nil {
					dev.Close()
					t.Fatalf("opened; want an error saying %q", c.wantErr)
				}
				if !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %q; want one line saying %q", err, c.wantErr)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			info, err := dev.Info()
			dev.Close()
			if err != nil {
				t.Fatal(err)
			}
			if info.Kernel != c.want {
				t.Fatalf("kernel %q, want %q", info.Kernel, c.want)
			}
			if !c.check {
				return
			}
			checkGreedyClose(t, m, greedyReqs(prompts(7, m.Vocab, 200, 3), 32), []int{1, 7})
		})
	}
}

// TestDeviceInfo: what Open reports, and the checks that need no kernel.
func TestDeviceInfo(t *testing.T) {
	needGPU(t)
	m := tiny(t, "llama", gguf.TypeBF16)
	dev, err := Open(m, Options{Slots: 8, KVMaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	info, err := dev.Info()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d SMs, grid %d × %d, %d KV blocks (%d MiB), weights %d MiB, work %d MiB, free %d of %d MiB",
		info.Name, info.SMCount, info.GridBlocks, info.Threads, info.NumBlocks, info.KVBytes>>20, info.WeightBytes>>20,
		info.WorkBytes>>20, info.FreeBytes>>20, info.TotalBytes>>20)
	if info.Name == "" || info.NumBlocks != dev.NumBlocks() || info.NumBlocks <= 0 || info.KVBytes > 64<<20 ||
		info.WeightBytes < uint64(m.WeightBytes())/2 || info.Launches != 0 || !strings.Contains(dev.Name(), info.Name) {
		t.Errorf("info %+v", info)
	}
	bw, err := dev.CopyBandwidth(256 << 20)
	if err != nil || bw <= 0 {
		t.Fatalf("CopyBandwidth: %v %v", bw, err)
	}
	t.Logf("device copy bandwidth %.0f GB/s", bw)
	lay, _ := ringbuf.NewLayout(64, 64, 1024)
	heapArena, _ := ringbuf.NewArena(ringbuf.HeapAllocator{}, lay)
	if err := dev.Start(heapArena); err == nil {
		t.Fatal("started on a Go-heap arena")
	}
}

// ---- benchmark ----

// benchClock measures steps on the device clock (StepHook): the window
// starts after `from` steps and ends at the last step with `full` entries.
type benchClock struct {
	mu                sync.Mutex
	steps, from, full int
	t0, t1            uint64
	base, measured    int
	spans             []uint64 // each step's device time, while recording
	recording         bool
}

// record starts (or, with false, stops) keeping every step's device time
// and returns the times kept so far.
func (c *benchClock) record(on bool) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.spans
	c.spans, c.recording = nil, on
	return s
}

func (c *benchClock) reset(from, full int) {
	c.mu.Lock()
	// Field by field: assigning *c would replace the held mutex.
	c.steps, c.from, c.full, c.t0, c.t1, c.base, c.measured = 0, from, full, 0, 0, 0, 0
	c.mu.Unlock()
}

func (c *benchClock) hook(_ uint64, entries int, start, end uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recording {
		c.spans = append(c.spans, end-start)
	}
	c.steps++
	switch {
	case c.steps < c.from || c.full == 0:
	case c.t0 == 0:
		c.t0, c.base = end, c.steps
	case entries >= c.full:
		c.t1, c.measured = end, c.steps-c.base
	}
}

// benchShape is the benchmarks' model shape: Llama-3.2-1B, or the synth
// preset RINGLM_BENCH_PRESET names (qwen2.5-0.5b: issue 15's second row).
func benchShape(b *testing.B) synth.Shape {
	name := cmp.Or(os.Getenv("RINGLM_BENCH_PRESET"), "llama-3.2-1b")
	s, err := synth.Lookup(name, "")
	if err != nil {
		b.Fatalf("RINGLM_BENCH_PRESET: %v", err)
	}
	return s
}

// BenchmarkDecode: decode throughput of a Llama-3.2-1B-shaped BF16 model
// (synthetic weights, 2.5 GB; benchShape: or RINGLM_BENCH_PRESET's)
// through the whole engine at batch 1, 16, 64 and 256, on the device
// clock. Reported: ms/step, tok/s, the weight bytes
// streamed per second (WeightBytes / step time), the device's copy
// bandwidth measured in the same run, and the floor (WeightBytes / copy
// bandwidth: a step cannot read the weights faster than a copy moves
// bytes) with the step time as a multiple of it. Then prefill2048: a
// 2048-token prompt in one step (token budget and prefill chunk 2048, the
// CUDA defaults), its step's device time as ms/prefill (the median of up
// to benchPrefillReps prompts) and prompt tokens per second: the figure
// bench/peers/gptfast.py's prefill row is compared with.
func BenchmarkDecode(b *testing.B) {
	needGPU(b)
	s := benchShape(b)
	t0 := time.Now()
	typ := gguf.TypeBF16 // RINGLM_BENCH_TYPE=f16|q8_0|q4_k... for the others
	if v := os.Getenv("RINGLM_BENCH_TYPE"); v != "" {
		var ok bool
		if typ, ok = gguf.ParseType(v); !ok {
			b.Fatalf("RINGLM_BENCH_TYPE %q", v)
		}
	}
	// RINGLM_BENCH_MIX=Q4_K_M (a llama-quantize mix) in place of the type.
	m := greedyCase{shape: s, typ: typ, mix: os.Getenv("RINGLM_BENCH_MIX")}.load(b, 1)
	b.Logf("synthetic %s: %.2f GB of weights per step, written and mapped in %v", s.Name, float64(m.WeightBytes())/1e9,
		time.Since(t0).Round(time.Millisecond))
	const maxBatch, ctx = 256, 4096
	const budget = 2048
	dev, err := Open(m, Options{Slots: maxBatch, Context: ctx, MaxStepTokens: budget, KVMaxBytes: 40 << 30})
	if err != nil {
		skipNoQuant(b, err)
		b.Fatal(err)
	}
	defer dev.Close()
	copyBW, err := dev.CopyBandwidth(1 << 30)
	if err != nil {
		b.Fatal(err)
	}
	weights := float64(m.WeightBytes())
	floorMS := weights / (copyBW * 1e9) * 1e3
	info, _ := dev.Info()
	b.Logf("%s: copy bandwidth %.0f GB/s, floor %.3f ms/step, %d KV blocks", info.Name, copyBW, floorMS, dev.NumBlocks())
	clock := &benchClock{}
	e, err := engine.New(engine.Config{Slots: maxBatch, TokenBudget: budget, PrefillChunk: budget, NumBlocks: dev.NumBlocks(), BlockSize: dev.BlockSize(),
		Vocab: m.Vocab, Context: ctx, Allocator: dev.Allocator(), StepHook: clock.hook}, dev)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			b.Error(err)
		}
	}()
	const warm = 16
	for _, batch := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			perSeq := dev.NumBlocks() / batch * 16
			steps := max(1, min(b.N, ctx-warm-64, perSeq-warm-64))
			clock.reset(warm, batch)
			p := sample.Defaults()
			p.Temperature, p.MaxTokens = 0, warm+steps+8
			streams := make([]*engine.Stream, batch)
			for i := range streams {
				s, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{int32(i % m.Vocab), 1, 2, 3}, Params: p, IgnoreEOS: true})
				if err != nil {
					b.Fatal(err)
				}
				streams[i] = s
			}
			b.ResetTimer()
			for _, s := range streams {
				if _, err := drain(s); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			clock.mu.Lock()
			n, ns := clock.measured, float64(clock.t1-clock.t0)
			clock.mu.Unlock()
			if n == 0 {
				b.Skip("no full-batch step measured (b.N too small)")
			}
			stepMS := ns / 1e6 / float64(n)
			b.ReportMetric(stepMS, "ms/step")
			b.ReportMetric(float64(batch)/(stepMS/1e3), "tok/s")
			b.ReportMetric(weights/(stepMS/1e3)/1e9, "weight-GB/s")
			b.ReportMetric(copyBW, "copy-GB/s")
			b.ReportMetric(floorMS, "floor-ms")
			b.ReportMetric(stepMS/floorMS, "x-floor")
			b.ReportMetric(0, "ns/op")
		})
	}
	b.Run(fmt.Sprintf("prefill%d", budget), func(b *testing.B) {
		r := rand.New(rand.NewPCG(2048, 1))
		prompt := make([]int32, budget)
		for i := range prompt {
			prompt[i] = int32(r.IntN(m.Vocab))
		}
		p := sample.Defaults()
		p.Temperature, p.MaxTokens = 0, 1
		one := func() {
			s, err := e.Submit(context.Background(), engine.Request{Prompt: prompt, Params: p})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := drain(s); err != nil {
				b.Fatal(err)
			}
		}
		one() // untimed: the first long step touches scratch memory
		clock.record(true)
		n := min(b.N, benchPrefillReps)
		b.ResetTimer()
		for range n {
			one()
		}
		b.StopTimer()
		spans := clock.record(false)
		// No prefix cache: each prompt is one step of 2048 tokens.
		if len(spans) != n {
			b.Fatalf("%d prompts took %d steps, want one each", n, len(spans))
		}
		slices.Sort(spans)
		ms := float64(spans[n/2]) / 1e6
		b.ReportMetric(ms, "ms/prefill")
		b.ReportMetric(float64(budget)/(ms/1e3), "tok/s")
		b.ReportMetric(float64(n), "prompts")
		b.ReportMetric(0, "ns/op")
	})
}

// benchPrefillReps bounds the prompts BenchmarkDecode's prefill row times
// (the -test.benchtime of the decode rows would be hundreds).
const benchPrefillReps = 8
