package policy_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
)

// scriptPolicy answers every request with N samples "<id>/<j>", records
// the size of each Generate call and the adapters it loads, and can be
// told to drop a result, drop a sample, fail every sample or lose its
// adapters.
type scriptPolicy struct {
	loaderPolicy
	batches   []int
	adapters  []string // Sampling.Adapter of each call
	drop      string   // "result", "sample", "all-fail" or "lost"
	generated int
}

func (p *scriptPolicy) Generate(ctx context.Context, reqs []policy.Request, s policy.Sampling) ([][]policy.Sample, error) {
	p.batches = append(p.batches, len(reqs))
	p.adapters = append(p.adapters, s.Adapter)
	if p.drop == "lost" {
		return nil, fmt.Errorf("%w: %s", policy.ErrAdapterNotLoaded, s.Adapter)
	}
	out := make([][]policy.Sample, len(reqs))
	for i, r := range reqs {
		for j := range s.Samples() {
			smp := policy.Sample{RequestID: r.ID, Index: j, Text: fmt.Sprintf("%s/%d", r.ID, j)}
			if p.drop == "all-fail" {
				smp = policy.Sample{RequestID: r.ID, Index: j, Status: tables.StatusInfraError, Error: "connection refused"}
			}
			out[i] = append(out[i], smp)
		}
	}
	switch p.drop {
	case "result":
		out = out[:len(out)-1]
	case "sample":
		out[0] = out[0][:1]
	}
	p.generated += len(reqs)
	return out, nil
}

func prompts(n int) []tables.Prompt {
	out := make([]tables.Prompt, n)
	for i := range out {
		out[i] = tables.Prompt{PromptID: fmt.Sprintf("q%d", i), Prompt: fmt.Sprintf("%d+1=", i)}
	}
	return out
}

func TestRows(t *testing.T) {
	ctx := context.Background()
	s := policy.Sampling{N: 2, Temperature: 1, MaxTokens: 4}
	tests := []struct {
		name        string
		adapter     bool
		drop        string
		prompts     int
		batch       int
		wantBatches []int
		wantVersion string
		wantErr     string
	}{
		{name: "base model in batches of 2", prompts: 5, batch: 2, wantBatches: []int{2, 2, 1}, wantVersion: "base"},
		{name: "default batch", prompts: 65, wantBatches: []int{64, 1}, wantVersion: "base"},
		{name: "adapter names the version", adapter: true, prompts: 1, batch: 1, wantBatches: []int{1}, wantVersion: "base+adapter-3285a77212c0"},
		{name: "a missing result", drop: "result", prompts: 3, batch: 3, wantBatches: []int{3},
			wantErr: "the policy returned 2 results for 3 prompts"},
		{name: "a missing sample", drop: "sample", prompts: 3, batch: 3, wantBatches: []int{3},
			wantErr: `the policy returned 1 samples for prompt "q0", want 2`},
		{name: "none served", drop: "all-fail", prompts: 2, batch: 1, wantBatches: []int{1, 1},
			wantErr: `every one of the 4 samples failed, none served (the first, of prompt "q0": infra_error connection refused): check the policy's servers; the task is retried, and a rerun resumes here`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &scriptPolicy{drop: tc.drop}
			src := policy.Source{Policy: p, Identity: "base", Adapters: policy.NewAdapters(p, "base", "", 2)}
			dir := ""
			if tc.adapter {
				dir = adapterDir(t, `{"r":1}`)
			}
			const sampler = `{"n":2,"temperature":1,"top_p":0,"max_tokens":4}`
			rows, err := src.Rows(ctx, dir, prompts(tc.prompts), policy.RowsOptions{Sampling: s, Seed: 9, Batch: tc.batch, Row: policy.RowParams{Iteration: 3, Staleness: 1}})
			if !slices.Equal(p.batches, tc.wantBatches) {
				t.Errorf("batches = %v, want %v", p.batches, tc.wantBatches)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("err = %q, want %q", gotErr, tc.wantErr)
			}
			if err != nil {
				return
			}
			if len(rows) != 2*tc.prompts {
				t.Fatalf("%d rows, want %d", len(rows), 2*tc.prompts)
			}
			// (prompt, sample index) order, whatever the batches.
			for k, r := range rows {
				id := fmt.Sprintf("q%d", k/2)
				want := tables.Trajectory{PromptID: id, SampleIndex: int32(k % 2), GroupID: "000003-" + id,
					Completion: fmt.Sprintf("%s/%d", id, k%2), NumTokens: int32(len(id) + 2), PolicyVersion: tc.wantVersion,
					Sampler: sampler, Seed: policy.RequestSeed(9, id), Staleness: 1, Status: tables.StatusOK}
				if !reflect.DeepEqual(r, want) {
					t.Fatalf("row %d = %+v, want %+v", k, r, want)
				}
			}
		})
	}
}

