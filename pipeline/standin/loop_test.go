package standin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/testproc"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

func loopConfig(iterations, staleness int) pipeline.LoopConfig {
	return pipeline.LoopConfig{Iterations: iterations, BatchSize: 3, MaxStaleness: staleness, Dataset: pipeline.StoreArtifact("main", "data/prompts.parquet")}
}

func envs() map[string]pipeline.Settings {
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: 3, Backoff: 5 * time.Millisecond}}
	return map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "advantages": quick, "train": quick}
}

func TestLoopOverlapCursorAndPolicyVersions(t *testing.T) {
	st := standintest.NewStore(t, 10)
	r, state := standintest.Loop(t, st, pipeline.RunOptions{Name: "ov", Envs: envs(), Seed: 1}, loopConfig(4, 1), standin.Stages(standin.Options{SamplesPerPrompt: 2}))
	if state.Iteration != 4 || state.Cursor != 12 {
		t.Fatalf("state = %+v, want iteration 4, cursor 12", state)
	}
	var ids []string
	for n := 1; n <= 4; n++ {
		for _, p := range standintest.ReadRows(t, st, r.Branch(), fmt.Sprintf("iterations/%06d/prompts.parquet", n), tables.Prompts) {
			ids = append(ids, p.PromptID)
		}
		trajs := standintest.ReadRows(t, st, r.Branch(), fmt.Sprintf("iterations/%06d/trajectories.parquet", n), tables.Trajectories)
		// Staleness 1: iteration n samples with the policy of n-2 (the base
		// model for n ≤ 2).
		wantStale := min(n-1, 1)
		for _, tr := range trajs {
			if int(tr.Staleness) != wantStale || (n <= 2) != (tr.PolicyVersion == "base") {
				t.Fatalf("iteration %d: sample with staleness %d and policy %q; want staleness %d", n, tr.Staleness, tr.PolicyVersion, wantStale)
			}
		}
	}
	want := "p000 p001 p002 p003 p004 p005 p006 p007 p008 p009 p000 p001"
	if strings.Join(ids, " ") != want {
		t.Fatalf("prompts consumed = %s, want %s", strings.Join(ids, " "), want)
	}
}

// The engine's loop records the run's config and state on the branch by
// itself: a library user who drives pipeline.Loop (no CLI, no driver)
// leaves a run that every reader of runs can read.
func TestLoopRecordsConfigAndState(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 10)
	cfg := []byte("# the effective config\niterations: 3\n")
	_, state := standintest.Loop(t, st, pipeline.RunOptions{Name: "lib", Envs: envs(), Seed: 5, Config: cfg}, loopConfig(3, 0), standin.Stages(standin.Options{SamplesPerPrompt: 2}))
	got, err := runs.ReadState(ctx, st, runs.Branch("lib"))
	if err != nil {
		t.Fatal(err)
	}
	want := runs.State{Iteration: 3, Cursor: 9, Seed: 5, Adapters: map[string]string{"2": runs.AdapterPath(2), "3": runs.AdapterPath(3)}}
	if got == nil || !reflect.DeepEqual(*got, want) || !reflect.DeepEqual(state, want) {
		t.Fatalf("%s = %+v, Loop returned %+v; want %+v", runs.StatePath, got, state, want)
	}
	b, err := artifacts.ReadObject(ctx, st, runs.Branch("lib"), runs.ConfigPath)
	if err != nil || string(b) != string(cfg) {
		t.Fatalf("%s = %q (%v), want %q", runs.ConfigPath, b, err, cfg)
	}
}

func TestResumeGivesIdenticalArtifacts(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 10)
	stages := standin.Stages(standin.Options{SamplesPerPrompt: 2})
	// Reference: uninterrupted, caching off so nothing is borrowed.
	ref, _ := standintest.Loop(t, st, pipeline.RunOptions{Name: "ref", Envs: envs(), Seed: 9, NoCache: true}, loopConfig(5, 1), stages)
	// Interrupted after iteration 2, then resumed.
	cfg := loopConfig(5, 1)
	cfg.Stop = func(i int) bool { return i == 2 }
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "res", Envs: envs(), Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := r.Loop(ctx, cfg, stages); err != nil || s.Iteration != 2 {
		t.Fatalf("first leg: %+v, %v", s, err)
	}
	r.Close()
	r, err = pipeline.Open(ctx, st, pipeline.RunOptions{Name: "res", Envs: envs(), Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if s, err := r.Loop(ctx, loopConfig(5, 1), stages); err != nil || s.Iteration != 5 {
		t.Fatalf("resumed leg: %+v, %v", s, err)
	}
	want, got := standintest.Sums(t, st, ref.Branch()), standintest.Sums(t, st, r.Branch())
	if len(want) == 0 || fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("artifacts differ:\nuninterrupted %v\nresumed       %v", want, got)
	}
}

