package ui_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/reports"
)

// layoutOf is a function of a root (the document, or an element) that
// measures every chart under it, and the page's width. A chart
// is a figure.chart (its title the figcaption, its legend .legend, its
// plot the SVG's rect.frame, or the span between the top y tick's grid
// line and the x axis) or a bare svg.chart. Everything is read from the
// layout, so the conditions below are exact comparisons, not timings:
//
//   - overlaps: legends whose bounding box meets the title's;
//   - titleCut: the title is wider than its box or sticks out of its chart;
//   - legendOut: a legend sticks out of its chart;
//   - over: how far (px) the highest bar, dot, line or band rises above the
//     plot's top (the top tick), and outside: the marks not within the plot.
//
// It also gives the document's scroll width and each table's width and
// the width of the box it scrolls in. Containment allows 0.001 px: the
// browser keeps SVG geometry in 32-bit floats, so a bar whose top is at
// y 150.1 and height 39.9 ends at 190.0000038, not at the axis's 190.
const layoutOf = `((root) => {
	const eps = 0.001;
	const box = (el) => { const b = el.getBoundingClientRect(); return {left: b.left, top: b.top, right: b.right, bottom: b.bottom}; };
	const meet = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
	const within = (a, b) => a.left >= b.left - eps && a.right <= b.right + eps && a.top >= b.top - eps && a.bottom <= b.bottom + eps;
	const bb = (el) => { const b = el.getBBox(); return {left: b.x, top: b.y, right: b.x + b.width, bottom: b.y + b.height}; };
	const plotArea = (svg) => {
		const frame = svg.querySelector('rect.frame');
		if (frame) return bb(frame);
		const axis = svg.querySelector('line.axis'), grid = [...svg.querySelectorAll('line.grid')];
		if (!axis || !grid.length) return null;
		const a = bb(axis);
		return {left: a.left, right: a.right, top: Math.min(...grid.map((g) => bb(g).top)), bottom: a.top};
	};
	const figs = [...root.querySelectorAll('figure.chart, svg.chart')].filter((el) => !(el.parentElement && el.parentElement.closest('figure.chart')));
	const charts = figs.map((fig) => {
		const svg = fig.matches('svg') ? fig : fig.querySelector('svg');
		const title = fig.querySelector('figcaption, .title');
		const legends = [...fig.querySelectorAll('.legend')];
		const note = fig.querySelector('.same');
		const fb = box(fig);
		const c = {title: title ? title.textContent : '', legend: legends.map((l) => l.textContent).join(' | '), note: note ? note.textContent : '',
			overlaps: 0, titleCut: false, legendOut: 0, over: 0, outside: [], marks: 0, top: null};
		if (title) {
			const tb = box(title);
			c.overlaps = legends.filter((l) => meet(box(l), tb)).length;
			c.titleCut = (title.scrollWidth || 0) > (title.clientWidth || Infinity) || tb.right > fb.right || tb.left < fb.left;
		}
		c.legendOut = legends.filter((l) => !within(box(l), fb)).length;
		const plot = svg && plotArea(svg);
		if (plot) {
			c.top = plot.top;
			for (const m of svg.querySelectorAll('g.bars rect, circle, polyline, path.line, polygon.band')) {
				let b = bb(m);
				if (m.matches('circle')) { const cx = (b.left + b.right) / 2, cy = (b.top + b.bottom) / 2; b = {left: cx, right: cx, top: cy, bottom: cy}; }
				if (b.right === b.left && b.bottom === b.top && !m.matches('circle')) continue; // an empty path
				c.marks++;
				c.over = Math.max(c.over, plot.top - b.top);
				if (!within(b, plot)) c.outside.push(m.tagName + ' ' + JSON.stringify(b) + ' not in ' + JSON.stringify(plot));
			}
		}
		return c;
	});
	const tables = [...root.querySelectorAll('table')].map((t) => {
		const sc = t.parentElement.closest('.scroll');
		return {cls: t.className, width: t.getBoundingClientRect().width, box: sc ? sc.clientWidth : null, scrolls: sc ? getComputedStyle(sc).overflowX : ''};
	});
	const doc = document.scrollingElement;
	return {scrollWidth: doc.scrollWidth, innerWidth: window.innerWidth, charts, tables};
})`

