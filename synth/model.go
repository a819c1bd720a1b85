package synth

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"

	"ringlm/gguf"
	"ringlm/quantize"
)

// Options say what to write.
type Options struct {
	Shape Shape
	// Type is every matrix's type (one of Types); 1-D tensors stay F32.
	Type gguf.Type
	// Mix, when set, is a llama-quantize mix (Q4_K_M, Q6_K, ...; see
	// quantize.Mixes) that chooses each tensor's type as llama.cpp's
	// quantizer would, in place of Type.
	Mix  string
	Seed uint64
	// Tokenizer holds the tokenizer.* metadata to embed; nil selects the
	// built-in vocabulary.
	Tokenizer []gguf.KV
	// VocabOnly writes the metadata and vocabulary and no tensors, like
	// llama.cpp's ggml-vocab-*.gguf files.
	VocabOnly bool
	// Weights, when set, are the tensors' values (a trained model);
	// otherwise they are seeded random.
	Weights Weights
}

// Types are the weight types synth writes: every type with an encoder
// (quantize.Writable).
func Types() []gguf.Type { return quantize.Writable() }

// mix is the quantize.Mix that o asks for.
func (o Options) mix() (quantize.Mix, error) {
	if o.Mix == "" {
		return quantize.PureMix(o.Type), nil
	}
	m, ok := quantize.ParseMix(o.Mix)
	if !ok {
		return m, fmt.Errorf("synth: unknown mix %q (%s)", o.Mix, strings.Join(quantize.Mixes(), ", "))
	}
	return m, nil
}

// tensorTypes chooses each tensor's type in mix as quantize does for a
// file of F32 tensors, and checks that every type has an encoder.
func (s Shape) tensorTypes(specs []tensorSpec, mix quantize.Mix) (map[string]gguf.Type, error) {
	ts := make([]quantize.Tensor, len(specs))
	for i, t := range specs {
		ts[i] = quantize.Tensor{Name: t.name, Type: gguf.TypeF32, Dims: t.dims}
	}
	m := quantize.Model{Arch: s.Arch, Layers: s.Layers, Heads: s.Heads, KVHeads: s.KVHeads}
	choices, err := quantize.Choose(m, ts, mix, quantize.Rules{})
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	if err := quantize.CheckEncoders(mix.Name, choices, nil); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	types := make(map[string]gguf.Type, len(choices))
	for _, c := range choices {
		types[c.Name] = c.To
	}
	return types, nil
}

type tensorSpec struct {
	name  string
	dims  []uint64 // ggml order
	std   float64  // weights ~ N(mean, std)
	mean  float64
	heads int // >0: a llama Q/K matrix whose rows get the converter's permutation
	fixed []float32
}

// tensors lists the model's tensors in the order llama.cpp's converter
// emits them, with llama.cpp's names and ggml-order shapes.
func (s Shape) tensors(vocab int) []tensorSpec {
	d, hd := uint64(s.Dim), uint64(s.HeadDim)
	q, kv := uint64(s.Heads)*hd, uint64(s.KVHeads)*hd
	ff, nv := uint64(s.FFN), uint64(vocab)
	in := 1 / math.Sqrt(float64(s.Dim))
	// Output projections are scaled down with depth so the residual stream
	// grows slowly and activations stay finite through every layer.
	depth := 1 / math.Sqrt(2*float64(s.Layers))
	head := 3 / math.Sqrt(float64(s.Dim)) // logits of std ~3: peaked, not flat
	norm := func(name string) tensorSpec {
		return tensorSpec{name: name, dims: []uint64{d}, mean: 1, std: 0.05}
	}
	var ts []tensorSpec
	if s.Llama3 != nil {
		ts = append(ts, tensorSpec{name: "rope_freqs.weight", dims: []uint64{hd / 2}, fixed: s.llama3Factors()})
	}
	ts = append(ts, tensorSpec{name: "token_embd.weight", dims: []uint64{d, nv}, std: head})
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts, norm(p+"attn_norm.weight"))
		switch s.Arch {
		case "phi3":
			ts = append(ts, tensorSpec{name: p + "attn_qkv.weight", dims: []uint64{d, q + 2*kv}, std: in})
		default:
			heads, kvHeads := 0, 0
			if s.Arch == "llama" {
				heads, kvHeads = s.Heads, s.KVHeads
			}
			ts = append(ts,
				tensorSpec{name: p + "attn_q.weight", dims: []uint64{d, q}, std: in, heads: heads},
				tensorSpec{name: p + "attn_k.weight", dims: []uint64{d, kv}, std: in, heads: kvHeads},
				tensorSpec{name: p + "attn_v.weight", dims: []uint64{d, kv}, std: in})
			if s.QKVBias {
				ts = append(ts,
					tensorSpec{name: p + "attn_q.bias", dims: []uint64{q}, std: 0.1},
					tensorSpec{name: p + "attn_k.bias", dims: []uint64{kv}, std: 0.1},
					tensorSpec{name: p + "attn_v.bias", dims: []uint64{kv}, std: 0.1})
			}
		}
		ts = append(ts, tensorSpec{name: p + "attn_output.weight", dims: []uint64{q, d}, std: depth / math.Sqrt(float64(q))})
		ts = append(ts, norm(p+"ffn_norm.weight"))
		if s.Arch == "phi3" {
			ts = append(ts, tensorSpec{name: p + "ffn_up.weight", dims: []uint64{d, 2 * ff}, std: in})
		} else {
			ts = append(ts,
				tensorSpec{name: p + "ffn_gate.weight", dims: []uint64{d, ff}, std: in},
				tensorSpec{name: p + "ffn_up.weight", dims: []uint64{d, ff}, std: in})
		}
		ts = append(ts, tensorSpec{name: p + "ffn_down.weight", dims: []uint64{ff, d}, std: depth / math.Sqrt(float64(ff))})
	}
	ts = append(ts, norm("output_norm.weight"))
	if !s.Tied {
		ts = append(ts, tensorSpec{name: "output.weight", dims: []uint64{d, nv}, std: head})
	}
	return ts
}

