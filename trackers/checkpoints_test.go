package trackers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/trackers"
	"github.com/rlpipe/rlpipe/trackers/trackertest"
)

// checkpointStore is an embedded store whose branch runs-ck holds
// iteration 2's adapter (two files) and its evaluation on heldout,
// committed; it returns the commit.
func checkpointStore(t *testing.T) (artifacts.Store, string) {
	t.Helper()
	ctx := context.Background()
	st := artifactstest.NewLocal(t)
	if _, err := st.CreateBranch(ctx, runs.Branch("ck"), "main"); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{runs.AdapterConfigFile: `{"r": 8}`, "adapter_model.safetensors": "weights"} {
		artifactstest.Put(t, st, runs.Branch("ck"), runs.AdapterPath(2)+"/"+name, []byte(body))
	}
	// Checkpoint 2's evaluation on heldout: pass@1 0.5.
	rows := []tables.EvalSummaryRow{{Checkpoint: "iteration-000002", Evalset: "heldout", K: 1, N: 2, Metric: tables.MetricPassAtK, Value: 0.5, CILow: 0.25, CIHigh: 0.75, NumProblems: 2}}
	artifactstest.PutTable(t, st, runs.Branch("ck"), runs.EvalPath(2, "heldout", runs.SummaryFile), tables.EvalSummary, rows)
	c, err := st.Commit(ctx, runs.Branch("ck"), "iteration 2", nil)
	if err != nil {
		t.Fatal(err)
	}
	return st, c.ID
}

// fakeMLflow is a hand-written MLflow server: one experiment, one run
// whose artifact root is root, log-batch accepted; PUTs to the artifact
// proxy are kept (or refused with 403 when refuse is set).
type fakeMLflow struct {
	root   string
	refuse bool
	mu     sync.Mutex
	puts   map[string]string // path below the proxy → body
}

func (f *fakeMLflow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const proxy = "/api/2.0/mlflow-artifacts/artifacts/"
	switch {
	case strings.HasPrefix(r.URL.Path, proxy) && r.Method == http.MethodPut:
		if f.refuse {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error_code": "PERMISSION_DENIED", "message": "uploads are off"}`)
			return
		}
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.puts[strings.TrimPrefix(r.URL.Path, proxy)] = string(b)
		f.mu.Unlock()
	case strings.HasSuffix(r.URL.Path, "experiments/get-by-name"):
		fmt.Fprint(w, `{"experiment": {"experiment_id": "1"}}`)
	case strings.HasSuffix(r.URL.Path, "runs/search"):
		json.NewEncoder(w).Encode(map[string]any{"runs": []any{map[string]any{"info": map[string]any{"run_id": "r1", "status": "RUNNING", "artifact_uri": f.root}}}})
	case strings.HasSuffix(r.URL.Path, "runs/log-batch"):
		fmt.Fprint(w, `{}`)
	default:
		http.NotFound(w, r)
	}
}

