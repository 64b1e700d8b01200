package rollouts_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/rollouts"
)

// seedPolicy is a deterministic policy: each sample's text is derived from
// its seed. Prompts whose id is in fail come back as infra errors, the
// way an endpoint that keeps failing does.
type seedPolicy struct {
	mu       sync.Mutex
	adapters map[string]string
	loads    []string
	unloads  []string
	fail     map[string]bool
	shapeErr bool
}

func (p *seedPolicy) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	version := "seed"
	if s.Adapter != "" {
		if _, ok := p.adapters[s.Adapter]; !ok {
			return nil, fmt.Errorf("%q: %w", s.Adapter, policy.ErrAdapterNotLoaded)
		}
		version += "+" + s.Adapter
	}
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		if p.fail[r.ID] {
			out[i] = policy.ErrorSamples(r, s.Samples(), policy.StatusInfraError, errors.New("endpoint down"), version)
			continue
		}
		for j := range s.Samples() {
			v := policy.SampleSeed(r.Seed, j)
			text := fmt.Sprint(v % 1000)
			out[i] = append(out[i], policy.Sample{RequestID: r.ID, Index: j, Text: text, TokenIDs: []int32{int32(v % 7)},
				Logprobs: []float32{-float32(v%5) / 4}, FinishReason: policy.FinishStop, PolicyVersion: version, Status: policy.StatusOK})
		}
	}
	return out, nil
}

func (p *seedPolicy) LoadAdapter(ctx context.Context, name, dir string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shapeErr {
		return fmt.Errorf("tensor layers.0.q_proj.lora_A: %w", policy.ErrAdapterShape)
	}
	if _, err := os.Stat(filepath.Join(dir, "adapter_config.json")); err != nil {
		return err
	}
	p.adapters[name] = dir
	p.loads = append(p.loads, name)
	return nil
}

func (p *seedPolicy) UnloadAdapter(ctx context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.adapters, name)
	p.unloads = append(p.unloads, name)
	return nil
}

func newSeedPolicy() *seedPolicy {
	return &seedPolicy{adapters: map[string]string{}, fail: map[string]bool{}}
}

// runLoop runs iterations of the stand-in loop on 6 prompts with a
// rollout task of pol (its options changed by mutate, when not nil) as the
// generate stage, and returns the store and the loop's error.
func runLoop(t *testing.T, pol policy.Policy, iterations int, mutate func(*rollouts.Options)) (artifacts.Store, error) {
	t.Helper()
	ctx := context.Background()
	st := standintest.NewStore(t, 6)
	o := rollouts.Options{Policy: pol, Identity: "seed", Sampling: policy.Sampling{N: 3, Temperature: 1, MaxTokens: 8}, KeepAdapters: 2}
	if mutate != nil {
		mutate(&o)
	}
	gen, err := rollouts.Task(o)
	if err != nil {
		t.Fatal(err)
	}
	stages := standin.Stages(standin.Options{SamplesPerPrompt: 3})
	stages.Generate = gen
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: 2, Backoff: time.Millisecond}}
	run, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "r", Seed: 5,
		Envs: map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "train": quick}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	_, err = run.Loop(ctx, pipeline.LoopConfig{Iterations: iterations, BatchSize: 2,
		Dataset: pipeline.StoreArtifact("main", standintest.DatasetPath)}, stages)
	return st, err
}

func trajectories(t *testing.T, st artifacts.Store, ref string, iteration int) []tables.Trajectory {
	t.Helper()
	ctx := context.Background()
	prefix := fmt.Sprintf("iterations/%06d/", iteration)
	for e, err := range st.ListObjects(ctx, ref, &artifacts.ListOptions{Prefix: prefix}) {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(e.Path, "trajectories.parquet") {
			continue
		}
		return standintest.ReadRows(t, st, ref, e.Path, tables.Trajectories)
	}
	t.Fatalf("no trajectories under %s", prefix)
	return nil
}

