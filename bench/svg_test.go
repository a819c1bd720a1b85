package bench

import (
	"encoding/xml"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// svgElements parses an SVG fragment strictly (it must be well-formed
// XML) and returns its elements by name, with their attributes.
func svgElements(t *testing.T, svg string) map[string][]map[string]string {
	t.Helper()
	out := map[string][]map[string]string{}
	d := xml.NewDecoder(strings.NewReader(svg))
	d.Strict = true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			attrs := map[string]string{}
			for _, a := range se.Attr {
				attrs[a.Name.Local] = a.Value
			}
			out[se.Name.Local] = append(out[se.Name.Local], attrs)
		}
	}
}

// svgPolyline returns the points of the series' polyline.
func svgPolyline(t *testing.T, svg, series string) []string {
	t.Helper()
	for _, pl := range svgElements(t, svg)["polyline"] {
		if pl["data-series"] == series {
			return strings.Fields(pl["points"])
		}
	}
	t.Fatalf("no polyline for series %q", series)
	return nil
}

// TestSVGAxisMath: the plot area of a 600 × 400 plot without a legend is
// x 72…584, y 44…348, and data points land where the linear and log
// mappings put them, to the hundredth of a pixel.
func TestSVGAxisMath(t *testing.T) {
	p := &Plot{ID: "t", Title: "t", Width: 600, Height: 400, NoLegend: true,
		X: PlotAxis{Min: 0, Max: 10}, Y: PlotAxis{Min: 0, Max: 100},
		Series: []PlotSeries{{Name: "lin", X: []float64{0, 5, 10, 2.5}, Y: []float64{0, 50, 100, 25}}}}
	x0, y0, x1, y1 := p.area()
	if x0 != 72 || y0 != 44 || x1 != 584 || y1 != 348 {
		t.Fatalf("area %v %v %v %v, want 72 44 584 348", x0, y0, x1, y1)
	}
	// x = 72 + v/10·512, y = 348 − v/100·304.
	want := []string{"72.00,348.00", "328.00,196.00", "584.00,44.00", "200.00,272.00"}
	if got := svgPolyline(t, p.SVG(), "lin"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("linear points %v, want %v", got, want)
	}

	// Log x over 1…1000 (3 decades of 512 px), log y over 0.1…10.
	p.X, p.Y = PlotAxis{Min: 1, Max: 1000, Log: true}, PlotAxis{Min: 0.1, Max: 10, Log: true}
	p.Series = []PlotSeries{{Name: "log", X: []float64{1, 10, 100, 1000, 0, -5, math.NaN()}, Y: []float64{0.1, 1, 10, 10, 1, 1, 1}}}
	// x = 72 + log10(v)/3·512: 72, 242.67, 413.33, 584; y = 348 − (log10(v)+1)/2·304.
	// Points at x ≤ 0 or NaN cannot be drawn and are left out.
	want = []string{"72.00,348.00", "242.67,196.00", "413.33,44.00", "584.00,44.00"}
	if got := svgPolyline(t, p.SVG(), "log"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("log points %v, want %v", got, want)
	}

	// A legend takes 40 px plus 7 per character of the longest name.
	p.NoLegend = false
	p.Series[0].Name = "abcdef"
	if _, _, x1, _ := p.area(); x1 != 600-16-(40+6*7) {
		t.Fatalf("right edge with a legend %v, want %v", x1, 600-16-(40+6*7))
	}
	// Long names are cut: the legend never exceeds its maximum width.
	p.Series[0].Name = strings.Repeat("x", 200)
	if w := p.legendWidth(); w > svgLegendMaxW {
		t.Fatalf("legend width %v > %d", w, svgLegendMaxW)
	}
}

func TestSVGNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi          float64
		nlo, nhi, nstep float64
	}{
		{0, 97, 0, 100, 20},
		{0.013, 0.87, 0, 1, 0.2},
		{3, 3, 0, 6, 2},
		{0, 0, 0, 1, 0.2},
		{12, 4870, 0, 5000, 1000},
		{-7, 7, -10, 10, 5},
	} {
		nlo, nhi, step := svgNiceRange(c.lo, c.hi, 5)
		if math.Abs(nlo-c.nlo) > 1e-12 || math.Abs(nhi-c.nhi) > 1e-12 || math.Abs(step-c.nstep) > 1e-12 {
			t.Errorf("svgNiceRange(%v, %v) = %v %v %v, want %v %v %v", c.lo, c.hi, nlo, nhi, step, c.nlo, c.nhi, c.nstep)
		}
	}
	labels := func(ts []PlotTick) string {
		var s []string
		for _, t := range ts {
			s = append(s, t.Label)
		}
		return strings.Join(s, " ")
	}
	a := PlotAxis{Min: 0, Max: 1}
	if got := labels(a.ticks()); got != "0 0.2 0.4 0.6 0.8 1" {
		t.Errorf("ticks 0…1: %s", got)
	}
	a = PlotAxis{Min: 0, Max: 50000}
	if got := labels(a.ticks()); got != "0 10k 20k 30k 40k 50k" {
		t.Errorf("ticks 0…50000: %s", got)
	}
	if got := labels(svgLogTicks(1, 1000)); got != "1 2 5 10 20 50 100 200 500 1000" {
		t.Errorf("log ticks 1…1000: %s", got)
	}
	if got := labels(svgLogTicks(0.01, 1e4)); got != "0.01 0.1 1 10 100 1000 10k" {
		t.Errorf("log ticks 0.01…1e4: %s", got)
	}
	lo, hi := svgLogRange(0.37, 4200)
	if lo != 0.1 || hi != 10000 {
		t.Errorf("svgLogRange(0.37, 4200) = %v %v", lo, hi)
	}
	// Every tick of an automatic axis lies inside it, and the ends are ticks.
	for _, c := range [][2]float64{{0, 3.7}, {0, 123456}, {0, 0.0042}, {10, 11}} {
		a := PlotAxis{}
		a.AutoAxis([]float64{c[0], c[1]}, true)
		ts := a.ticks()
		if len(ts) < 2 || ts[0].V != a.Min || math.Abs(ts[len(ts)-1].V-a.Max) > 1e-9*a.Max {
			t.Errorf("axis %v: min %v max %v ticks %v", c, a.Min, a.Max, ts)
		}
	}
}

// TestSVGWellFormed: titles, labels and names with markup characters are
// escaped, every element parses, and markers, dashes and the legend come
// out.
func TestSVGWellFormed(t *testing.T) {
	p := &Plot{ID: "w", Title: `a <b> & "c"`, Note: "x < y",
		X: PlotAxis{Label: "x & y", Min: 0, Max: 1}, Y: PlotAxis{Label: "<y>", Min: 1, Max: 100, Log: true},
		Series: []PlotSeries{
			{Name: "<one>", X: []float64{0, 1}, Y: []float64{1, 100}, Markers: true},
			{Name: "two & three", X: []float64{0.5}, Y: []float64{10}, Dash: "7 4"},
		}}
	svg := p.SVG()
	els := svgElements(t, svg)
	if len(els["svg"]) != 1 || len(els["polyline"]) != 1 {
		t.Fatalf("svg %d, polylines %d", len(els["svg"]), len(els["polyline"]))
	}
	// Two markers on the first series, one dot for the single point of the second.
	if n := len(els["circle"]); n != 2+1+1 { // + the legend's marker sample
		t.Errorf("%d circles, want 4", n)
	}
	for _, s := range []string{"a &lt;b&gt; &amp; &#34;c&#34;", "&lt;one&gt;", "two &amp; three", "(log scale)"} {
		if !strings.Contains(svg, s) {
			t.Errorf("SVG lacks %q", s)
		}
	}
	if c, d := SeriesStyle(len(Palette)); c != Palette[0] || d == "" {
		t.Errorf("series past the palette: %q %q, want the first colour dashed", c, d)
	}
}

func TestSVGCoordsParse(t *testing.T) {
	// Every coordinate the plot writes is a plain decimal number.
	p := &Plot{X: PlotAxis{Min: 0, Max: 3}, Y: PlotAxis{Min: 0, Max: 3},
		Series: []PlotSeries{{Name: "s", X: []float64{0, 1, 2, 3}, Y: []float64{3, 2, 1, 0}}}}
	for _, pt := range svgPolyline(t, p.SVG(), "s") {
		x, y, ok := strings.Cut(pt, ",")
		if !ok {
			t.Fatalf("point %q", pt)
		}
		for _, v := range []string{x, y} {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				t.Fatalf("coordinate %q: %v", v, err)
			}
		}
	}
}

// TestSVGLegendBelow: a legend too wide for the right side goes below the
// plot, which keeps its full width and grows taller.
func TestSVGLegendBelow(t *testing.T) {
	p := &Plot{Width: 640, Height: 400, X: PlotAxis{Min: 0, Max: 1}, Y: PlotAxis{Min: 0, Max: 1}}
	for i := range 3 {
		p.Series = append(p.Series, PlotSeries{Name: strings.Repeat("n", 40) + strconv.Itoa(i), X: []float64{0, 1}, Y: []float64{0, 1}})
	}
	if _, _, x1, _ := p.area(); x1 != 640-16 {
		t.Fatalf("right edge %v: the legend should be below", x1)
	}
	lg := p.legend()
	// Entries of 40 + 41·7 px (+12 apart) in 552 px: one column, three rows.
	if lg.right || lg.cols != 1 || lg.rows != 3 {
		t.Fatalf("legend %+v", lg)
	}
	svg := svgElements(t, p.SVG())["svg"][0]
	if svg["height"] != svgCoord(400+3*svgLegendRowH+8) {
		t.Fatalf("height %s", svg["height"])
	}
}
