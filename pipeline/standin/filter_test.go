package standin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/trackers"
)

// filterStages are the stand-in stages with dynamic sampling's merge task.
func filterStages() pipeline.Stages {
	s := standin.Stages(standin.Options{SamplesPerPrompt: 4})
	s.FilterGroups = pipeline.FilterGroupsTask()
	return s
}

func filterEnvs() map[string]pipeline.Settings {
	e := envs()
	e[pipeline.FilterGroupsName] = pipeline.Settings{}
	return e
}

func filterConfig(iterations int) pipeline.LoopConfig {
	c := loopConfig(iterations, 1)
	c.MaxGenBatches = 3
	return c
}

// readFilter reads iteration n's filter_groups.json.
func readFilter(t *testing.T, st artifacts.Store, ref string, n int) pipeline.FilterGroups {
	t.Helper()
	b, err := artifacts.ReadObject(context.Background(), st, ref, runs.IterationPath(n, runs.FilterGroupsFile))
	if err != nil {
		t.Fatal(err)
	}
	var f pipeline.FilterGroups
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// roundsOf lists a record's rounds as "cursor:informative" pairs.
func roundsOf(f pipeline.FilterGroups) string {
	var out []string
	for _, r := range f.Rounds {
		out = append(out, fmt.Sprintf("%d:%d", r.Cursor, r.Informative))
	}
	return strings.Join(out, " ")
}

// TestDynamicSamplingRefills: with max_num_gen_batches 3, an iteration
// whose first batch holds fewer than batch_size groups with a reward
// spread draws the next prompts in further rounds (through the real loop,
// with overlap, on the embedded store), records each round under
// rounds/RR with why it was drawn, trains on the informative groups it
// kept, and moves the cursor past every prompt drawn, so that the next
// iteration starts after the refill's prompts.
func TestDynamicSamplingRefills(t *testing.T) {
	st := standintest.NewStore(t, 10)
	var mu sync.Mutex
	ran := map[string]bool{}
	opts := pipeline.RunOptions{Name: "dyn", Envs: filterEnvs(), Seed: 2, OnEvent: func(e pipeline.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind == pipeline.EventFinished {
			ran[fmt.Sprintf("%d/%s", e.Iteration, e.Task)] = true
		}
	}}
	r, state := standintest.Loop(t, st, opts, filterConfig(3), filterStages())
	if state.Cursor != 21 {
		t.Errorf("cursor %d, want 21: 9 + 6 + 6 prompts drawn", state.Cursor)
	}
	for _, tc := range []struct {
		n                    int
		rounds               string
		kept, dropped, drawn int
		why1                 string
	}{
		{1, "0:0 3:2 6:2", 3, 6, 9, "informative groups: 0 of 3 after round 0"},
		{2, "9:2 12:3", 3, 3, 6, "informative groups: 2 of 3 after round 0"},
		{3, "15:2 18:2", 3, 3, 6, "informative groups: 2 of 3 after round 0"},
	} {
		f := readFilter(t, st, r.Branch(), tc.n)
		if got := roundsOf(f); got != tc.rounds || f.GroupsKept != tc.kept || f.GroupsDropped != tc.dropped || f.PromptsDrawn != tc.drawn ||
			f.GroupsPadded != 0 || f.Shortfall != 0 || f.Stop != pipeline.StopFull || f.Rounds[1].Why != tc.why1 {
			t.Errorf("iteration %d: %+v\nwant rounds %s, kept %d, dropped %d, drawn %d", tc.n, f, tc.rounds, tc.kept, tc.dropped, tc.drawn)
		}
		// Each round's prompts are the dataset's from its cursor on, in
		// the round's directory, drawn by a call of its own.
		for _, rd := range f.Rounds {
			if rd.Dir != runs.RoundDir(tc.n, rd.Round) {
				t.Errorf("iteration %d round %d in %s", tc.n, rd.Round, rd.Dir)
			}
			ps := standintest.ReadRows(t, st, r.Branch(), rd.Dir+"/"+runs.PromptsFile, tables.Prompts)
			if want := fmt.Sprintf("p%03d", rd.Cursor%10); len(ps) != 3 || ps[0].PromptID != want {
				t.Errorf("iteration %d round %d starts with %v, want %s", tc.n, rd.Round, ps, want)
			}
			for _, slot := range []string{"sample", "generate", "reward"} {
				name := slot
				if rd.Round > 0 {
					name = fmt.Sprintf("%s-round-%02d", slot, rd.Round)
				}
				if !ran[fmt.Sprintf("%d/%s", tc.n, name)] {
					t.Errorf("iteration %d: no call %s ran", tc.n, name)
				}
			}
		}
		// The iteration's batch is the kept groups: every one has a
		// reward spread, and the train task read them.
		ps := standintest.ReadRows(t, st, r.Branch(), runs.IterationPath(tc.n, runs.PromptsFile), tables.Prompts)
		rw := standintest.ReadRows(t, st, r.Branch(), runs.IterationPath(tc.n, runs.RewardsFile), tables.Rewards)
		tr := standintest.ReadRows(t, st, r.Branch(), runs.IterationPath(tc.n, runs.TrajectoriesFile), tables.Trajectories)
		inf, _ := pipeline.Informative([][]tables.Reward{rw})
		if len(ps) != 3 || len(rw) != 12 || len(tr) != 12 || len(inf[0]) != 3 {
			t.Errorf("iteration %d: %d prompts, %d rewards, %d trajectories, %d informative groups; want 3, 12, 12, 3", tc.n, len(ps), len(rw), len(tr), len(inf[0]))
		}
	}
	// The experiment trackers get each iteration's figures.
	points, err := trackers.History(context.Background(), st, "dyn", r.Branch())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range points {
		s := p.Scalars
		got = append(got, fmt.Sprintf("%d: rounds %g drawn %g kept %g dropped %g shortfall %g", p.Step, s["filter_groups/rounds"],
			s["filter_groups/prompts_drawn"], s["filter_groups/groups_kept"], s["filter_groups/groups_dropped"], s["filter_groups/shortfall"]))
	}
	if want := []string{"1: rounds 3 drawn 9 kept 3 dropped 6 shortfall 0", "2: rounds 2 drawn 6 kept 3 dropped 3 shortfall 0",
		"3: rounds 2 drawn 6 kept 3 dropped 3 shortfall 0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("tracker points\n got %q\nwant %q", got, want)
	}
}

// TestDynamicSamplingShortfall: when max_num_gen_batches rounds hold too
// few informative groups, the iteration trains on those it has, fills the
// batch with zero-variance groups (which the advantages step masks), and
// records the shortfall and why it stopped.
func TestDynamicSamplingShortfall(t *testing.T) {
	st := standintest.NewStore(t, 10)
	cfg := filterConfig(1)
	cfg.MaxGenBatches = 2
	r, state := standintest.Loop(t, st, pipeline.RunOptions{Name: "short", Envs: filterEnvs(), Seed: 2}, cfg, filterStages())
	f := readFilter(t, st, r.Branch(), 1)
	if got := roundsOf(f); got != "0:0 3:2" || f.GroupsKept != 2 || f.GroupsPadded != 1 || f.GroupsDropped != 3 || f.Shortfall != 1 ||
		f.Stop != pipeline.StopMaxGenBatches || f.PromptsDrawn != 6 || state.Cursor != 6 {
		t.Fatalf("record %+v, cursor %d", f, state.Cursor)
	}
	ps := standintest.ReadRows(t, st, r.Branch(), runs.IterationPath(1, runs.PromptsFile), tables.Prompts)
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.PromptID)
	}
	// Round 1's informative groups first, then round 0's first prompt.
	if got := strings.Join(ids, " "); got != "p003 p004 p000" {
		t.Errorf("batch %s, want p003 p004 p000", got)
	}
}