// llama3Factors are the per-frequency divisors llama.cpp's converter
// stores in rope_freqs.weight for Llama 3.1+ RoPE scaling.
func (s Shape) llama3Factors() []float32 {
	r := s.Llama3
	lowWave := float64(r.OrigContext) / float64(r.LowFreqFactor)
	highWave := float64(r.OrigContext) / float64(r.HighFreqFactor)
	out := make([]float32, s.HeadDim/2)
	for i := range out {
		freq := 1 / math.Pow(float64(s.RopeBase), float64(2*i)/float64(s.HeadDim))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = r.Factor
		default:
			smooth := (float64(r.OrigContext)/wave - float64(r.LowFreqFactor)) / float64(r.HighFreqFactor-r.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/float64(r.Factor) + smooth))
		}
	}
	return out
}

// Build assembles the model in a writer; tensor data is generated while
// the writer streams it out.
func Build(o Options) (*gguf.Writer, error) {
	s := o.Shape
	mix, err := o.mix()
	if err != nil {
		return nil, err
	}
	if s.SlidingWindow < 0 {
		return nil, fmt.Errorf("synth: sliding window %d: want 0 (none) or a number of positions", s.SlidingWindow)
	}
	if s.Dim%32 != 0 || s.FFN%32 != 0 || (s.Heads*s.HeadDim)%32 != 0 || s.Heads%s.KVHeads != 0 || s.HeadDim%2 != 0 {
		return nil, fmt.Errorf("synth: shape %+v: dimensions must be multiples of 32 and heads a multiple of kv heads", s)
	}
	tok := o.Tokenizer
	if tok == nil {
		tok = builtinVocab()
	}
	tok, vocab, err := padVocab(tok, s.Vocab)
	if err != nil {
		return nil, err
	}
	specs := s.tensors(vocab)
	types, err := s.tensorTypes(specs, mix)
	if err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	a := func(k string) string { return s.Arch + "." + k }
	w.Set("general.architecture", gguf.String(s.Arch))
	w.Set("general.type", gguf.String("model"))
	w.Set("general.name", gguf.String(s.Name))
	w.Set(a("block_count"), gguf.Uint32(uint32(s.Layers)))
	w.Set(a("context_length"), gguf.Uint32(uint32(s.Context)))
	w.Set(a("embedding_length"), gguf.Uint32(uint32(s.Dim)))
	w.Set(a("feed_forward_length"), gguf.Uint32(uint32(s.FFN)))
	w.Set(a("attention.head_count"), gguf.Uint32(uint32(s.Heads)))
	w.Set(a("attention.head_count_kv"), gguf.Uint32(uint32(s.KVHeads)))
	w.Set(a("rope.freq_base"), gguf.Float32(s.RopeBase))
	w.Set(a("attention.layer_norm_rms_epsilon"), gguf.Float32(s.NormEps))
	if s.HeadDim != s.Dim/s.Heads {
		w.Set(a("attention.key_length"), gguf.Uint32(uint32(s.HeadDim)))
		w.Set(a("attention.value_length"), gguf.Uint32(uint32(s.HeadDim)))
	}
	switch s.Arch {
	case "llama":
		w.Set(a("vocab_size"), gguf.Uint32(uint32(vocab)))
		w.Set(a("rope.dimension_count"), gguf.Uint32(uint32(s.HeadDim)))
	case "phi3":
		w.Set(a("rope.dimension_count"), gguf.Uint32(uint32(s.HeadDim)))
		w.Set(a("rope.scaling.original_context_length"), gguf.Uint32(uint32(s.Context)))
	}
	if win := s.SlidingWindow; win > 0 || s.Arch == "phi3" {
		if win == 0 {
			win = s.Context
		}
		w.Set(a("attention.sliding_window"), gguf.Uint32(uint32(win)))
	}
	if !mix.NoFileType {
		w.Set("general.file_type", gguf.Uint32(mix.FileType))
	}
	for _, t := range types {
		if info, _ := t.Info(); info.BlockSize > 1 {
			w.Set("general.quantization_version", gguf.Uint32(2))
			break
		}
	}
	for _, kv := range tok {
		w.Set(kv.Key, kv.Value)
	}
	if o.VocabOnly {
		return w, nil
	}
	if o.Weights != nil {
		if err := o.Weights.check(specs); err != nil {
			return nil, err
		}
		for i, t := range specs {
			if t.fixed == nil {
				specs[i].fixed = o.Weights[t.name].Data
			}
		}
	}
	for _, t := range specs {
		typ := types[t.name]
		n := uint64(1)
		for _, d := range t.dims {
			n *= d
		}
		size, _ := typ.RowBytes(n)
		g := &gen{spec: t, typ: typ, seed: o.Seed}
		if err := w.AddTensorFunc(t.name, typ, t.dims, g.write, size); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// gen produces one tensor's bytes. Values come from a PCG stream per
// (seed, tensor name, chunk), so output is identical however the chunks
// are spread over cores.
type gen struct {
	spec tensorSpec
	typ  gguf.Type // one Build checked quantize.Format encodes
	seed uint64
}

const chunkElems = 1 << 16 // a multiple of every block size

func (g *gen) write(w io.Writer) error {
	t := g.spec
	f, ok := quantize.Format(g.typ)
	if !ok || f.Quantize == nil {
		return fmt.Errorf("synth: no encoder for %s", g.typ)
	}
	enc := f.Quantize
	if t.fixed != nil {
		x := t.fixed
		if t.heads > 0 { // trained Q/K in HF's row order
			x = PermuteQK(x, int(t.dims[0]), t.heads)
		}
		buf := make([]byte, bytesFor(g.typ, uint64(len(x))))
		enc(buf, x)
		_, err := w.Write(buf)
		return err
	}
	h := fnv.New64a()
	h.Write([]byte(t.name))
	key := h.Sum64()
	n := uint64(1)
	for _, d := range t.dims {
		n *= d
	}
	if t.heads > 0 {
		// Q/K: generate in HF's row order, then permute rows as
		// convert_hf_to_gguf.py does, so the HF oracle can undo it.
		x := make([]float32, n)
		fill(x, g.seed, key, 0, t)
		x = PermuteQK(x, int(t.dims[0]), t.heads)
		buf := make([]byte, bytesFor(g.typ, n))
		enc(buf, x)
		_, err := w.Write(buf)
		return err
	}
	chunks := (n + chunkElems - 1) / chunkElems
	workers := runtime.GOMAXPROCS(0)
	const batch = 64 // chunks generated in parallel before being written in order
	outs := make([][]byte, batch)
	for first := uint64(0); first < chunks; first += batch {
		last := min(first+batch, chunks)
		var wg sync.WaitGroup
		next := make(chan uint64, last-first)
		for c := first; c < last; c++ {
			next <- c
		}
		close(next)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := make([]float32, chunkElems)
				for c := range next {
					m := min(uint64(chunkElems), n-c*chunkElems)
					fill(x[:m], g.seed, key, c, t)
					b := outs[c-first]
					if need := bytesFor(g.typ, m); uint64(cap(b)) < need {
						b = make([]byte, need)
					} else {
						b = b[:need]
					}
					enc(b, x[:m])
					outs[c-first] = b
				}
			}()
		}
		wg.Wait()
		for c := first; c < last; c++ {
			if _, err := w.Write(outs[c-first]); err != nil {
				return err
			}
		}
	}
	return nil
}