// layoutJS measures the whole page.
const layoutJS = layoutOf + `(document)`

// overEps is how far (px) a mark may rise above the top tick: the 32-bit
// rounding above, nothing visible.
const overEps = 0.001

type chartLayout struct {
	Title, Legend, Note string
	Overlaps, LegendOut int
	TitleCut            bool
	Over                float64
	Outside             []string
	Marks               int
}

type pageLayout struct {
	ScrollWidth, InnerWidth float64
	Charts                  []chartLayout
	Tables                  []struct {
		Cls     string
		Width   float64
		Box     *float64
		Scrolls string
	}
}

// checkLayout fails for each chart whose legend meets its title, whose
// title is cut, whose legend sticks out, or whose marks leave the plot,
// and when the page is wider than the window.
func checkLayout(t *testing.T, where string, l pageLayout) {
	t.Helper()
	if l.ScrollWidth > l.InnerWidth {
		t.Errorf("%s: the document is %.0f px wide in a %.0f px window", where, l.ScrollWidth, l.InnerWidth)
	}
	for _, c := range l.Charts {
		if c.Overlaps != 0 || c.TitleCut || c.LegendOut != 0 {
			t.Errorf("%s: chart %q: %d legend(s) meet the title, title cut %v, %d legend(s) stick out", where, c.Title, c.Overlaps, c.TitleCut, c.LegendOut)
		}
		if c.Over > overEps || len(c.Outside) > 0 {
			t.Errorf("%s: chart %q: marks rise %.1f px above the top tick; outside the plot: %v", where, c.Title, c.Over, c.Outside)
		}
	}
}

func findChart(l pageLayout, title string) *chartLayout {
	for i := range l.Charts {
		if l.Charts[i].Title == title {
			return &l.Charts[i]
		}
	}
	return nil
}

