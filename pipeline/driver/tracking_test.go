package driver_test

import (
	"bytes"
	"context"
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
)

// recorder is a tracker that keeps what it is sent, registered as kind
// "recorder" with the key name: what the driver feeds, seen from the
// tracker's side.
type recorder struct {
	mu     sync.Mutex
	run    trackers.Run
	points []trackers.Point
	closed bool
}

func (r *recorder) Start(_ context.Context, run trackers.Run) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.run = run
	return nil
}

func (r *recorder) Log(_ context.Context, p []trackers.Point) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.points = append(r.points, p...)
	return nil
}

func (r *recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

type recorderOptions struct {
	Name string `yaml:"name"`
}

type recorderBackend struct{}

var (
	recordersMu sync.Mutex
	recorders   = map[string]*recorder{}
	registerRec sync.Once
)

func (recorderBackend) Options() any        { return &recorderOptions{} }
func (recorderBackend) Target(v string) any { return &recorderOptions{Name: v} }
func (recorderBackend) Open(opts any) (trackers.Tracker, error) {
	recordersMu.Lock()
	defer recordersMu.Unlock()
	r := &recorder{}
	recorders[opts.(*recorderOptions).Name] = r
	return r, nil
}

func recorderNamed(name string) *recorder {
	recordersMu.Lock()
	defer recordersMu.Unlock()
	return recorders[name]
}

// TestRunFeedsTrackers runs a pipeline with a tracking section: the
// tracker gets the run's config, and per iteration what a back-fill from
// the store gives, with the commit of each.
func TestRunFeedsTrackers(t *testing.T) {
	registerRec.Do(func() { trackers.Register("recorder", recorderBackend{}) })
	st := newStore(t)
	ctx := context.Background()
	name := t.Name()
	cfg := parse(t, pipelineYAML+"tracking: [{kind: recorder, name: "+name+"}]\n")
	sum, err := driver.Run(ctx, st, cfg, driver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := recorderNamed(name)
	if rec == nil || !rec.closed {
		t.Fatalf("the recorder was not opened and closed: %+v", rec)
	}
	if rec.run.Name != "exp1" || !bytes.Contains(rec.run.Config, []byte("tracking:")) || rec.run.Params["iterations"] != "2" || rec.run.ConfigHash != sum.ConfigHash {
		t.Errorf("run: %+v", rec.run)
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
