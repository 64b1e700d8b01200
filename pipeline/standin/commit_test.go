package standin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/lakefs"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/storeserver"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// commitIterations is how many iterations the commit tests run, with
// max_staleness 1.
const commitIterations = 4

// pacedRun runs a loop of commitIterations iterations as run "paced" on
// st, its next iteration ahead of the current one's commit or behind it
// (standintest.Pacing), and returns the run's branch.
func pacedRun(t *testing.T, st artifacts.Store, ahead bool) string {
	t.Helper()
	p := standintest.NewPacing(ahead, commitIterations)
	opts := pipeline.RunOptions{Name: "paced", Envs: envs(), Seed: 4, OnEvent: p.Event,
		Machine: &pipeline.Machine{CPU: 8, MemoryMB: 4096}}
	r, state := standintest.Loop(t, st, opts, loopConfig(commitIterations, 1), p.Stages(standin.Stages(standin.Options{SamplesPerPrompt: 2})))
	if state.Iteration != commitIterations {
		t.Fatalf("the loop ended at iteration %d, want %d", state.Iteration, commitIterations)
	}
	return r.Branch()
}

// trees maps each iteration of the run on branch to its commit's tree:
// path → checksum, the checksum of events/ left out (timings).
func trees(t *testing.T, st artifacts.Store, branch string) map[int]map[string]string {
	t.Helper()
	ctx := context.Background()
	run, _ := runs.RunOf(branch)
	out := map[int]map[string]string{}
	for c, err := range runs.History(ctx, st, run, branch) {
		if err != nil {
			t.Fatal(err)
		}
		tree := map[string]string{}
		for e, err := range st.ListObjects(ctx, c.ID, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(e.Path, runs.EventsPrefix) {
				e.Checksum = "(timings)"
			}
			tree[e.Path] = e.Checksum
		}
		out[c.Iteration] = tree
	}
	for n := 1; n <= len(out); n++ {
		if _, ok := out[n]; !ok {
			t.Fatalf("%s has no commit of iteration %d", branch, n)
		}
	}
	return out
}

// later lists the paths of tree that belong to an iteration after n
// (iterations/, events/), "" when none do.
func later(tree map[string]string, n int) string {
	var bad []string
	for p := range tree {
		if m, _, ok := runs.ParseIterationPath(p); ok && m > n {
			bad = append(bad, p)
		}
		if num, ok := strings.CutPrefix(p, runs.EventsPrefix); ok && len(num) > 6 && num[:6] > fmt.Sprintf("%06d", n) {
			bad = append(bad, p)
		}
	}
	slices.Sort(bad)
	return strings.Join(bad, " ")
}

