package driver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline/driver"
	"github.com/rlpipe/rlpipe/trackers"
	"github.com/rlpipe/rlpipe/trackers/trackertest"
)

// recorder is a tracker that keeps what it is sent, registered as kind
// "recorder" with the key name: what the driver feeds, seen from the
// tracker's side.
type recorder struct {
	mu      sync.Mutex
	run     trackers.Run
	points  []trackers.Point
	ends    int // calls of End
	outcome trackers.Outcome
	o       recorderOptions
}

func (r *recorder) Start(_ context.Context, run trackers.Run) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.run = run
	return nil
}

func (r *recorder) Log(ctx context.Context, p []trackers.Point) error {
	if r.o.Hang {
		<-ctx.Done()
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.points = append(r.points, p...)
	return nil
}

func (r *recorder) End(_ context.Context, o trackers.Outcome) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends++
	r.outcome = o
	if r.o.FailEnd {
		return errors.New("recorder: end refused")
	}
	return nil
}

type recorderOptions struct {
	Name    string `yaml:"name"`
	FailEnd bool   `yaml:"fail_end"` // End records the outcome, then fails
	Hang    bool   `yaml:"hang"`     // Log waits for its context to end
	// Batch has a default (3) that the file need not write: the
	// effective config the tracker gets fills it in.
	Batch int `yaml:"batch,omitempty"`
}

func (o *recorderOptions) EnsureDefaults() {
	if o.Batch == 0 {
		o.Batch = 3
	}
}

func (o *recorderOptions) Where() string { return o.Name }

type recorderBackend struct{}

var (
	recordersMu sync.Mutex
	recorders   = map[string]*recorder{}
)

func (recorderBackend) Name() string        { return "recorder" }
func (recorderBackend) Options() any        { return &recorderOptions{} }
func (recorderBackend) Target(v string) any { return &recorderOptions{Name: v} }
func (recorderBackend) Open(opts any) (trackers.Tracker, error) {
	recordersMu.Lock()
	defer recordersMu.Unlock()
	r := &recorder{o: *opts.(*recorderOptions)}
	recorders[r.o.Name] = r
	return r, nil
}

func recorderNamed(name string) *recorder {
	recordersMu.Lock()
	defer recordersMu.Unlock()
	return recorders[name]
}

// TestRunFeedsTrackers runs a pipeline with a tracking section: the
// tracker gets the run's config, and per iteration what a back-fill from
// the store gives, with the commit of each, and is ended finished.
func TestRunFeedsTrackers(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	name := t.Name()
	cfg := parse(t, pipelineYAML+"tracking: [{kind: recorder, name: "+name+"}]\n")
	before := time.Now()
	sum, err := driver.Run(ctx, st, cfg, driver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := recorderNamed(name)
	if rec == nil || rec.ends != 1 || rec.outcome.Status != trackers.Finished || rec.outcome.Time.Before(before) {
		t.Fatalf("the recorder was not opened and ended once, finished, after the run began: %+v", rec)
	}
	if rec.run.Name != "exp1" || !bytes.Contains(rec.run.Config, []byte("tracking:")) || rec.run.Params["iterations"] != "2" || rec.run.ConfigHash != sum.ConfigHash {
		t.Errorf("run: %+v", rec.run)
	}
	// The tracker gets the effective config, its own default filled in;
	// the run records the config as the file wrote it.
	if got := rec.run.Params["tracking[0].batch"]; got != "3" {
		t.Errorf("the tracker's params: tracking[0].batch = %q, want the default 3: %v", got, rec.run.Params)
	}
	if head := "# effective pipeline config of run exp1, defaults filled in, secrets redacted\n# config-hash: " + sum.ConfigHash + "\n"; !bytes.HasPrefix(rec.run.Config, []byte(head)) {
		t.Errorf("the tracker's config does not start with %q:\n%s", head, rec.run.Config)
	}
	if recorded, err := artifacts.ReadObject(ctx, st, sum.Branch, runs.ConfigPath); err != nil || bytes.Contains(recorded, []byte("batch:")) {
		t.Errorf("the run's recorded config (%v) holds the tracker's default:\n%s", err, recorded)
	}
	want, err := trackers.History(ctx, st, "exp1", sum.Branch)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.points) != 2 || !reflect.DeepEqual(rec.points, want) {
		t.Errorf("points fed:\n%+v\nback-fill reads:\n%+v", rec.points, want)
	}
	for i, p := range rec.points {
		if p.Step != i+1 || len(p.Scalars) == 0 || p.Text[trackers.TagCommit] == "" {
			t.Errorf("point %d: %+v", i, p)
		}
	}
	if c := rec.points[1].Text[trackers.TagCommit]; c != sum.Commit {
		t.Errorf("the last point's commit is %s, the run's head %s", c, sum.Commit)
	}
}

