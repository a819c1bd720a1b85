package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A small SVG plotting helper for the HTML report: linear and log axes
// with nice ticks, polylines with markers, a legend. Everything is drawn
// as plain SVG elements (no script, no external resources), so a page
// that inlines the output is self-contained.

// PlotTick is one axis tick: where it is (data units) and what it says.
type PlotTick struct {
	V     float64
	Label string
}

// PlotAxis maps a data range onto a pixel range.
type PlotAxis struct {
	Label    string
	Min, Max float64 // data range; both > 0 for Log
	Log      bool    // log10 scale
	// Ticks replaces the computed ticks (nice 1-2-5 steps on a linear
	// axis, decades and their 2 and 5 multiples on a log one).
	Ticks []PlotTick
}

// pos maps v onto [p0, p1] (p0 is where Min lands). Values outside the
// range map outside the pixel range; on a log axis v must be > 0.
func (a *PlotAxis) pos(v, p0, p1 float64) float64 {
	lo, hi := a.Min, a.Max
	if a.Log {
		v, lo, hi = math.Log10(v), math.Log10(lo), math.Log10(hi)
	}
	if hi == lo {
		return (p0 + p1) / 2
	}
	return p0 + (v-lo)/(hi-lo)*(p1-p0)
}

// ticks returns the axis ticks inside [Min, Max].
func (a *PlotAxis) ticks() []PlotTick {
	if a.Ticks != nil {
		return a.Ticks
	}
	if a.Log {
		return svgLogTicks(a.Min, a.Max)
	}
	lo, hi, step := svgNiceRange(a.Min, a.Max, 5)
	var out []PlotTick
	for k := math.Round(lo / step); k*step <= hi+step*1e-9; k++ {
		v := k * step
		if v < a.Min-step*1e-9 || v > a.Max+step*1e-9 {
			continue
		}
		out = append(out, PlotTick{V: v, Label: svgFmtTick(v, step)})
	}
	return out
}

// svgNiceStep is a 1, 2 or 5 × 10^k step that cuts span into about n parts.
func svgNiceStep(span float64, n int) float64 {
	if span <= 0 || math.IsInf(span, 0) || math.IsNaN(span) {
		return 1
	}
	raw := span / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f <= 1:
		return mag
	case f <= 2:
		return 2 * mag
	case f <= 5:
		return 5 * mag
	default:
		return 10 * mag
	}
}

// svgNiceRange widens [lo, hi] to multiples of a nice step (about n steps).
// An empty range is widened around its value.
func svgNiceRange(lo, hi float64, n int) (nlo, nhi, step float64) {
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo { // one value: from 0 to twice it
		switch {
		case lo > 0:
			lo, hi = 0, 2*hi
		case lo == 0:
			hi = 1
		default:
			lo, hi = 2*lo, 0
		}
	}
	step = svgNiceStep(hi-lo, n)
	nlo = math.Floor(lo/step+1e-9) * step
	nhi = math.Ceil(hi/step-1e-9) * step
	return nlo, nhi, step
}

// svgLogRange widens [lo, hi] (lo > 0) to whole decades.
func svgLogRange(lo, hi float64) (float64, float64) {
	if lo <= 0 {
		lo = hi / 10
	}
	if hi <= 0 {
		return 0.1, 1
	}
	nlo := math.Pow(10, math.Floor(math.Log10(lo)+1e-9))
	nhi := math.Pow(10, math.Ceil(math.Log10(hi)-1e-9))
	if nhi <= nlo {
		nhi = nlo * 10
	}
	return nlo, nhi
}

// svgLogTicks puts ticks at decades, and at 2× and 5× them when the range
// spans three decades or fewer.
func svgLogTicks(lo, hi float64) []PlotTick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	k0, k1 := int(math.Floor(math.Log10(lo)+1e-9)), int(math.Ceil(math.Log10(hi)-1e-9))
	mults := []float64{1}
	if k1-k0 <= 3 {
		mults = []float64{1, 2, 5}
	}
	var out []PlotTick
	for k := k0; k <= k1; k++ {
		dec := math.Pow(10, float64(k))
		for _, m := range mults {
			v := m * dec
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			out = append(out, PlotTick{V: v, Label: svgFmtTick(v, v)})
		}
	}
	return out
}

