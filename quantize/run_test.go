package quantize_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ringlm/gguf"
	"ringlm/internal/testmodel"
	"ringlm/model"
	"ringlm/quant"
	"ringlm/quantize"
	"ringlm/synth"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testmodel.Cleanup()
	os.Exit(code)
}

func mix(t testing.TB, name string) quantize.Mix {
	t.Helper()
	m, ok := quantize.ParseMix(name)
	if !ok {
		t.Fatalf("no mix %s", name)
	}
	return m
}

func run(t testing.TB, in string, o quantize.Options) (string, *quantize.Plan) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.gguf")
	p, err := quantize.Run(context.Background(), in, out, o)
	if err != nil {
		t.Fatal(err)
	}
	return out, p
}

func open(t testing.TB, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func decode(t testing.TB, f *gguf.File, ti *gguf.TensorInfo) []float32 {
	t.Helper()
	codec, ok := quantize.Format(ti.Type)
	if !ok {
		t.Fatalf("%s: no codec for %s", ti.Name, ti.Type)
	}
	x := make([]float32, ti.Elements())
	codec.Dequantize(x, f.Data(ti))
	return x
}

// errorBound is the largest error the type's rounding allows on a block
// of 32 values x: half a step of the Q8_0 scale (which is itself rounded
// to F16), or half a unit in the last place of an F16 or BF16 value.
func errorBound(typ gguf.Type, x []float32, i int) float64 {
	switch typ {
	case gguf.TypeQ8_0:
		amax := 0.0
		for _, v := range x[i/32*32 : i/32*32+32] {
			amax = max(amax, math.Abs(float64(v)))
		}
		return 0.6 * amax / 127
	case gguf.TypeF16:
		return math.Abs(float64(x[i]))*math.Exp2(-11) + math.Exp2(-25)
	case gguf.TypeBF16:
		return math.Abs(float64(x[i])) * math.Exp2(-8)
	}
	return 0
}

// F16 → Q8_0 and F16 → BF16 end to end: the output loads, every tensor is
// there with its shape and the planned type, values are within the type's
// rounding, the metadata is the input's with file_type and
// quantization_version set.
func TestRunEndToEnd(t *testing.T) {
	for _, arch := range synth.Archs {
		in := testmodel.Path(t, arch, gguf.TypeF16)
		src := open(t, in)
		for _, tc := range []struct {
			mix      string
			to       gguf.Type
			fileType uint32
		}{{"Q8_0", gguf.TypeQ8_0, 7}, {"bf16", gguf.TypeBF16, 32}} {
			t.Run(arch+"/"+tc.mix, func(t *testing.T) {
				path, p := run(t, in, quantize.Options{Mix: mix(t, tc.mix)})
				out := open(t, path)
				if _, err := model.Load(out); err != nil {
					t.Fatalf("model.Load: %v", err)
				}
				if len(out.Tensors) != len(src.Tensors) || len(p.Choices) != len(src.Tensors) {
					t.Fatalf("%d tensors out, %d in", len(out.Tensors), len(src.Tensors))
				}
				for _, ti := range src.Tensors {
					to, ok := out.Tensor(ti.Name)
					if !ok {
						t.Fatalf("%s missing from the output", ti.Name)
					}
					want := tc.to
					if len(ti.Dims) == 1 {
						want = ti.Type // norms and biases stay F32
					}
					if to.Type != want || !slices.Equal(to.Dims, ti.Dims) {
						t.Fatalf("%s: %s %v, want %s %v", ti.Name, to.Type, to.Dims, want, ti.Dims)
					}
					if to.Type == ti.Type {
						if !bytes.Equal(out.Data(to), src.Data(&ti)) {
							t.Fatalf("%s: copied bytes differ", ti.Name)
						}
						continue
					}
					x, y := decode(t, src, &ti), decode(t, out, to)
					for i := range x {
						if d := math.Abs(float64(x[i] - y[i])); d > errorBound(to.Type, x, i) {
							t.Fatalf("%s[%d]: %v became %v, beyond %s's rounding", ti.Name, i, x[i], y[i], to.Type)
						}
					}
				}
				for _, kv := range src.KVs {
					got, ok := out.Get(kv.Key)
					switch kv.Key {
					case "general.file_type":
						if u, _ := got.Int(); u != int64(tc.fileType) || got.Type != gguf.TypeUint32 {
							t.Errorf("general.file_type = %v, want %d", got, tc.fileType)
						}
					case "general.quantization_version":
					default:
						if !ok || got.String() != kv.Value.String() || got.Type != kv.Value.Type {
							t.Errorf("%s: %v, want %v", kv.Key, got, kv.Value)
						}
					}
				}
				if v, ok := out.Get("general.quantization_version"); !ok || v.String() != "2" {
					t.Errorf("general.quantization_version = %v", v)
				}
				if len(out.KVs) != len(src.KVs)+1 { // + quantization_version
					t.Errorf("%d keys out, %d in", len(out.KVs), len(src.KVs))
				}
				in, outBytes, n := p.Sizes()
				st, _ := os.Stat(path)
				if in <= outBytes && tc.to == gguf.TypeQ8_0 || n <= 0 || st.Size() < outBytes {
					t.Errorf("sizes: in %d, out %d, %d elements, file %d", in, outBytes, n, st.Size())
				}
			})
		}
	}
}

// The output's bytes do not depend on the number of threads, with
// tensors of more chunks than one window of work.
func TestRunDeterministic(t *testing.T) {
	s, _ := synth.Lookup("tiny", "qwen2")
	s.FFN = 1536 // 6 chunks of 64Ki in each FFN matrix: windows of 4 at 1 thread
	in := testmodel.Write(t, s, gguf.TypeF16, 3)
	var first []byte
	for _, threads := range []int{1, 2, 3, 7} {
		path, _ := run(t, in, quantize.Options{Mix: mix(t, "Q8_0"), Threads: threads})
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = b
		} else if !bytes.Equal(b, first) {
			t.Fatalf("%d threads write other bytes than 1", threads)
		}
	}
}