// TestRunEndsTrackers checks the outcome each way a run ends gives its
// trackers' End: finished, failed (a task that fails for good), killed (a
// cancelled context); a resumed run starts its tracker again.
func TestRunEndsTrackers(t *testing.T) {
	failing := strings.Replace(pipelineYAML, "train: {kind: standin, env: train}", "train: {kind: standin, env: train, fail_times: 1}", 1)
	for _, c := range []struct {
		name   string
		src    string
		cancel bool // cancel the context when iteration 1 commits
		want   trackers.Status
		points int
	}{
		{"finished", pipelineYAML, false, trackers.Finished, 2},
		{"failed", failing, false, trackers.Failed, 0},
		{"killed", pipelineYAML, true, trackers.Killed, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newStore(t)
			name := t.Name()
			cfg := parse(t, c.src+"tracking: [{kind: recorder, name: "+name+"}]\n")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o := driver.Options{NoCache: true}
			if c.cancel {
				o.OnCommit = func(context.Context, string, int) { cancel() }
			}
			_, err := driver.Run(ctx, st, cfg, o)
			if (err == nil) != (c.want == trackers.Finished) {
				t.Fatalf("run: %v", err)
			}
			rec := recorderNamed(name)
			if rec == nil || rec.ends != 1 || rec.outcome.Status != c.want || rec.outcome.Time.IsZero() || len(rec.points) != c.points {
				t.Fatalf("recorder: %+v; want ended once, %v, with %d points", rec, c.want, c.points)
			}
		})
	}
}