// TestLoopRunsAdvantagesBetweenRewardAndTrain: with the advantages step,
// every iteration runs it once the reward task has finished, writes
// advantages.parquet in the iteration's directory, and starts train only
// after it, with its output as the "advantages" input; with overlap too.
// A train task that declares the same file is refused.
func TestLoopRunsAdvantagesBetweenRewardAndTrain(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 10)
	var events standin.Events
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "adv", Envs: envs(), Seed: 1, OnEvent: events.Add})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stages := standin.Stages(standin.Options{SamplesPerPrompt: 2})
	stages.Steps = []pipeline.Step{advantages.Step(advantages.TrainOptions{})}
	if ts := stages.Tasks(); len(ts) != 5 || ts[3] != stages.Steps[0].Task || ts[4] != stages.Train {
		t.Fatalf("Tasks() does not list the advantages task before train")
	}
	if _, err := r.Loop(ctx, loopConfig(3, 1), stages); err != nil {
		t.Fatal(err)
	}
	seen := events.All()
	for n := 1; n <= 3; n++ {
		var order []string
		for _, e := range seen {
			if e.Iteration == n && (e.Kind == pipeline.EventStarted || e.Kind == pipeline.EventFinished) {
				order = append(order, e.Task+" "+strings.TrimPrefix(string(e.Kind), "task."))
			}
		}
		at := func(s string) int {
			for i, o := range order {
				if o == s {
					return i
				}
			}
			t.Fatalf("iteration %d: no %q in %v", n, s, order)
			return -1
		}
		if !(at("reward finished") < at("advantages started") && at("advantages finished") < at("train started")) {
			t.Errorf("iteration %d: tasks ran in the order %v", n, order)
		}
		dir := fmt.Sprintf("iterations/%06d/", n)
		trajs := standintest.ReadRows(t, st, r.Branch(), dir+"trajectories.parquet", tables.Trajectories)
		rewards := standintest.ReadRows(t, st, r.Branch(), dir+"rewards.parquet", tables.Rewards)
		j, err := advantages.Join(trajs, rewards, advantages.TrainOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := standintest.ReadRows(t, st, r.Branch(), dir+"advantages.parquet", tables.Advantages); fmt.Sprint(got) != fmt.Sprint(j.Advantages) {
			t.Errorf("iteration %d: advantages.parquet %v, want %v", n, got, j.Advantages)
		}
		_, info, err := st.GetObject(ctx, r.Branch(), dir+"train_metrics.json")
		if err != nil {
			t.Fatal(err)
		}
		if in := info.Metadata["rlpipe-inputs"]; !strings.Contains(in, `"advantages"`) {
			t.Errorf("iteration %d: the train task's inputs %s have no advantages", n, in)
		}
	}
	if order := pipeline.TaskOrder(stages.Steps); !slices.Equal(order, []string{"sample", "generate", "reward", "advantages", "train"}) {
		t.Errorf("TaskOrder %v does not put advantages between reward and train", order)
	}

	clash := standin.Stages(standin.Options{})
	clash.Steps = []pipeline.Step{advantages.Step(advantages.TrainOptions{})}
	clash.Train.Outputs = append(clash.Train.Outputs, pipeline.Output{Name: "advantages", File: "advantages.parquet"})
	r2, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "clash", Envs: envs()})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if _, err := r2.Loop(ctx, loopConfig(1, 0), clash); !errors.Is(err, pipeline.ErrConfig) || !strings.Contains(err.Error(), "both write advantages.parquet") {
		t.Fatalf("a train task writing advantages.parquet beside the advantages task: %v", err)
	}
}