// Rows are quantized on as many goroutines as Threads says, and no more:
// a codec that holds each call a moment sees that many at once.
func TestRunParallel(t *testing.T) {
	s, _ := synth.Lookup("tiny", "qwen2")
	s.FFN = 1536 // FFN matrices of 6 chunks
	in := testmodel.Write(t, s, gguf.TypeF16, 3)
	for _, threads := range []int{1, 3} {
		var now, most atomic.Int32
		q8, _ := quantize.Format(gguf.TypeQ8_0)
		slow := *q8
		slow.Quantize = func(dst []byte, src []float32) {
			n := now.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(5 * time.Millisecond)
			q8.Quantize(dst, src)
			now.Add(-1)
		}
		formats := func(typ gguf.Type) (*quant.Format, bool) {
			if typ == gguf.TypeQ8_0 {
				return &slow, true
			}
			return quantize.Format(typ)
		}
		run(t, in, quantize.Options{Mix: mix(t, "Q8_0"), Threads: threads, Formats: formats})
		if got := most.Load(); int(got) != threads {
			t.Errorf("--threads %d: %d chunks quantized at once", threads, got)
		}
	}
}

func TestRunProgress(t *testing.T) {
	in := testmodel.Path(t, "llama", gguf.TypeF16)
	var got []quantize.Progress
	_, p := run(t, in, quantize.Options{Mix: mix(t, "Q8_0"), Threads: 2, Progress: func(g quantize.Progress) { got = append(got, g) }})
	inBytes, _, _ := p.Sizes()
	last := got[len(got)-1]
	if last.Index != len(p.Choices) || last.Count != len(p.Choices) || last.Done != inBytes || last.Total != inBytes || last.TensorDone != last.TensorBytes {
		t.Errorf("last report %+v; want tensor %d of %d, %d bytes done", last, len(p.Choices), len(p.Choices), inBytes)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Index < got[i-1].Index || got[i].Done < got[i-1].Done {
			t.Fatalf("report %d goes backwards: %+v after %+v", i, got[i], got[i-1])
		}
	}
}

