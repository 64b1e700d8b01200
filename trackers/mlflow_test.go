package trackers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/trackers"
)

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

type mlflowRunData struct {
	Run struct {
		Info struct {
			RunID        string `json:"run_id"`
			ExperimentID string `json:"experiment_id"`
		} `json:"info"`
		Data struct {
			Params []struct{ Key, Value string } `json:"params"`
			Tags   []struct{ Key, Value string } `json:"tags"`
		} `json:"data"`
	} `json:"run"`
}

// mlflowRoundTrip logs a run to a real MLflow server and reads it
// back over the REST API: every metric at its step with its exact value
// and its commit's time, the parameters, the commit tags; then a second
// tracker for the same run (a resume) finds the MLflow run by its tag and
// appends to it.
func mlflowRoundTrip(t *testing.T, uri string) {
	ctx := context.Background()
	run := trackers.Run{Name: "arith", ConfigHash: "sha256:abc",
		Params: map[string]string{"iterations": "2", "eval.k[0]": "1", "environments.judge.env.API_KEY": "<redacted>"}}
	open := func() *trackers.MLflow {
		tr, err := trackers.Open(trackers.MLflowBackend, &trackers.MLflowOptions{URI: uri, Experiment: "rl"})
		if err != nil {
			t.Fatal(err)
		}
		return tr.(*trackers.MLflow)
	}
	first := open()
	if err := first.Start(ctx, run); err != nil {
		t.Fatal(err)
	}
	points := tbPoints()
	if err := first.Log(ctx, points[:2]); err != nil {
		t.Fatal(err)
	}
	// The resumed run: a new tracker, the same MLflow run; step 1 again
	// (a retry) and step 2.
	second := open()
	if err := second.Start(ctx, run); err != nil {
		t.Fatal(err)
	}
	if second.RunID() != first.RunID() {
		t.Fatalf("the resumed run got MLflow run %s, the first %s", second.RunID(), first.RunID())
	}
	if err := second.Log(ctx, points[1:]); err != nil {
		t.Fatal(err)
	}

	api := uri + "/api/2.0/mlflow/"
	var got mlflowRunData
	getJSON(t, api+"runs/get?run_id="+first.RunID(), &got)
	params := map[string]string{}
	for _, p := range got.Run.Data.Params {
		params[p.Key] = p.Value
	}
	want := map[string]string{"iterations": "2", "eval.k.0": "1", "environments.judge.env.API_KEY": "<redacted>"}
	if fmt.Sprint(params) != fmt.Sprint(want) {
		t.Errorf("params: got %v, want %v", params, want)
	}
	tags := map[string]string{}
	for _, p := range got.Run.Data.Tags {
		tags[p.Key] = p.Value
	}
	for k, v := range map[string]string{"rlpipe.run": "arith", "rlpipe.config_hash": "sha256:abc", "rlpipe.commit.000000": "c0",
		"rlpipe.commit.000001": "c1", "rlpipe.commit.000002": "c2", "rlpipe.commit": "c2"} {
		if tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, tags[k], v)
		}
	}
	for _, c := range []struct {
		key, tag string
	}{{"eval/heldout/pass_at_1", "eval/heldout/pass@1"}, {"eval/heldout/pass_at_1/low", "eval/heldout/pass@1/low"},
		{"train/loss", "train/loss"}, {"reward/total", "reward/total"}} {
		var h struct {
			Metrics []struct {
				Value     float64 `json:"value"`
				Timestamp int64   `json:"timestamp"`
				Step      int     `json:"step"`
			} `json:"metrics"`
		}
		getJSON(t, api+"metrics/get-history?run_id="+first.RunID()+"&metric_key="+url.QueryEscape(c.key), &h)
		var wantSteps []string
		for _, p := range points {
			if v, ok := p.Scalars[c.tag]; ok {
				// Step 1, logged by both, is there once: the server keeps
				// one of identical metrics, so a retried Log does no harm.
				wantSteps = append(wantSteps, fmt.Sprintf("%d:%v@%d", p.Step, v, p.Time.UnixMilli()))
			}
		}
		var gotSteps []string
		for _, m := range h.Metrics {
			gotSteps = append(gotSteps, fmt.Sprintf("%d:%v@%d", m.Step, m.Value, m.Timestamp))
		}
		if strings.Join(gotSteps, " ") != strings.Join(wantSteps, " ") {
			t.Errorf("%s: got %v, want %v", c.key, gotSteps, wantSteps)
		}
	}
	var search struct {
		Runs []json.RawMessage `json:"runs"`
	}
	body := fmt.Sprintf(`{"experiment_ids": [%q]}`, got.Run.Info.ExperimentID)
	resp, err := http.Post(api+"runs/search", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&search); err != nil {
		t.Fatal(err)
	}
	if len(search.Runs) != 1 {
		t.Errorf("the experiment holds %d runs, want 1", len(search.Runs))
	}
}

// TestMLflowCredentials sends the token of the environment as a bearer
// token, and no error names it.
func TestMLflowCredentials(t *testing.T) {
	const token = "s3cret-token"
	t.Setenv("MLFLOW_TRACKING_TOKEN", token)
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auths = append(auths, r.Header.Get("Authorization"))
		if r.Method == http.MethodPost && r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s without a JSON content type", r.URL.Path)
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "experiments/get-by-name"):
			fmt.Fprint(w, `{"experiment": {"experiment_id": "7"}}`)
		case strings.HasSuffix(r.URL.Path, "runs/search"):
			fmt.Fprint(w, `{}`)
		case strings.HasSuffix(r.URL.Path, "runs/create"):
			fmt.Fprint(w, `{"run": {"info": {"run_id": "r1"}}}`)
		default:
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error_code": "PERMISSION_DENIED", "message": "no"}`)
		}
	}))
	defer srv.Close()
	tr, err := trackers.Open(trackers.MLflowBackend, &trackers.MLflowOptions{URI: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	err = tr.Start(context.Background(), trackers.Run{Name: "arith", Params: map[string]string{"a": "1"}})
	if err == nil || !strings.Contains(err.Error(), "PERMISSION_DENIED") || strings.Contains(err.Error(), token) {
		t.Errorf("Start: got %v, want a PERMISSION_DENIED error without the token", err)
	}
	for i, a := range auths {
		if a != "Bearer "+token {
			t.Errorf("request %d: Authorization %q", i, a)
		}
	}
	if len(auths) != 4 {
		t.Errorf("%d requests, want get-by-name, search, create, log-batch", len(auths))
	}
}
