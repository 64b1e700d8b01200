package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
)

// groupRewards are a prompt's rewards, one a sample; NaN is a reward that
// failed (not scored).
func groupRewards(id string, totals ...float64) []tables.Reward {
	var out []tables.Reward
	for i, v := range totals {
		r := tables.Reward{PromptID: id, SampleIndex: int32(i), Total: v, Status: tables.StatusOK}
		if math.IsNaN(v) {
			r.Status = "error"
		}
		out = append(out, r)
	}
	return out
}

// TestInformative: a group carries a signal when at least two of its
// samples are scored and their rewards are not all equal; a prompt a
// later round draws again counts once, in the round that drew it first.
func TestInformative(t *testing.T) {
	nan := math.NaN()
	round0 := slicesConcat(groupRewards("a", 1, 1), groupRewards("b", 0, 1), groupRewards("c", 1, nan), groupRewards("d", 0.5))
	round1 := slicesConcat(groupRewards("e", 0, 0.25), groupRewards("a", 0, 1), groupRewards("f", nan, nan))
	inf, rep := pipeline.Informative([][]tables.Reward{round0, round1})
	if want := [][]string{{"b"}, {"e"}}; !reflect.DeepEqual(inf, want) {
		t.Errorf("informative %v, want %v", inf, want)
	}
	if want := [][]string{nil, {"a"}}; !reflect.DeepEqual(rep, want) {
		t.Errorf("repeated %v, want %v", rep, want)
	}
}

func slicesConcat(parts ...[]tables.Reward) []tables.Reward {
	var out []tables.Reward
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestFilterGroupsTask: the merge keeps the first batch_size informative
// groups in round order, fills a short batch with the first zero-variance
// groups, never keeps a prompt drawn again, writes the kept groups' rows
// of all three tables, and records the rounds, the counts and why it
// stopped.
func TestFilterGroupsTask(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 1)
	r := openRun(t, st, pipeline.RunOptions{Envs: map[string]pipeline.Settings{pipeline.FilterGroupsName: {}}})
	nan := math.NaN()
	rounds := []struct {
		ids     []string
		rewards []tables.Reward
	}{
		{[]string{"a", "b", "c"}, slicesConcat(groupRewards("a", 1, 1), groupRewards("b", 0, 1), groupRewards("c", 0, nan))},
		{[]string{"d", "a", "e"}, slicesConcat(groupRewards("d", 1, 0), groupRewards("a", 0, 1), groupRewards("e", 0, 0))},
	}
	in := map[string]pipeline.Artifact{}
	for k, rd := range rounds {
		var ps []tables.Prompt
		var ts []tables.Trajectory
		for _, id := range rd.ids {
			ps = append(ps, tables.Prompt{PromptID: id, Prompt: "q " + id})
		}
		for _, w := range rd.rewards {
			ts = append(ts, tables.Trajectory{PromptID: w.PromptID, SampleIndex: w.SampleIndex, Completion: "round " + string(rune('0'+k)), Status: tables.StatusOK})
		}
		dir := "in/" + string(rune('0'+k)) + "/"
		in["prompts-0"+string(rune('0'+k))] = standintest.PutInput(t, st, dir+"p.parquet", tables.Prompts, ps)
		in["trajectories-0"+string(rune('0'+k))] = standintest.PutInput(t, st, dir+"t.parquet", tables.Trajectories, ts)
		in["rewards-0"+string(rune('0'+k))] = standintest.PutInput(t, st, dir+"r.parquet", tables.Rewards, rd.rewards)
	}
	it := r.Iteration(4)
	node := it.Go(ctx, pipeline.FilterGroupsTask(), pipeline.Call{Inputs: in,
		Params: map[string]int{"iteration": 4, "batch_size": 3, "cursor": 8, "rounds": 2, "max_num_gen_batches": 2}})
	if err := node.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	res := func(out string) string {
		a, err := node.Result(out)
		if err != nil {
			t.Fatal(err)
		}
		return a.Path
	}
	var ids, trajs []string
	for _, p := range standintest.ReadRows(t, st, r.Branch(), res(pipeline.OutPrompts), tables.Prompts) {
		ids = append(ids, p.PromptID)
	}
	for _, x := range standintest.ReadRows(t, st, r.Branch(), res(pipeline.OutTrajectories), tables.Trajectories) {
		trajs = append(trajs, x.PromptID+":"+x.Completion)
	}
	rw := standintest.ReadRows(t, st, r.Branch(), res(pipeline.OutRewards), tables.Rewards)
	// b and d have a spread; a (round 0) fills the batch; a again in
	// round 1 is never kept; c has one scored sample, e none that differ.
	if got := strings.Join(ids, " "); got != "b d a" || len(rw) != 6 ||
		strings.Join(trajs, " ") != "b:round 0 b:round 0 d:round 1 d:round 1 a:round 0 a:round 0" {
		t.Errorf("batch %s, trajectories %v, %d rewards", got, trajs, len(rw))
	}
	if p := res(pipeline.OutPrompts); p != runs.IterationPath(4, runs.PromptsFile) {
		t.Errorf("prompts at %s", p)
	}
	b, err := artifacts.ReadObject(ctx, st, r.Branch(), res(pipeline.OutFilter))
	if err != nil {
		t.Fatal(err)
	}
	var f pipeline.FilterGroups
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	want := pipeline.FilterGroups{BatchSize: 3, MaxGenBatches: 2, PromptsDrawn: 6, GroupsKept: 2, GroupsPadded: 1, GroupsDropped: 3, Shortfall: 1,
		Stop: pipeline.StopMaxGenBatches, Rounds: []pipeline.FilterRound{
			{Round: 0, Dir: "iterations/000004/rounds/00", Cursor: 8, Prompts: 3, Informative: 1, Why: "the iteration's batch"},
			{Round: 1, Dir: "iterations/000004/rounds/01", Cursor: 11, Prompts: 3, Informative: 1, Repeated: 1, Why: "informative groups: 1 of 3 after round 0"},
		}}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("record\n got %+v\nwant %+v", f, want)
	}
}

// TestLoopRefusesBadDynamicSampling: a negative bound, or a bound without
// the merge task, is a config error before anything runs.
func TestLoopRefusesBadDynamicSampling(t *testing.T) {
	st := standintest.NewStore(t, 4)
	r := openRun(t, st, pipeline.RunOptions{})
	stages := standin.Stages(standin.Options{})
	for _, tc := range []struct {
		name  string
		max   int
		merge bool
		want  string
	}{
		{"negative", -1, true, "invalid pipeline config: filter_groups.max_num_gen_batches must be ≥ 1"},
		{"no merge task", 2, false, "invalid pipeline config: dynamic sampling needs the stages' FilterGroups task (pipeline.FilterGroupsTask)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stages
			if tc.merge {
				s.FilterGroups = pipeline.FilterGroupsTask()
			}
			cfg := pipeline.LoopConfig{Iterations: 1, BatchSize: 2, MaxGenBatches: tc.max, Dataset: pipeline.StoreArtifact("main", standintest.DatasetPath)}
			_, err := r.Loop(context.Background(), cfg, s)
			if !errors.Is(err, pipeline.ErrConfig) || err.Error() != tc.want {
				t.Errorf("err %v, want %s", err, tc.want)
			}
		})
	}
}
