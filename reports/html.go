package reports

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Options configure a report. Nil means defaults.
type Options struct {
	// Title heads the page (default "rlpipe report: <ref>").
	Title string
	// Compare, when set, adds a comparison with this ref. When either
	// side is a rescoring (it holds reports/rescore.json), the rewards
	// are compared sample by sample (a rescore branch and its source,
	// either way round); otherwise Compare is another run, whose learning
	// curves and held-out figures are overlaid on this run's.
	Compare string
	Load    *LoadOptions
	Alarms  *AlarmOptions
}

// Report is a run's report: its data, alarms and, with Options.Compare,
// the comparison.
type Report struct {
	Run     *Run
	Alarms  []Alarm
	Compare *Comparison
	// Other is the run Options.Compare named when it is not a rescoring:
	// its curves are overlaid on Run's.
	Other *Run
	title string
}

// Build reads everything a report shows from ref.
func Build(ctx context.Context, st artifacts.Store, ref string, opts *Options) (*Report, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	run, err := Load(ctx, st, ref, o.Load)
	if err != nil {
		return nil, err
	}
	alarms, err := Detect(run.Health, run.Evals, o.Alarms)
	if err != nil {
		return nil, err
	}
	r := &Report{Run: run, Alarms: alarms, title: o.Title}
	if r.title == "" {
		r.title = "rlpipe report: " + ref
	}
	if o.Compare != "" {
		rescoring, err := eitherRescored(ctx, st, ref, o.Compare)
		if err != nil {
			return nil, err
		}
		if rescoring {
			r.Compare, err = Compare(ctx, st, ref, o.Compare)
		} else {
			r.Other, err = Load(ctx, st, o.Compare, &LoadOptions{SampleIterations: -1})
		}
		if err != nil {
			return nil, fmt.Errorf("compare with %s: %w", o.Compare, err)
		}
	}
	return r, nil
}

// HTML builds the report of ref as one self-contained HTML page: inline
// CSS and SVG charts, no script, no external resource. The bytes depend
// only on the store's content at ref (and Compare): the same state gives
// the same page.
func HTML(ctx context.Context, st artifacts.Store, ref string, opts *Options) ([]byte, error) {
	r, err := Build(ctx, st, ref, opts)
	if err != nil {
		return nil, err
	}
	return r.HTML(), nil
}

// WriteHTML builds the report of ref and writes it to path atomically (a
// reader never sees half a file), returning the report.
func WriteHTML(ctx context.Context, st artifacts.Store, ref, path string, opts *Options) (*Report, error) {
	r, err := Build(ctx, st, ref, opts)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, r.HTML()); err != nil {
		return nil, err
	}
	return r, nil
}

func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write report %s: %w", path, err)
	}
	return nil
}

const css = `body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1180px;padding:0 18px 40px;color:#1b1b1b}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:15px;margin:16px 0 6px}
nav a{margin-right:12px}.meta{color:#555}.empty{color:#777;font-style:italic}
.charts{display:flex;flex-wrap:wrap;gap:10px;align-items:flex-start}
figure.chart{margin:0;padding:6px 8px;max-width:100%;background:#fff;border:1px solid #e4e4e4}.chart svg{display:block;max-width:100%;height:auto}
.chart .title{display:block;font-size:13px;font-weight:600;overflow-wrap:anywhere}
.chart .legend{display:flex;flex-wrap:wrap;gap:0 12px;margin:2px 0;font-size:11px;color:#444}.chart .legend span{white-space:nowrap}
.chart .key{display:inline-block;width:14px;border-top:3px solid;vertical-align:middle;margin-right:4px}.chart .key.dashed{border-top-style:dashed}
.chart .same{margin:2px 0 0;font-size:11px;color:#666;font-style:italic}
.chart .tick,.chart .axis{font-size:11px;fill:#444}.chart .note{font-size:13px;fill:#888}
.chart .grid line{stroke:#eee}.chart .frame{fill:none;stroke:#bbb}.chart .line{fill:none;stroke-width:1.8}.chart .band{opacity:.15}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:6px 0;font-size:13px}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f5f5f5}td.n{text-align:right;font-variant-numeric:tabular-nums}
.alarm td:first-child{font-weight:600;color:#b00020}.ok{color:#1a7f37}
pre{margin:0;white-space:pre-wrap;word-break:break-word;max-width:520px;font-size:12px}
details{margin:4px 0}summary{cursor:pointer}.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #ddd;padding:8px 12px;border-radius:4px}.card b{display:block;font-size:18px}
.turn{border-left:3px solid #ddd;padding:1px 6px;margin:2px 0}.turn.trained{border-left-color:#2563eb;background:#eff6ff}.turn.untrained{border-left-color:#b45309}
.turn .who{font-size:11px;color:#666}.turn .mark{font-style:italic}`