// TestRunEndsTrackerFaults checks that a tracker is ended even when the
// feed gave up on its queue (its Log hangs past FeedOptions.Flush), and
// that a tracker whose End fails is named with the command that ends it.
func TestRunEndsTrackerFaults(t *testing.T) {
	for _, c := range []struct {
		name, keys string
		want       []string // in the logs
	}{
		{"hung", "hang: true", []string{"back-fill it with: rlpipe track exp1 --to recorder:TestRunEndsTrackerFaults/hung"}},
		{"end-fails", "fail_end: true", []string{"recorder: end refused", "the tracker did not record how the run ended; rlpipe track exp1 --to recorder:TestRunEndsTrackerFaults/end-fails records it"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := t.Name()
			var logs bytes.Buffer
			_, err := driver.Run(context.Background(), newStore(t), parse(t, pipelineYAML+"tracking: [{kind: recorder, name: "+name+", "+c.keys+"}]\n"),
				driver.Options{Logger: zerolog.New(zerolog.SyncWriter(&logs)), Trackers: &trackers.FeedOptions{Attempts: 1, CallTimeout: time.Minute, Flush: 50 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			if rec := recorderNamed(name); rec == nil || rec.ends != 1 || rec.outcome.Status != trackers.Finished {
				t.Errorf("recorder: %+v; want ended once, finished", rec)
			}
			for _, w := range c.want {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("logs lack %q:\n%s", w, logs.String())
				}
			}
		})
	}
}

// patient lets the trackers' feed wait for a slow tracker when a run
// ends: on a loaded machine MLflow can take seconds to make an
// experiment and wandb to start, longer than the default flush, and the
// tests read back what the run recorded, not a timeout.
var patient = &trackers.FeedOptions{Flush: 2 * time.Minute}

// TestRunEndsMLflowRuns runs pipelines with an mlflow tracking entry
// against a real MLflow server and reads the runs back from its REST API:
// a run interrupted after iteration 1 is KILLED with an end time; run
// again, it resumes in the same MLflow run, which ends FINISHED; a run
// whose task fails for good is FAILED.
func TestRunEndsMLflowRuns(t *testing.T) {
	uri := trackertest.MLflowServer(t)
	section := func(exp string) string {
		return fmt.Sprintf("tracking: [{kind: mlflow, uri: %q, experiment: %s}]\n", uri, exp)
	}
	t.Run("killed-then-resumed", func(t *testing.T) {
		st := newStore(t)
		cfg := parse(t, pipelineYAML+section("resumed"))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		before := time.Now().UnixMilli()
		if _, err := driver.Run(ctx, st, cfg, driver.Options{Trackers: patient, OnCommit: func(context.Context, string, int) { cancel() }}); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted run: %v", err)
		}
		killed := trackertest.OneMLflowRun(t, uri, "resumed", "exp1")
		if killed.Status != "KILLED" || killed.EndTime < before {
			t.Errorf("interrupted: %s, end_time %d; want KILLED, at or after %d", killed.Status, killed.EndTime, before)
		}
		if _, err := driver.Run(context.Background(), st, cfg, driver.Options{Trackers: patient}); err != nil {
			t.Fatal(err)
		}
		done := trackertest.OneMLflowRun(t, uri, "resumed", "exp1")
		if done.ID != killed.ID || done.Status != "FINISHED" || done.EndTime < killed.EndTime {
			t.Errorf("resumed: run %s, %s, end_time %d; want run %s, FINISHED, at or after %d", done.ID, done.Status, done.EndTime, killed.ID, killed.EndTime)
		}
		if done.Tags["rlpipe.commit.000001"] == "" || done.Tags["rlpipe.commit.000002"] == "" {
			t.Errorf("the resumed MLflow run lacks a step's commit: %v", done.Tags)
		}
	})
	t.Run("failed", func(t *testing.T) {
		st := newStore(t)
		failing := strings.Replace(pipelineYAML, "train: {kind: standin, env: train}", "train: {kind: standin, env: train, fail_times: 1}", 1)
		before := time.Now().UnixMilli()
		if _, err := driver.Run(context.Background(), st, parse(t, failing+section("failed")), driver.Options{Trackers: patient}); err == nil {
			t.Fatal("a run whose train task fails for good succeeded")
		}
		if r := trackertest.OneMLflowRun(t, uri, "failed", "exp1"); r.Status != "FAILED" || r.EndTime < before {
			t.Errorf("failed: %s, end_time %d; want FAILED, at or after %d", r.Status, r.EndTime, before)
		}
	})
}

// TestRunWithTrackersDown runs with a TensorBoard dir that cannot be
// created, an MLflow server that refuses connections and one that never
// answers: the run finishes with the same artifacts as without trackers,
// and the warning names the back-fill.
func TestRunWithTrackersDown(t *testing.T) {
	slow := hangingServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	section := fmt.Sprintf("tracking:\n  - {kind: tensorboard, dir: %q}\n  - {kind: mlflow, uri: %q}\n  - {kind: mlflow, uri: %q}\n",
		filepath.Join(blocker, "tb"), refused, slow.URL)

	ctx := context.Background()
	plain, with := newStore(t), newStore(t)
	if _, err := driver.Run(ctx, plain, parse(t, pipelineYAML), driver.Options{}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	_, err = driver.Run(ctx, with, parse(t, pipelineYAML+section), driver.Options{Logger: zerolog.New(zerolog.SyncWriter(&logs)),
		Trackers: &trackers.FeedOptions{Attempts: 2, Backoff: time.Millisecond, CallTimeout: 100 * time.Millisecond, Flush: 2 * time.Second}})
	if err != nil {
		t.Fatalf("a run with its trackers down failed: %v", err)
	}
	a, b := objects(t, plain), objects(t, with)
	delete(a, runs.ConfigPath) // the recorded config holds the tracking section
	delete(b, runs.ConfigPath)
	for p := range a {
		if strings.HasPrefix(p, "events/") {
			delete(a, p) // timings
			delete(b, p)
		}
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("artifacts differ with trackers down:\n%v\n%v", a, b)
	}
	for _, want := range []string{
		"back-fill it with: rlpipe track exp1 --to tensorboard:" + filepath.Join(blocker, "tb"),
		"back-fill it with: rlpipe track exp1 --to mlflow:" + refused,
		"back-fill it with: rlpipe track exp1 --to mlflow:" + slow.URL,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

// objects maps each path of a run's head to its checksum.
func objects(t *testing.T, st artifacts.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for o, err := range st.ListObjects(context.Background(), runs.Branch("exp1"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out[o.Path] = o.Checksum
	}
	return out
}

// BenchmarkTrackersDown runs one loop (stand-in stages of 40 ms, 8
// iterations) with no tracker, with a TensorBoard tracker, and with an
// MLflow tracker whose server holds every request until it times out, and
// reports the mean time between iteration commits of each and their
// ratios, measured in the same run on the same data: a tracker that is
// down must not slow the loop (down/plain, target ≤ 1.05); tracked/plain
// is what reading the store for any tracker costs. The end of the run,
// when the feed gives up on what it could not send, is not in the figure.
func BenchmarkTrackersDown(b *testing.B) {
	slow := hangingServer(b)
	src := strings.NewReplacer("iterations: 2", "iterations: 8", "generate: {kind: standin, samples_per_prompt: 2}",
		"generate: {kind: standin, samples_per_prompt: 2, sleep: 40ms}", "train: {kind: standin, env: train}",
		"train: {kind: standin, env: train, sleep: 40ms}").Replace(pipelineYAML)
	if !strings.Contains(src, "sleep: 40ms}\n  reward") {
		b.Fatalf("the test pipeline changed; update this benchmark:\n%s", src)
	}
	section := fmt.Sprintf("tracking:\n  - {kind: mlflow, uri: %q}\n", slow.URL)
	// run returns the mean time between iteration commits, taken when
	// each commit returns to the loop.
	run := func(src string, feed *trackers.FeedOptions) time.Duration {
		var first, last time.Time
		n := 0
		onCommit := func(context.Context, string, int) {
			if n == 0 {
				first = time.Now()
			}
			last = time.Now()
			n++
		}
		if _, err := driver.Run(context.Background(), newStore(b), parse(b, src), driver.Options{OnCommit: onCommit, Trackers: feed}); err != nil {
			b.Fatal(err)
		}
		return last.Sub(first) / time.Duration(n-1)
	}
	var plain, up, down time.Duration
	for range b.N {
		plain += run(src, nil)
		up += run(src+fmt.Sprintf("tracking:\n  - {kind: tensorboard, dir: %q}\n", b.TempDir()), nil)
		down += run(src+section, &trackers.FeedOptions{Attempts: 3, Backoff: 10 * time.Millisecond, CallTimeout: 200 * time.Millisecond, Flush: 100 * time.Millisecond})
	}
	b.ReportMetric(float64(up)/float64(plain), "tracked/plain")
	b.ReportMetric(float64(down)/float64(up), "down/tracked")
	b.ReportMetric(float64(plain.Microseconds())/float64(b.N)/1000, "ms/iteration-plain")
	b.ReportMetric(float64(down.Microseconds())/float64(b.N)/1000, "ms/iteration-tracker-down")
	b.ReportMetric(float64(down)/float64(plain), "down/plain")
}

// hangingServer answers no request: each is held until its client gives
// up, or the test ends.
func hangingServer(tb testing.TB) *httptest.Server {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	tb.Cleanup(func() {
		close(hang)
		srv.Close()
	})
	return srv
}

// TestRunChecksTrackers: a tracker whose plan-time check fails (a wandb
// entry whose python does not exist) stops the run before it starts,
// naming the entry and what to do, and the run records nothing.
func TestRunChecksTrackers(t *testing.T) {
	st := newStore(t)
	dir := t.TempDir()
	py := filepath.Join(dir, "no-venv")
	cfg := parse(t, pipelineYAML+fmt.Sprintf("tracking: [{kind: wandb, dir: %q, python: %q}]\n", filepath.Join(dir, "wb"), py))
	_, err := driver.Run(context.Background(), st, cfg, driver.Options{})
	want := "pipeline.yaml: tracking[0] (wandb:" + filepath.Join(dir, "wb") + "): wandb: python " + py +
		": no such venv or interpreter; set python: to a venv with wandb (the project's .venv-tracking, made by scripts/tracker-venv.sh): no wandb package"
	if err == nil || err.Error() != want || !errors.Is(err, trackers.ErrNoWandb) {
		t.Fatalf("run: got %v\nwant %s", err, want)
	}
	if _, err := st.GetBranch(context.Background(), runs.Branch("exp1")); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("the run's branch after a failed check: %v, want none", err)
	}
}

// TestRunWandb runs a pipeline with a wandb tracking entry (offline, the
// real wandb package) and reads the runs back with wandb's own reader: a
// run interrupted after iteration 1 ends its W&B run with exit code 255;
// run again, it resumes the same W&B run (id exp1), which gets iteration
// 2 and exit code 0, each step with its commit.
func TestRunWandb(t *testing.T) {
	py := trackertest.Python(t)
	t.Setenv("WANDB_API_KEY", "")
	dir := t.TempDir()
	st := newStore(t)
	cfg := parse(t, pipelineYAML+fmt.Sprintf("tracking: [{kind: wandb, dir: %q, python: %q}]\n", dir, py))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := driver.Run(ctx, st, cfg, driver.Options{Trackers: patient, OnCommit: func(context.Context, string, int) { cancel() }}); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	sum, err := driver.Run(context.Background(), st, cfg, driver.Options{Trackers: patient})
	if err != nil {
		t.Fatal(err)
	}
	got := trackertest.WandbRuns(t, dir, "exp1")
	if len(got) != 2 {
		t.Fatalf("offline runs of id exp1: %d, want 2 (the run and its resume)", len(got))
	}
	for i, want := range []struct{ step, code int }{{1, 255}, {2, 0}} {
		r := got[i]
		if r.ID != "exp1" || len(r.History) != 1 || r.History[0]["_step"] != float64(want.step) || r.ExitCode == nil || *r.ExitCode != want.code {
			t.Errorf("offline run %d: id %s, rows %v, exit code %v; want exp1, step %d, exit code %d", i, r.ID, r.History, r.ExitCode, want.step, want.code)
		}
		if r.Config["iterations"] != "2" || r.Config["rlpipe.config_hash"] != sum.ConfigHash {
			t.Errorf("offline run %d: config %v", i, r.Config)
		}
	}
	if c := got[1].History[0]["rlpipe/commit"]; c != sum.Commit {
		t.Errorf("step 2's commit: %v, want the head %s", c, sum.Commit)
	}
}