// svgFmtTick formats a tick value with as many decimals as the step needs,
// large values with k or M.
func svgFmtTick(v, step float64) string {
	if v == 0 {
		return "0"
	}
	a := math.Abs(v)
	switch {
	case a >= 1e6 && math.Mod(a, 1e5) == 0:
		return svgTrimZeros(strconv.FormatFloat(v/1e6, 'f', 1, 64)) + "M"
	case a >= 1e4 && math.Mod(a, 100) == 0:
		return svgTrimZeros(strconv.FormatFloat(v/1e3, 'f', 1, 64)) + "k"
	}
	dec := 0
	if s := math.Abs(step); s > 0 && s < 1 {
		dec = int(math.Ceil(-math.Log10(s) - 1e-9))
	}
	return svgTrimZeros(strconv.FormatFloat(v, 'f', dec, 64))
}

func svgTrimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// PlotSeries is one line of a plot.
type PlotSeries struct {
	Name    string
	X, Y    []float64
	Color   string // CSS colour; "" = from the palette by index
	Dash    string // stroke-dasharray ("" = solid)
	Markers bool   // a dot at every point
}

// Plot is one chart: a title, two axes, its series and a legend at the
// right.
type Plot struct {
	ID            string // unique in the page: names the clip path
	Title         string
	Width, Height int // pixels (default 640 × 400)
	X, Y          PlotAxis
	Series        []PlotSeries
	NoLegend      bool
	Note          string // a line under the title
}

// Palette is the series colours in order: readable on white and apart
// from each other (Tableau 10, darkened where pale).
var Palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
	"#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#a5a51a"}

// Dashes vary the line style once the palette has been used up.
var Dashes = []string{"", "7 4", "2 3", "9 3 2 3"}

// SeriesStyle is the colour and dash of the i-th series.
func SeriesStyle(i int) (color, dash string) {
	return Palette[i%len(Palette)], Dashes[(i/len(Palette))%len(Dashes)]
}

// Plot geometry (pixels).
const (
	plotMarginLeft    = 72
	plotMarginTop     = 44
	plotMarginBottom  = 52
	plotMarginRight   = 16
	svgLegendCharW    = 7   // width of a legend character at 12 px
	svgLegendPad      = 40  // the sample line and gaps
	svgLegendMaxW     = 260 // legends at the right wider than this are cut with …
	svgLegendMaxChars = (svgLegendMaxW - svgLegendPad) / svgLegendCharW
	svgLegendRowH     = 18
)

func (p *Plot) size() (w, h float64) {
	w, h = float64(p.Width), float64(p.Height)
	if w <= 0 {
		w = 640
	}
	if h <= 0 {
		h = 400
	}
	return w, h
}

// legend says where the legend goes: at the right of the plot area
// (width: the room it takes there) when it is narrow and its entries fit
// beside the area, else below the plot in cols columns of entryW pixels
// and rows rows, which make the picture taller by below pixels. maxChars
// is where names are cut.
type legend struct {
	right         bool
	width, entryW float64
	cols, rows    int
	below         float64
	maxChars, n   int
}

func (p *Plot) legend() legend {
	if p.NoLegend || len(p.Series) == 0 {
		return legend{}
	}
	w, h := p.size()
	longest := 0
	for _, s := range p.Series {
		longest = max(longest, utf8.RuneCountInString(s.Name))
	}
	n := len(p.Series)
	rw := float64(svgLegendPad + min(longest, svgLegendMaxChars)*svgLegendCharW)
	if rw <= 0.34*w && float64(n*svgLegendRowH) <= h-plotMarginTop-plotMarginBottom {
		return legend{right: true, width: rw, maxChars: svgLegendMaxChars, n: n}
	}
	inner := w - plotMarginLeft - plotMarginRight
	maxChars := max(4, int(inner-svgLegendPad)/svgLegendCharW)
	entryW := float64(svgLegendPad + min(longest, maxChars)*svgLegendCharW)
	cols := max(1, min(n, int((inner+12)/(entryW+12))))
	rows := (n + cols - 1) / cols
	return legend{entryW: entryW + 12, cols: cols, rows: rows, below: float64(rows*svgLegendRowH) + 8, maxChars: maxChars, n: n}
}