// added lists what the commit of iteration n added to the run (its tree
// less the one before), with n written as N.
func added(trees map[int]map[string]string, n int) string {
	var out []string
	for p := range trees[n] {
		if _, ok := trees[n-1][p]; !ok {
			out = append(out, strings.ReplaceAll(p, fmt.Sprintf("%06d", n), "N"))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// ownFiles is what every iteration's commit adds: its own directory and
// events, nothing else (the first also the dataset the run branched off
// with, and the loop state).
const ownFiles = "events/N.jsonl events/N.metrics.json iterations/N/adapter/adapter_config.json iterations/N/adapter/adapter_model.json " +
	"iterations/N/prompts.parquet iterations/N/rewards.parquet iterations/N/train_metrics.json iterations/N/trajectories.parquet"

// checkCommits fails the test for a commit of iteration N that holds a
// file of a later iteration or adds anything but N's own files.
func checkCommits(t *testing.T, trees map[int]map[string]string) {
	t.Helper()
	if len(trees) != commitIterations {
		t.Fatalf("%d iteration commits, want %d", len(trees), commitIterations)
	}
	checkCommitsUpTo(t, trees, commitIterations)
}

// checkCommitsUpTo is checkCommits for a run of iterations iterations.
func checkCommitsUpTo(t *testing.T, trees map[int]map[string]string, iterations int) {
	t.Helper()
	if len(trees) != iterations {
		t.Fatalf("%d iteration commits, want %d", len(trees), iterations)
	}
	for n := 1; n <= iterations; n++ {
		if bad := later(trees[n], n); bad != "" {
			t.Errorf("the commit of iteration %d holds files of later iterations: %s", n, bad)
		}
		want := ownFiles
		if n == 1 {
			want = standintest.DatasetPath + " " + ownFiles + " " + runs.StatePath
		}
		if got := added(trees, n); got != want {
			t.Errorf("the commit of iteration %d added\n%s\nwant\n%s", n, got, want)
		}
	}
}

// An overlapped loop whose next iteration writes before the current one
// commits still commits each iteration with exactly the iterations up to
// it: on the embedded store, and through the lakeFS backend against the
// store server.
func TestIterationCommitHoldsOnlyIterationsUpToIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (run, read artifacts.Store)
	}{
		{"embedded", func(t *testing.T) (artifacts.Store, artifacts.Store) {
			st := standintest.NewStore(t, 10)
			return st, st
		}},
		{"lakefs", func(t *testing.T) (artifacts.Store, artifacts.Store) {
			served := standintest.NewStore(t, 10)
			remote, _ := throughLakeFS(t, served, nil)
			return remote, served
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, read := tc.open(t)
			branch := pacedRun(t, st, true)
			checkCommits(t, trees(t, read, branch))
			checkCommits(t, trees(t, st, branch))
			if left := workBranches(t, read); left != "" {
				t.Errorf("work branches left after the loop finished: %s", left)
			}
		})
	}
}

// throughLakeFS serves st with the store server (with opts) and opens it
// through the lakeFS backend, both closed when the test ends.
func throughLakeFS(t *testing.T, st artifacts.Store, opts *storeserver.Options) (artifacts.Store, *storeserver.Server) {
	t.Helper()
	ctx := context.Background()
	srv, err := storeserver.New(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := lakefs.NewClient(lakefs.Config{Endpoint: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := lakefs.Open(ctx, c, srv.Repository(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remote.Close() })
	return remote, srv
}

// Two identical runs, one whose next iteration writes before the current
// commits and one whose next iteration waits for it, give commits with
// identical trees: the same paths with the same checksums (the timings
// under events/ aside). Commit ids differ (they hold their date), and so
// do the ids of the trees (objects carry their creation time), so the
// listings are compared.
func TestIdenticalRunsCommitIdenticalTrees(t *testing.T) {
	listings := map[bool]map[int]map[string]string{}
	for _, ahead := range []bool{true, false} {
		st := standintest.NewStore(t, 10)
		listings[ahead] = trees(t, st, pacedRun(t, st, ahead))
	}
	for n := 1; n <= commitIterations; n++ {
		var diff []string
		a, b := listings[true][n], listings[false][n]
		for p := range a {
			if a[p] != b[p] {
				diff = append(diff, fmt.Sprintf("%s: %q ahead, %q behind", p, a[p], b[p]))
			}
		}
		for p := range b {
			if _, ok := a[p]; !ok {
				diff = append(diff, fmt.Sprintf("%s: only behind", p))
			}
		}
		slices.Sort(diff)
		if len(diff) > 0 {
			t.Errorf("the commits of iteration %d differ:\n%s", n, strings.Join(diff, "\n"))
		}
	}
	if got := len(listings[true][commitIterations]); got != 34 {
		t.Errorf("the last commit holds %d objects, want 34", got)
	}
}

// workBranches lists the work branches of st.
func workBranches(t *testing.T, st artifacts.Store) string {
	t.Helper()
	var out []string
	for b, err := range st.ListBranches(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(b.Name, pipeline.WorkBranchPrefix) {
			out = append(out, b.Name)
		}
	}
	return strings.Join(out, " ")
}

// A loop stopped after iteration 2 leaves only the work branch of the
// iteration it cut off (3), having deleted the one a killed process left
// for the committed iteration 1 (whose stray file it never committed);
// the resumed loop reuses iteration 3's staged outputs as cache hits and
// leaves no work branch.
func TestWorkBranchesLifetime(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 10)
	branch := runs.Branch("life")
	stray := runs.IterationPath(1, "stray.txt")
	if _, err := st.CreateBranch(ctx, pipeline.WorkBranch(branch, 1), "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObject(ctx, pipeline.WorkBranch(branch, 1), stray, strings.NewReader("left by a killed attempt"), nil); err != nil {
		t.Fatal(err)
	}
	leg := func(stop int) []pipeline.Event {
		p := standintest.NewPacing(true, commitIterations)
		var events standin.Events
		r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "life", Envs: envs(), Seed: 4, Machine: &pipeline.Machine{CPU: 8, MemoryMB: 4096},
			OnEvent: func(e pipeline.Event) { events.Add(e); p.Event(e) }})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		cfg := loopConfig(commitIterations, 1)
		cfg.Stop = func(n int) bool { return n == stop }
		s, err := r.Loop(ctx, cfg, p.Stages(standin.Stages(standin.Options{SamplesPerPrompt: 2})))
		if err != nil || s.Iteration != min(stop, commitIterations) {
			t.Fatalf("the loop stopped at iteration %d (%v), want %d", s.Iteration, err, min(stop, commitIterations))
		}
		return events.All()
	}
	leg(2)
	if got, want := workBranches(t, st), pipeline.WorkBranch(branch, 3); got != want {
		t.Fatalf("work branches after a loop stopped at iteration 2: %q, want %q", got, want)
	}
	if _, err := st.StatObject(ctx, branch, stray); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("%s on the run branch: %v, want not found", stray, err)
	}
	var cached []string
	for _, e := range leg(commitIterations + 1) {
		if e.Kind == pipeline.EventCached {
			cached = append(cached, fmt.Sprintf("%s %d", e.Stage, e.Iteration))
		}
	}
	// Iteration 3's sample surely finished before the stop (its generation
	// had started); how far the rest got depends on timing.
	if len(cached) == 0 || cached[0] != "sample 3" || slices.ContainsFunc(cached, func(c string) bool { return !strings.HasSuffix(c, " 3") }) {
		t.Errorf("the resumed loop took from the cache %q, want iteration 3's sample and perhaps more of iteration 3", cached)
	}
	if got := workBranches(t, st); got != "" {
		t.Errorf("work branches after the loop finished: %q", got)
	}
	checkCommits(t, trees(t, st, branch))
}