// The kill test runs the loop in a child process (this test binary in a
// helper role) and kills it with SIGKILL at random moments until it
// finishes.
const (
	envRole  = "RLPIPE_STANDIN_ROLE"
	envStore = "RLPIPE_STANDIN_STORE"
	envJudge = "RLPIPE_STANDIN_JUDGE"
	envRun   = "RLPIPE_STANDIN_RUN"
)

const killIterations = 6

// killStages are the stand-ins with the advantages step between reward
// and train, so that a kill can land in it too.
func killStages(judge string) pipeline.Stages {
	s := standin.Stages(standin.Options{SamplesPerPrompt: 2, JudgeURL: judge,
		GenerateSleep: 40 * time.Millisecond, TrainSleep: 20 * time.Millisecond, RewardSleep: 10 * time.Millisecond})
	s.Steps = []pipeline.Step{advantages.Step(advantages.TrainOptions{})}
	return s
}

func TestMain(m *testing.M) {
	if os.Getenv(envRole) == filterRole {
		os.Exit(filterDriver())
	}
	if os.Getenv(envRole) != "driver" {
		os.Exit(m.Run())
	}
	os.Exit(driveLoop(pipeline.RunOptions{Envs: envs(), Seed: 3}, loopConfig(killIterations, 1), killStages(os.Getenv(envJudge))))
}