// TestMLflowKeepCheckpoint keeps iteration 2's adapter through
// Backfill's path (KeepCheckpoint with the store's files) in MLflow runs
// of each kind of artifact root: through the server's artifact proxy
// (mlflow-artifacts:/), copied into a local root, refused by the proxy,
// and a root rlpipe does not write (s3://), each with its exact result.
func TestMLflowKeepCheckpoint(t *testing.T) {
	st, commit := checkpointStore(t)
	local := t.TempDir()
	for _, c := range []struct {
		name, root string
		refuse     bool
		wantPuts   map[string]string
		wantFiles  map[string]string // below local
		wantErr    string
	}{
		{name: "proxied", root: "mlflow-artifacts:/1/r1/artifacts",
			wantPuts: map[string]string{"1/r1/artifacts/checkpoints/iteration-000002/adapter_config.json": `{"r": 8}`,
				"1/r1/artifacts/checkpoints/iteration-000002/adapter_model.safetensors": "weights"}},
		{name: "local", root: local,
			wantFiles: map[string]string{"checkpoints/iteration-000002/adapter_config.json": `{"r": 8}`,
				"checkpoints/iteration-000002/adapter_model.safetensors": "weights"}},
		{name: "refused", root: "mlflow-artifacts:/1/r1/artifacts", refuse: true,
			wantErr: `mlflow: keep checkpoint iteration-000002 in run r1: upload 1/r1/artifacts/checkpoints/iteration-000002/adapter_config.json: 403 Forbidden: {"error_code": "PERMISSION_DENIED", "message": "uploads are off"}`},
		{name: "s3", root: "s3://bucket/1/r1/artifacts",
			wantErr: `mlflow: keep checkpoint iteration-000002 in run r1: artifact store not supported: the run's artifact root is "s3://bucket/1/r1/artifacts"; start the server with --serve-artifacts (its default) and without a --default-artifact-root of that scheme, so that rlpipe uploads through the server: unsupported operation`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeMLflow{root: c.root, refuse: c.refuse, puts: map[string]string{}}
			srv := httptest.NewServer(f)
			defer srv.Close()
			tr, err := trackers.Open(trackers.MLflowBackend, &trackers.MLflowOptions{URI: srv.URL, Artifacts: trackers.ArtifactsCheckpoints})
			if err != nil {
				t.Fatal(err)
			}
			err = keepOne(t, st, tr, commit)
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("got %v\nwant %s", err, c.wantErr)
				}
				if c.name == "s3" && !errors.Is(err, trackers.ErrArtifactStore) {
					t.Errorf("%v is not ErrArtifactStore", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(f.puts) != fmt.Sprint(orEmpty(c.wantPuts)) {
				t.Errorf("uploads %v, want %v", f.puts, c.wantPuts)
			}
			for rel, want := range c.wantFiles {
				if b, err := os.ReadFile(filepath.Join(local, rel)); err != nil || string(b) != want {
					t.Errorf("%s: %q, %v; want %q", rel, b, err, want)
				}
			}
		})
	}
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// keepOne starts tr and sends it, as Backfill does, an evaluation point
// of checkpoint 2 at commit, then ends it; the error is Backfill's.
func keepOne(t *testing.T, st artifacts.Store, tr trackers.Tracker, commit string) error {
	t.Helper()
	if err := tr.Start(context.Background(), trackers.Run{Name: "ck"}); err != nil {
		t.Fatal(err)
	}
	points := []trackers.Point{{Step: 2, Time: time.Unix(1_800_000_000, 0), Checkpoint: "iteration-000002",
		Scalars: map[string]float64{"eval/heldout/pass@1": 0.5}, Text: map[string]string{trackers.TagCommit: commit}}}
	return trackers.KeepCheckpoints(context.Background(), st, tr, points)
}

// TestKeepCheckpointMissing: a checkpoint whose directory the commit
// does not hold is an ErrObjectNotFound naming the directory and the
// command that lists the iteration.
func TestKeepCheckpointMissing(t *testing.T) {
	st, commit := checkpointStore(t)
	f := &fakeMLflow{root: "mlflow-artifacts:/1/r1/artifacts", puts: map[string]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	tr, err := trackers.Open(trackers.MLflowBackend, &trackers.MLflowOptions{URI: srv.URL, Artifacts: trackers.ArtifactsCheckpoints})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(context.Background(), trackers.Run{Name: "ck"}); err != nil {
		t.Fatal(err)
	}
	points := []trackers.Point{{Step: 3, Checkpoint: "iteration-000003", Text: map[string]string{trackers.TagCommit: commit}}}
	err = trackers.KeepCheckpoints(context.Background(), st, tr, points)
	want := fmt.Sprintf("keep checkpoint iteration-000003: object not found: no directory iterations/000003/adapter at commit %s (`rlpipe ls %s:iterations/000003` lists it)", commit, commit)
	if err == nil || err.Error() != want || !errors.Is(err, artifacts.ErrObjectNotFound) {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if len(f.puts) != 0 {
		t.Errorf("uploads %v", f.puts)
	}
}

// TestArtifactsKey: the artifacts key takes checkpoints on mlflow and
// wandb; another value, or any on tensorboard, is refused naming the key.
func TestArtifactsKey(t *testing.T) {
	for _, c := range []struct {
		name string
		b    trackers.Backend
		opts any
		want string
	}{
		{"mlflow checkpoints", trackers.MLflowBackend, &trackers.MLflowOptions{URI: "http://127.0.0.1:5000", Artifacts: "checkpoints"}, ""},
		{"wandb checkpoints", trackers.WandbBackend, &trackers.WandbOptions{Dir: "wb", Artifacts: "checkpoints"}, ""},
		{"mlflow other", trackers.MLflowBackend, &trackers.MLflowOptions{URI: "http://127.0.0.1:5000", Artifacts: "weights"},
			`tracker mlflow: artifacts: "weights" is not what a tracker keeps: write artifacts: checkpoints (the adapter or weights of every evaluated checkpoint), or leave the key out`},
		{"wandb other", trackers.WandbBackend, &trackers.WandbOptions{Dir: "wb", Artifacts: "all"},
			`tracker wandb: artifacts: "all" is not what a tracker keeps: write artifacts: checkpoints (the adapter or weights of every evaluated checkpoint), or leave the key out`},
		{"tensorboard", trackers.TensorBoardBackend, &trackers.TensorBoardOptions{Dir: "tb", Artifacts: "checkpoints"},
			"tracker tensorboard: artifacts: tensorboard keeps event files only, not artifacts: set artifacts: checkpoints on an mlflow or wandb entry, or export a checkpoint with rlpipe policy export"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := trackers.Open(c.b, c.opts)
			if got := fmt.Sprint(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
				t.Errorf("got %v\nwant %q", err, c.want)
			}
		})
	}
}

// keeperTracker is a tracker that keeps checkpoints by reading their
// files when handed them (the directory is gone after the call), or
// refuses them.
type keeperTracker struct {
	mu     sync.Mutex
	refuse bool
	points []trackers.Point
	kept   map[string]map[string]string // checkpoint → file → content
	calls  int
}

func (k *keeperTracker) Start(context.Context, trackers.Run) error   { return nil }
func (k *keeperTracker) End(context.Context, trackers.Outcome) error { return nil }
func (k *keeperTracker) Log(_ context.Context, p []trackers.Point) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.points = append(k.points, p...)
	return nil
}
func (k *keeperTracker) KeepsCheckpoints() bool { return true }
func (k *keeperTracker) KeepCheckpoint(_ context.Context, c trackers.Checkpoint) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	if k.refuse {
		return errors.New("keeper: no room")
	}
	files := map[string]string{}
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(c.Dir, e.Name()))
		if err != nil {
			return err
		}
		files[e.Name()] = string(b)
	}
	k.kept[fmt.Sprintf("%s@%d:%s", c.Name, c.Iteration, c.Commit)] = files
	return nil
}