// TestDynamicSamplingResumesExactlyOnce: a run whose iteration 1 fails at
// a round boundary (round 2's reward, after rounds 0 and 1 and round 2's
// generation finished) resumes without sampling any round again: every
// generation call of the run finished exactly once over both legs, the
// resumed leg's finished rounds are cache hits, and the run's artifacts
// are byte-identical to an uninterrupted run's.
func TestDynamicSamplingResumesExactlyOnce(t *testing.T) {
	ctx := context.Background()
	// On-policy, so that no later iteration is in flight when iteration
	// 1 fails (a cancelled task of one may or may not have recorded its
	// result, which is the engine's matter, not the rounds').
	cfg := filterConfig(3)
	cfg.MaxStaleness = 0
	// The reference runs in a store of its own: the cache is
	// store-wide, and the resumed run must not borrow its results.
	refStore := standintest.NewStore(t, 10)
	ref, _ := standintest.Loop(t, refStore, pipeline.RunOptions{Name: "ref", Envs: filterEnvs(), Seed: 2}, cfg, filterStages())
	st := standintest.NewStore(t, 10)

	var mu sync.Mutex
	finished := map[string]int{}
	cached := map[string]bool{}
	opts := pipeline.RunOptions{Name: "res", Envs: filterEnvs(), Seed: 2, OnEvent: func(e pipeline.Event) {
		mu.Lock()
		defer mu.Unlock()
		k := fmt.Sprintf("%d/%s", e.Iteration, e.Task)
		switch e.Kind {
		case pipeline.EventFinished:
			finished[k]++
		case pipeline.EventCached:
			cached[k] = true
		}
	}}
	failing := filterStages()
	reward := *failing.Reward
	run := reward.Run
	reward.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
		if tc.Iteration == 1 && tc.Task == "reward-round-02" {
			return pipeline.Permanent(errors.New("the process died here"))
		}
		return run(ctx, tc)
	}
	failing.Reward = &reward
	r, err := pipeline.Open(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Loop(ctx, cfg, failing)
	r.Close()
	if err == nil || !strings.Contains(err.Error(), "the process died here") {
		t.Fatalf("first leg: %v, want round 2's reward to fail", err)
	}
	if s, _ := runs.ReadState(ctx, st, runs.Branch("res")); s != nil {
		t.Fatalf("first leg committed %+v", *s)
	}
	standintest.Loop(t, st, opts, cfg, filterStages())

	for _, k := range []string{"1/sample", "1/generate", "1/reward", "1/sample-round-01", "1/generate-round-01", "1/reward-round-01", "1/sample-round-02", "1/generate-round-02"} {
		if !cached[k] {
			t.Errorf("%s ran again on resume", k)
		}
	}
	gens := 0
	for k, c := range finished {
		if strings.Contains(k, "/generate") {
			gens++
			if c != 1 {
				t.Errorf("%s finished %d times", k, c)
			}
		}
	}
	if gens != 8 { // 3 + 2 + 3 rounds
		t.Errorf("%d generation calls finished, want 8: %v", gens, finished)
	}
	want, got := standintest.Sums(t, refStore, ref.Branch()), standintest.Sums(t, st, runs.Branch("res"))
	if len(want) == 0 || fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("artifacts differ:\nuninterrupted %v\nresumed       %v", want, got)
	}
}

