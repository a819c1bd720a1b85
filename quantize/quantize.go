package quantize

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"ringlm/gguf"
	"ringlm/quant"
	"ringlm/tokenizer"
)

// Archs are the architectures whose files Run quantizes: those ringlm
// runs, for which llama.cpp's rules are reproduced here.
var Archs = []string{"llama", "phi3", "qwen2"}

// The kinds of refusal callers may tell apart.
var (
	// ErrRequantize: a tensor is already quantized and would be
	// converted, adding a second rounding to the first.
	ErrRequantize = errors.New("requantization refused")
	// ErrUnsupported: a type the conversion needs has no codec here.
	ErrUnsupported = errors.New("unsupported type")
	// ErrNonFinite: a tensor holds a NaN or an infinity, or a value too
	// large for the type it is converted to.
	ErrNonFinite = errors.New("not finite")
)

// Options say how to quantize a file.
type Options struct {
	Mix   Mix
	Rules Rules
	// AllowRequantize lets already quantized tensors be converted
	// (llama-quantize --allow-requantize).
	AllowRequantize bool
	// Threads is how many goroutines quantize rows; 0 means GOMAXPROCS.
	// The output is the same whatever the number.
	Threads int
	// Progress, when set, is called from the goroutine writing the file
	// after each run of chunks and at the end of each tensor.
	Progress func(Progress)
	// Formats finds a type's codec; nil means Format.
	Formats func(gguf.Type) (*quant.Format, bool)
}

// Progress is how far a Run has come, in input bytes.
type Progress struct {
	Index, Count int // the tensor being written, from 1, and the number of tensors
	Choice
	TensorDone, TensorBytes int64 // this tensor
	Done, Total             int64 // all tensors
}

// Plan is a file's quantization, worked out and checked before anything
// is written.
type Plan struct {
	Model   Model
	Mix     Mix
	Choices []Choice  // in the output's order (llama.cpp's)
	KVs     []gguf.KV // the output's metadata
	f       *gguf.File
	o       Options
}

// NewPlan chooses every tensor's type and checks that the conversion can
// be done: a known architecture, codecs for every type converted from and
// to, no requantization unless allowed.
func NewPlan(f *gguf.File, o Options) (*Plan, error) {
	if o.Formats == nil {
		o.Formats = Format
	}
	m, err := modelOf(f)
	if err != nil {
		return nil, err
	}
	ts := make([]Tensor, len(f.Tensors))
	for i, t := range f.Tensors {
		ts[i] = Tensor{Name: t.Name, Type: t.Type, Dims: t.Dims}
	}
	choices, err := Choose(m, ts, o.Mix, o.Rules)
	if err != nil {
		return nil, err
	}
	p := &Plan{Model: m, Mix: o.Mix, Choices: choices, f: f, o: o}
	if err := p.check(); err != nil {
		return nil, err
	}
	p.KVs = outputKVs(f.KVs, o.Mix)
	return p, nil
}

func modelOf(f *gguf.File) (Model, error) {
	h, err := f.Hparams()
	if err != nil {
		return Model{}, fmt.Errorf("quantize: %w", err)
	}
	if !slices.Contains(Archs, h.Arch) {
		return Model{}, fmt.Errorf("quantize: architecture %q: ringlm quantizes %s models", h.Arch, strings.Join(Archs, ", "))
	}
	experts, err := gguf.Optional(f, h.Arch+".expert_count", f.Uint32, 0)
	if err != nil {
		return Model{}, fmt.Errorf("quantize: %w", err)
	}
	if experts > 0 {
		return Model{}, fmt.Errorf("quantize: a mixture-of-experts model (%s.expert_count = %d): ringlm quantizes dense models", h.Arch, experts)
	}
	return Model{Arch: h.Arch, Layers: int(h.BlockCount), Heads: int(h.HeadCount), KVHeads: int(h.HeadCountKV)}, nil
}