// TestFeedKeepsCheckpoints: a live feed hands a tracker that keeps
// checkpoints the adapter of the checkpoint its iteration evaluated,
// after the evaluation's point (pass@1 at the checkpoint's step); one
// that refuses it is named in a warning, and the feed goes on.
func TestFeedKeepsCheckpoints(t *testing.T) {
	st, commit := checkpointStore(t)
	for _, c := range []struct {
		name   string
		refuse bool
		calls  int
		kept   string
		warn   string
	}{
		{"kept", false, 1, fmt.Sprintf(`map[iteration-000002@2:%s:map[adapter_config.json:{"r": 8} adapter_model.safetensors:weights]]`, commit), ""},
		// Tried once or twice: Close makes a failure final.
		{"refused", true, 0, "map[]", `{"level":"warn","run":"ck","error":"keeper: no room","tracker":"keeper","iteration":2,"message":"trackers: cannot keep the checkpoint in the tracker; rlpipe track RUN --to KIND:TARGET keeps it afterwards"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			k := &keeperTracker{refuse: c.refuse, kept: map[string]map[string]string{}}
			f := trackers.NewFeed(context.Background(), st, trackers.Run{Name: "ck"}, []trackers.Named{{Name: "keeper", Tracker: k}},
				&trackers.FeedOptions{Attempts: 2, Backoff: time.Millisecond, Logger: zerolog.New(&logs)})
			f.Committed(2, commit)
			d := f.Close(trackers.Outcome{Status: trackers.Finished})
			if len(d) != 1 || d[0].Lost != 0 {
				t.Fatalf("deliveries %+v", d)
			}
			var evalStep []string
			for _, p := range k.points {
				if v, ok := p.Scalars["eval/heldout/pass@1"]; ok {
					evalStep = append(evalStep, fmt.Sprintf("%d %s %v", p.Step, p.Checkpoint, v))
				}
			}
			if strings.Join(evalStep, ",") != "2 iteration-000002 0.5" {
				t.Errorf("pass@1 points: %v, want one at step 2 of iteration-000002", evalStep)
			}
			if (c.calls > 0 && k.calls != c.calls) || k.calls < 1 || k.calls > 2 || fmt.Sprint(k.kept) != c.kept {
				t.Errorf("%d calls, kept %v\nwant %d, %s", k.calls, k.kept, c.calls, c.kept)
			}
			if got := logs.String(); (c.warn == "") != (got == "") || !strings.Contains(got, c.warn) {
				t.Errorf("logs:\n%s\nwant %s", got, c.warn)
			}
		})
	}
}

// mlflowCheckpoints keeps checkpoint 2 of a real store in a real MLflow
// server's run (the feed's and Backfill's KeepCheckpoints) and reads its
// files back through the server's artifact API: the store's bytes under
// checkpoints/iteration-000002. Kept again (a back-fill), the files are
// the same.
func mlflowCheckpoints(t *testing.T, uri string) {
	st, commit := checkpointStore(t)
	tr, err := trackers.Open(trackers.MLflowBackend, &trackers.MLflowOptions{URI: uri, Experiment: "checkpoints", Artifacts: trackers.ArtifactsCheckpoints})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := keepOne(t, st, tr, commit); err != nil {
			t.Fatal(err)
		}
	}
	run := trackertest.OneMLflowRun(t, uri, "checkpoints", "ck")
	got := trackertest.MLflowArtifacts(t, uri, run.ID, "checkpoints/iteration-000002")
	if want := `map[adapter_config.json:{"r": 8} adapter_model.safetensors:weights]`; fmt.Sprint(got) != want {
		t.Errorf("MLflow's checkpoints/iteration-000002: %v, want %s", got, want)
	}
}