// The driver process of TestDynamicSamplingKilledAtARoundBoundary.
const (
	filterRole = "filter-driver"
	// envCrashAt names the call ("1/reward-round-02") at whose start the
	// driver kills itself; envGenLog is the file every generation
	// appends its call to when it starts.
	envCrashAt = "RLPIPE_STANDIN_CRASH_AT"
	envGenLog  = "RLPIPE_STANDIN_GEN_LOG"
)

// killedRunConfig is the loop of the kill test: on-policy, so that no
// later iteration is in flight when the driver dies.
func killedRunConfig() pipeline.LoopConfig {
	c := filterConfig(3)
	c.MaxStaleness = 0
	return c
}

// loggedStages are filterStages whose generations append "N/call" to
// genLog as they start, and whose reward dies (SIGKILL, no cleanup) at
// the call crashAt names.
func loggedStages(genLog, crashAt string) pipeline.Stages {
	s := filterStages()
	gen, rew := *s.Generate, *s.Reward
	genRun, rewRun := gen.Run, rew.Run
	gen.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
		f, err := os.OpenFile(genLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "%d/%s\n", tc.Iteration, tc.Task)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		return genRun(ctx, tc)
	}
	rew.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
		if fmt.Sprintf("%d/%s", tc.Iteration, tc.Task) == crashAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return rewRun(ctx, tc)
	}
	s.Generate, s.Reward = &gen, &rew
	return s
}

