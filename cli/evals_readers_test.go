package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/ui"
)

// evalRow is one metric of one evaluation, as the notebooks' helper
// returns it.
type evalRow struct {
	Iteration  int      `json:"iteration"`
	Checkpoint string   `json:"checkpoint"`
	Set        string   `json:"set"`
	Problems   int      `json:"problems"`
	N          int      `json:"n"`
	Metric     string   `json:"metric"`
	Value      float64  `json:"value"`
	Low        *float64 `json:"ci_low"`
	High       *float64 `json:"ci_high"`
}

func evalRows(evals []evalOut) []evalRow {
	var out []evalRow
	for _, e := range evals {
		for m, v := range e.Metrics {
			r := evalRow{Iteration: e.Iteration, Checkpoint: e.Checkpoint, Set: e.Set, Problems: e.Problems, N: e.N, Metric: m, Value: v}
			if iv, ok := e.Intervals[m]; ok {
				r.Low, r.High = &iv[0], &iv[1]
			}
			out = append(out, r)
		}
	}
	sortRows(out)
	return out
}

// sortRows orders rows by checkpoint, set and metric.
func sortRows(rows []evalRow) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Iteration != b.Iteration {
			return a.Iteration < b.Iteration
		}
		if a.Set != b.Set {
			return a.Set < b.Set
		}
		return a.Metric < b.Metric
	})
}

// TestOneReaderOfEvaluations reads one run's evaluations through every
// reader a user has: `status -o json`, `evals -o json`, `report -o json`,
// the UI's /api/runs/RUN and the notebooks' Run.evals(). All give the same
// figures, with every metric at every k (pass^1 and pass^4, not one
// pass^k) and its interval.
func TestOneReaderOfEvaluations(t *testing.T) {
	h, _ := smallArithRun(t)
	var status runStatusOut
	h.json(&status, "status", "arith")
	if len(status.Evals) != 3 {
		t.Fatalf("status: %d evaluations, want checkpoints 0, 2 and 4", len(status.Evals))
	}
	for _, m := range []string{"avg@4", "pass@1", "pass@4", "pass^1", "pass^4", "maj@4", "exact_pass@1"} {
		if _, ok := status.Evals[2].Metrics[m]; !ok {
			t.Errorf("status: checkpoint %s has no %s: %v", status.Evals[2].Checkpoint, m, status.Evals[2].Metrics)
		}
	}
	if iv := status.Evals[2].Intervals["pass^4"]; !(iv[0] <= status.Evals[2].Metrics["pass^4"] && status.Evals[2].Metrics["pass^4"] <= iv[1]) {
		t.Errorf("pass^4 %v outside its interval %v", status.Evals[2].Metrics["pass^4"], iv)
	}
	var evals evalsOut
	h.json(&evals, "evals", "arith")
	var report reportOut
	h.json(&report, "report", "arith", "--out", filepath.Join(h.dir, "r.html"))
	want := evalRows(status.Evals)
	for name, got := range map[string][]evalOut{"evals": evals.Evals, "report": report.Evals} {
		if !reflect.DeepEqual(got, status.Evals) {
			t.Errorf("%s -o json evals differ from status's:\n got %+v\nwant %+v", name, got, status.Evals)
		}
	}

	ctx := context.Background()
	st, err := local.Open(ctx, h.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ui.New(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/api/runs/arith", nil))
	st.Close()
	var detail ui.RunDetail
	if err := json.Unmarshal(rec.Body.Bytes(), &detail); rec.Code != 200 || err != nil {
		t.Fatalf("GET /api/runs/arith: %d %v %s", rec.Code, err, rec.Body.Bytes())
	}
	if !reflect.DeepEqual(detail.Evals, status.Evals) {
		t.Errorf("the UI's evals differ from status's:\n got %+v\nwant %+v", detail.Evals, status.Evals)
	}

	// The notebooks' helper, run by the Python the notebooks run on.
	py := os.Getenv("RLPIPE_PYTHON") // as scripts/notebook-deps.sh
	if py == "" {
		py = "/usr/bin/python3"
	}
	if exec.Command(py, "-c", "import pandas").Run() != nil {
		t.Skip("no Python with pandas (scripts/notebook-deps.sh installs it); the notebooks' reader is not compared")
	}
	bin := filepath.Join(t.TempDir(), "rlpipe")
	wrapper := "#!/bin/sh\nexec env " + envCLIArgs + "=\"$(" + py + " -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \"$@\")\" " + os.Args[0] + " -test.run='^$'\n"
	if err := os.WriteFile(bin, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	nb, _ := filepath.Abs("../notebooks")
	cmd := exec.Command(py, "-c", `import json, sys, rlpipe_data
df = rlpipe_data.Run("runs-arith", store=sys.argv[1]).evals()
rows = df.astype(object).where(df.notna(), None).to_dict("records")
print(json.dumps(rows, default=lambda x: x.item()))`, h.store)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+nb, "RLPIPE_BIN="+bin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Run.evals(): %v %s", err, err.(*exec.ExitError).Stderr)
	}
	var rows []evalRow
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("Run.evals(): %v in %s", err, out)
	}
	if len(rows) != len(want) {
		t.Fatalf("Run.evals(): %d rows, want %d", len(rows), len(want))
	}
	sortRows(rows)
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("Run.evals() differs from status's evals:\n got %+v\nwant %+v", rows, want)
	}
	// The columns the notebooks pivot by: family and k name the metric
	// as runs.MetricName does ("pass@k" at 4 is "pass@4"; exact_pass@1 is
	// itself at 1), and path is the summary table status read.
	var split []struct {
		Iteration int    `json:"iteration"`
		Set       string `json:"set"`
		Metric    string `json:"metric"`
		Family    string `json:"family"`
		K         int    `json:"k"`
		Path      string `json:"path"`
	}
	if err := json.Unmarshal(out, &split); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, e := range status.Evals {
		paths[strconv.Itoa(e.Iteration)+" "+e.Set] = e.Path
	}
	for _, r := range split {
		atK := r.Metric != "exact_pass@1" // every other metric of the summary is one at k
		if got := runs.MetricName(r.Family, r.K); got != r.Metric || r.K < 1 || atK == (r.Family == r.Metric) {
			t.Errorf("Run.evals(): %s split into family %q and k %d, which name %s", r.Metric, r.Family, r.K, got)
		}
		if want := paths[strconv.Itoa(r.Iteration)+" "+r.Set]; r.Path != want {
			t.Errorf("Run.evals(): checkpoint %d on %s read from %q, status from %q", r.Iteration, r.Set, r.Path, want)
		}
	}
}