// Requantizing is refused, naming the tensor, unless allowed; so is a
// dense F16 target from Q8_0, as llama.cpp refuses it.
func TestRunRequantize(t *testing.T) {
	in := testmodel.Path(t, "llama", gguf.TypeQ8_0)
	out := filepath.Join(t.TempDir(), "out.gguf")
	_, err := quantize.Run(context.Background(), in, out, quantize.Options{Mix: mix(t, "F16")})
	if !errors.Is(err, quantize.ErrRequantize) || !strings.Contains(err.Error(), `requantization refused: tensor "output.weight" is already Q8_0`) {
		t.Fatalf("Q8_0 to F16: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused run left %s", out)
	}
	// The same type is a copy, not a requantization.
	path, _ := run(t, in, quantize.Options{Mix: mix(t, "Q8_0")})
	a, _ := os.ReadFile(in)
	b, _ := os.ReadFile(path)
	if len(a) != len(b) {
		t.Errorf("Q8_0 to Q8_0: %d bytes, input %d", len(b), len(a))
	}
	path, _ = run(t, in, quantize.Options{Mix: mix(t, "F16"), AllowRequantize: true})
	if f := open(t, path); f.Tensors[0].Type != gguf.TypeF16 {
		t.Errorf("allowed requantize wrote %s", f.Tensors[0].Type)
	}
}

// A type with no encoder yet is refused before anything is written,
// naming it.
func TestRunUnsupported(t *testing.T) {
	in := testmodel.Path(t, "llama", gguf.TypeF16)
	noQ8 := func(t gguf.Type) (*quant.Format, bool) {
		if t == gguf.TypeQ8_0 {
			return nil, false
		}
		return quantize.Format(t)
	}
	out := filepath.Join(t.TempDir(), "out.gguf")
	_, err := quantize.Run(context.Background(), in, out, quantize.Options{Mix: mix(t, "Q8_0"), Formats: noQ8})
	if !errors.Is(err, quantize.ErrUnsupported) || !strings.Contains(err.Error(), "unsupported type: Q8_0 needs Q8_0, which ringlm does not write yet") {
		t.Fatalf("%v", err)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("refused before writing, yet %s.tmp exists", out)
	}
}