// CheckEncoders refuses choices that convert tensors to a type with no
// encoder, naming every such type in one line. formats nil means Format.
func CheckEncoders(mix string, cs []Choice, formats func(gguf.Type) (*quant.Format, bool)) error {
	if formats == nil {
		formats = Format
	}
	encodes := func(t gguf.Type) bool { f, ok := formats(t); return ok && f.Quantize != nil }
	var missing []gguf.Type
	for _, c := range cs {
		if c.Converts() && !encodes(c.To) && !slices.Contains(missing, c.To) {
			missing = append(missing, c.To)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	var have []gguf.Type
	for _, t := range gguf.Types() {
		if encodes(t) {
			have = append(have, t)
		}
	}
	return fmt.Errorf("quantize: %w: %s needs %s, which ringlm does not write yet (it writes %s)",
		ErrUnsupported, mix, quant.Names(missing), quant.Names(have))
}

func (p *Plan) check() error {
	if err := CheckEncoders(p.Mix.Name, p.Choices, p.o.Formats); err != nil {
		return err
	}
	for _, c := range p.Choices {
		if !c.Converts() {
			continue
		}
		if _, ok := p.o.Formats(c.Type); !ok {
			return fmt.Errorf("quantize: %w: tensor %q is %s, which ringlm does not read", ErrUnsupported, c.Name, c.Type)
		}
		if quantized(c.Type) && !p.o.AllowRequantize {
			return fmt.Errorf("quantize: %w: tensor %q is already %s, and converting it to %s adds a second rounding to the first (--allow-requantize does it anyway)",
				ErrRequantize, c.Name, c.Type, c.To)
		}
	}
	return nil
}

// outputKVs copies the input's metadata and sets what llama-quantize
// sets: general.quantization_version 2 and general.file_type, moved to
// the end as llama.cpp's gguf_set_val does; split.* keys are dropped, the
// output being one file.
func outputKVs(in []gguf.KV, mix Mix) []gguf.KV {
	drop := []string{"general.quantization_version", "general.file_type", "split.no", "split.count", "split.tensors.count"}
	var out []gguf.KV
	for _, kv := range in {
		if slices.Contains(drop, kv.Key) {
			continue
		}
		// The pre-tokenizer under the name llama.cpp writes and reads
		// ("gpt2" in older ringlm files is llama.cpp's "gpt-2").
		if s, ok := kv.Value.Str(); ok && kv.Key == "tokenizer.ggml.pre" {
			kv.Value = gguf.String(tokenizer.CanonicalPre(s))
		}
		out = append(out, kv)
	}
	out = append(out, gguf.KV{Key: "general.quantization_version", Value: gguf.Uint32(2)})
	if !mix.NoFileType {
		out = append(out, gguf.KV{Key: "general.file_type", Value: gguf.Uint32(mix.FileType)})
	}
	return out
}

// Sizes are the tensor data's bytes in the input and the output and the
// number of elements: what bits per weight are reckoned from.
func (p *Plan) Sizes() (in, out, elements int64) {
	for _, c := range p.Choices {
		n := elementsOf(c.Dims)
		b, _ := c.To.RowBytes(uint64(n))
		in += int64(p.info(c).Size)
		out += int64(b)
		elements += n
	}
	return
}

// Fallbacks counts the tensors whose rows did not fit the type the rules
// wanted.
func (p *Plan) Fallbacks() int {
	n := 0
	for _, c := range p.Choices {
		if c.Fallback {
			n++
		}
	}
	return n
}

func (p *Plan) info(c Choice) *gguf.TensorInfo {
	ti, _ := p.f.Tensor(c.Name)
	return ti
}

func elementsOf(d []uint64) int64 {
	n := int64(1)
	for _, x := range d {
		n *= int64(x)
	}
	return n
}

func (p *Plan) threads() int {
	if p.o.Threads > 0 {
		return p.o.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// Writer lays out the output: the metadata, then each tensor converted
// while the writer streams it. The input file must stay open until the
// writer is done; ctx stops the conversion between chunks.
func (p *Plan) Writer(ctx context.Context) (*gguf.Writer, error) {
	w := gguf.NewWriter()
	for _, kv := range p.KVs {
		w.Set(kv.Key, kv.Value)
	}
	in, _, _ := p.Sizes()
	prog := &progress{p: p, total: in, threads: p.threads()}
	for i, c := range p.Choices {
		size, _ := c.To.RowBytes(uint64(elementsOf(c.Dims)))
		fill := func(out io.Writer) error { return p.write(ctx, out, i, c, prog) }
		if err := w.AddTensorFunc(c.Name, c.To, c.Dims, fill, size); err != nil {
			return nil, fmt.Errorf("quantize: %w", err)
		}
	}
	return w, nil
}

// Run quantizes the file in to out. out is written as out.tmp and renamed
// when complete, so an error or an interruption never leaves a partial
// file under out's name.
func Run(ctx context.Context, in, out string, o Options) (*Plan, error) {
	f, err := gguf.Open(in)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := NewPlan(f, o)
	if err != nil {
		return nil, err
	}
	w, err := p.Writer(ctx)
	if err != nil {
		return nil, err
	}
	if err := w.WriteFile(out); err != nil {
		return nil, fmt.Errorf("quantize: writing %s: %w", out, err)
	}
	return p, nil
}

// progress counts input bytes done for Options.Progress, and holds the
// buffers the tensors, written one after another, reuse.
type progress struct {
	p           *Plan
	done, total int64
	threads     int
	outs        [][]byte    // a chunk's output, per slot of a window
	errs        []error     // a chunk's error, per slot
	scratch     [][]float32 // a chunk's elements, per goroutine
}

func (g *progress) report(i int, c Choice, tensorDone, tensorBytes int64) {
	if g.p.o.Progress != nil {
		g.p.o.Progress(Progress{Index: i + 1, Count: len(g.p.Choices), Choice: c,
			TensorDone: tensorDone, TensorBytes: tensorBytes, Done: g.done, Total: g.total})
	}
}

// copyPiece bounds how much of an unconverted tensor is written between
// progress reports and checks of ctx.
const copyPiece = 16 << 20

// chunkElems is about how many elements one goroutine converts at a time:
// whole rows, at least one.
const chunkElems = 1 << 16

func (p *Plan) write(ctx context.Context, w io.Writer, i int, c Choice, g *progress) error {
	src := p.f.Data(p.info(c))
	size := int64(len(src))
	if !c.Converts() {
		for off := int64(0); off < size; {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := min(size-off, copyPiece)
			if _, err := w.Write(src[off : off+n]); err != nil {
				return err
			}
			off += n
			g.done += n
			g.report(i, c, off, size)
		}
		if size == 0 {
			g.report(i, c, 0, 0)
		}
		return nil
	}
	from, _ := p.o.Formats(c.Type)
	to, _ := p.o.Formats(c.To)
	rowLen := int64(c.Dims[0])
	rows := elementsOf(c.Dims) / rowLen
	inRow, _ := c.Type.RowBytes(uint64(rowLen))
	outRow, _ := c.To.RowBytes(uint64(rowLen))
	per := max(1, chunkElems/rowLen)
	chunks := (rows + per - 1) / per
	threads := g.threads
	window := int64(threads) * 4
	if g.outs == nil {
		g.outs, g.errs, g.scratch = make([][]byte, window), make([]error, window), make([][]float32, threads)
	}
	outs, errs, scratch := g.outs, g.errs, g.scratch
	done := int64(0)
	for first := int64(0); first < chunks; first += window {
		if err := ctx.Err(); err != nil {
			return err
		}
		last := min(first+window, chunks)
		var next atomic.Int64
		next.Store(first)
		var wg sync.WaitGroup
		for k := range min(int64(threads), last-first) {
			wg.Go(func() {
				for {
					ch := next.Add(1) - 1
					if ch >= last {
						return
					}
					r0, r1 := ch*per, min(ch*per+per, rows)
					n := (r1 - r0) * rowLen
					if int64(cap(scratch[k])) < n {
						scratch[k] = make([]float32, n)
					}
					slot := ch - first
					need := (r1 - r0) * int64(outRow)
					if int64(cap(outs[slot])) < need {
						outs[slot] = make([]byte, need)
					}
					outs[slot] = outs[slot][:need]
					errs[slot] = convertRows(from, to, outs[slot], src[r0*int64(inRow):r1*int64(inRow)], scratch[k][:n], r0, rowLen)
				}
			})
		}
		wg.Wait()
		// The first failing chunk in file order, whatever the threads.
		for s := range last - first {
			if errs[s] != nil {
				return errs[s]
			}
		}
		for s := range last - first {
			if _, err := w.Write(outs[s]); err != nil {
				return err
			}
		}
		r1 := min(last*per, rows)
		n := r1*int64(inRow) - done
		done += n
		g.done += n
		g.report(i, c, done, size)
	}
	return nil
}

// convertRows decodes rows from src, checks that they are finite,
// encodes them into dst and decodes them again to check that nothing
// overflowed the output type (ggml's validate_row_data, for a value
// beyond F16's range or a block scale that became infinite). x is
// scratch for the rows' elements; row0 numbers the first row in errors.
func convertRows(from, to *quant.Format, dst, src []byte, x []float32, row0, rowLen int64) error {
	from.Dequantize(x, src)
	if i := nonFinite(x); i >= 0 {
		return fmt.Errorf("%w: row %d holds %v", ErrNonFinite, row0+int64(i)/rowLen, x[i])
	}
	to.Quantize(dst, x)
	to.Dequantize(x, dst)
	if i := nonFinite(x); i >= 0 {
		return fmt.Errorf("%w: row %d does not fit in %s (a value came back as %v)", ErrNonFinite, row0+int64(i)/rowLen, to.Type, x[i])
	}
	return nil
}

// nonFinite is the index of the first NaN or infinity in x, or -1.
func nonFinite(x []float32) int {
	for i, v := range x {
		if v-v != 0 { // NaN for NaN and ±Inf, 0 for every finite value
			return i
		}
	}
	return -1
}