// TestBrowserLayout checks, at a 1360 px wide window, that the run view's
// and a report's charts fit their data (no bar or dot above the top tick),
// that no legend overlaps its chart's title and no title is cut, that
// series equal point for point are drawn once with a note, and that the
// wide evaluations table scrolls in its box instead of widening the page.
func TestBrowserLayout(t *testing.T) {
	chromium := findChromium(t)
	st := newRunStore(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// A report of the run, compared with another run's branch at the same
	// commit: the overlaid curves are equal point for point.
	if _, err := st.CreateBranch(ctx, "rescore-demo", "runs-"+testRun); err != nil {
		t.Fatal(err)
	}
	report, err := reports.HTML(ctx, st, "runs-"+testRun, &reports.Options{Compare: "rescore-demo"})
	if err != nil {
		t.Fatal(err)
	}
	reportSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(report)
	}))
	defer reportSrv.Close()

	addr := serveUI(ctx, t, st, time.Hour)

	page := openPage(ctx, t, chromium)
	page.viewport(ctx, t, 1360, 900)

	// The run view, once its charts and evaluations are drawn.
	page.navigate(ctx, t, "http://"+addr+"/#/runs/"+testRun)
	var run pageLayout
	page.waitFor(ctx, t, &run, `document.querySelector('table.evals tbody tr') && document.querySelector('svg.chart g.bars rect') ? `+layoutJS+` : null`)
	checkLayout(t, "run view", run)
	keepScreenshot(ctx, t, page, "layout-run.png")
	t.Logf("run view: document %.0f px wide in a %.0f px window", run.ScrollWidth, run.InnerWidth)
	evalTable := func(l pageLayout) (width, box float64) {
		for _, tb := range l.Tables {
			if tb.Cls == "evals" {
				if tb.Box == nil || tb.Scrolls != "auto" {
					t.Fatalf("the evaluations table is not in a box that scrolls: %+v", tb)
				}
				return tb.Width, *tb.Box
			}
		}
		t.Fatal("no evaluations table")
		return 0, 0
	}
	width, box := evalTable(run)
	t.Logf("evaluations table: %.0f px wide in a %.0f px box", width, box)
	// In a window narrower than the table (its 13 metrics are about
	// 1,350 px wide, fonts permitting), it scrolls in its box and the page
	// keeps the window's width.
	page.viewport(ctx, t, 900, 900)
	var narrow pageLayout
	page.waitFor(ctx, t, &narrow, `window.innerWidth === 900 ? `+layoutJS+` : null`)
	width, box = evalTable(narrow)
	if width <= box {
		t.Errorf("at 900 px the evaluations table (%.0f px) fits its box (%.0f px): the fixture no longer tests scrolling", width, box)
	}
	if narrow.ScrollWidth > narrow.InnerWidth {
		t.Errorf("at 900 px the document is %.0f px wide", narrow.ScrollWidth)
	}
	t.Logf("at 900 px: the evaluations table is %.0f px wide in a %.0f px box; document %.0f px", width, box, narrow.ScrollWidth)
	page.viewport(ctx, t, 1360, 900)
	evals := findChart(run, "pass@k on heldout per checkpoint")
	if evals == nil {
		t.Fatalf("no pass@k chart in %+v", run.Charts)
	}
	if !strings.Contains(evals.Legend, "pass@1 = exact_pass@1") || evals.Note != "identical series drawn once: pass@1 = exact_pass@1" {
		t.Errorf("pass@k chart: legend %q, note %q; want pass@1 and exact_pass@1 drawn once, with a note", evals.Legend, evals.Note)
	}
	checkRunViewFixes(ctx, t, page)
	bars := findChart(run, "time in tasks per iteration (s)")
	if bars == nil || bars.Marks != 4*4+3*2 {
		t.Fatalf("task bars: %+v, want 22 bars", bars)
	}

	// The case, exactly: evaluated iterations whose bars reach
	// 2.06 s and 2.46 s, drawn by the page's own taskBars.
	var exact struct {
		Ticks  []float64
		Layout pageLayout
	}
	page.eval(ctx, t, `(() => {
		const task = (name, seconds) => ({name, seconds, attempts: 1, cached: false});
		const its = [1, 2, 3, 4].map((n) => {
			const tasks = [task('sample', 0.1), task('generate', 1.2), task('reward', 0.1), task('train', 0.1)];
			if (n % 2 === 0) tasks.push(task('eval', n === 2 ? 0.56 : 0.96));
			return {iteration: n, tasks, seconds: tasks.reduce((a, t) => a + t.seconds, 0)};
		});
		const holder = document.createElement('div');
		holder.append(taskBars(its));
		document.getElementById('app').prepend(holder);
		const layout = (`+layoutOf+`)(holder);
		holder.remove();
		return {ticks: niceTicks(0, 2.46, 4), layout};
	})()`, &exact)
	if len(exact.Ticks) == 0 || exact.Ticks[len(exact.Ticks)-1] < 2.46 {
		t.Errorf("niceTicks(0, 2.46, 4) = %v: the top tick is below the data", exact.Ticks)
	}
	checkLayout(t, "task bars of 2.06 s and 2.46 s", exact.Layout)
	if c := findChart(exact.Layout, "time in tasks per iteration (s)"); c != nil {
		t.Logf("task bars of 2.06 s and 2.46 s: ticks %v, bars rise %.1f px above the top tick", exact.Ticks, c.Over)
	}

	// The report.
	page.navigate(ctx, t, reportSrv.URL+"/")
	var rep pageLayout
	// Once the whole document is parsed: on a loaded machine the parser
	// can stop between a chart's legend and its note.
	page.waitFor(ctx, t, &rep, `document.readyState === 'complete' && document.getElementById('compare') ? `+layoutJS+` : null`)
	checkLayout(t, "report", rep)
	keepScreenshot(ctx, t, page, "layout-report.png")
	t.Logf("report: document %.0f px wide in a %.0f px window, %d charts", rep.ScrollWidth, rep.InnerWidth, len(rep.Charts))
	for _, tb := range rep.Tables {
		if tb.Box == nil || tb.Scrolls != "auto" {
			t.Errorf("report table %q (%.0f px) is not in a box that scrolls", tb.Cls, tb.Width)
		}
	}
	for _, want := range []struct{ title, legend, note string }{
		{"Training reward and accuracy", "reward (mean total) = accuracy (correct)", "identical series drawn once: reward (mean total) = accuracy (correct)"},
		{"heldout: pass@k by checkpoint (95% intervals shaded)", "pass@1 = exact_pass@1", "identical series drawn once: pass@1 = exact_pass@1"},
		// rescore-demo holds no rescoring report: it is compared as another
		// run, its curves overlaid on the run's (and equal to them).
		{"Training reward (mean total) by run", "runs-demo = rescore-demo", "identical series drawn once: runs-demo = rescore-demo"},
	} {
		c := findChart(rep, want.title)
		if c == nil {
			t.Errorf("report: no chart %q", want.title)
			continue
		}
		if !strings.Contains(c.Legend, want.legend) || !strings.HasPrefix(c.Note, want.note) {
			t.Errorf("report chart %q: legend %q, note %q; want %q drawn once with a note", want.title, c.Legend, c.Note, want.legend)
		}
	}
}