// driveLoop is the body of a kill test's child process (TestMain): it
// opens the run $RLPIPE_STANDIN_RUN with opts in the store at
// $RLPIPE_STANDIN_STORE, with a one-second lock so that the next child
// takes over soon after a kill, and runs the loop cfg describes with
// stages to its end. It returns the process's exit code: 1, the error
// printed, when the loop fails.
func driveLoop(opts pipeline.RunOptions, cfg pipeline.LoopConfig, stages pipeline.Stages) int {
	ctx := context.Background()
	st, err := local.Open(ctx, os.Getenv(envStore), nil)
	if err == nil {
		opts.Name, opts.LockTTL = os.Getenv(envRun), time.Second
		var r *pipeline.Run
		r, err = pipeline.Open(ctx, st, opts)
		if err == nil {
			_, err = r.Loop(ctx, cfg, stages)
			r.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// judge is a fake paid judge on loopback that counts calls per input.
type judge struct {
	mu    sync.Mutex
	calls map[string]int
	url   string
}

func startJudge(t *testing.T) *judge {
	t.Helper()
	j := &judge{calls: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var in struct{ Completion string }
		json.Unmarshal(b, &in)
		j.mu.Lock()
		j.calls[string(b)]++
		j.mu.Unlock()
		score := 0.0
		if !strings.HasSuffix(in.Completion, "0") {
			score = 1
		}
		fmt.Fprintf(w, `{"score": %g}`, score)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	j.url = "http://" + ln.Addr().String()
	return j
}

func TestKillDriverAndResume(t *testing.T) {
	trials := testproc.ChaosTrials(t, 3)
	dir := t.TempDir()
	ctx := context.Background()
	// The uninterrupted reference, in this process, with its own store and
	// judge (memo records are repository-wide: a shared store would replay
	// the reference's judge calls).
	refStore := standintest.NewStore(t, 10)
	refJudge := startJudge(t)
	ref, _ := standintest.Loop(t, refStore, pipeline.RunOptions{Name: "reference", Envs: envs(), Seed: 3}, loopConfig(killIterations, 1), killStages(refJudge.url))
	want := standintest.Sums(t, refStore, ref.Branch())
	rng := rand.New(rand.NewPCG(7, uint64(trials)))
	for trial := 0; trial < trials; trial++ {
		t.Run(strconv.Itoa(trial), func(t *testing.T) {
			j := startJudge(t)
			run := "chaos"
			storeDir := filepath.Join(dir, fmt.Sprintf("store%d", trial))
			st, err := local.Create(ctx, storeDir, "main", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := standin.PutDataset(ctx, st, "main", standintest.DatasetPath, 10); err != nil {
				t.Fatal(err)
			}
			kills := 0
			for leg := 0; ; leg++ {
				if leg > 40 {
					t.Fatalf("run %s did not finish after %d legs", run, leg)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envRole+"=driver", envStore+"="+storeDir, envJudge+"="+j.url, envRun+"="+run)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				// Kill at a random moment in the first legs; let the last run out.
				var err error
				if kills < 3 {
					select {
					case err = <-done:
					case <-time.After(time.Duration(100+rng.IntN(500)) * time.Millisecond):
						cmd.Process.Signal(syscall.SIGKILL)
						<-done
						kills++
						continue
					}
				} else {
					err = <-done
				}
				if err != nil {
					t.Fatalf("driver leg %d: %v\n%s", leg, err, stderr.String())
				}
				break
			}
			got := standintest.Sums(t, st, runs.Branch(run))
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after %d kills the artifacts differ from the uninterrupted run:\nwant %v\ngot  %v", kills, want, got)
			}
			// Every judge call ran once per distinct input, except calls a
			// kill cut off between starting and recording: the memo record
			// counts the processes that started the call, an upper bound on
			// how often the judge saw it (a kill can land before the request
			// leaves), so a call recorded as started once ran exactly once.
			started := memoStarts(t, st)
			dup := 0
			for in, n := range j.calls {
				want, ok := started[normalizeJSON(t, in)]
				if !ok {
					t.Fatalf("judge input %s has no memo record", in)
				}
				if n > want {
					t.Fatalf("judge input %s called %d times; its memo record says it was started %d time(s)", in, n, want)
				}
				if n > 1 {
					dup++
				}
			}
			if len(j.calls) != len(refJudge.calls) {
				t.Fatalf("distinct judge inputs = %d, want %d", len(j.calls), len(refJudge.calls))
			}
			reruns := dup
			t.Logf("trial %d: %d kills, %d judge inputs, %d cut off by a kill and rerun", trial, kills, len(j.calls), reruns)
		})
	}
}

// memoStarts maps each memoized call's key (normalised JSON) to the number
// of processes its record says started it.
func memoStarts(t *testing.T, st artifacts.Store) map[string]int {
	t.Helper()
	out := map[string]int{}
	for e, err := range st.ListObjects(context.Background(), pipeline.CacheBranch, &artifacts.ListOptions{Prefix: "memo/"}) {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(e.Path, ".json") {
			continue
		}
		rc, _, err := st.GetObject(context.Background(), pipeline.CacheBranch, e.Path)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Key     json.RawMessage `json:"key"`
			Started int             `json:"started"`
		}
		if err := json.NewDecoder(rc).Decode(&rec); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		out[normalizeJSON(t, string(rec.Key))] = rec.Started
	}
	return out
}

func normalizeJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("normalise %q: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// With overlap, iteration 2's prompts can be ready before iteration 1's;
// its generation must still wait for iteration 1's to take the one
// generator, or iteration 1's training (which the next generation needs)
// comes late. Sample 1 here finishes only after sample 2.
func TestLoopGeneratesInIterationOrder(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 10)
	stages := standin.Stages(standin.Options{})
	sample2 := make(chan struct{})
	var once sync.Once
	inner := *stages.Sample
	sample := inner
	sample.Run = func(ctx context.Context, tc *pipeline.TaskContext) error {
		if tc.Iteration == 1 {
			select {
			case <-sample2:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := inner.Run(ctx, tc)
		if tc.Iteration == 2 {
			once.Do(func() { close(sample2) })
		}
		return err
	}
	stages.Sample = &sample
	e := envs()
	gen := e["generate"]
	gen.Concurrency = 1
	e["generate"] = gen
	var events standin.Events
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "order", Envs: e, Seed: 1,
		Machine: &pipeline.Machine{CPU: 8, MemoryMB: 4096}, OnEvent: events.Add})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Loop(ctx, loopConfig(4, 1), stages); err != nil {
		t.Fatal(err)
	}
	var order []int
	for _, ev := range events.All() {
		if ev.Stage == pipeline.SlotGenerate && ev.Kind == pipeline.EventStarted {
			order = append(order, ev.Iteration)
		}
	}
	if fmt.Sprint(order) != "[1 2 3 4]" {
		t.Fatalf("generations started in iteration order %v, want [1 2 3 4]", order)
	}
}