// filterDriver runs the kill test's loop in this process (TestMain).
func filterDriver() int {
	return driveLoop(pipeline.RunOptions{Envs: filterEnvs(), Seed: 2}, killedRunConfig(), loggedStages(os.Getenv(envGenLog), os.Getenv(envCrashAt)))
}

// TestDynamicSamplingKilledAtARoundBoundary: a driver process killed
// (SIGKILL) as iteration 1's third round is scored — rounds 0 and 1 and
// round 2's generation done — is started again and finishes: no
// generation ran twice over both processes (each call's start is logged),
// and the run's artifacts are byte-identical to an uninterrupted run's in
// a store of its own.
func TestDynamicSamplingKilledAtARoundBoundary(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	refStore := standintest.NewStore(t, 10)
	ref, _ := standintest.Loop(t, refStore, pipeline.RunOptions{Name: "ref", Envs: filterEnvs(), Seed: 2}, killedRunConfig(),
		loggedStages(filepath.Join(dir, "ref.log"), ""))

	storeDir := filepath.Join(dir, "store")
	st, err := local.Create(ctx, storeDir, "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := standin.PutDataset(ctx, st, "main", standintest.DatasetPath, 10); err != nil {
		t.Fatal(err)
	}
	genLog := filepath.Join(dir, "gen.log")
	for leg, crashAt := range []string{"1/reward-round-02", ""} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRole+"="+filterRole, envStore+"="+storeDir, envRun+"=killed", envGenLog+"="+genLog, envCrashAt+"="+crashAt)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case leg == 0 && !(errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL):
			t.Fatalf("leg 0: %v, want the driver killed\n%s", err, stderr.String())
		case leg == 1 && err != nil:
			t.Fatalf("leg 1: %v\n%s", err, stderr.String())
		}
		if leg == 0 {
			if s, _ := runs.ReadState(ctx, st, runs.Branch("killed")); s != nil {
				t.Fatalf("the killed leg committed %+v", *s)
			}
		}
	}
	b, err := os.ReadFile(genLog)
	if err != nil {
		t.Fatal(err)
	}
	calls := strings.Fields(string(b))
	seen := map[string]int{}
	for _, c := range calls {
		seen[c]++
		if seen[c] > 1 {
			t.Errorf("generation %s ran twice", c)
		}
	}
	refCalls, err := os.ReadFile(filepath.Join(dir, "ref.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 8 || len(strings.Fields(string(refCalls))) != 8 { // 3 + 2 + 3 rounds
		t.Errorf("%d generations over both legs (%v), %d uninterrupted; want 8", len(calls), calls, len(strings.Fields(string(refCalls))))
	}
	if want, got := standintest.Sums(t, refStore, ref.Branch()), standintest.Sums(t, st, runs.Branch("killed")); len(want) == 0 || fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("artifacts differ:\nuninterrupted %v\nresumed       %v", want, got)
	}
}
