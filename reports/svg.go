package reports

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// palette colours series in order; colour-blind-safe (Okabe-Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}

// series is one line of a chart. Lo and Hi, when set, draw a band.
type series struct {
	name   string
	x, y   []float64
	lo, hi []float64
	dashed bool
	points bool // mark each point (with its value as a tooltip)
	// color is the series' palette index; lineChart sets it from the
	// series' place before merging identical ones, so a line keeps its
	// colour whether or not another is drawn with it.
	color int
}

// lineChart is a line chart: an HTML figure holding its title, a legend
// and an SVG plot, drawn without any script. Title, legend and plot each
// have their own row, so they never overlap: a long title wraps, and so
// does a long legend.
type lineChart struct {
	title, xLabel string
	series        []series
	// yFrom and yTo fix the y range when yFixed (fractions: 0..1); data
	// outside widens it.
	yFixed     bool
	yFrom, yTo float64
	// width and height are the plot's SVG (axes included), in pixels.
	width  int
	height int
	// empty is what a chart without data says (default "not reported").
	empty string
	// why explains, in the note under the chart, why series drawn once are
	// identical: keyed by their merged name ("loss = policy loss").
	why map[string]string
	// counts says the values are counts: the y axis starts at 0 and
	// steps by whole numbers, so a constant 0 reads 0 to 1, not −0.5 to
	// 0.5.
	counts bool
}

const (
	padLeft, padRight, padTop, padBottom = 56.0, 12.0, 10.0, 34.0
)

// num formats a coordinate.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// label formats an axis or tooltip value: at most 4 significant digits.
func label(v float64) string {
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// decimals is how many decimals print a multiple of step exactly: the
// ticks of one axis all get as many ("0.00", "0.25", … "1.00"), never "1"
// beside "0.75".
func decimals(step float64) int {
	for d := 0; d < 8; d++ {
		v := step * math.Pow(10, float64(d))
		if math.Abs(v-math.Round(v)) < 1e-9*math.Max(1, v) {
			return d
		}
	}
	return 8
}

// niceStep is a round step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// axisRange returns an axis covering [lo, hi] with about n round steps:
// its first tick from ≤ lo and its last tick to ≥ hi, both multiples of
// step (so the top tick is never below the data). An empty range is
// widened by half a unit each way.
func axisRange(lo, hi float64, n int) (from, to, step float64) {
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		lo, hi = lo-0.5, hi+0.5
	}
	step = niceStep(hi-lo, n)
	from, to = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	// Rounding in the division can land a tick just inside the data.
	for from > lo {
		from -= step
	}
	for to < hi {
		to += step
	}
	return from, to, step
}

// ticks lists the ticks of an axis from axisRange, computed from the
// first one (not by adding steps, which drifts), the last being to.
func ticks(from, to, step float64) []float64 {
	n := int(math.Round((to - from) / step))
	out := make([]float64, 0, n+1)
	for i := 0; i < n; i++ {
		out = append(out, from+float64(i)*step)
	}
	return append(out, to)
}

// finite reports whether v is a number other than ±Inf.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// hasData reports whether any series has a finite value.
func (c lineChart) hasData() bool {
	for _, s := range c.series {
		if s.hasData() {
			return true
		}
	}
	return false
}

func (s series) hasData() bool {
	for _, v := range s.y {
		if finite(v) {
			return true
		}
	}
	return false
}

// same reports whether two series are equal point for point: the same x
// and the same y, exactly, with NaNs in the same places.
func same(a, b series) bool {
	eq := func(u, v float64) bool { return u == v || math.IsNaN(u) && math.IsNaN(v) }
	if len(a.x) != len(b.x) || len(a.y) != len(b.y) {
		return false
	}
	for i := range a.x {
		if !eq(a.x[i], b.x[i]) || !eq(a.y[i], b.y[i]) {
			return false
		}
	}
	return true
}

// mergeIdentical draws series that are equal point for point once: the
// first of them stays in its place, named "a = b" after all of them (with
// the band of the first that has one), and the others go. It returns the
// series and the merged names; series without data are left as they are.
func mergeIdentical(ss []series) (out []series, merged []string) {
	used := make([]bool, len(ss))
	for i, s := range ss {
		if used[i] {
			continue
		}
		names := []string{s.name}
		if s.hasData() {
			for j := i + 1; j < len(ss); j++ {
				if used[j] || !same(s, ss[j]) {
					continue
				}
				used[j] = true
				names = append(names, ss[j].name)
				if s.lo == nil && ss[j].lo != nil {
					s.lo, s.hi = ss[j].lo, ss[j].hi
				}
				s.points = s.points || ss[j].points
			}
		}
		if len(names) > 1 {
			s.name = strings.Join(names, " = ")
			merged = append(merged, s.name)
		}
		out = append(out, s)
	}
	return out, merged
}