// legendWidth is the room the legend takes at the right (0 when it has
// none there).
func (p *Plot) legendWidth() float64 { return p.legend().width }

// area is the plot rectangle: x0 (left), y0 (top), x1 (right), y1
// (bottom). The X axis maps Min..Max onto x0..x1, the Y axis Min..Max
// onto y1..y0.
func (p *Plot) area() (x0, y0, x1, y1 float64) {
	w, h := p.size()
	return plotMarginLeft, plotMarginTop, w - plotMarginRight - p.legendWidth(), h - plotMarginBottom
}

// Point maps a data point onto pixel coordinates; ok is false when the
// point cannot be drawn (not finite, or ≤ 0 on a log axis).
func (p *Plot) Point(x, y float64) (px, py float64, ok bool) {
	if !svgFinite(x) || !svgFinite(y) || (p.X.Log && x <= 0) || (p.Y.Log && y <= 0) {
		return 0, 0, false
	}
	x0, y0, x1, y1 := p.area()
	return p.X.pos(x, x0, x1), p.Y.pos(y, y1, y0), true
}

func svgFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// coord formats a pixel coordinate (two decimals: what the tests compare).
func svgCoord(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func svgEsc(s string) string { return html.EscapeString(s) }

// cut shortens s to n runes with an ellipsis.
func svgCut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 1)]) + "…"
}