func TestRolloutTaskInLoop(t *testing.T) {
	pol := newSeedPolicy()
	pol.fail["p003"] = true
	st, err := runLoop(t, pol, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	it1 := trajectories(t, st, "runs-r", 1)
	if len(it1) != 6 {
		t.Fatalf("iteration 1: %d rows, want 2 prompts × 3 samples", len(it1))
	}
	for i, r := range it1 {
		if r.PolicyVersion != "seed" || r.SampleIndex != int32(i%3) || r.Status != tables.StatusOK {
			t.Errorf("iteration 1 row %d: %+v", i, r)
		}
	}
	if it1[0].Seed == 0 || it1[0].Seed != it1[2].Seed || it1[0].Seed == it1[3].Seed {
		t.Errorf("request seeds %d %d %d: want one nonzero seed per prompt", it1[0].Seed, it1[2].Seed, it1[3].Seed)
	}
	// Iteration 2 samples from iteration 1's adapter (on-policy loop) and
	// holds p002, p003: p003's samples are infra errors, kept with status.
	it2 := trajectories(t, st, "runs-r", 2)
	var failed int
	for _, r := range it2 {
		if !strings.HasPrefix(r.PolicyVersion, "seed+adapter-") {
			t.Errorf("iteration 2 sampled from %q, want iteration 1's adapter", r.PolicyVersion)
		}
		if r.PromptID == "p003" {
			failed++
			if r.Status != tables.StatusInfraError || r.Error == nil || *r.Error != "endpoint down" {
				t.Errorf("failed sample recorded as %q %v", r.Status, r.Error)
			}
		}
	}
	if failed != 3 {
		t.Errorf("%d failed samples recorded, want 3", failed)
	}
	// Two adapters were loaded (iterations 1 and 2), none unloaded yet
	// with KeepAdapters 2.
	if len(pol.loads) != 2 || len(pol.unloads) != 0 {
		t.Errorf("loads %v unloads %v", pol.loads, pol.unloads)
	}
}

// A batch none of whose samples the servers served fails the generate
// task (retried), instead of committing an iteration of failures.
func TestRolloutTaskFailsWhenNoSampleIsServed(t *testing.T) {
	pol := newSeedPolicy()
	for i := range 6 {
		pol.fail[fmt.Sprintf("p%03d", i)] = true
	}
	_, err := runLoop(t, pol, 1, nil)
	if err == nil || !strings.Contains(err.Error(), "every one of the 6 samples failed") || !strings.Contains(err.Error(), "infra_error endpoint down") {
		t.Fatalf("err = %v: want the generate task to fail with the samples' error", err)
	}
	if strings.Contains(err.Error(), "after 1 attempt") {
		t.Errorf("err = %v: want it retried", err)
	}
}

func TestRolloutTaskUnloadsOldAdapters(t *testing.T) {
	pol := newSeedPolicy()
	if _, err := runLoop(t, pol, 5, nil); err != nil {
		t.Fatal(err)
	}
	if len(pol.loads) != 4 || len(pol.unloads) != 2 || pol.unloads[0] != pol.loads[0] || pol.unloads[1] != pol.loads[1] {
		t.Errorf("loads %v unloads %v: want the two oldest unloaded", pol.loads, pol.unloads)
	}
	if len(pol.adapters) != 2 {
		t.Errorf("%d adapters loaded, want 2", len(pol.adapters))
	}
}

func TestRolloutTaskDeterministic(t *testing.T) {
	a, err := runLoop(t, newSeedPolicy(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := runLoop(t, newSeedPolicy(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for it := 1; it <= 2; it++ {
		ra, rb := trajectories(t, a, "runs-r", it), trajectories(t, b, "runs-r", it)
		if fmt.Sprint(ra) != fmt.Sprint(rb) {
			t.Errorf("iteration %d differs between two runs with one seed", it)
		}
	}
}

func TestRolloutTaskAdapterShapeIsPermanent(t *testing.T) {
	pol := newSeedPolicy()
	pol.shapeErr = true
	_, err := runLoop(t, pol, 2, nil)
	if err == nil || !errors.Is(err, policy.ErrAdapterShape) || !strings.Contains(err.Error(), "layers.0.q_proj.lora_A") {
		t.Fatalf("err = %v, want the adapter shape error naming the tensor", err)
	}
}

func TestRolloutTaskCopiesAdaptersToRoot(t *testing.T) {
	root := t.TempDir()
	pol := newSeedPolicy()
	if _, err := runLoop(t, pol, 2, func(o *rollouts.Options) { o.AdapterRoot = root }); err != nil {
		t.Fatal(err)
	}
	if len(pol.loads) != 1 {
		t.Fatalf("loads %v", pol.loads)
	}
	dir := pol.adapters[pol.loads[0]]
	if filepath.Dir(dir) != root {
		t.Fatalf("adapter loaded from %s, want under %s", dir, root)
	}
	if _, err := os.Stat(filepath.Join(dir, "adapter_config.json")); err != nil {
		t.Fatal(err)
	}
}

func TestRolloutTaskRejectsBadOptions(t *testing.T) {
	if _, err := rollouts.Task(rollouts.Options{}); err == nil {
		t.Error("no policy accepted")
	}
	if _, err := rollouts.Task(rollouts.Options{Policy: newSeedPolicy(), Sampling: policy.Sampling{Temperature: -1}}); err == nil ||
		!strings.Contains(err.Error(), "temperature") {
		t.Errorf("negative temperature: %v", err)
	}
	_, err := rollouts.Task(rollouts.Options{Policy: newSeedPolicy(), Sampling: policy.Sampling{Temperature: math.NaN()}})
	if want := "rollouts: sampling: temperature is NaN; it must be a number ≥ 0"; err == nil || err.Error() != want {
		t.Errorf("NaN temperature: %v, want %q", err, want)
	}
}