// figure wraps a chart's SVG with its title (wrapping, with the full text
// as a tooltip), its legend and its notes, each in its own row.
func figure(title string, width int, legend []series, svg string, notes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<figure class="chart" style="width:%dpx"><figcaption class="title" title="%s">%s</figcaption>`, width, esc(title), esc(title))
	if len(legend) > 0 {
		b.WriteString(`<div class="legend">`)
		for _, s := range legend {
			dash := ""
			if s.dashed {
				dash = " dashed"
			}
			fmt.Fprintf(&b, `<span><i class="key%s" style="border-color:%s"></i>%s</span>`, dash, palette[s.color%len(palette)], esc(s.name))
		}
		b.WriteString(`</div>`)
	}
	b.WriteString(svg)
	for _, n := range notes {
		fmt.Fprintf(&b, `<p class="same">%s</p>`, esc(n))
	}
	b.WriteString(`</figure>`)
	return b.String()
}

// html renders the chart. A chart without data shows a note instead of a
// plot. Series equal point for point are drawn once, with a note.
func (c lineChart) html() string {
	if c.width == 0 {
		c.width = 460
	}
	if c.height == 0 {
		c.height = 200
	}
	w, h := float64(c.width), float64(c.height)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="plot" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		c.width, c.height, c.width, c.height, esc(c.title))
	if !c.hasData() {
		note := c.empty
		if note == "" {
			note = "not reported"
		}
		fmt.Fprintf(&b, `<text class="note" x="%s" y="%s" text-anchor="middle">%s</text></svg>`, num(w/2), num(h/2), esc(note))
		return figure(c.title, c.width, nil, b.String(), nil)
	}
	ser := make([]series, len(c.series))
	for i, s := range c.series {
		s.color = i
		ser[i] = s
	}
	ser, merged := mergeIdentical(ser)
	x0, x1 := math.Inf(1), math.Inf(-1)
	y0, y1 := math.Inf(1), math.Inf(-1)
	for _, s := range ser {
		for i, v := range s.y {
			if !finite(v) {
				continue
			}
			x0, x1 = math.Min(x0, s.x[i]), math.Max(x1, s.x[i])
			y0, y1 = math.Min(y0, v), math.Max(y1, v)
			if s.lo != nil && finite(s.lo[i]) {
				y0 = math.Min(y0, s.lo[i])
			}
			if s.hi != nil && finite(s.hi[i]) {
				y1 = math.Max(y1, s.hi[i])
			}
		}
	}
	if c.yFixed {
		y0, y1 = math.Min(y0, c.yFrom), math.Max(y1, c.yTo)
	}
	if x1 == x0 {
		x0, x1 = x0-1, x1+1
	}
	if c.counts {
		y0, y1 = math.Min(y0, 0), math.Max(y1, 1)
	}
	y0, y1, ystep := axisRange(y0, y1, 4)
	if c.counts && ystep < 1 {
		y0, y1, ystep = math.Floor(y0), math.Ceil(y1), 1
	}
	yDecimals := decimals(ystep)
	pw, ph := w-padLeft-padRight, h-padTop-padBottom
	px := func(x float64) float64 { return padLeft + (x-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return padTop + (1-(y-y0)/(y1-y0))*ph }

	// Grid and axes.
	b.WriteString(`<g class="grid">`)
	for _, v := range ticks(y0, y1, ystep) {
		t := math.Round(v/ystep) * ystep
		if t == 0 {
			t = 0 // not "-0.00"
		}
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(padLeft), num(py(v)), num(w-padRight), num(py(v)))
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`, num(padLeft-4), num(py(v)+4), strconv.FormatFloat(t, 'f', yDecimals, 64))
	}
	xstep := math.Max(1, niceStep(x1-x0, 6))
	for v := math.Ceil(x0/xstep) * xstep; v <= x1+1e-9; v += xstep {
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`, num(px(v)), num(h-padBottom+14), label(v))
	}
	b.WriteString(`</g>`)
	fmt.Fprintf(&b, `<rect class="frame" x="%s" y="%s" width="%s" height="%s"/>`, num(padLeft), num(padTop), num(pw), num(ph))
	if c.xLabel != "" {
		fmt.Fprintf(&b, `<text class="axis" x="%s" y="%s" text-anchor="middle">%s</text>`, num(padLeft+pw/2), num(h-4), esc(c.xLabel))
	}

	for _, s := range ser {
		col := palette[s.color%len(palette)]
		if s.lo != nil && s.hi != nil {
			var top, bot []string
			for i := range s.x {
				if !finite(s.lo[i]) || !finite(s.hi[i]) || !finite(s.y[i]) {
					continue
				}
				top = append(top, num(px(s.x[i]))+","+num(py(s.hi[i])))
				bot = append([]string{num(px(s.x[i])) + "," + num(py(s.lo[i]))}, bot...)
			}
			if len(top) > 1 {
				fmt.Fprintf(&b, `<polygon class="band" fill="%s" points="%s"/>`, col, strings.Join(append(top, bot...), " "))
			}
		}
		var d strings.Builder
		pen := false
		for i := range s.x {
			if !finite(s.y[i]) {
				pen = false
				continue
			}
			if pen {
				d.WriteString(" L")
			} else {
				if d.Len() > 0 {
					d.WriteByte(' ')
				}
				d.WriteString("M")
			}
			d.WriteString(num(px(s.x[i])) + "," + num(py(s.y[i])))
			pen = true
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(&b, `<path class="line" stroke="%s"%s d="%s"><title>%s</title></path>`, col, dash, d.String(), esc(s.name))
		if s.points {
			for i := range s.x {
				if !finite(s.y[i]) {
					continue
				}
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s at %s: %s</title></circle>`,
					num(px(s.x[i])), num(py(s.y[i])), col, esc(s.name), label(s.x[i]), strconv.FormatFloat(s.y[i], 'f', 4, 64))
			}
		}
	}
	b.WriteString(`</svg>`)
	// A legend, one entry per line drawn, unless the only line is unnamed.
	var legend []series
	if len(ser) > 1 || ser[0].name != "" {
		legend = ser
	}
	var notes []string
	if len(merged) > 0 {
		note := "identical series drawn once: " + strings.Join(merged, "; ")
		var whys []string
		for _, m := range merged {
			if why := c.why[m]; why != "" {
				whys = append(whys, why)
			}
		}
		if len(whys) > 0 {
			note += " (" + strings.Join(whys, "; ") + ")"
		}
		notes = append(notes, note)
	}
	return figure(c.title, c.width, legend, b.String(), notes)
}