// SVG renders the plot as an <svg> element.
func (p *Plot) SVG() string {
	var b strings.Builder
	w, h := p.size()
	x0, y0, x1, y1 := p.area()
	lg := p.legend()
	th := h + lg.below // the picture's height: the plot's, and a legend below it
	id := p.ID
	if id == "" {
		id = "plot"
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="%s">`+"\n",
		svgCoord(w), svgCoord(th), svgCoord(w), svgCoord(th), svgEsc(p.Title))
	fmt.Fprintf(&b, `<defs><clipPath id="%s-clip"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath></defs>`+"\n",
		svgEsc(id), svgCoord(x0-4), svgCoord(y0-4), svgCoord(x1-x0+8), svgCoord(y1-y0+8))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`+"\n", svgCoord(w), svgCoord(th))
	fmt.Fprintf(&b, `<text class="title" x="%s" y="20" text-anchor="middle" font-size="15" font-weight="bold">%s</text>`+"\n",
		svgCoord((x0+x1)/2), svgEsc(p.Title))
	if p.Note != "" {
		fmt.Fprintf(&b, `<text class="note" x="%s" y="36" text-anchor="middle" font-size="11" fill="#555555">%s</text>`+"\n",
			svgCoord((x0+x1)/2), svgEsc(p.Note))
	}
	// Grid and ticks.
	b.WriteString(`<g class="grid" stroke="#e3e3e3" stroke-width="1">` + "\n")
	xt, yt := p.X.ticks(), p.Y.ticks()
	for _, t := range xt {
		x := p.X.pos(t.V, x0, x1)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", svgCoord(x), svgCoord(y0), svgCoord(x), svgCoord(y1))
	}
	for _, t := range yt {
		y := p.Y.pos(t.V, y1, y0)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`+"\n", svgCoord(x0), svgCoord(y), svgCoord(x1), svgCoord(y))
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#333333" stroke-width="1"/>`+"\n",
		svgCoord(x0), svgCoord(y0), svgCoord(x1-x0), svgCoord(y1-y0))
	b.WriteString(`<g class="xticks" font-size="11" fill="#222222" text-anchor="middle">` + "\n")
	for _, t := range xt {
		x := p.X.pos(t.V, x0, x1)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333"/><text x="%s" y="%s">%s</text>`+"\n",
			svgCoord(x), svgCoord(y1), svgCoord(x), svgCoord(y1+5), svgCoord(x), svgCoord(y1+18), svgEsc(t.Label))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g class="yticks" font-size="11" fill="#222222" text-anchor="end">` + "\n")
	for _, t := range yt {
		y := p.Y.pos(t.V, y1, y0)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#333333"/><text x="%s" y="%s">%s</text>`+"\n",
			svgCoord(x0-5), svgCoord(y), svgCoord(x0), svgCoord(y), svgCoord(x0-8), svgCoord(y+4), svgEsc(t.Label))
	}
	b.WriteString("</g>\n")
	xl, yl := p.X.Label, p.Y.Label
	if p.X.Log {
		xl += " (log scale)"
	}
	if p.Y.Log {
		yl += " (log scale)"
	}
	fmt.Fprintf(&b, `<text class="xlabel" x="%s" y="%s" text-anchor="middle" font-size="12">%s</text>`+"\n",
		svgCoord((x0+x1)/2), svgCoord(h-12), svgEsc(xl))
	fmt.Fprintf(&b, `<text class="ylabel" x="0" y="0" transform="translate(16 %s) rotate(-90)" text-anchor="middle" font-size="12">%s</text>`+"\n",
		svgCoord((y0+y1)/2), svgEsc(yl))
	// Series.
	fmt.Fprintf(&b, `<g class="series" clip-path="url(#%s-clip)">`+"\n", svgEsc(id))
	for i, s := range p.Series {
		color, dash := p.style(i)
		var pts []string
		for k := range min(len(s.X), len(s.Y)) {
			if px, py, ok := p.Point(s.X[k], s.Y[k]); ok {
				pts = append(pts, svgCoord(px)+","+svgCoord(py))
			}
		}
		if len(pts) == 0 {
			continue
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline data-series="%s" points="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"`,
				svgEsc(s.Name), strings.Join(pts, " "), color)
			if dash != "" {
				fmt.Fprintf(&b, ` stroke-dasharray="%s"`, dash)
			}
			b.WriteString("/>\n")
		}
		if s.Markers || len(pts) == 1 {
			for _, pt := range pts {
				x, y, _ := strings.Cut(pt, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3.5" fill="%s" stroke="#ffffff" stroke-width="1"/>`+"\n", x, y, color)
			}
		}
	}
	b.WriteString("</g>\n")
	// Legend: a column at the right, or rows below the plot.
	if lg.n > 0 {
		fmt.Fprintf(&b, `<g class="legend" font-size="12" fill="#222222">`+"\n")
		for i, s := range p.Series {
			color, dash := p.style(i)
			lx, y := x1+12, y0+8+float64(i)*svgLegendRowH
			if !lg.right {
				lx, y = x0+float64(i%lg.cols)*lg.entryW, h+6+float64(i/lg.cols)*svgLegendRowH
			}
			fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2.5"`, svgCoord(lx), svgCoord(y), svgCoord(lx+22), svgCoord(y), color)
			if dash != "" {
				fmt.Fprintf(&b, ` stroke-dasharray="%s"`, dash)
			}
			b.WriteString("/>")
			if s.Markers {
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3.5" fill="%s"/>`, svgCoord(lx+11), svgCoord(y), color)
			}
			fmt.Fprintf(&b, `<text x="%s" y="%s"><title>%s</title>%s</text>`+"\n", svgCoord(lx+28), svgCoord(y+4), svgEsc(s.Name), svgEsc(svgCut(s.Name, lg.maxChars)))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func (p *Plot) style(i int) (color, dash string) {
	color, dash = SeriesStyle(i)
	if c := p.Series[i].Color; c != "" {
		color, dash = c, p.Series[i].Dash
	} else if p.Series[i].Dash != "" {
		dash = p.Series[i].Dash
	}
	return color, dash
}

// AutoAxis sets Min and Max to cover the values with nice bounds: from 0
// when zeroBased (and every value ≥ 0), to whole decades when Log (values
// ≤ 0 ignored).
func (a *PlotAxis) AutoAxis(values []float64, zeroBased bool) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if !svgFinite(v) || (a.Log && v <= 0) {
			continue
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo > hi { // nothing to show
		if a.Log {
			a.Min, a.Max = 1, 10
		} else {
			a.Min, a.Max = 0, 1
		}
		return
	}
	if a.Log {
		a.Min, a.Max = svgLogRange(lo, hi)
		return
	}
	if zeroBased && lo >= 0 {
		lo = 0
	}
	a.Min, a.Max, _ = svgNiceRange(lo, hi, 5)
}