func bytesFor(t gguf.Type, n uint64) uint64 { b, _ := t.RowBytes(n); return b }

func fill(x []float32, seed, key, chunk uint64, t tensorSpec) {
	r := rand.New(rand.NewPCG(seed^key, chunk*0x9e3779b97f4a7c15+1))
	for i := range x {
		x[i] = float32(t.mean + t.std*r.NormFloat64())
	}
}

// PermuteQK applies llama.cpp's convert_hf_to_gguf permutation to a
// row-major [heads*headDim, cols] matrix: within each head, the rotary
// halves (HF, NEOX order) become interleaved pairs (GGML order).
func PermuteQK(x []float32, cols, heads int) []float32 {
	rows := len(x) / cols
	hd := rows / heads
	out := make([]float32, len(x))
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			for j := 0; j < 2; j++ {
				src := h*hd + j*(hd/2) + i
				dst := h*hd + 2*i + j
				copy(out[dst*cols:(dst+1)*cols], x[src*cols:(src+1)*cols])
			}
		}
	}
	return out
}

// UnpermuteQK is the inverse of PermuteQK (what the HF oracle applies).
func UnpermuteQK(x []float32, cols, heads int) []float32 {
	rows := len(x) / cols
	hd := rows / heads
	out := make([]float32, len(x))
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			for j := 0; j < 2; j++ {
				src := h*hd + 2*i + j
				dst := h*hd + j*(hd/2) + i
				copy(out[dst*cols:(dst+1)*cols], x[src*cols:(src+1)*cols])
			}
		}
	}
	return out
}