// headlineIterations is how many of the last iterations the summary's
// reward and accuracy average.
const headlineIterations = 5

// f4 formats a value with 4 decimals ("–" for NaN).
func f4(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

func esc(s string) string { return html.EscapeString(s) }

// HTML renders the report.
func (r *Report) HTML() []byte {
	var b bytes.Buffer
	run := r.Run
	h := run.Health
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
	b.WriteString(`<meta name="viewport" content="width=device-width, initial-scale=1">`)
	fmt.Fprintf(&b, "<title>%s</title><style>%s</style></head><body>\n", esc(r.title), css)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(r.title))
	first, last := h[0].Iteration, h[len(h)-1].Iteration
	fmt.Fprintf(&b, `<p class="meta">ref <code>%s</code> at commit <code>%s</code>`, esc(run.Ref), esc(shortCommit(run.Commit.ID)))
	if !run.Commit.CreationDate.IsZero() {
		fmt.Fprintf(&b, ` (%s)`, esc(run.Commit.CreationDate.UTC().Format(time.RFC3339)))
	}
	if msg, _, _ := strings.Cut(run.Commit.Message, "\n"); msg != "" {
		fmt.Fprintf(&b, `: %s`, esc(msg))
	}
	fmt.Fprintf(&b, `<br><span id="iterations">%d iterations (%d–%d)</span>, %d evaluated checkpoints, %d alarms</p>`+"\n",
		len(h), first, last, len(checkpoints(run.Evals)), len(r.Alarms))
	b.WriteString(`<nav><a href="#summary">summary</a><a href="#alarms">alarms</a><a href="#learning">learning curves</a><a href="#evals">evaluations</a><a href="#health">health</a><a href="#samples">samples</a><a href="#table">health table</a>`)
	if r.Compare != nil || r.Other != nil {
		b.WriteString(`<a href="#compare">comparison</a>`)
	}
	b.WriteString("</nav>\n")

	r.summary(&b)
	r.alarms(&b)
	r.learning(&b)
	r.evals(&b)
	r.health(&b)
	r.samples(&b)
	r.table(&b)
	if r.Compare != nil {
		r.compare(&b)
	}
	if r.Other != nil {
		r.overlay(&b)
	}
	fmt.Fprintf(&b, "<p class=\"meta\">Written by rlpipe from <code>%s</code> at commit <code>%s</code>. The health metrics and alarm rules are described in docs/REPORTS.md.</p>\n</body></html>\n",
		esc(run.Ref), esc(run.Commit.ID))
	return b.Bytes()
}

