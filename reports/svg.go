package reports

import (
	"fmt"
	"html"
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
}

// lineChart is an SVG line chart drawn without any script.
type lineChart struct {
	title, xLabel string
	series        []series
	// yFrom and yTo fix the y range when yFixed (fractions: 0..1).
	yFixed     bool
	yFrom, yTo float64
	width      int
	height     int
	// empty is what a chart without data says (default "not reported").
	empty string
}

const (
	padLeft, padRight, padTop, padBottom = 56.0, 12.0, 30.0, 34.0
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

// niceStep is a round step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) {
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

// hasData reports whether any series has a finite value.
func (c lineChart) hasData() bool {
	for _, s := range c.series {
		for _, v := range s.y {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				return true
			}
		}
	}
	return false
}

// svg renders the chart. A chart without data renders a note instead.
func (c lineChart) svg() string {
	if c.width == 0 {
		c.width = 460
	}
	if c.height == 0 {
		c.height = 220
	}
	w, h := float64(c.width), float64(c.height)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		c.width, c.height, c.width, c.height, html.EscapeString(c.title))
	fmt.Fprintf(&b, `<text class="title" x="%s" y="16">%s</text>`, num(padLeft), html.EscapeString(c.title))
	if !c.hasData() {
		note := c.empty
		if note == "" {
			note = "not reported"
		}
		fmt.Fprintf(&b, `<text class="note" x="%s" y="%s" text-anchor="middle">%s</text></svg>`, num(w/2), num(h/2), html.EscapeString(note))
		return b.String()
	}
	x0, x1 := math.Inf(1), math.Inf(-1)
	y0, y1 := math.Inf(1), math.Inf(-1)
	for _, s := range c.series {
		for i, v := range s.y {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			x0, x1 = math.Min(x0, s.x[i]), math.Max(x1, s.x[i])
			y0, y1 = math.Min(y0, v), math.Max(y1, v)
			if s.lo != nil && !math.IsNaN(s.lo[i]) {
				y0 = math.Min(y0, s.lo[i])
			}
			if s.hi != nil && !math.IsNaN(s.hi[i]) {
				y1 = math.Max(y1, s.hi[i])
			}
		}
	}
	if c.yFixed {
		y0, y1 = math.Min(y0, c.yFrom), math.Max(y1, c.yTo)
	}
	if y1 == y0 {
		y0, y1 = y0-0.5, y1+0.5
	}
	if x1 == x0 {
		x0, x1 = x0-1, x1+1
	}
	ystep := niceStep(y1-y0, 4)
	y0, y1 = math.Floor(y0/ystep)*ystep, math.Ceil(y1/ystep)*ystep
	pw, ph := w-padLeft-padRight, h-padTop-padBottom
	px := func(x float64) float64 { return padLeft + (x-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return padTop + (1-(y-y0)/(y1-y0))*ph }

	// Grid and axes.
	b.WriteString(`<g class="grid">`)
	for v := y0; v <= y1+ystep/2; v += ystep {
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(padLeft), num(py(v)), num(w-padRight), num(py(v)))
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`, num(padLeft-4), num(py(v)+4), label(math.Round(v/ystep)*ystep))
	}
	xstep := math.Max(1, niceStep(x1-x0, 6))
	for v := math.Ceil(x0/xstep) * xstep; v <= x1+1e-9; v += xstep {
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`, num(px(v)), num(h-padBottom+14), label(v))
	}
	b.WriteString(`</g>`)
	fmt.Fprintf(&b, `<rect class="frame" x="%s" y="%s" width="%s" height="%s"/>`, num(padLeft), num(padTop), num(pw), num(ph))
	if c.xLabel != "" {
		fmt.Fprintf(&b, `<text class="axis" x="%s" y="%s" text-anchor="middle">%s</text>`, num(padLeft+pw/2), num(h-4), html.EscapeString(c.xLabel))
	}

	for si, s := range c.series {
		col := palette[si%len(palette)]
		if s.lo != nil && s.hi != nil {
			var top, bot []string
			for i := range s.x {
				if math.IsNaN(s.lo[i]) || math.IsNaN(s.hi[i]) || math.IsNaN(s.y[i]) {
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
			if math.IsNaN(s.y[i]) || math.IsInf(s.y[i], 0) {
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
		fmt.Fprintf(&b, `<path class="line" stroke="%s"%s d="%s"><title>%s</title></path>`, col, dash, d.String(), html.EscapeString(s.name))
		if s.points {
			for i := range s.x {
				if math.IsNaN(s.y[i]) {
					continue
				}
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s at %s: %s</title></circle>`,
					num(px(s.x[i])), num(py(s.y[i])), col, html.EscapeString(s.name), label(s.x[i]), strconv.FormatFloat(s.y[i], 'f', 4, 64))
			}
		}
	}
	// Legend, top right, one entry per series.
	if len(c.series) > 1 || c.series[0].name != "" {
		lx := w - padRight - 6
		for si := len(c.series) - 1; si >= 0; si-- {
			s := c.series[si]
			tw := 7*float64(len([]rune(s.name))) + 18
			lx -= tw
			fmt.Fprintf(&b, `<rect x="%s" y="%s" width="10" height="3" fill="%s"/><text class="legend" x="%s" y="%s">%s</text>`,
				num(lx), num(padTop-9), palette[si%len(palette)], num(lx+13), num(padTop-5), html.EscapeString(s.name))
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// boxRow is one distribution drawn as a box: whiskers min..max, box
// p10..p90, a bar at the median, a dot at the mean.
type boxRow struct {
	label                       string
	min, p10, p50, p90, max, mu float64
	color                       int
}

// boxChart draws distributions side by side on one horizontal axis.
func boxChart(title string, rows []boxRow) string {
	const w, rowH = 560.0, 22.0
	left := 150.0
	h := padTop + rowH*float64(len(rows)) + 24
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		lo, hi = math.Min(lo, r.min), math.Max(hi, r.max)
	}
	if len(rows) == 0 || math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if hi == lo {
		lo, hi = lo-0.5, hi+0.5
	}
	step := niceStep(hi-lo, 5)
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	px := func(v float64) float64 { return left + (v-lo)/(hi-lo)*(w-left-padRight) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-label="%s">`,
		num(w), num(h), num(w), num(h), html.EscapeString(title))
	fmt.Fprintf(&b, `<text class="title" x="8" y="16">%s</text><g class="grid">`, html.EscapeString(title))
	for v := lo; v <= hi+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s"/><text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`,
			num(px(v)), num(padTop-4), num(px(v)), num(h-20), num(px(v)), num(h-6), label(math.Round(v/step)*step))
	}
	b.WriteString(`</g>`)
	for i, r := range rows {
		y := padTop + rowH*float64(i) + rowH/2
		col := palette[r.color%len(palette)]
		fmt.Fprintf(&b, `<g><title>%s: min %s, p10 %s, median %s, p90 %s, max %s, mean %s</title>`, html.EscapeString(r.label),
			label(r.min), label(r.p10), label(r.p50), label(r.p90), label(r.max), strconv.FormatFloat(r.mu, 'f', 4, 64))
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`, num(left-6), num(y+4), html.EscapeString(r.label))
		fmt.Fprintf(&b, `<line stroke="%s" x1="%s" y1="%s" x2="%s" y2="%s"/>`, col, num(px(r.min)), num(y), num(px(r.max)), num(y))
		fmt.Fprintf(&b, `<rect fill="%s" fill-opacity="0.35" stroke="%s" x="%s" y="%s" width="%s" height="12"/>`, col, col,
			num(px(r.p10)), num(y-6), num(math.Max(px(r.p90)-px(r.p10), 1)))
		fmt.Fprintf(&b, `<line stroke="%s" stroke-width="2" x1="%s" y1="%s" x2="%s" y2="%s"/>`, col, num(px(r.p50)), num(y-7), num(px(r.p50)), num(y+7))
		fmt.Fprintf(&b, `<circle fill="%s" cx="%s" cy="%s" r="3"/></g>`, col, num(px(r.mu)), num(y))
	}
	b.WriteString(`</svg>`)
	return b.String()
}