// keepScreenshot saves a screenshot of the whole page, to look at, in
// screenshotDir, and logs where.
func keepScreenshot(ctx context.Context, t *testing.T, p *page, name string) {
	t.Helper()
	dir := screenshotDir(t)
	var res struct {
		Data string `json:"data"`
	}
	if err := p.b.call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &res); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(b))
}

// screenshotDir is where the browser tests keep their screenshots:
// $RLPIPE_UI_SCREENSHOTS (created if missing) to keep them for a
// reviewer, else the test's temporary directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("RLPIPE_UI_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBrowserCompareRuns ticks runs in the runs list and compares them:
// their curves are overlaid on one chart per metric, one series per run,
// and two runs whose curves are equal point for point are drawn once and
// named together.
func TestBrowserCompareRuns(t *testing.T) {
	chromium := findChromium(t)
	st := newRunStore(t, 4)
	runFixture(t, st, "other", 7, 3) // another seed, fewer iterations
	runFixture(t, st, "twin", 1, 4)  // the demo's seed: the same curves
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addr := serveUI(ctx, t, st, time.Hour)
	page := openPage(ctx, t, chromium)
	page.viewport(ctx, t, 1360, 900)

	page.navigate(ctx, t, "http://"+addr+"/#/")
	var ready bool
	page.waitFor(ctx, t, &ready, `document.querySelectorAll('input[data-run]').length === 3 ? true : null`)
	var hash string
	page.eval(ctx, t, `(() => {
		for (const r of ['demo', 'other']) document.querySelector('input[data-run="' + r + '"]').click();
		document.getElementById('compare').click();
		return location.hash;
	})()`, &hash)
	if hash != "#/compare?runs=demo,other" {
		t.Fatalf("compare went to %q", hash)
	}
	var cmp pageLayout
	page.waitFor(ctx, t, &cmp, `document.querySelector('.compare figure.chart') ? `+layoutJS+` : null`)
	checkLayout(t, "compare demo, other", cmp)
	keepScreenshot(ctx, t, page, "compare-runs.png")
	reward := findChart(cmp, "reward (mean) by run")
	held := findChart(cmp, "held-out exact_pass@1 per checkpoint by run")
	if reward == nil || held == nil {
		t.Fatalf("compare charts: %+v", cmp.Charts)
	}
	if !strings.Contains(reward.Legend, "demo") || !strings.Contains(reward.Legend, "other") || strings.Contains(reward.Legend, "=") || reward.Marks < 7 {
		t.Errorf("reward chart: legend %q, %d marks; want demo and other, 4 + 3 points", reward.Legend, reward.Marks)
	}
	if !strings.Contains(held.Legend, "demo (heldout)") || !strings.Contains(held.Legend, "other (heldout)") {
		t.Errorf("held-out chart: legend %q", held.Legend)
	}
	t.Logf("compare: %d charts; reward legend %q", len(cmp.Charts), reward.Legend)

	page.navigate(ctx, t, "http://"+addr+"/#/compare?runs=demo,twin")
	var twins pageLayout
	page.waitFor(ctx, t, &twins, `document.querySelector('.compare figure.chart') && document.title.includes('twin') ? `+layoutJS+` : null`)
	if c := findChart(twins, "reward (mean) by run"); c == nil || !strings.Contains(c.Legend, "demo = twin") || c.Note != "identical series drawn once: demo = twin" {
		t.Errorf("two runs with the same curves: %+v", c)
	}
}