// boxRow is one distribution drawn as a box: whiskers min..max, box
// p10..p90, a bar at the median, a dot at the mean.
type boxRow struct {
	label                       string
	min, p10, p50, p90, max, mu float64
	color                       int
}

// boxChart draws distributions side by side on one horizontal axis, in a
// figure whose title wraps above the plot.
func boxChart(title string, rows []boxRow) string {
	const w, rowH, top = 560.0, 22.0, 10.0
	left := 150.0
	h := top + rowH*float64(len(rows)) + 24
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		lo, hi = math.Min(lo, r.min), math.Max(hi, r.max)
	}
	if len(rows) == 0 || math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	lo, hi, step := axisRange(lo, hi, 5)
	px := func(v float64) float64 { return left + (v-lo)/(hi-lo)*(w-left-padRight) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="plot" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-label="%s"><g class="grid">`,
		num(w), num(h), num(w), num(h), esc(title))
	for _, v := range ticks(lo, hi, step) {
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/><text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`,
			num(px(v)), num(top-4), num(px(v)), num(h-20), num(px(v)), num(h-6), label(math.Round(v/step)*step))
	}
	b.WriteString(`</g>`)
	for i, r := range rows {
		y := top + rowH*float64(i) + rowH/2
		col := palette[r.color%len(palette)]
		fmt.Fprintf(&b, `<g><title>%s: min %s, p10 %s, median %s, p90 %s, max %s, mean %s</title>`, esc(r.label),
			label(r.min), label(r.p10), label(r.p50), label(r.p90), label(r.max), strconv.FormatFloat(r.mu, 'f', 4, 64))
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`, num(left-6), num(y+4), esc(r.label))
		fmt.Fprintf(&b, `<line stroke="%s" x1="%s" y1="%s" x2="%s" y2="%s"/>`, col, num(px(r.min)), num(y), num(px(r.max)), num(y))
		fmt.Fprintf(&b, `<rect fill="%s" fill-opacity="0.35" stroke="%s" x="%s" y="%s" width="%s" height="12"/>`, col, col,
			num(px(r.p10)), num(y-6), num(math.Max(px(r.p90)-px(r.p10), 1)))
		fmt.Fprintf(&b, `<line stroke="%s" stroke-width="2" x1="%s" y1="%s" x2="%s" y2="%s"/>`, col, num(px(r.p50)), num(y-7), num(px(r.p50)), num(y+7))
		fmt.Fprintf(&b, `<circle fill="%s" cx="%s" cy="%s" r="3"/></g>`, col, num(px(r.mu)), num(y))
	}
	b.WriteString(`</svg>`)
	return figure(title, int(w), nil, b.String(), nil)
}