// A NaN met halfway through fails the run, naming the tensor and row,
// and leaves neither the output nor its .tmp; an output already there
// is untouched.
func TestRunErrorLeavesNoFile(t *testing.T) {
	in := testmodel.Poison(t, testmodel.Path(t, "llama", gguf.TypeF32), "blk.2.ffn_up.weight", float32(math.NaN()))
	out := filepath.Join(t.TempDir(), "out.gguf")
	if err := os.WriteFile(out, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := quantize.Run(context.Background(), in, out, quantize.Options{Mix: mix(t, "Q8_0")})
	if !errors.Is(err, quantize.ErrNonFinite) || !strings.Contains(err.Error(), `tensor "blk.2.ffn_up.weight": not finite: row 0 holds NaN`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("%v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "previous" {
		t.Errorf("the existing output was replaced: %q", b)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("%s.tmp left behind", out)
	}

	// A value beyond F16's range overflows.
	big := testmodel.Poison(t, testmodel.Path(t, "llama", gguf.TypeF32), "blk.0.attn_q.weight", 1e6)
	_, err = quantize.Run(context.Background(), big, out, quantize.Options{Mix: mix(t, "F16")})
	if !errors.Is(err, quantize.ErrNonFinite) || !strings.Contains(err.Error(), "not finite: row 0 does not fit in F16") {
		t.Errorf("1e6 to F16: %v", err)
	}

	// A cancelled run stops at the next chunk.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = quantize.Run(ctx, testmodel.Path(t, "llama", gguf.TypeF16), out, quantize.Options{Mix: mix(t, "Q8_0")})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("%s.tmp left behind after cancelling", out)
	}
}

func TestRunRefusesOtherModels(t *testing.T) {
	for _, tc := range []struct {
		kvs  []gguf.KV
		want string
	}{
		{[]gguf.KV{{Key: "general.architecture", Value: gguf.String("gemma2")}}, `architecture "gemma2": ringlm quantizes llama, phi3, qwen2 models`},
		{[]gguf.KV{{Key: "llama.expert_count", Value: gguf.Uint32(8)}}, "mixture-of-experts"},
	} {
		s, _ := synth.Lookup("tiny", "llama")
		w, err := synth.Build(synth.Options{Shape: s, Type: gguf.TypeF16, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		arch := "llama"
		for _, kv := range tc.kvs {
			if kv.Key == "general.architecture" {
				arch, _ = kv.Value.Str()
				// Move the hyperparameters to the new architecture's keys.
				for _, old := range w.KVs() {
					if rest, ok := strings.CutPrefix(old.Key, "llama."); ok {
						w.Set(arch+"."+rest, old.Value)
					}
				}
			}
			w.Set(kv.Key, kv.Value)
		}
		in := filepath.Join(t.TempDir(), "in.gguf")
		if err := w.WriteFile(in); err != nil {
			t.Fatal(err)
		}
		_, err = quantize.Run(context.Background(), in, in+".q8", quantize.Options{Mix: mix(t, "Q8_0")})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", arch, err, tc.want)
		}
	}
}

// BenchmarkRun converts F16 weights in memory (no disk), reporting input
// MB/s: the rate ringlm quantize's progress shows, with the decode-and-
// check of every converted row included. "tiny" is the 3.4M-parameter
// llama (tensors of at most 3 chunks); "wide" two layers of 2048 × 8192
// (121M parameters, 231 MiB), whose tensors have the hundreds of chunks
// real models have, for the thread counts up to GOMAXPROCS.
func BenchmarkRun(b *testing.B) {
	models := map[string]func() string{
		"tiny": func() string { return testmodel.Path(b, "llama", gguf.TypeF16) },
		"wide": func() string {
			s, _ := synth.Lookup("tiny", "llama")
			s.Dim, s.FFN, s.Heads, s.KVHeads, s.HeadDim, s.Layers = 2048, 8192, 32, 8, 64, 2
			return testmodel.Write(b, s, gguf.TypeF16, 1)
		},
	}
	for _, model := range []string{"tiny", "wide"} {
		var f *gguf.File
		for _, name := range []string{"Q8_0", "BF16"} {
			for _, threads := range []int{1, 2, 4, 8, 16} {
				if threads > runtime.GOMAXPROCS(0) {
					continue
				}
				b.Run(fmt.Sprintf("%s/%s/threads=%d", model, name, threads), func(sb *testing.B) {
					if f == nil {
						f = open(b, models[model]()) // open for all the sub-benchmarks
					}
					p, err := quantize.NewPlan(f, quantize.Options{Mix: mix(sb, name), Threads: threads})
					if err != nil {
						sb.Fatal(err)
					}
					inBytes, _, _ := p.Sizes()
					sb.SetBytes(inBytes)
					for sb.Loop() {
						w, err := p.Writer(context.Background())
						if err != nil {
							sb.Fatal(err)
						}
						if _, err := w.WriteTo(io.Discard); err != nil {
							sb.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// The architectures quantize takes are those ringlm runs: a new one in
// model must be checked against llama.cpp's rules before it is added here.
func TestArchsAreModels(t *testing.T) {
	if !slices.Equal(quantize.Archs, model.Architectures()) {
		t.Errorf("quantize takes %v, model runs %v", quantize.Archs, model.Architectures())
	}
}
