package steptest

import (
	"bytes"
	"context"
	"path"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
)

// Iterations is how many iterations each scenario's loop runs.
const Iterations = 2

// Dataset is where the scenarios' prompts table is, on main: a step
// that reads a fixed artifact (an eval set) may read it.
const Dataset = "data/prompts.parquet"

// Run runs every scenario on the step step returns; before, if any, are
// steps the step reads from, placed ahead of it.
func Run(t *testing.T, step func(testing.TB) pipeline.Step, before ...pipeline.Step) {
	t.Run("InputsExistUpstream", func(t *testing.T) {
		t.Parallel()
		s := step(t)
		st := stages(s, before)
		if err := pipeline.CheckSteps(st); err != nil {
			t.Fatalf("the step does not fit the loop: %v", err)
		}
		for _, in := range s.Inputs {
			if in.From == "" && in.Artifact.Path == "" {
				t.Errorf("input %s has neither a producer nor an artifact", in.Name)
			}
		}
		l := newLoop(t)
		if _, err := l.run(t, st, nil); err != nil {
			t.Fatalf("loop: %v", err)
		}
	})
	t.Run("OutputsWritten", func(t *testing.T) {
		t.Parallel()
		s := step(t)
		l := newLoop(t)
		if _, err := l.run(t, stages(s, before), nil); err != nil {
			t.Fatalf("loop: %v", err)
		}
		ran := 0
		for n := 1; n <= Iterations; n++ {
			if s.When != nil && !s.When(n, Iterations) {
				continue
			}
			ran++
			for _, p := range outputPaths(t, s, n) {
				if b := l.read(t, p); len(b) == 0 {
					t.Errorf("iteration %d: output %s is not committed (or empty)", n, p)
				}
			}
			m, err := runs.ReadMetrics(context.Background(), l.st, l.branch, n)
			if err != nil || m == nil {
				t.Fatalf("iteration %d: metrics: %v", n, err)
			}
			if _, ok := m.Tasks[s.Name]; !ok {
				t.Errorf("iteration %d: the task metrics %v do not name the step's call %s", n, m.Tasks, s.Name)
			}
		}
		if ran == 0 {
			t.Fatalf("the step's When runs it in none of iterations 1..%d: nothing to check", Iterations)
		}
	})
	t.Run("Deterministic", func(t *testing.T) {
		t.Parallel()
		s := step(t)
		a, b := newLoop(t), newLoop(t)
		for _, l := range []*loop{a, b} {
			if _, err := l.run(t, stages(step(t), before), nil); err != nil {
				t.Fatalf("loop: %v", err)
			}
		}
		for n := 1; n <= Iterations; n++ {
			if s.When != nil && !s.When(n, Iterations) {
				continue
			}
			for _, p := range outputPaths(t, s, n) {
				if x, y := a.read(t, p), b.read(t, p); !bytes.Equal(x, y) {
					t.Errorf("iteration %d: %s differs between two runs with the same seed (%d and %d bytes)", n, p, len(x), len(y))
				}
			}
		}
	})
	t.Run("ResumeDoesNotRerun", func(t *testing.T) {
		t.Parallel()
		l := newLoop(t)
		s := step(t)
		first, err := l.run(t, stages(s, before), func(n int) bool { return n == 1 })
		if err != nil {
			t.Fatalf("first leg: %v", err)
		}
		second, err := l.run(t, stages(step(t), before), nil)
		if err != nil {
			t.Fatalf("resumed leg: %v", err)
		}
		if got := starts(second, s.Name, 1); got != 0 {
			t.Errorf("the resumed loop started the step's call of committed iteration 1 %d times, want 0", got)
		}
		if s.When == nil || s.When(1, Iterations) {
			if got := starts(first, s.Name, 1); got != 1 {
				t.Errorf("the first leg started the step's call of iteration 1 %d times, want 1", got)
			}
		}
		if s.When == nil || s.When(2, Iterations) {
			if got := starts(second, s.Name, 2); got != 1 {
				t.Errorf("the resumed loop started the step's call of iteration 2 %d times, want 1", got)
			}
		}
	})
}

// stages are the stand-in slots with before and s.
func stages(s pipeline.Step, before []pipeline.Step) pipeline.Stages {
	st := standin.Stages(standin.Options{SamplesPerPrompt: 2})
	st.Steps = append(slices.Clone(before), s)
	for _, slot := range pipeline.SlotNames() {
		t := pipeline.Feeding(slotTask(st, slot), slot, st.Steps)
		switch slot {
		case pipeline.SlotSample:
			st.Sample = t
		case pipeline.SlotGenerate:
			st.Generate = t
		case pipeline.SlotReward:
			st.Reward = t
		case pipeline.SlotTrain:
			st.Train = t
		}
	}
	return st
}

func slotTask(st pipeline.Stages, slot string) *pipeline.Task {
	return map[string]*pipeline.Task{pipeline.SlotSample: st.Sample, pipeline.SlotGenerate: st.Generate,
		pipeline.SlotReward: st.Reward, pipeline.SlotTrain: st.Train}[slot]
}

// outputPaths are the committed paths of s's declared file outputs in
// iteration n.
func outputPaths(t testing.TB, s pipeline.Step, n int) []string {
	t.Helper()
	var out []string
	for _, name := range s.Outputs {
		i := slices.IndexFunc(s.Task.Outputs, func(o pipeline.Output) bool { return o.Name == name })
		if i < 0 {
			t.Fatalf("the step declares output %s, which its task does not write", name)
		}
		if s.Task.Outputs[i].Dir {
			continue
		}
		file := s.Task.Outputs[i].File
		if s.Dir != nil {
			out = append(out, path.Join(s.Dir(n), file))
		} else {
			out = append(out, runs.IterationPath(n, file))
		}
	}
	return out
}

// loop is one scenario's store and run.
type loop struct {
	st     artifacts.Store
	branch string
}

func newLoop(t testing.TB) *loop {
	return &loop{st: Store(t), branch: runs.Branch("step")}
}

// run opens the run (again), runs the loop to Iterations (or until stop
// says so) and returns the events it saw.
func (l *loop) run(t testing.TB, st pipeline.Stages, stop func(int) bool) ([]pipeline.Event, error) {
	t.Helper()
	ctx := context.Background()
	envs := map[string]pipeline.Settings{}
	for _, task := range st.Tasks() {
		envs[task.Env] = pipeline.Settings{}
	}
	var events standin.Events
	r, err := pipeline.Open(ctx, l.st, pipeline.RunOptions{Name: "step", Seed: 5, Envs: envs, ConfigHash: "sha256:steptest", OnEvent: events.Add})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cfg := pipeline.LoopConfig{Iterations: Iterations, BatchSize: 3, Dataset: pipeline.StoreArtifact("main", Dataset), Stop: stop}
	_, err = r.Loop(ctx, cfg, st)
	return events.All(), err
}

// read is the committed object at p on the run branch (nil if absent).
func (l *loop) read(t testing.TB, p string) []byte {
	t.Helper()
	b, err := artifacts.ReadObject(context.Background(), l.st, l.branch, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// starts counts the started attempts of call name in iteration n.
func starts(events []pipeline.Event, name string, n int) int {
	c := 0
	for _, e := range events {
		if e.Kind == pipeline.EventStarted && e.Task == name && e.Iteration == n {
			c++
		}
	}
	return c
}