// An output that is gone from the work branch when its iteration commits
// (deleted by hand) stops the loop before the commit, with an error that
// names the object, where it was looked for and what to do; running the
// loop again produces it again.
func TestCommitOfAnOutputGoneFromTheWorkBranch(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 10)
	branch := runs.Branch("gone")
	work, prompts := pipeline.WorkBranch(branch, 1), runs.IterationPath(1, runs.PromptsFile)
	stages := standin.Stages(standin.Options{SamplesPerPrompt: 2})
	train := *stages.Train
	inner := train.Run
	train.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
		if tc.Iteration == 1 {
			if err := st.DeleteObject(ctx, work, prompts); err != nil {
				return err
			}
		}
		return inner(ctx, tc)
	}
	bad := stages
	bad.Train = &train
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "gone", Envs: envs(), Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Loop(ctx, loopConfig(2, 0), bad)
	r.Close()
	want := regexp.MustCompile(`^move iterations/000001/prompts\.parquet of iteration 000001 into runs-gone: object not found: ` +
		`it is not on rlpipe-work-runs-gone-000001 with checksum [0-9a-f]{64}; run the loop again to produce it again$`)
	if err == nil || !errors.Is(err, artifacts.ErrObjectNotFound) || !want.MatchString(err.Error()) {
		t.Fatalf("loop error = %v, want one matching %s", err, want)
	}
	if s, err := runs.ReadState(ctx, st, branch); err != nil || s != nil {
		t.Errorf("state after the failed commit: %+v (%v), want none: iteration 1 committed without its prompts", s, err)
	}
	_, state := standintest.Loop(t, st, pipeline.RunOptions{Name: "gone", Envs: envs(), Seed: 4}, loopConfig(2, 0), stages)
	if state.Iteration != 2 {
		t.Fatalf("the loop run again ended at iteration %d, want 2", state.Iteration)
	}
	checkCommitsUpTo(t, trees(t, st, branch), 2)
}