// TestRowsReloadLostAdapter: a policy that lost its adapter (a server
// that restarted) fails the call with ErrAdapterNotLoaded, and the next
// attempt loads the adapter again (Checkpoint.Failed).
func TestRowsReloadLostAdapter(t *testing.T) {
	ctx := context.Background()
	p := &scriptPolicy{drop: "lost"}
	src := policy.Source{Policy: p, Identity: "base", Adapters: policy.NewAdapters(p, "base", "", 2)}
	dir := adapterDir(t, `{"r":1}`)
	for attempt := 1; attempt <= 2; attempt++ {
		_, err := src.Rows(ctx, dir, prompts(1), policy.RowsOptions{Sampling: policy.Sampling{N: 1, Temperature: 1}})
		if want := "adapter not loaded: adapter-3285a77212c0"; err == nil || err.Error() != want || !errors.Is(err, policy.ErrAdapterNotLoaded) {
			t.Fatalf("attempt %d: err = %v, want %q", attempt, err, want)
		}
	}
	want := []string{"load adapter-3285a77212c0", "load adapter-3285a77212c0"}
	if !slices.Equal(p.calls, want) {
		t.Errorf("loader calls = %q, want %q", p.calls, want)
	}
	if want := []string{"adapter-3285a77212c0", "adapter-3285a77212c0"}; !slices.Equal(p.adapters, want) {
		t.Errorf("sampled adapters = %q, want %q", p.adapters, want)
	}
}

// TestCheckpointAdapterInput: an adapter the policy cannot load is an
// ErrAdapterInput from Checkpoint, before any sampling.
func TestCheckpointAdapterInput(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		policy  policy.Policy
		dir     string
		wantErr string
	}{
		{name: "policy cannot load adapters", policy: basePolicy{}, dir: "config",
			wantErr: "the policy input is an adapter, but policy base cannot load adapters"},
		{name: "tensors do not fit", policy: &loaderPolicy{shapeErr: true}, dir: "config",
			wantErr: "load adapter adapter-3285a77212c0: tensor layers.0.q_proj.lora_A: adapter does not match the base model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "config" {
				dir = adapterDir(t, `{"r":1}`)
			}
			src := policy.Source{Policy: tc.policy, Identity: "base", Adapters: policy.NewAdapters(tc.policy, "base", "", 2)}
			_, err := src.Checkpoint(ctx, dir, policy.Sampling{N: 1})
			if err == nil || err.Error() != tc.wantErr || !errors.Is(err, policy.ErrAdapterInput) {
				t.Fatalf("err = %v, want %q matching ErrAdapterInput", err, tc.wantErr)
			}
		})
	}
}

// TestRowsBatchInvariant: on the embedded tiny model, the rows
// are the same bytes whatever the batch size, since every prompt is seeded
// on its own; evaluation relies on it to batch without changing what a
// checkpoint samples.
func TestRowsBatchInvariant(t *testing.T) {
	ctx := context.Background()
	m, err := tiny.New(tiny.DefaultConfig(), 7)
	if err != nil {
		t.Fatal(err)
	}
	p := tiny.NewPolicy(m)
	src := policy.Source{Policy: p, Identity: "tiny", Adapters: policy.NewAdapters(p, "tiny", "", 2)}
	var first []tables.Trajectory
	for _, batch := range []int{1, 4, 64} {
		rows, err := src.Rows(ctx, "", prompts(7), policy.RowsOptions{Sampling: policy.Sampling{N: 3, Temperature: 1, MaxTokens: 6}, Seed: 11, Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = rows
			continue
		}
		if !reflect.DeepEqual(rows, first) {
			t.Errorf("batch %d: rows differ from batch 1's", batch)
		}
	}
	if len(first) != 21 {
		t.Errorf("%d rows, want 21", len(first))
	}
}

// TestNewSource: a shared loader is used as it is; without one the task
// gets a loader of its own with the given keep.
func TestNewSource(t *testing.T) {
	ctx := context.Background()
	p := &loaderPolicy{}
	shared := policy.NewAdapters(p, "base", "", 3)
	if src := policy.NewSource(p, "base", shared, "", 1); src.Adapters != shared || src.Identity != "base" {
		t.Fatalf("NewSource with a shared loader = %+v, want that loader", src)
	}
	own := policy.NewSource(p, "base", nil, "", 1).Adapters
	for _, cfg := range []string{`{"r":1}`, `{"r":2}`} {
		if _, err := own.Load(ctx, adapterDir(t, cfg)); err != nil {
			t.Fatal(err)
		}
	}
	// keep 1: the second load unloads the first.
	want := []string{"load adapter-3285a77212c0", "load adapter-7b795ad73c77", "unload adapter-3285a77212c0"}
	if !slices.Equal(p.calls, want) {
		t.Errorf("calls = %q, want %q", p.calls, want)
	}
}
