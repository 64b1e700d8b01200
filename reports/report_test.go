package reports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// checkSelfContained fails when a page could load anything.
func checkSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"http://", "https://", "<script", "<link", "<img", "@import", "url("} {
		if strings.Contains(page, bad) {
			i := strings.Index(page, bad)
			t.Errorf("page holds %q: …%s…", bad, page[max(i-80, 0):min(i+80, len(page))])
		}
	}
}

// buildReport is the report of ref, which must build.
func buildReport(t *testing.T, st artifacts.Store, ref string, opts *Options) *Report {
	t.Helper()
	rep, err := Build(context.Background(), st, ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// renderHTML is the HTML report of ref, which must render.
func renderHTML(t *testing.T, st artifacts.Store, ref string, opts *Options) []byte {
	t.Helper()
	page, err := HTML(context.Background(), st, ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

func TestEndToEndLengthHack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := lengthHackStore(t, "runs-hack", 20, lengthHackingEvals())

	rep := buildReport(t, st, "runs-hack", nil)
	var rules []string
	for _, a := range rep.Alarms {
		rules = append(rules, a.Rule+"@"+strconv.Itoa(a.Iteration)+"-"+strconv.Itoa(a.LastIteration))
	}
	want := []string{RuleRewardUpHeldoutFlat + "@10-20", RuleLengthDriftUp + "@10-20"}
	if strings.Join(rules, " ") != strings.Join(want, " ") {
		t.Fatalf("alarms = %v, want %v\n%+v", rules, want, rep.Alarms)
	}
	// The health the alarms read, from the stored tables.
	h := rep.Run.Health[19]
	if h.Iteration != 20 || h.LengthMean != 21 || h.Scored != 32 || h.Components["correct"].Mean != 0.25 || h.KL != 0.02 || h.Groups != 8 || h.FracMixed != 1 {
		t.Fatalf("iteration 20 health = %+v", h)
	}

	page := string(rep.HTML())
	checkSelfContained(t, page)
	for _, want := range []string{
		`<span id="iterations">20 iterations (1–20)</span>`,
		"<svg", "<path", "<polygon", // lines and interval bands
		`>0.3000</td>`, `>0.5600</td>`, `>0.2990</td>`, // pass@1, pass@4, exact_pass@1 in the eval table
		"<th>pass@1</th><th>pass@4</th><th>exact_pass@1</th>",
		RuleLengthDriftUp, RuleRewardUpHeldoutFlat,
		"heldout exact_pass@1, base → iteration-000020",
		"iteration 20: best", "q0\n0+0=\nanswer: 0",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(page, "<svg"); n < 15 {
		t.Errorf("%d charts, want at least 15", n)
	}
	if len(page) > 400<<10 {
		t.Errorf("page is %d bytes", len(page))
	}

	// The headline reward is the mean of the last 5 iterations, which it
	// names, beside the last one's own (noisy) figure; the failed-rollouts
	// panel, all 0, runs from 0 to 1.
	for _, want := range []string{
		`<div class="card">reward, mean of iterations 16–20 (iteration 20 alone: 0.8550)<b>0.7750</b></div>`,
		`<div class="card">accuracy, mean of iterations 16–20 (iteration 20 alone: 0.2500)<b>0.2500</b></div>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if _, failed, ok := strings.Cut(page, `title="Failed rollouts (count)"`); !ok {
		t.Errorf("page lacks the failed rollouts panel")
	} else if ticks := regexp.MustCompile(`text-anchor="end">([^<]*)</text>`).FindAllStringSubmatch(strings.SplitN(failed, "</figure>", 2)[0], -1); len(ticks) != 2 || ticks[0][1] != "0" || ticks[1][1] != "1" {
		t.Errorf("the failed rollouts panel's y ticks are %q, want 0 and 1", ticks)
	}

	// Same store state, same bytes.
	again, err := HTML(ctx, st, "runs-hack", nil)
	if err != nil || !bytes.Equal(again, []byte(page)) {
		t.Fatalf("second report differs (err %v)", err)
	}
	// Commit ids depend on the store's creation time; the rest must not.
	id := rep.Run.Commit.ID
	page = strings.ReplaceAll(strings.ReplaceAll(page, id, "COMMIT"), id[:12], "COMMIT")
	// The stylesheet is html.go's constant, inlined once: the golden holds
	// what this report says, not a second copy of the stylesheet.
	style := "<style>" + css + "</style>"
	if n := strings.Count(page, style); n != 1 {
		t.Fatalf("page inlines the stylesheet %d times, want 1", n)
	}
	page = strings.Replace(page, style, "<style>/* css */</style>", 1)
	golden(t, "length_hack.html", []byte(page))
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./reports -run %s -update)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file (%d bytes, golden %d); if the change is intended, run go test ./reports -run %s -update", path, len(got), len(want), t.Name())
	}
}

func TestReportWithoutEvals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	writeRun(t, st, "runs-young", 3, func(it int) iteration {
		trajs, rws := handMade()
		return iteration{trajs: trajs, rewards: rws}
	}, nil)
	out := filepath.Join(t.TempDir(), "report.html")
	rep, err := WriteHTML(ctx, st, "runs-young", out, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	checkSelfContained(t, page)
	for _, want := range []string{`id="no-evals"`, "No evaluations yet", "3 iterations (1–3)", "0 evaluated checkpoints", "not reported"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// "42" answers half the samples, of two prompts, every iteration.
	if len(rep.Alarms) != 1 || rep.Alarms[0].Rule != RuleCompletionsDominate || len(rep.Run.Evals) != 0 || len(rep.Run.Samples) != 3 {
		t.Fatalf("report: %d alarms, %d evals, %d sample iterations", len(rep.Alarms), len(rep.Run.Evals), len(rep.Run.Samples))
	}
	// The best samples come from different prompts; the worst are the
	// lowest totals.
	s := rep.Run.Samples[2]
	if len(s.Best) != 2 || s.Best[0].PromptID != "p1" || s.Best[1].PromptID != "p3" || s.Worst[0].Total != 0 || s.Worst[0].PromptID != "p2" {
		t.Fatalf("samples = %+v", s)
	}
}

func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	if _, err := Load(ctx, st, "main", nil); !errors.Is(err, ErrNoIterations) || !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("main: err = %v, want ErrNoIterations", err)
	}
	if _, err := Load(ctx, st, "nope", nil); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("nope: err = %v, want not found", err)
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := lengthHackStore(t, "runs-a", 4, nil)
	src, err := st.ResolveRef(ctx, "runs-a")
	if err != nil {
		t.Fatal(err)
	}
	// A rescored branch: the same trajectories, correctness only.
	if _, err := st.CreateBranch(ctx, "rescore-x", "runs-a"); err != nil {
		t.Fatal(err)
	}
	var old, nw []tables.IterationRewards
	for it := 1; it <= 4; it++ {
		x := lengthHacking(it)
		var rows []tables.Reward
		for _, r := range x.rewards {
			r.Components = map[string]float64{"correct": r.Components["correct"]}
			r.Total, r.SpecDigest = r.Components["correct"], "sha256:correct"
			rows = append(rows, r)
		}
		tb, _ := tables.RewardsWith("correct")
		putTable(t, st, "rescore-x", runs.IterationDir(it)+"/"+"rewards.parquet", tb, rows)
		old, nw = append(old, tables.IterationRewards{Iteration: it, Rows: x.rewards}), append(nw, tables.IterationRewards{Iteration: it, Rows: rows})
	}
	commit(t, st, "rescore-x", "rescore", 100)

	c, err := Compare(ctx, st, "runs-a", "rescore-x")
	if err != nil {
		t.Fatal(err)
	}
	if c.Old != "runs-a" || c.New != "rescore-x" || c.From != "computed" || c.OldCommit != src.ID || len(c.PerIteration) != 4 || c.Result.Scored != 128 {
		t.Fatalf("comparison = %+v", c)
	}
	// Per iteration: old mean is the length reward, new is 0.25.
	if p := c.PerIteration[0]; math.Abs(p.Old-(0.08+0.015)) > 1e-12 || p.New != 0.25 {
		t.Fatalf("iteration 1: %+v", p)
	}

	// With the rescoring's own report committed, it is reused, and the
	// rescored side is the new one whichever side the report is of.
	stored := tables.RescoreReport{From: "runs-a", FromCommit: src.ID, Branch: "rescore-x", Comparison: tables.CompareRewards(old, nw, 3)}
	b, _ := json.Marshal(stored)
	put(t, st, "rescore-x", runs.RescoreReportPath, b)
	commit(t, st, "rescore-x", "report", 101)
	c, err = Compare(ctx, st, "rescore-x", "runs-a")
	if err != nil {
		t.Fatal(err)
	}
	if c.Old != "runs-a" || c.New != "rescore-x" || c.From != "rescore-x:reports/rescore.json" || len(c.Result.Top) != 3 {
		t.Fatalf("comparison from the stored report = %+v", c)
	}

	page := renderHTML(t, st, "runs-a", &Options{Compare: "rescore-x"})
	checkSelfContained(t, string(page))
	for _, want := range []string{"No alarm", `id="compare"`, "Comparison: rescore-x (new) against runs-a (old)", "length (old)", "correct (new)", "Most changed samples", "<td>total</td>"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Ranges print with the same 4 decimals as the means ("0.0000..1.0000",
	// not "0..1"), and equal changes list the newest iterations first.
	if !bytes.Contains(page, []byte(`<td class="n">0.0000..1.0000</td>`)) {
		t.Errorf("page lacks the correct component's range 0.0000..1.0000")
	}
	for i := 1; i < len(c.Top); i++ {
		a, z := c.Top[i-1], c.Top[i]
		if math.Abs(a.Delta) == math.Abs(z.Delta) && a.Iteration < z.Iteration {
			t.Errorf("most changed samples: iteration %d listed before iteration %d at the same |delta| %v", a.Iteration, z.Iteration, a.Delta)
		}
	}
	if _, err := Compare(ctx, st, "runs-a", "main"); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("compare with main: %v", err)
	}
}

func TestHealthTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := lengthHackStore(t, "runs-h", 3, nil)
	run, err := Load(ctx, st, "runs-h", &LoadOptions{SampleIterations: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Samples) != 0 {
		t.Fatalf("samples kept: %d", len(run.Samples))
	}
	// A row without a train metrics file has null optimizer columns.
	rows := append(run.Health, ComputeHealth(4, nil, nil, nil, nil))
	c, err := SaveHealth(ctx, st, "runs-h", rows, "health table")
	if err != nil || c.ID == "" {
		t.Fatalf("save: %v", err)
	}
	b, err := readObject(ctx, st, "runs-h", HealthPath)
	if err != nil {
		t.Fatal(err)
	}
	f, err := tables.OpenFile(bytes.NewReader(b), int64(len(b)), HealthPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if name, v := f.Table(); name != HealthTableName || v != HealthTableVersion || f.NumRows() != 4 {
		t.Fatalf("table %s v%d, %d rows", name, v, f.NumRows())
	}
	var got []map[string]any
	for r, err := range f.Rows(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	r1, r4 := got[0], got[3]
	if r1["iteration"] != int64(1) || r1["response_length_mean"] != 2.0 || r1["r_correct_mean"] != 0.25 || r1["kl"] != 0.001 || r1["judge_verifier_disagreement"] != nil {
		t.Fatalf("row 1 = %v", r1)
	}
	if r4["iteration"] != int64(4) || r4["kl"] != nil || r4["r_length_max"] != nil || r4["samples"] != int64(0) {
		t.Fatalf("row 4 = %v", r4)
	}
	names := f.Schema().Fields()
	if names[0].Name != "iteration" || names[len(names)-1].Name != "r_length_max" {
		t.Fatalf("columns %v", f.Schema())
	}
	// Same rows, same bytes.
	var a, b2 bytes.Buffer
	if err := WriteHealth(&a, rows); err != nil {
		t.Fatal(err)
	}
	if err := WriteHealth(&b2, rows); err != nil || !bytes.Equal(a.Bytes(), b2.Bytes()) || !bytes.Equal(a.Bytes(), b) {
		t.Fatalf("health table bytes differ (err %v)", err)
	}
}

func TestChartsHandleGaps(t *testing.T) {
	c := lineChart{title: "t <&>", series: []series{{name: "a", x: []float64{1, 2, 3, 4}, y: []float64{1, math.NaN(), 3, 4}}}}
	page := c.html()
	if !strings.Contains(page, `<figcaption class="title" title="t &lt;&amp;&gt;">t &lt;&amp;&gt;</figcaption>`) {
		t.Fatalf("title not escaped: %s", page)
	}
	d := regexp.MustCompile(`<path class="line"[^>]* d="([^"]*)"`).FindStringSubmatch(page)
	if d == nil || strings.Count(d[1], "M") != 2 || !regexp.MustCompile(`^M56.0,\d+\.\d M`).MatchString(d[1]) {
		t.Fatalf("a gap should start a new subpath: %s", page)
	}
	empty := lineChart{title: "none", series: []series{{name: "a", x: []float64{1}, y: []float64{math.NaN()}}}}.html()
	if !strings.Contains(empty, "not reported") {
		t.Fatalf("empty chart = %s", empty)
	}
}

// The axis covers the data: the first tick is at or below the minimum and
// the last at or above the maximum, on round steps.
func TestAxisRangeCoversData(t *testing.T) {
	for _, c := range []struct {
		lo, hi         float64
		from, to, step float64
	}{
		{2.06, 2.46, 2, 2.5, 0.1}, // the eval iterations' task times
		{0, 2.46, 0, 3, 1},        // the same bars stacked from 0
		{0, 1, 0, 1, 0.25},
		{0.1, 0.3, 0.1, 0.3, 0.05},
		{-0.37, 0.81, -0.5, 1, 0.5},
		{5, 5, 4.5, 5.5, 0.25},
		{0.30000000000000004, 0.7000000000000001, 0.3, 0.7, 0.1},
		{1e-3, 0.0246, 0, 0.03, 0.01},
	} {
		from, to, step := axisRange(c.lo, c.hi, 4)
		if from > c.lo || to < c.hi {
			t.Errorf("axisRange(%v, %v) = %v..%v: does not cover the data", c.lo, c.hi, from, to)
		}
		if math.Abs(from-c.from) > 1e-9 || math.Abs(to-c.to) > 1e-9 || math.Abs(step-c.step) > 1e-12 {
			t.Errorf("axisRange(%v, %v) = %v..%v step %v, want %v..%v step %v", c.lo, c.hi, from, to, step, c.from, c.to, c.step)
		}
		ts := ticks(from, to, step)
		if ts[0] != from || ts[len(ts)-1] != to {
			t.Errorf("ticks(%v, %v, %v) = %v", from, to, step, ts)
		}
	}
	// Every value drawn lies between the first and the last grid line.
	c := lineChart{title: "task time", series: []series{{name: "s", x: []float64{1, 2, 3, 4}, y: []float64{1.5, 2.06, 1.5, 2.46}}}}
	page := c.html()
	top, bottom := padTop, 200-padBottom
	for _, m := range regexp.MustCompile(`<line x1="56.0" y1="([\d.]+)"`).FindAllStringSubmatch(page, -1) {
		y, _ := strconv.ParseFloat(m[1], 64)
		if y < top || y > bottom {
			t.Errorf("grid line at y %v outside the plot %v..%v", y, top, bottom)
		}
	}
	if !strings.Contains(page, `<line x1="56.0" y1="10.0" x2="448.0" y2="10.0"/><text class="tick" x="52.0" y="14.0" text-anchor="end">2.50</text>`) {
		t.Errorf("the top grid line is not the 2.50 tick at the plot's top: %s", page)
	}
	for _, m := range regexp.MustCompile(`[ML](\d+\.\d),(\d+\.\d)`).FindAllStringSubmatch(page, -1) {
		y, _ := strconv.ParseFloat(m[2], 64)
		if y < top || y > bottom {
			t.Errorf("point %s,%s outside the plot %v..%v", m[1], m[2], top, bottom)
		}
	}
}

// Series equal point for point (NaNs aligned) are drawn once, named
// "a = b", with a note; series that differ anywhere are not.
func TestIdenticalSeriesDrawnOnce(t *testing.T) {
	nan := math.NaN()
	x := []float64{1, 2, 3}
	ss := []series{
		{name: "reward", x: x, y: []float64{0.25, nan, 0.5}},
		{name: "loss", x: x, y: []float64{0.1, 0.2, 0.3}},
		{name: "accuracy", x: x, y: []float64{0.25, nan, 0.5}, lo: []float64{0, 0, 0}, hi: []float64{1, 1, 1}},
		{name: "almost", x: x, y: []float64{0.25, nan, 0.5000000001}},
		{name: "policy loss", x: x, y: []float64{0.1, 0.2, 0.3}},
		{name: "gap", x: x, y: []float64{0.25, 0.3, 0.5}},
		{name: "none", x: x, y: []float64{nan, nan, nan}},
		{name: "none either", x: x, y: []float64{nan, nan, nan}},
	}
	for i := range ss {
		ss[i].color = i
	}
	out, merged := mergeIdentical(ss)
	var names []string
	for _, s := range out {
		names = append(names, s.name)
	}
	if got := strings.Join(names, ", "); got != "reward = accuracy, loss = policy loss, almost, gap, none, none either" {
		t.Fatalf("merged series: %s", got)
	}
	if strings.Join(merged, "; ") != "reward = accuracy; loss = policy loss" || out[0].color != 0 || out[0].lo == nil || out[1].color != 1 {
		t.Fatalf("merged %v; first %+v", merged, out[0])
	}

	c := lineChart{title: "Training reward and accuracy", series: []series{ss[0], ss[1], ss[2], ss[4]}, why: map[string]string{"reward = accuracy": "a 0/1 reward"}}
	page := c.html()
	for _, want := range []string{
		`<span><i class="key" style="border-color:#0072B2"></i>reward = accuracy</span>`,
		`<span><i class="key" style="border-color:#E69F00"></i>loss = policy loss</span>`,
		`<p class="same">identical series drawn once: reward = accuracy; loss = policy loss (a 0/1 reward)</p>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("chart lacks %s:\n%s", want, page)
		}
	}
	if n := strings.Count(page, `<path class="line"`); n != 2 {
		t.Errorf("%d lines drawn, want 2", n)
	}
	// The title, the legend and the plot are rows of one figure, in that
	// order.
	fig := regexp.MustCompile(`^<figure class="chart" style="width:460px"><figcaption class="title" title="[^"]*">[^<]*</figcaption><div class="legend">.*</div><svg class="plot" .*</svg><p class="same">.*</p></figure>$`)
	if !fig.MatchString(page) {
		t.Errorf("chart layout: %s", page)
	}
	if page := (lineChart{title: "t", series: ss[3:4]}).html(); strings.Contains(page, "identical") {
		t.Errorf("a lone series gets a note: %s", page)
	}
}

// Every table of the report scrolls inside its own box, so a wide one
// does not widen the page.
func TestReportTablesScroll(t *testing.T) {
	t.Parallel()
	st := lengthHackStore(t, "runs-hack", 4, lengthHackingEvals())
	page := renderHTML(t, st, "runs-hack", nil)
	tables := strings.Count(string(page), "<table")
	if tables < 3 || strings.Count(string(page), `<div class="scroll"><table`) != tables || strings.Count(string(page), `</table></div>`) != tables {
		t.Errorf("%d tables, %d in a scroll box", tables, strings.Count(string(page), `<div class="scroll"><table`))
	}
	if !strings.Contains(string(page), `.scroll{overflow-x:auto;max-width:100%}`) {
		t.Errorf("no overflow rule for the scroll boxes")
	}
}

// A trainer at β = 0 writes kl as null: the health table holds null, the
// KL panel says it was not computed, and its cells show –, not 0.
func TestKLNotComputed(t *testing.T) {
	st := newStore(t)
	writeRun(t, st, "runs-beta0", 4, func(it int) iteration {
		x := lengthHacking(it)
		x.metrics = map[string]any{"loss": 0.01, "kl": nil, "entropy": 1.0}
		return x
	}, nil)
	rep := buildReport(t, st, "runs-beta0", nil)
	for _, h := range rep.Run.Health {
		if !math.IsNaN(h.KL) {
			t.Errorf("iteration %d: kl %v, want not computed (NaN in memory, null in the table)", h.Iteration, h.KL)
		}
	}
	page := string(rep.HTML())
	if !strings.Contains(page, notComputedKL) {
		t.Errorf("the KL panel does not say it was not computed")
	}
	// The health table's loss column (0.0100), then kl: not computed.
	if n := strings.Count(page, `<td class="n">0.0100</td><td class="n">–</td>`); n != 4 {
		t.Errorf("%d of 4 iterations show kl as –", n)
	}
}

// TestCompareRuns: --compare with another run (neither side a rescoring)
// overlays the two runs' curves, each dot at its run's figure.
func TestCompareRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	writeRun(t, st, "runs-a", 3, lengthHacking, map[int][]tables.EvalSummaryRow{0: summaryRows(0, 0.30, 0.5, 0.3), 2: summaryRows(2, 0.35, 0.6, 0.375)})
	writeRun(t, st, "runs-b", 2, lengthHacking, map[int][]tables.EvalSummaryRow{0: summaryRows(0, 0.30, 0.5, 0.3), 2: summaryRows(2, 0.45, 0.7, 0.4625)})
	rep := buildReport(t, st, "runs-a", &Options{Compare: "runs-b"})
	if rep.Compare != nil || rep.Other == nil || rep.Other.Ref != "runs-b" || len(rep.Other.Health) != 2 {
		t.Fatalf("compare with a run: comparison %v, other %+v", rep.Compare, rep.Other)
	}
	page := string(rep.HTML())
	checkSelfContained(t, page)
	want := []string{`id="compare"`, "Runs compared: runs-a and runs-b", "Training reward (mean total) by run", "exact_pass@1 on heldout per checkpoint by run",
		"<title>runs-a at 2: 0.3750</title>", "<title>runs-b at 2: 0.4625</title>", "<title>runs-a at 0: 0.3000</title>"}
	for _, it := range rep.Run.Health {
		want = append(want, fmt.Sprintf("<title>runs-a at %d: %.4f</title>", it.Iteration, it.Reward.Mean))
	}
	for _, it := range rep.Other.Health {
		want = append(want, fmt.Sprintf("<title>runs-b at %d: %.4f</title>", it.Iteration, it.Reward.Mean))
	}
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	if strings.Contains(page, "Comparison:") {
		t.Error("two runs got a sample-by-sample reward comparison")
	}
	if _, err := Build(ctx, st, "runs-a", &Options{Compare: "runs-nope"}); err == nil || !strings.Contains(err.Error(), "compare with runs-nope") {
		t.Fatalf("compare with a missing run: %v", err)
	}
}

// The y ticks of a chart all print with the decimals its step needs
// ("0.50" beside "1.00", never "1" beside "0.8" or "7.500"), and a chart
// of counts that are all 0 runs from 0 to 1 in whole numbers (not −0.5 to
// 0.5).
func TestTickLabels(t *testing.T) {
	tickRE := regexp.MustCompile(`<text class="tick" x="52.0" y="[\d.]+" text-anchor="end">([^<]*)</text>`)
	for _, c := range []struct {
		name  string
		chart lineChart
		want  []string
	}{
		{"quarters", lineChart{series: []series{{name: "s", x: []float64{1, 2, 3, 4}, y: []float64{1.5, 2.06, 1.5, 2.46}}}},
			[]string{"1.50", "1.75", "2.00", "2.25", "2.50"}},
		{"fractions", lineChart{yFixed: true, yFrom: 0, yTo: 1, series: []series{{name: "s", x: []float64{1, 2}, y: []float64{0.2, 0.8}}}},
			[]string{"0.00", "0.25", "0.50", "0.75", "1.00"}},
		{"halves", lineChart{series: []series{{name: "s", x: []float64{1, 2}, y: []float64{0, 9.5}}}},
			[]string{"0.0", "2.5", "5.0", "7.5", "10.0"}},
		{"counts all 0", lineChart{counts: true, series: []series{{name: "errored", x: []float64{1, 2, 3}, y: []float64{0, 0, 0}}}},
			[]string{"0", "1"}},
		{"counts", lineChart{counts: true, series: []series{{name: "errored", x: []float64{1, 2, 3}, y: []float64{0, 3, 1}}}},
			[]string{"0", "1", "2", "3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, m := range tickRE.FindAllStringSubmatch(c.chart.html(), -1) {
				got = append(got, m[1])
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("y ticks %q, want %q", got, c.want)
			}
		})
	}
}

// The most changed samples: by |delta|, ties newest iteration first (then
// prompt and sample), with the number of samples tied at the last one.
func TestMostChanged(t *testing.T) {
	ch := func(it int, p string, d float64) tables.RewardChange {
		return tables.RewardChange{Iteration: it, PromptID: p, Delta: d}
	}
	for _, c := range []struct {
		name     string
		all      []tables.RewardChange
		n        int
		want     []tables.RewardChange
		wantTied int
	}{
		{"none", nil, 3, nil, 0},
		{"ties from iteration 1 give way to the newest",
			[]tables.RewardChange{ch(1, "a", 1), ch(1, "b", -1), ch(2, "a", 1), ch(3, "a", -1), ch(3, "b", 0.5)}, 2,
			[]tables.RewardChange{ch(3, "a", -1), ch(2, "a", 1)}, 4},
		{"a larger change first, whatever its iteration",
			[]tables.RewardChange{ch(1, "a", 2), ch(3, "a", 1), ch(2, "b", 1)}, 2,
			[]tables.RewardChange{ch(1, "a", 2), ch(3, "a", 1)}, 2},
		{"no tie", []tables.RewardChange{ch(1, "a", 0.3), ch(2, "a", 0.2)}, 5,
			[]tables.RewardChange{ch(1, "a", 0.3), ch(2, "a", 0.2)}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			top, tied := mostChanged(c.all, c.n)
			if !slices.Equal(top, c.want) || tied != c.wantTied {
				t.Errorf("mostChanged = %v, %d tied; want %v, %d", top, tied, c.want, c.wantTied)
			}
		})
	}
}
