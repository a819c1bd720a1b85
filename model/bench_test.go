package model

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"

	"ringlm/gguf"
	"ringlm/synth"
)

// BenchmarkMemoryRead measures this machine's memory read bandwidth with
// every core summing its share of a 512 MiB array: the roof a CPU decode
// step (which streams every weight byte once) is measured against.
func BenchmarkMemoryRead(b *testing.B) {
	buf := make([]uint64, 64<<20)
	for i := range buf {
		buf[i] = uint64(i)
	}
	w := runtime.GOMAXPROCS(0)
	b.SetBytes(int64(len(buf) * 8))
	b.ResetTimer()
	var sink uint64
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		part := len(buf) / w
		sums := make([]uint64, w)
		for g := 0; g < w; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var s0, s1, s2, s3 uint64
				p := buf[g*part : (g+1)*part]
				for j := 0; j+4 <= len(p); j += 4 {
					s0 += p[j]
					s1 += p[j+1]
					s2 += p[j+2]
					s3 += p[j+3]
				}
				sums[g] = s0 + s1 + s2 + s3
			}()
		}
		wg.Wait()
		sink += sums[0]
	}
	_ = sink
}

// benchModel writes (once, cached in the temp dir) and loads a synthetic model.
func benchModel(b *testing.B, preset, arch string, typ gguf.Type) *Model {
	b.Helper()
	path := filepath.Join(os.TempDir(), "ringlm-bench-"+preset+"-"+arch+"-"+typ.String()+".gguf")
	if _, err := os.Stat(path); err != nil {
		s, err := synth.Lookup(preset, arch)
		if err != nil {
			b.Fatal(err)
		}
		w, err := synth.Build(synth.Options{Shape: s, Type: typ, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		if err := w.WriteFile(path); err != nil {
			b.Fatal(err)
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	m, err := Load(f)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// benchDecode times single-sequence decode steps at a short context and
// reports tok/s and the weight bytes streamed per second.
func benchDecode(b *testing.B, m *Model, batch int) {
	kv, err := NewKVPool(&m.Config, gguf.TypeF16, batch*8, DefaultBlockSize)
	if err != nil {
		b.Fatal(err)
	}
	seqs := make([]Seq, batch)
	for i := range seqs {
		seqs[i] = Seq{Tokens: []int32{1, 2, 3, 4}, Blocks: seqBlocks(i*8, 8), Logits: make([]float32, m.Vocab)}
	}
	if err := m.Forward(kv, seqs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		for j := range seqs {
			seqs[j].Pos = 4 + i%100
			seqs[j].Tokens = []int32{int32((i + j) % m.Vocab)}
		}
		if err := m.Forward(kv, seqs); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric((cpuTime()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/step")
	b.ReportMetric(float64(batch)/sec, "tok/s")
	b.ReportMetric(float64(m.WeightBytes())/sec/1e9, "weightGB/s")
	b.ReportMetric(sec*1e3, "ms/step")
}

func BenchmarkDecodeTinyF32(b *testing.B) {
	benchDecode(b, benchModel(b, "tiny", "llama", gguf.TypeF32), 1)
}
func BenchmarkDecodeTinyF16(b *testing.B) {
	benchDecode(b, benchModel(b, "tiny", "llama", gguf.TypeF16), 1)
}
func BenchmarkDecodeTinyQ8(b *testing.B) {
	benchDecode(b, benchModel(b, "tiny", "llama", gguf.TypeQ8_0), 1)
}
func BenchmarkDecodeTinyF16Batch8(b *testing.B) {
	benchDecode(b, benchModel(b, "tiny", "llama", gguf.TypeF16), 8)
}
func BenchmarkDecodeQwen05BF16(b *testing.B) {
	if testing.Short() {
		b.Skip("1 GB model")
	}
	benchDecode(b, benchModel(b, "qwen2.5-0.5b", "", gguf.TypeF16), 1)
}

// BenchmarkDecodeFile: decode steps of RINGLM_BENCH_BATCH sequences
// (default 1) of the GGUF file named by RINGLM_BENCH_GGUF (skipped
// without it), for models synth writes no preset of, or mixes such as
// Q4_K_M (ringlm synth --type Q4_K_M).
func BenchmarkDecodeFile(b *testing.B) {
	m, name := benchFile(b)
	batch := benchEnvInt(b, "RINGLM_BENCH_BATCH", 1)
	b.Run(fmt.Sprintf("%s/batch=%d", name, batch), func(b *testing.B) { benchDecode(b, m, batch) })
}

// benchFile loads the GGUF file named by RINGLM_BENCH_GGUF (closed with
// the benchmark), skipping without it.
func benchFile(b *testing.B) (*Model, string) {
	path := os.Getenv("RINGLM_BENCH_GGUF")
	if path == "" {
		b.Skip("RINGLM_BENCH_GGUF names no file")
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	m, err := Load(f)
	if err != nil {
		b.Fatal(err)
	}
	return m, filepath.Base(path)
}

// benchEnvInt reads a positive number from the environment variable key
// (def when unset).
func benchEnvInt(b *testing.B, key string, def int) int {
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: not a positive number", key, s)
	}
	return n
}

// BenchmarkPrefillFile: one prompt of RINGLM_BENCH_PROMPT tokens (default
// 512, at most the model's context) per step, of the GGUF file named by
// RINGLM_BENCH_GGUF (skipped without it).
func BenchmarkPrefillFile(b *testing.B) {
	m, name := benchFile(b)
	n := min(benchEnvInt(b, "RINGLM_BENCH_PROMPT", 512), m.Context)
	b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) { benchPrefill(b, m, n) })
}

// benchPrefill times one prompt of n tokens per step and reports tok/s
// and the CPU time per token.
func benchPrefill(b *testing.B, m *Model, n int) {
	blocks := (n + DefaultBlockSize - 1) / DefaultBlockSize
	kv, err := NewKVPool(&m.Config, gguf.TypeF16, blocks, DefaultBlockSize)
	if err != nil {
		b.Fatal(err)
	}
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(i * 7 % m.Vocab)
	}
	logits := make([]float32, m.Vocab)
	cpu0 := cpuTime()
	for b.Loop() {
		if err := m.Forward(kv, []Seq{{Tokens: toks, Blocks: seqBlocks(0, blocks), Logits: logits}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tok/s")
	b.ReportMetric((cpuTime()-cpu0).Seconds()*1e3/float64(n*b.N), "cpu-ms/tok")
}

// qwen05Bench loads a Qwen2.5-0.5B-shaped model (a 1 GB file written once
// to the temp dir) whose matrices are of type RINGLM_BENCH_TYPE (default
// q8_0), and runs fn on the integer path (int8) and on the float path
// (float). It skips when synth cannot write that type.
func qwen05Bench(b *testing.B, fn func(b *testing.B, m *Model)) {
	if testing.Short() {
		b.Skip("1 GB model")
	}
	typ := gguf.TypeQ8_0
	if s := os.Getenv("RINGLM_BENCH_TYPE"); s != "" {
		t, ok := gguf.ParseType(s)
		if !ok {
			b.Fatalf("RINGLM_BENCH_TYPE=%q: not a ggml type", s)
		}
		typ = t
	}
	if !slices.Contains(synth.Types(), typ) {
		b.Skipf("synth cannot write %s (it writes %v)", typ, synth.Types())
	}
	m := benchModel(b, "qwen2.5-0.5b", "", typ)
	for _, c := range []struct {
		name string
		acts Activations
	}{{"int8", Int8Activations}, {"float", FloatActivations}} {
		b.Run(typ.String()+"/"+c.name, func(b *testing.B) {
			m.SetActivations(c.acts)
			fn(b, m)
		})
	}
}

// BenchmarkDecodeQwen05: batch-1 decode steps (qwen05Bench).
func BenchmarkDecodeQwen05(b *testing.B) {
	qwen05Bench(b, func(b *testing.B, m *Model) { benchDecode(b, m, 1) })
}

// BenchmarkPrefillQwen05: one 128-token prompt per step (qwen05Bench).
func BenchmarkPrefillQwen05(b *testing.B) {
	qwen05Bench(b, func(b *testing.B, m *Model) { benchPrefill(b, m, 128) })
}