// checkRunViewFixes checks, on the run view of the fixture's run, the
// fixes of issue 40: the evaluations table with pass@k first, intervals
// in the cells and equal columns collapsed; y ticks alike within each
// chart; exact_pass@1 in its own colour, dashed, with a note; reward and
// accuracy one chart when equal; and the page as wide as the window.
func checkRunViewFixes(ctx context.Context, t *testing.T, page *page) {
	t.Helper()
	var got struct {
		Headers []string
		Cell    string
		Ticks   map[string][]string
	}
	page.eval(ctx, t, `(() => {
		const ticks = {};
		for (const f of document.querySelectorAll('figure.chart')) {
			const ts = [...f.querySelectorAll('text.ytick')].map((x) => x.textContent);
			if (ts.length) ticks[f.querySelector('figcaption').textContent] = ts;
		}
		return {headers: [...document.querySelectorAll('table.evals thead th')].map((th) => th.textContent),
			cell: document.querySelector('table.evals tbody tr td[data-metric="pass@2"]').textContent, ticks};
	})()`, &got)
	// At k = 1 pass@1, pass^1, maj@1 and the exact pass@1 are the same
	// figure in the fixture, and avg@k does not depend on k: one column.
	wantHeaders := []string{"checkpoint", "set", "problems", "n", "pass@1 = exact_pass@1 = pass^1 = maj@1 = avg@1 = avg@2 = avg@4",
		"pass@2", "pass@4", "pass^2", "pass^4", "maj@2", "maj@4"}
	if !slices.Equal(got.Headers, wantHeaders) {
		t.Errorf("evaluations table headers %q, want %q", got.Headers, wantHeaders)
	}
	// The first row is the base: its pass@2 is 0.35 in [0.20, 0.50]
	// (evalSummary).
	if want := "0.3500 [0.200, 0.500]"; got.Cell != want {
		t.Errorf("the base's pass@2 cell reads %q, want %q", got.Cell, want)
	}
	if want := []string{"0.00", "0.25", "0.50", "0.75", "1.00"}; !slices.Equal(got.Ticks["pass@k on heldout per checkpoint"], want) {
		t.Errorf("pass@k ticks %q, want %q", got.Ticks["pass@k on heldout per checkpoint"], want)
	}
	for title, ts := range got.Ticks {
		_, frac, _ := strings.Cut(ts[0], ".")
		for _, x := range ts {
			if _, f, _ := strings.Cut(x, "."); len(f) != len(frac) {
				t.Errorf("chart %q: ticks %q have different decimals", title, ts)
				break
			}
		}
	}

	// exact_pass@1 that differs from pass@1: near black, dashed, apart
	// from every pass@k colour, with a note saying what it is.
	var ex struct {
		Series []struct{ Name, Color, Dash string }
		About  string
	}
	page.eval(ctx, t, `(() => {
		const evals = [0, 2].map((it) => ({set: 'heldout', iteration: it, intervals: {},
			metrics: {'pass@1': 0.25 + it / 10, 'pass@2': 0.4 + it / 10, 'pass@4': 0.5 + it / 10, 'pass@8': 0.6 + it / 10, 'exact_pass@1': 0.27 + it / 10}}));
		const fig = evalCharts(evals)[0];
		return {series: [...fig.querySelectorAll('g.series')].map((g) => ({name: g.dataset.name,
			color: g.querySelector('polyline').getAttribute('stroke'), dash: g.querySelector('polyline').getAttribute('stroke-dasharray') || ''})),
			about: fig.querySelector('.about').textContent};
	})()`, &ex)
	colors := map[string]string{}
	for _, se := range ex.Series {
		if prev, ok := colors[se.Color]; ok {
			t.Errorf("%s and %s share the colour %s", prev, se.Name, se.Color)
		}
		colors[se.Color] = se.Name
		if wantDash := se.Name == "exact_pass@1"; (se.Dash != "") != wantDash {
			t.Errorf("series %s dashed %q", se.Name, se.Dash)
		}
	}
	if colors["#111827"] != "exact_pass@1" || len(ex.Series) != 5 {
		t.Errorf("exact_pass@1 is not the one near-black series: %+v", ex.Series)
	}
	if want := "exact_pass@1: the expected pass@1 computed from the token probabilities, with no sampling noise (dashed where it differs from pass@1); pass@k: estimated from the n samples drawn per problem."; ex.About != want {
		t.Errorf("the pass@k chart's note %q, want %q", ex.About, want)
	}

	// Reward and accuracy equal at every iteration: one chart, as the
	// report draws it; different: two.
	var tc struct {
		Same, Differ []string
		Note         string
	}
	page.eval(ctx, t, `(() => {
		const its = [1, 2, 3].map((n) => ({iteration: n, tasks: [], train: {'reward.mean': n / 4, 'reward_components.correct.mean': n / 4, loss: n / 10}}));
		const same = trainCharts(its, new Set());
		const differ = trainCharts(its.map((it) => ({...it, train: {...it.train, 'reward_components.correct.mean': it.train['reward.mean'] / 2}})), new Set());
		const titles = (fs) => fs.map((f) => f.querySelector('figcaption').textContent);
		return {same: titles(same), differ: titles(differ), note: same[0].querySelector('.same').textContent};
	})()`, &tc)
	if want := []string{"reward (mean) and accuracy", "loss"}; !slices.Equal(tc.Same, want) {
		t.Errorf("equal reward and accuracy: charts %q, want %q", tc.Same, want)
	}
	if want := "identical series drawn once: reward.mean = reward_components.correct.mean (the reward is its 0/1 correct component)"; tc.Note != want {
		t.Errorf("the merged chart's note %q, want %q", tc.Note, want)
	}
	if want := []string{"reward (mean)", "accuracy", "loss"}; !slices.Equal(tc.Differ, want) {
		t.Errorf("different reward and accuracy: charts %q, want %q", tc.Differ, want)
	}

	// Sections a run does not have (trainer options, rescorings) leave
	// nothing behind, not the text "null".
	if strings.Contains(bodyText(ctx, t, page), "\nnull\n") {
		t.Errorf("the run view prints null where a section is left out")
	}

	// On a wide screen the page takes the window's width.
	page.viewport(ctx, t, 2400, 900)
	var width struct{ Main, Window float64 }
	page.waitFor(ctx, t, &width, `window.innerWidth === 2400 ? {main: document.getElementById('app').getBoundingClientRect().width, window: window.innerWidth} : null`)
	if width.Main != width.Window {
		t.Errorf("at %.0f px the page is %.0f px wide, want all of it", width.Window, width.Main)
	}
	keepScreenshot(ctx, t, page, "run-2400px.png")
	page.viewport(ctx, t, 1360, 900)
}

func bodyText(ctx context.Context, t *testing.T, page *page) string {
	t.Helper()
	var text string
	page.eval(ctx, t, `document.body.innerText`, &text)
	return text
}
