package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/rewards/rescore"
	"github.com/rlpipe/rlpipe/rewards/rewardstest"
	"github.com/rlpipe/rlpipe/ui"
)

// rescoreFixture rescores the fixture run with a reward of 0.75 for
// every scored sample, on branch, and returns the branch.
func rescoreFixture(t testing.TB, st artifacts.Store, branch string) string {
	t.Helper()
	prog := rewardstest.Program(t, "flat.yaml", "components:\n  - name: flat\n    expr: '0.75'\n")
	rep, err := rescore.Run(context.Background(), st, rescore.Options{From: runs.Branch(testRun), Branch: branch, Reward: prog})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Branch
}

// meanReward is the mean total of the scored rows of iteration n's
// rewards table at ref, read here independently of the UI.
func meanReward(t testing.TB, st artifacts.Store, ref string, n int) float64 {
	t.Helper()
	rows := standintest.ReadRows(t, st, ref, runs.IterationPath(n, runs.RewardsFile), tables.Rewards)
	s, k := 0.0, 0
	for _, r := range rows {
		if r.Scored() {
			s += r.Total
			k++
		}
	}
	return s / float64(k)
}

// TestRescoringsOfARun: the run view lists the branch that rescored the
// run, and its curves give, per iteration, the run's mean reward and the
// rescoring's, exactly as the two rewards tables have them.
func TestRescoringsOfARun(t *testing.T) {
	st := newRunStore(t, 3)
	branch := rescoreFixture(t, st, "rescore-flat")
	h := newHandler(t, st, nil)

	var d ui.RunDetail
	get(t, h, "/api/runs/demo", &d)
	if len(d.Rescorings) != 1 || d.Rescorings[0].Branch != branch || d.Rescorings[0].Iterations != 3 || !strings.HasPrefix(d.Rescorings[0].SpecDigest, "sha256:") {
		t.Fatalf("rescorings = %+v, want %s with 3 iterations", d.Rescorings, branch)
	}
	var c ui.RescoreCurves
	if code := get(t, h, "/api/runs/demo/rescorings/"+branch, &c); code != http.StatusOK {
		t.Fatalf("curves: %d", code)
	}
	if c.Run != testRun || c.Branch != branch || len(c.PerIteration) != 3 {
		t.Fatalf("curves = %+v", c)
	}
	for i, p := range c.PerIteration {
		if p.Iteration != i+1 || p.Old == nil || p.New == nil {
			t.Fatalf("point %d = %+v", i, p)
		}
		if want := meanReward(t, st, runs.Branch(testRun), p.Iteration); *p.Old != want {
			t.Errorf("iteration %d: old %v, want the run's %v", p.Iteration, *p.Old, want)
		}
		if *p.New != 0.75 {
			t.Errorf("iteration %d: new %v, want 0.75", p.Iteration, *p.New)
		}
	}

	// Faults: a branch that is not there, one that is not a rescoring.
	for _, tc := range []struct{ path, want string }{
		{"/api/runs/demo/rescorings/nope", `no branch "nope"`},
		{"/api/runs/demo/rescorings/main", `branch "main" is not a rescoring: it has no reports/rescore.json`},
		{"/api/runs/ghost/rescorings/" + branch, `no run "ghost"`},
	} {
		var e struct{ Error string }
		if code := get(t, h, tc.path, &e); code != http.StatusNotFound || !strings.Contains(e.Error, tc.want) {
			t.Errorf("GET %s: %d %q, want 404 with %q", tc.path, code, e.Error, tc.want)
		}
	}
}

// TestBrowserCompareRescoring follows the run view's link to a rescoring
// and finds the run's reward curve and the rescoring's on one chart, each
// dot at the API's value.
func TestBrowserCompareRescoring(t *testing.T) {
	chromium := findChromium(t)
	st := newRunStore(t, 4)
	branch := rescoreFixture(t, st, "rescore-flat")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addr := serveUI(ctx, t, st, time.Hour)
	var c ui.RescoreCurves
	get(t, newHandler(t, st, nil), "/api/runs/demo/rescorings/"+branch, &c)

	page := openPage(ctx, t, chromium)
	page.viewport(ctx, t, 1360, 900)
	page.navigate(ctx, t, "http://"+addr+"/#/runs/demo")
	var hash string
	page.waitFor(ctx, t, &hash, `(() => {
		const a = document.querySelector('a.compare-rescored');
		if (!a) return null;
		a.click();
		return location.hash;
	})()`)
	if want := "#/compare?runs=demo&rescored=" + branch; hash != want {
		t.Fatalf("the rescoring's link went to %q, want %q", hash, want)
	}
	var cmp pageLayout
	page.waitFor(ctx, t, &cmp, `document.querySelector('.compare figure.chart') ? `+layoutJS+` : null`)
	checkLayout(t, "compare demo with its rescoring", cmp)
	keepScreenshot(ctx, t, page, "compare-rescoring.png")
	title := "reward (mean of the rewards tables): demo and its rescorings"
	chart := findChart(cmp, title)
	if chart == nil || len(cmp.Charts) != 1 {
		t.Fatalf("want the one chart %q: %+v", title, cmp.Charts)
	}
	var dots map[string][][2]float64
	page.eval(ctx, t, `(() => {
		const fig = [...document.querySelectorAll('figure.chart')].find((f) => f.querySelector('figcaption').textContent === `+fmt.Sprintf("%q", title)+`);
		const out = {};
		for (const g of fig.querySelectorAll('g.series')) out[g.dataset.name] = [...g.querySelectorAll('circle.pt')].map((c) => [+c.dataset.x, +c.dataset.y]);
		return out;
	})()`, &dots)
	var old, nw [][2]float64
	for _, p := range c.PerIteration {
		old = append(old, [2]float64{float64(p.Iteration), *p.Old})
		nw = append(nw, [2]float64{float64(p.Iteration), *p.New})
	}
	if fmt.Sprint(dots["demo (as run)"]) != fmt.Sprint(old) || fmt.Sprint(dots[branch]) != fmt.Sprint(nw) {
		t.Errorf("dots = %v\nwant demo (as run) %v and %s %v", dots, old, branch, nw)
	}
}