func shortCommit(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// checkpoints lists the evaluated iterations.
func checkpoints(evals []Eval) []int {
	var out []int
	for _, e := range evals {
		if !slices.Contains(out, e.Iteration) {
			out = append(out, e.Iteration)
		}
	}
	return out
}

func (r *Report) summary(b *bytes.Buffer) {
	h := r.Run.Health
	lastH := h[len(h)-1]
	b.WriteString(`<h2 id="summary">Summary</h2><div class="cards">`)
	card := func(name, value string) {
		fmt.Fprintf(b, `<div class="card">%s<b>%s</b></div>`, esc(name), esc(value))
	}
	// One iteration's reward is noisy (a batch of a few prompts): the
	// headline is the mean of the last headlineIterations, naming them and
	// the last iteration's own figure.
	tail := h[max(0, len(h)-headlineIterations):]
	span := fmt.Sprintf("iterations %d–%d", tail[0].Iteration, lastH.Iteration)
	if len(tail) == 1 {
		span = fmt.Sprintf("iteration %d", lastH.Iteration)
	}
	tailMean := func(f func(*Health) float64) float64 {
		sum, n := 0.0, 0
		for i := range tail {
			if v := f(&tail[i]); finite(v) {
				sum, n = sum+v, n+1
			}
		}
		if n == 0 {
			return math.NaN()
		}
		return sum / float64(n)
	}
	headlineCard := func(name string, f func(*Health) float64) {
		title := fmt.Sprintf("%s, mean of %s", name, span)
		if len(tail) > 1 {
			title += fmt.Sprintf(" (iteration %d alone: %s)", lastH.Iteration, f4(f(&lastH)))
		}
		card(title, f4(tailMean(f)))
	}
	headlineCard("reward", func(h *Health) float64 { return h.Reward.Mean })
	if _, ok := lastH.Components["correct"]; ok {
		headlineCard("accuracy", func(h *Health) float64 { return componentMean(h, "correct") })
	}
	for _, set := range evalSets(r.Run.Evals) {
		cps := setEvals(r.Run.Evals, set)
		m := headlineMetric(cps)
		a, z := cps[0], cps[len(cps)-1]
		if len(cps) == 1 {
			card(fmt.Sprintf("%s %s at %s", set, m, a.Checkpoint), f4(a.Metrics[m]))
			continue
		}
		card(fmt.Sprintf("%s %s, %s → %s", set, m, a.Checkpoint, z.Checkpoint),
			fmt.Sprintf("%s → %s (%+.1f points)", f4(a.Metrics[m]), f4(z.Metrics[m]), 100*(z.Metrics[m]-a.Metrics[m])))
	}
	card("alarms", strconv.Itoa(len(r.Alarms)))
	b.WriteString("</div>\n")
}

func (r *Report) alarms(b *bytes.Buffer) {
	b.WriteString(`<h2 id="alarms">Alarms</h2>`)
	if len(r.Alarms) == 0 {
		b.WriteString(`<p class="ok">No alarm: no rule fired (thresholds in docs/REPORTS.md).</p>` + "\n")
		return
	}
	b.WriteString("<div class=\"scroll\"><table><tr><th>rule</th><th>iterations</th><th>what happened</th><th>evidence</th></tr>\n")
	for _, a := range r.Alarms {
		its := strconv.Itoa(a.Iteration)
		if a.LastIteration != a.Iteration {
			its += "–" + strconv.Itoa(a.LastIteration)
		}
		var ev []string
		for _, e := range a.Evidence {
			ev = append(ev, e.Name+" = "+label(e.Value))
		}
		fmt.Fprintf(b, `<tr class="alarm"><td>%s</td><td class="n">%s</td><td>%s</td><td>%s</td></tr>`+"\n",
			esc(a.Rule), its, esc(a.Message), esc(strings.Join(ev, ", ")))
	}
	b.WriteString("</table></div>\n")
}

// healthSeries is one Health field against iteration.
func (r *Report) healthSeries(name string, f func(*Health) float64) series {
	h := r.Run.Health
	s := series{name: name, x: make([]float64, len(h)), y: make([]float64, len(h))}
	for i := range h {
		s.x[i], s.y[i] = float64(h[i].Iteration), f(&h[i])
	}
	return s
}

// notComputedKL is what the KL panel says when no iteration has a KL: a
// trainer at β = 0 (the default) leaves the term out and reports none.
const notComputedKL = "not computed: at beta 0 the loss has no KL term"

func (r *Report) learning(b *bytes.Buffer) {
	b.WriteString(`<h2 id="learning">Learning curves</h2><div class="charts">`)
	reward := r.healthSeries("reward (mean total)", func(h *Health) float64 { return h.Reward.Mean })
	ser := []series{reward}
	if slices.ContainsFunc(r.Run.Health, func(h Health) bool { _, ok := h.Components["correct"]; return ok }) {
		ser = append(ser, r.healthSeries("accuracy (correct)", func(h *Health) float64 { return componentMean(h, "correct") }))
	}
	// Equal curves are drawn once with a note (lineChart); these are equal
	// by construction.
	b.WriteString(lineChart{title: "Training reward and accuracy", xLabel: "iteration", series: ser,
		why: map[string]string{"reward (mean total) = accuracy (correct)": "the reward is its 0/1 correct component"}}.html())
	b.WriteString(lineChart{title: "Loss", xLabel: "iteration", series: []series{r.healthSeries("loss", func(h *Health) float64 { return h.Loss }),
		r.healthSeries("policy loss", func(h *Health) float64 { return h.PolicyLoss })},
		why: map[string]string{"loss = policy loss": "at beta 0 the loss has no KL term"}}.html())
	b.WriteString(lineChart{title: "KL to the reference", xLabel: "iteration", empty: notComputedKL,
		series: []series{r.healthSeries("kl", func(h *Health) float64 { return h.KL })}}.html())
	if comps := allComponents(r.Run.Health); len(comps) > 1 {
		var cs []series
		for _, c := range comps {
			cs = append(cs, r.healthSeries(c, func(h *Health) float64 { return componentMean(h, c) }))
		}
		b.WriteString(lineChart{title: "Reward components (mean)", xLabel: "iteration", series: cs}.html())
	}
	b.WriteString("</div>\n")
}

func componentMean(h *Health, name string) float64 {
	if s, ok := h.Components[name]; ok {
		return s.Mean
	}
	return math.NaN()
}

func (r *Report) evals(b *bytes.Buffer) {
	b.WriteString(`<h2 id="evals">Evaluations (pass@k per checkpoint)</h2>`)
	evals := r.Run.Evals
	if len(evals) == 0 {
		fmt.Fprintf(b, `<p class="empty" id="no-evals">No evaluations yet: the run has no %s. Add an <code>eval</code> section to the pipeline config, or wait for the first evaluated checkpoint.</p>`+"\n",
			html.EscapeString(runs.EvalPattern(runs.SummaryFile)))
		return
	}
	for _, set := range evalSets(evals) {
		cps := setEvals(evals, set)
		ks := passKs(cps)
		var ser []series
		metrics := make([]string, 0, len(ks)+1)
		for _, k := range ks {
			metrics = append(metrics, "pass@"+strconv.Itoa(k))
		}
		hasExact := slices.ContainsFunc(cps, func(e Eval) bool { _, ok := e.Metrics[MetricExact]; return ok })
		if hasExact {
			metrics = append(metrics, MetricExact)
		}
		for _, m := range metrics {
			s := series{name: m, points: true, dashed: m == MetricExact}
			for _, e := range cps {
				v, ok := e.Metrics[m]
				if !ok {
					v = math.NaN()
				}
				ci, okCI := e.Intervals[m]
				if !okCI || ci[0] > ci[1] {
					ci = [2]float64{math.NaN(), math.NaN()}
				}
				s.x, s.y = append(s.x, float64(e.Iteration)), append(s.y, v)
				s.lo, s.hi = append(s.lo, ci[0]), append(s.hi, ci[1])
			}
			ser = append(ser, s)
		}
		fmt.Fprintf(b, "<h3>%s</h3><div class=\"charts\">", esc(set))
		b.WriteString(lineChart{title: fmt.Sprintf("%s: pass@k by checkpoint (95%% intervals shaded)", set), xLabel: "checkpoint (iteration)",
			series: ser, width: 640, height: 280, yFixed: true, yFrom: 0, yTo: 1}.html())
		b.WriteString("</div>\n<div class=\"scroll\"><table class=\"evals\"><tr><th>checkpoint</th><th>iteration</th><th>problems × n</th>")
		for _, m := range metrics {
			fmt.Fprintf(b, "<th>%s</th>", esc(m))
		}
		b.WriteString("</tr>\n")
		for _, e := range cps {
			fmt.Fprintf(b, `<tr><td>%s</td><td class="n">%d</td><td class="n">%d × %d</td>`, esc(e.Checkpoint), e.Iteration, e.Problems, e.N)
			for _, m := range metrics {
				v, ok := e.Metrics[m]
				if !ok {
					b.WriteString(`<td class="n">–</td>`)
					continue
				}
				ci := e.Intervals[m]
				fmt.Fprintf(b, `<td class="n" title="95%% interval %s–%s">%s</td>`, f4(ci[0]), f4(ci[1]), f4(v))
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</table></div>\n")
	}
}

func (r *Report) health(b *bytes.Buffer) {
	b.WriteString(`<h2 id="health">Training health</h2><div class="charts">`)
	hs := r.healthSeries
	charts := []lineChart{
		{title: "Reward spread", series: []series{hs("std", func(h *Health) float64 { return h.Reward.Std }),
			hs("min", func(h *Health) float64 { return h.Reward.Min }), hs("max", func(h *Health) float64 { return h.Reward.Max })}},
		{title: "Groups by outcome (fractions)", yFixed: true, yFrom: 0, yTo: 1, series: []series{hs("zero std", func(h *Health) float64 { return h.FracZeroStd }),
			hs("solved all", func(h *Health) float64 { return h.FracSolvedAll }), hs("solved none", func(h *Health) float64 { return h.FracSolvedNone }),
			hs("mixed", func(h *Health) float64 { return h.FracMixed })}},
		{title: "Response length (tokens)", series: []series{hs("mean", func(h *Health) float64 { return h.LengthMean }),
			hs("max", func(h *Health) float64 { return float64(h.LengthMax) })}},
		{title: "Stopped at max_tokens (fraction)", yFixed: true, yFrom: 0, yTo: 1, series: []series{hs("finish length", func(h *Health) float64 { return h.FracLength })}},
		{title: "Entropy", series: []series{hs("entropy", func(h *Health) float64 { return h.Entropy })}},
		{title: "Clipping and ratio", series: []series{hs("clip low", func(h *Health) float64 { return h.ClipLow }),
			hs("clip high", func(h *Health) float64 { return h.ClipHigh }), hs("|ratio-1|", func(h *Health) float64 { return h.RatioDev })}},
		{title: "Gradient norm", series: []series{hs("grad norm", func(h *Health) float64 { return h.GradNorm })}},
		{title: "Staleness (policy updates behind)", series: []series{hs("mean", func(h *Health) float64 { return h.StalenessMean })}},
		{title: "Failed rollouts (count)", counts: true, series: []series{hs("errored", func(h *Health) float64 { return float64(h.Errored) }),
			hs("timed out", func(h *Health) float64 { return float64(h.TimedOut) })}},
		{title: "Top completion share", yFixed: true, yFrom: 0, yTo: 1, series: []series{hs("share", func(h *Health) float64 { return h.TopShare })}},
	}
	if slices.ContainsFunc(r.Run.Health, func(h Health) bool { return !math.IsNaN(h.Disagreement) }) {
		charts = append(charts, lineChart{title: "Judge vs verifier disagreement", yFixed: true, yFrom: 0, yTo: 1,
			series: []series{hs("disagreement", func(h *Health) float64 { return h.Disagreement })}})
	}
	if slices.ContainsFunc(r.Run.Health, func(h Health) bool { return !math.IsNaN(h.FormatMean) }) {
		charts = append(charts, lineChart{title: "Format vs correctness", yFixed: true, yFrom: 0, yTo: 1,
			series: []series{hs("format", func(h *Health) float64 { return h.FormatMean }), hs("correct", func(h *Health) float64 { return h.CorrectMean }),
				hs("format, not correct", func(h *Health) float64 { return h.FormatWithoutCorrect })}})
	}
	for _, c := range charts {
		c.xLabel, c.width, c.height = "iteration", 370, 200
		b.WriteString(c.html())
	}
	b.WriteString("</div>\n")
}

func (r *Report) samples(b *bytes.Buffer) {
	b.WriteString(`<h2 id="samples">Best and worst samples</h2>`)
	if len(r.Run.Samples) == 0 {
		b.WriteString(`<p class="empty">No samples kept.</p>` + "\n")
		return
	}
	fmt.Fprintf(b, "<p class=\"meta\">The last %d iterations, newest first: the highest and lowest total rewards (ties by prompt id).</p>\n", len(r.Run.Samples))
	for i := len(r.Run.Samples) - 1; i >= 0; i-- {
		s := r.Run.Samples[i]
		open := ""
		if i == len(r.Run.Samples)-1 {
			open = " open"
		}
		best, worst := math.NaN(), math.NaN()
		if len(s.Best) > 0 {
			best = s.Best[0].Total
		}
		if len(s.Worst) > 0 {
			worst = s.Worst[0].Total
		}
		fmt.Fprintf(b, "<details%s><summary>iteration %d: best %s, worst %s</summary>\n<div class=\"scroll\"><table><tr><th></th><th>prompt</th><th>completion</th><th>total</th><th>components</th></tr>\n",
			open, s.Iteration, f4(best), f4(worst))
		row := func(kind string, x Sample) {
			names := make([]string, 0, len(x.Components))
			for n := range x.Components {
				names = append(names, n)
			}
			slices.Sort(names)
			var cs []string
			for _, n := range names {
				cs = append(cs, n+" "+label(x.Components[n]))
			}
			prompt := x.PromptID
			if x.Prompt != "" {
				prompt += "\n" + x.Prompt
			}
			if x.Answer != "" {
				prompt += "\nanswer: " + x.Answer
			}
			completion := "<pre>" + esc(x.Completion) + "</pre>"
			if len(x.Turns) > 0 {
				completion = episodeHTML(x.Turns)
			}
			fmt.Fprintf(b, `<tr><td>%s</td><td><pre>%s</pre></td><td>%s<span class="meta">#%d, %d tokens, %s</span></td><td class="n">%s</td><td>%s</td></tr>`+"\n",
				kind, esc(prompt), completion, x.SampleIndex, x.NumTokens, esc(x.FinishReason), f4(x.Total), esc(strings.Join(cs, ", ")))
		}
		for _, x := range s.Best {
			row("best", x)
		}
		for _, x := range s.Worst {
			row("worst", x)
		}
		b.WriteString("</table></div></details>\n")
	}
}

func (r *Report) table(b *bytes.Buffer) {
	fmt.Fprintf(b, `<h2 id="table">Health table</h2><details><summary>every iteration (also in %s when saved)</summary>`+"\n", runs.HealthReportPath)
	cols := []struct {
		name string
		f    func(*Health) string
	}{
		{"iteration", func(h *Health) string { return strconv.Itoa(h.Iteration) }},
		{"samples", func(h *Health) string { return strconv.Itoa(h.Samples) }},
		{"scored", func(h *Health) string { return strconv.Itoa(h.Scored) }},
		{"errored", func(h *Health) string { return strconv.Itoa(h.Errored) }},
		{"timed out", func(h *Health) string { return strconv.Itoa(h.TimedOut) }},
		{"reward mean", func(h *Health) string { return f4(h.Reward.Mean) }},
		{"reward std", func(h *Health) string { return f4(h.Reward.Std) }},
		{"zero std", func(h *Health) string { return f4(h.FracZeroStd) }},
		{"solved all", func(h *Health) string { return f4(h.FracSolvedAll) }},
		{"solved none", func(h *Health) string { return f4(h.FracSolvedNone) }},
		{"length mean", func(h *Health) string { return f4(h.LengthMean) }},
		{"length max", func(h *Health) string { return strconv.Itoa(h.LengthMax) }},
		{"finish length", func(h *Health) string { return f4(h.FracLength) }},
		{"staleness", func(h *Health) string { return f4(h.StalenessMean) }},
		{"top share", func(h *Health) string { return f4(h.TopShare) }},
		{"loss", func(h *Health) string { return f4(h.Loss) }},
		{"kl", func(h *Health) string { return f4(h.KL) }},
		{"entropy", func(h *Health) string { return f4(h.Entropy) }},
		{"grad norm", func(h *Health) string { return f4(h.GradNorm) }},
	}
	b.WriteString("<div class=\"scroll\"><table><tr>")
	for _, c := range cols {
		fmt.Fprintf(b, "<th>%s</th>", c.name)
	}
	b.WriteString("</tr>\n")
	for i := range r.Run.Health {
		b.WriteString("<tr>")
		for _, c := range cols {
			fmt.Fprintf(b, `<td class="n">%s</td>`, c.f(&r.Run.Health[i]))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table></div></details>\n")
}

func (r *Report) compare(b *bytes.Buffer) {
	c := r.Compare
	res := c.Result
	fmt.Fprintf(b, `<h2 id="compare">Comparison: %s (new) against %s (old)</h2>`, esc(c.New), esc(c.Old))
	fmt.Fprintf(b, "<p class=\"meta\">old <code>%s</code> at %s, new <code>%s</code> at %s; comparison %s.<br>%s</p>\n",
		esc(c.Old), esc(shortCommit(c.OldCommit)), esc(c.New), esc(shortCommit(c.NewCommit)), esc(c.From), esc(res.String()))
	var rows []boxRow
	for _, s := range res.Components {
		for side, st := range []*tables.RewardStats{s.Old, s.New} {
			if st == nil {
				continue
			}
			name := s.Name + " (old)"
			if side == 1 {
				name = s.Name + " (new)"
			}
			rows = append(rows, boxRow{label: name, min: st.Min, p10: st.P10, p50: st.P50, p90: st.P90, max: st.Max, mu: st.Mean, color: side})
		}
	}
	b.WriteString(`<div class="charts">`)
	b.WriteString(boxChart("Reward components before and after (min–max, p10–p90 box, median bar, mean dot)", rows))
	old := series{name: "old " + c.Old, points: len(c.PerIteration) <= 30}
	nw := series{name: "new " + c.New, points: len(c.PerIteration) <= 30}
	for _, p := range c.PerIteration {
		old.x, old.y = append(old.x, float64(p.Iteration)), append(old.y, p.Old)
		nw.x, nw.y = append(nw.x, float64(p.Iteration)), append(nw.y, p.New)
	}
	b.WriteString(lineChart{title: "Mean total reward per iteration", xLabel: "iteration", series: []series{old, nw}, width: 560}.html())
	b.WriteString("</div>\n<div class=\"scroll\"><table><tr><th>component</th><th>old mean</th><th>new mean</th><th>old std</th><th>new std</th><th>old min..max</th><th>new min..max</th></tr>\n")
	cell := func(s *tables.RewardStats, f func(*tables.RewardStats) string) string {
		if s == nil {
			return "–"
		}
		return f(s)
	}
	mean := func(s *tables.RewardStats) string { return f4(s.Mean) }
	std := func(s *tables.RewardStats) string { return f4(s.Std) }
	rng := func(s *tables.RewardStats) string { return f4(s.Min) + ".." + f4(s.Max) }
	for _, s := range res.Components {
		fmt.Fprintf(b, `<tr><td>%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td></tr>`+"\n",
			esc(s.Name), cell(s.Old, mean), cell(s.New, mean), cell(s.Old, std), cell(s.New, std), cell(s.Old, rng), cell(s.New, rng))
	}
	b.WriteString("</table></div>\n")
	if len(c.Top) > 0 {
		b.WriteString("<h3>Most changed samples</h3>")
		if last := c.Top[len(c.Top)-1]; c.Tied > 1 {
			fmt.Fprintf(b, "<p class=\"meta\" id=\"ties\">%d samples changed by |delta| = %s; of those tied, the newest iterations are listed.</p>", c.Tied, f4(math.Abs(last.Delta)))
		}
		b.WriteString("<div class=\"scroll\"><table><tr><th>iteration</th><th>prompt</th><th>sample</th><th>old</th><th>new</th><th>delta</th></tr>\n")
		for _, t := range c.Top {
			fmt.Fprintf(b, `<tr><td class="n">%d</td><td>%s</td><td class="n">%d</td><td class="n">%s</td><td class="n">%s</td><td class="n">%+.4f</td></tr>`+"\n",
				t.Iteration, esc(t.PromptID), t.SampleIndex, f4(t.Old), f4(t.New), t.Delta)
		}
		b.WriteString("</table></div>\n")
	}
}

// eitherRescored reports whether ref or other holds a rescoring's report.
func eitherRescored(ctx context.Context, st artifacts.Store, ref, other string) (bool, error) {
	for _, r := range []string{ref, other} {
		rep, err := runs.ReadRescoreReport(ctx, st, r)
		if err != nil {
			return false, err
		}
		if rep != nil {
			return true, nil
		}
	}
	return false, nil
}

// overlay draws this run's curves and the other run's on the same charts:
// the training reward, the loss, and the held-out headline per checkpoint
// of each eval set both runs have.
func (r *Report) overlay(b *bytes.Buffer) {
	a, o := r.Run, r.Other
	fmt.Fprintf(b, `<h2 id="compare">Runs compared: %s and %s</h2>`, esc(a.Ref), esc(o.Ref))
	fmt.Fprintf(b, `<p class="meta"><code>%s</code> at %s (%d iterations), <code>%s</code> at %s (%d iterations).</p>`+"\n",
		esc(a.Ref), esc(shortCommit(a.Commit.ID)), len(a.Health), esc(o.Ref), esc(shortCommit(o.Commit.ID)), len(o.Health))
	b.WriteString(`<div class="charts">`)
	perRun := func(title string, f func(*Health) float64) {
		var ser []series
		for _, run := range []*Run{a, o} {
			s := series{name: run.Ref, points: len(run.Health) <= 30}
			for i := range run.Health {
				s.x, s.y = append(s.x, float64(run.Health[i].Iteration)), append(s.y, f(&run.Health[i]))
			}
			ser = append(ser, s)
		}
		b.WriteString(lineChart{title: title, xLabel: "iteration", series: ser}.html())
	}
	perRun("Training reward (mean total) by run", func(h *Health) float64 { return h.Reward.Mean })
	perRun("Loss by run", func(h *Health) float64 { return h.Loss })
	for _, set := range evalSets(a.Evals) {
		ea, eo := evalsOf(a.Evals, set), evalsOf(o.Evals, set)
		if len(eo) == 0 {
			continue
		}
		metric := headlineMetric(append(slices.Clip(ea), eo...))
		var ser []series
		for _, side := range []struct {
			ref   string
			evals []Eval
		}{{a.Ref, ea}, {o.Ref, eo}} {
			s := series{name: side.ref, points: true}
			for _, e := range side.evals {
				if v, ok := e.Metrics[metric]; ok {
					s.x, s.y = append(s.x, float64(e.Iteration)), append(s.y, v)
				}
			}
			ser = append(ser, s)
		}
		b.WriteString(lineChart{title: fmt.Sprintf("%s on %s per checkpoint by run", metric, set), xLabel: "checkpoint (iteration)",
			series: ser, yFixed: true, yFrom: 0, yTo: 1}.html())
	}
	b.WriteString("</div>\n")
}

// evalsOf keeps the evaluations on set, in checkpoint order.
func evalsOf(evals []Eval, set string) []Eval {
	out := setEvals(evals, set)
	slices.SortFunc(out, func(x, y Eval) int { return x.Iteration - y.Iteration })
	return out
}

// episodeHTML shows an episode turn by turn: each reply marked trained,
// with its token count, or not trained when the episode has no exact
// token sequence; the other turns given.
func episodeHTML(turns []Turn) string {
	var b strings.Builder
	b.WriteString(`<div class="episode">`)
	for _, t := range turns {
		mark, cls := "given", "given"
		switch {
		case t.Tokens != nil:
			mark, cls = fmt.Sprintf("trained · %d tokens", *t.Tokens), "trained"
		case t.Role == "assistant":
			mark, cls = "not trained: no exact token sequence", "untrained"
		}
		fmt.Fprintf(&b, `<div class="turn %s"><span class="who">%s <span class="mark">%s</span></span><pre>%s</pre></div>`, cls, esc(t.Role), mark, esc(t.Content))
	}
	b.WriteString(`</div>`)
	return b.String()
}
