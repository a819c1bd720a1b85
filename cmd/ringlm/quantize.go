package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"ringlm/gguf"
	"ringlm/quant"
	"ringlm/quantize"
)

// quantizeFormats finds the codecs ringlm quantize uses; tests narrow it.
var quantizeFormats = quantize.Format

func runQuantize(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("quantize", "quantize IN.gguf OUT.gguf TYPE [--threads N] [--allow-requantize] [--pure] [--output-tensor-type T] [--token-embedding-type T]\n\n"+
		"Converts a model's weights as llama.cpp's llama-quantize does, choosing each tensor's type by its rules for the mix TYPE:\n  "+
		strings.Join(quantize.Mixes(), ", ")+"\n(any case; Q3_K, Q4_K and Q5_K stand for the _M mixes; llama_ftype numbers work too).")
	threads := fs.Int("threads", 0, "goroutines quantizing rows; 0: one per core (the output is the same whatever the number)")
	allow := fs.Bool("allow-requantize", false, "convert tensors that are already quantized (each conversion loses precision)")
	pure := fs.Bool("pure", false, "give every quantizable tensor TYPE's default type: no mix rules, only the fallback for rows that are not whole blocks")
	outType := fs.String("output-tensor-type", "", "ggml type for output.weight (and for token_embd when it is also the output head)")
	embType := fs.String("token-embedding-type", "", "ggml type for token_embd.weight")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 3 {
		return usagef("expected IN.gguf OUT.gguf TYPE, got %d arguments", len(pos))
	}
	in, out := pos[0], pos[1]
	mix, ok := quantize.ParseMix(pos[2])
	if !ok {
		return usagef("unknown TYPE %q (accepted: %s)", pos[2], strings.Join(quantize.Mixes(), ", "))
	}
	mix.Pure = *pure
	if *threads < 0 {
		return usagef("--threads must be 0 or more, got %d", *threads)
	}
	o := quantize.Options{Mix: mix, AllowRequantize: *allow, Threads: *threads, Formats: quantizeFormats}
	for _, f := range []struct {
		name, value string
		dst         **gguf.Type
	}{{"output-tensor-type", *outType, &o.Rules.OutputType}, {"token-embedding-type", *embType, &o.Rules.EmbeddingType}} {
		if f.value == "" {
			continue
		}
		t, ok := gguf.ParseType(f.value)
		if !ok {
			return usagef("unknown --%s %q (a ggml type: %s)", f.name, f.value, quant.Names(gguf.Types()))
		}
		*f.dst = &t
	}

	bar := newQuantizeProgress(stderr)
	o.Progress = bar.update
	ctx, which, stop := interruptContext()
	defer stop()
	start := time.Now()
	p, err := quantize.Run(ctx, in, out, o)
	bar.finish()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return interrupted{which()}
		}
		return err
	}
	inBytes, outBytes, n := p.Sizes()
	fileType := fmt.Sprintf("general.file_type %d", mix.FileType)
	if mix.NoFileType {
		fileType = "no file type"
	}
	fmt.Fprintf(stdout, "wrote %s: %s (%s), %d tensors in %.1fs\n", out, mix.Name, fileType, len(p.Choices), time.Since(start).Seconds())
	fmt.Fprintf(stdout, "model size %10s (%.2f bits per weight)\n", humanBytes(uint64(inBytes)), bpw(inBytes, n))
	fmt.Fprintf(stdout, "quant size %10s (%.2f bits per weight)\n", humanBytes(uint64(outBytes)), bpw(outBytes, n))
	if k := p.Fallbacks(); k > 0 {
		fmt.Fprintf(stdout, "%d of %d tensors fell back to another type: their rows are not whole blocks of the type the mix wanted (as llama.cpp does)\n", k, len(p.Choices))
	}
	return nil
}

func bpw(bytes, elements int64) float64 {
	if elements == 0 {
		return 0
	}
	return float64(bytes) * 8 / float64(elements)
}

// quantizeProgress shows Run's progress on stderr: a bar redrawn in place
// on a terminal, a line per tensor otherwise (logs, pipes).
type quantizeProgress struct {
	w        io.Writer
	tty      bool
	start    time.Time
	drawn    time.Time
	lastLine int // width of the bar last drawn, to blank it
}

func newQuantizeProgress(w io.Writer) *quantizeProgress {
	f, ok := w.(*os.File)
	return &quantizeProgress{w: w, tty: ok && isatty.IsTerminal(f.Fd()), start: time.Now()}
}

func (q *quantizeProgress) update(g quantize.Progress) {
	now := time.Now()
	rate := float64(g.Done) / 1e6 / max(now.Sub(q.start).Seconds(), 1e-9)
	tensorDone := g.TensorDone == g.TensorBytes
	fell := ""
	if g.Fallback {
		fell = fmt.Sprintf(" (%s does not fit rows of %d: fallback)", g.Wanted, g.Dims[0])
	}
	if !q.tty {
		if tensorDone {
			n := uint64(1)
			for _, d := range g.Dims {
				n *= d
			}
			out, _ := g.To.RowBytes(n)
			fmt.Fprintf(q.w, "[%*d/%d] %-32s %5s → %-6s %10s → %-10s %7.1f MB/s%s\n", digits(g.Count), g.Index, g.Count, g.Name,
				g.Type, g.To, humanBytes(uint64(g.TensorBytes)), humanBytes(out), rate, fell)
		}
		return
	}
	if fell != "" && tensorDone {
		q.clear()
		fmt.Fprintf(q.w, "%s: %s → %s%s\n", g.Name, g.Type, g.To, fell)
	}
	// Redrawing ten times a second is plenty; the last report always shows.
	if now.Sub(q.drawn) < 100*time.Millisecond && !(tensorDone && g.Index == g.Count) {
		return
	}
	q.drawn = now
	const width = 24
	frac := 1.0
	if g.Total > 0 {
		frac = float64(g.Done) / float64(g.Total)
	}
	fill := int(frac * width)
	line := fmt.Sprintf("[%*d/%d] %-32s %5s → %-6s [%s%s] %3.0f%% %7.1f MB/s", digits(g.Count), g.Index, g.Count, g.Name, g.Type, g.To,
		strings.Repeat("#", fill), strings.Repeat("-", width-fill), 100*frac, rate)
	q.clear()
	fmt.Fprint(q.w, line)
	q.lastLine = len([]rune(line))
}

// clear blanks the bar's line, leaving the cursor at its start.
func (q *quantizeProgress) clear() {
	if q.lastLine > 0 {
		fmt.Fprintf(q.w, "\r%s\r", strings.Repeat(" ", q.lastLine))
		q.lastLine = 0
	}
}

func (q *quantizeProgress) finish() {
	if q.tty {
		q.clear()
	}
}

func digits(n int) int { return len(fmt.Sprint(n)) }
