package pull

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// NewProgress returns an Options.Progress that shows events on w. When w
// is a terminal and jsonLines is false: a bar per digest, redrawn in
// place, with the bytes done, the speed and the time left, and every
// other status on a line of its own. Otherwise one JSON object per line,
// the shape `ollama pull` streams ({"status":"pulling 6a0746a1ec1a",
// "digest":"sha256:…","total":N,"completed":M}). It may be shared by
// concurrent Fetches.
func NewProgress(w io.Writer, jsonLines bool) func(Event) {
	if jsonLines || !IsTerminal(w) {
		var mu sync.Mutex
		enc := json.NewEncoder(w)
		return func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			enc.Encode(e)
		}
	}
	return newBar(w, time.Now).show
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

const (
	barCells    = 25
	speedWindow = 5 * time.Second // the speed is the mean over this much of the recent past
	redrawEvery = 100 * time.Millisecond
)

type sample struct {
	at   time.Time
	done int64
}

// bar draws progress lines on a terminal.
type bar struct {
	w   io.Writer
	now func() time.Time

	mu      sync.Mutex
	digest  string // whose bar the current line is; "" when none is open
	last    Event  // the newest event of that bar, drawn or not
	drawn   time.Time
	width   int // runes drawn on the line, to blank what a shorter line leaves
	samples []sample
}

func newBar(w io.Writer, now func() time.Time) *bar { return &bar{w: w, now: now} }

func (b *bar) show(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.Digest == "" || e.Total <= 0 || !strings.HasPrefix(e.Status, "pulling") {
		b.end()
		fmt.Fprintln(b.w, e.Status)
		return
	}
	if e.Digest != b.digest {
		b.end()
		b.digest = e.Digest
		b.samples = b.samples[:0]
	}
	now := b.now()
	b.last = e
	b.samples = append(b.samples, sample{now, e.Completed})
	for len(b.samples) > 2 && now.Sub(b.samples[0].at) > speedWindow {
		b.samples = b.samples[1:]
	}
	if now.Sub(b.drawn) >= redrawEvery || e.Completed >= e.Total {
		b.draw(now)
	}
}

// end finishes the open bar with its newest numbers.
func (b *bar) end() {
	if b.digest == "" {
		return
	}
	b.draw(b.now())
	fmt.Fprintln(b.w)
	b.digest, b.width = "", 0
}

func (b *bar) draw(now time.Time) {
	b.drawn = now
	line := b.line()
	n := len([]rune(line))
	fmt.Fprintf(b.w, "\r%s%s", line, strings.Repeat(" ", max(b.width-n, 0)))
	b.width = n
}

// line is "pulling 6a0746a1ec1a:  42% ▕██████████               ▏ 1.2 GB/2.9 GB  45 MB/s  38s".
func (b *bar) line() string {
	e := b.last
	done := min(max(e.Completed, 0), e.Total)
	frac := float64(done) / float64(e.Total)
	fill := int(frac * barCells)
	s := fmt.Sprintf("%s: %3d%% ▕%s%s▏ ", e.Status, int(frac*100), strings.Repeat("█", fill), strings.Repeat(" ", barCells-fill))
	if done == e.Total {
		return s + FormatBytes(e.Total)
	}
	s += FormatBytes(done) + "/" + FormatBytes(e.Total)
	first, last := b.samples[0], b.samples[len(b.samples)-1]
	if dt := last.at.Sub(first.at).Seconds(); dt > 0 && last.done > first.done {
		speed := float64(last.done-first.done) / dt
		left := time.Duration(float64(e.Total-done) / speed * float64(time.Second))
		s += fmt.Sprintf("  %s/s  %s", FormatBytes(int64(speed)), left.Round(time.Second))
	}
	return s
}

// FormatBytes writes n in decimal units, as the Hub's pages and
// `ollama pull` show sizes: "512 B", "4.7 GB", "45 MB".
func FormatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	u := -1
	for v >= 999.5 && u < len(units)-1 { // 999.96 KB shows as 1.0 MB, not 1000 KB
		v /= 1000
		u++
	}
	if v < 10 {
		return fmt.Sprintf("%.1f %cB", v, units[u])
	}
	return fmt.Sprintf("%.0f %cB", v, units[u])
}
