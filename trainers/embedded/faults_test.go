package embedded_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// The fault tests run small loops: 4 prompts × 8 samples an iteration.
const faultBatch = 4

// adapterSums keeps the adapter files of sums.
func adapterSums(all map[string]string) map[string]string {
	m := map[string]string{}
	for p, s := range all {
		if strings.Contains(p, "/adapter/") {
			m[p] = s
		}
	}
	return m
}

func loopState(t testing.TB, st artifacts.Store, ref string) runs.State {
	t.Helper()
	var s runs.State
	if err := json.Unmarshal(standintest.Read(t, st, ref, runs.StatePath), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// runLoop runs a fresh store's loop to iterations with the train task.
func runLoop(t *testing.T, m *tiny.Model, train *pipeline.Task, iterations int) (artifacts.Store, *pipeline.Run, error) {
	t.Helper()
	st := newStore(t, 64)
	r := openRun(t, st, "f", 5)
	_, err := r.Loop(context.Background(), loopConfig(iterations, faultBatch), stages(t, m, train))
	return st, r, err
}

// TestCrashMidWriteIsRetried: the train stage of iteration 2 crashes
// after writing half its adapter. The engine retries it; the run ends
// with the same bytes as a run without the crash, and no commit of the
// run branch ever holds an adapter that differs from the clean run's.
func TestCrashMidWriteIsRetried(t *testing.T) {
	m := embeddedModel(t)
	o := embedded.Options{}
	cleanSt, clean, err := runLoop(t, m, embedded.Task(m, o), 3)
	if err != nil {
		t.Fatal(err)
	}
	crashes := 0
	crash := func(iteration, attempt int) bool {
		if iteration == 2 && attempt == 1 {
			crashes++
			return true
		}
		return false
	}
	st, r, err := runLoop(t, m, embedded.TaskWithFaults(m, o, crash, nil), 3)
	if err != nil {
		t.Fatalf("the loop did not survive a crashed train attempt: %v", err)
	}
	if crashes != 1 {
		t.Fatalf("%d planned crashes happened, want 1", crashes)
	}
	var im runs.IterationMetrics
	if err := json.Unmarshal(standintest.Read(t, st, r.Branch(), "events/000002.metrics.json"), &im); err != nil {
		t.Fatal(err)
	}
	if a := im.Tasks["train"].Attempts; a != 2 {
		t.Fatalf("train of iteration 2 took %d attempts, want 2", a)
	}
	want := standintest.Sums(t, cleanSt, clean.Branch()+"@")
	if got := standintest.Sums(t, st, r.Branch()+"@"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("artifacts differ from the clean run's:\nclean   %v\ncrashed %v", want, got)
	}
	wantAd := adapterSums(want)
	if len(wantAd) != 3*4 {
		t.Fatalf("%d adapter files in the clean run, want 3 iterations × 4", len(wantAd))
	}
	commits := 0
	for c, err := range st.Log(context.Background(), r.Branch(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		commits++
		for p, s := range adapterSums(standintest.Sums(t, st, c.ID)) {
			if wantAd[p] != s {
				t.Errorf("commit %s (%q) holds %s with checksum %s; the clean run wrote %s", c.ID[:12], c.Message, p, s, wantAd[p])
			}
		}
	}
	if commits < 3 {
		t.Fatalf("%d commits on the run branch, want at least the 3 iterations'", commits)
	}
}

// TestNaNLossFailsPermanently: a NaN in iteration 3's loss fails the train
// stage at once (no retry) with an error wrapping grpo.ErrNonFinite, and
// the run branch keeps iteration 2's adapter as its latest.
func TestNaNLossFailsPermanently(t *testing.T) {
	m := embeddedModel(t)
	nan := func(iteration int) bool { return iteration == 3 }
	st, r, err := runLoop(t, m, embedded.TaskWithFaults(m, embedded.Options{}, nil, nan), 4)
	if err == nil {
		t.Fatal("the loop succeeded with a NaN loss")
	}
	var te *pipeline.TaskError
	if !errors.As(err, &te) || te.Task != "train" || te.Attempts != 1 {
		t.Fatalf("error %v: want the train task's error after 1 attempt", err)
	}
	if !errors.Is(err, grpo.ErrNonFinite) || !errors.Is(err, pipeline.ErrPermanent) {
		t.Fatalf("error %v: want it to wrap grpo.ErrNonFinite and pipeline.ErrPermanent", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "train iteration 3") || !strings.Contains(msg, "non-finite loss") {
		t.Fatalf("error %q does not say which iteration failed and why", msg)
	}
	head := r.Branch() + "@"
	s := loopState(t, st, head)
	if s.Iteration != 2 || s.Adapters["2"] != "iterations/000002/adapter" {
		t.Fatalf("committed state %+v, want iteration 2 with its adapter current", s)
	}
	var paths []string
	for p := range standintest.Sums(t, st, head) {
		if strings.HasPrefix(p, "iterations/000003/") {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	if len(paths) > 0 {
		t.Fatalf("the failed iteration committed %v", paths)
	}
	// Iteration 2's adapter still loads and its trainer state says two
	// updates.
	dir := standintest.Fetch(t, st, head, "iterations/000002/adapter")
	if _, err := m.LoadAdapter(dir); err != nil {
		t.Fatal(err)
	}
	var ts embedded.State
	if err := json.Unmarshal(standintest.Read(t, st, head, "iterations/000002/adapter/"+embedded.StateFile), &ts); err != nil {
		t.Fatal(err)
	}
	if ts.Updates != 2 || ts.OptimizerSteps != 2 {
		t.Fatalf("trainer state %+v, want 2 updates of 1 step", ts)
	}
}

// TestResumeContinuesExactly: 4 iterations straight, and 2 iterations,
// a stop, then a resumed run to 4, end with byte-identical artifacts —
// adapters, optimizer state and trainer state included.
func TestResumeContinuesExactly(t *testing.T) {
	st, ref, want := resumedLikeStraight(t, embedded.Options{}, 4, 2)
	for _, f := range []string{"adapter_model.safetensors", embedded.OptimizerFile, embedded.StateFile} {
		if p := "iterations/000004/adapter/" + f; want[p] == "" {
			t.Fatalf("no %s in the final adapter", p)
		}
	}
	var ts embedded.State
	if err := json.Unmarshal(standintest.Read(t, st, ref, "iterations/000004/adapter/"+embedded.StateFile), &ts); err != nil {
		t.Fatal(err)
	}
	if ts.Updates != 4 || ts.OptimizerSteps != 4 {
		t.Fatalf("trainer state %+v, want 4 updates of 1 step", ts)
	}
}

// resumedLikeStraight runs a loop of iterations with the options
// straight, and again stopped after stop and resumed, fails the test
// unless both commit the same bytes, and returns the resumed run's store,
// its ref and the checksums of its files.
func resumedLikeStraight(t *testing.T, o embedded.Options, iterations, stop int) (artifacts.Store, string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	m := embeddedModel(t)
	straightSt, straight, err := runLoop(t, m, embedded.Task(m, o), iterations)
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t, 64)
	cfg := loopConfig(iterations, faultBatch)
	cfg.Stop = func(i int) bool { return i == stop }
	r := openRun(t, st, "f", 5)
	if s, err := r.Loop(ctx, cfg, stages(t, m, embedded.Task(m, o))); err != nil || s.Iteration != stop {
		t.Fatalf("first leg: %+v, %v", s, err)
	}
	r.Close()
	r = openRun(t, st, "f", 5)
	if s, err := r.Loop(ctx, loopConfig(iterations, faultBatch), stages(t, m, embedded.Task(m, o))); err != nil || s.Iteration != iterations {
		t.Fatalf("resumed leg: %+v, %v", s, err)
	}
	want, got := standintest.Sums(t, straightSt, straight.Branch()+"@"), standintest.Sums(t, st, r.Branch()+"@")
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("artifacts differ:\nstraight %v\nresumed  %v", want, got)
	}
	return st, r.Branch() + "@", got
}

// TestOverlapTrainsOffPolicy: with max_staleness 1, iteration 3 trains on
// samples of iteration 1's adapter while starting from iteration 2's, so
// the ratio moves away from 1; the metrics say so.
func TestOverlapTrainsOffPolicy(t *testing.T) {
	m := embeddedModel(t)
	st := newStore(t, 64)
	r := openRun(t, st, "f", 5)
	cfg := loopConfig(3, faultBatch)
	cfg.MaxStaleness = 1
	if _, err := r.Loop(context.Background(), cfg, stages(t, m, embedded.Task(m, embedded.Options{}))); err != nil {
		t.Fatal(err)
	}
	var met embedded.Metrics
	raw := standintest.Read(t, st, r.Branch()+"@", "iterations/000003/"+grpo.MetricsFile)
	if err := json.Unmarshal(raw, &met); err != nil {
		t.Fatal(err)
	}
	t.Logf("iteration 3's %s:\n%s", grpo.MetricsFile, raw)
	if met.Iteration != 3 || met.StalenessMean != 1 || met.Updates != 3 || met.Used == 0 || !(met.RatioDev > 1e-4) {
		t.Fatalf("iteration 3 metrics %+v: want staleness 1, 3 updates and a ratio away from 1", met)
	}
	adv := standintest.ReadRows(t, st, r.Branch()+"@", "iterations/000003/"+grpo.AdvantagesFile, tables.Advantages)
	if len(adv) != faultBatch*8 {
		t.Fatalf("%d advantage rows, want %d", len(adv), faultBatch*8)
	}
}
