package advantages_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/pipeline/standin/steptest"
)

// handBatch is a small iteration: prompt a has a failed sample, b a group
// of equal rewards, c a sample without a reward and one without token ids.
func handBatch() ([]tables.Trajectory, []tables.Reward) {
	ok := tables.StatusOK
	trajs := []tables.Trajectory{
		traj("c", 2, ok, 6), traj("a", 1, ok, 7), traj("b", 0, ok, 5), traj("a", 0, ok, 9),
		traj("c", 0, ok, 4), traj("b", 1, ok, 5), traj("a", 2, tables.StatusTimeout), traj("c", 1, ok),
	}
	rewards := []tables.Reward{rew("a", 0, 1), rew("a", 1, 0), {PromptID: "a", SampleIndex: 2, Status: tables.StatusTimeout, Total: math.NaN()},
		rew("b", 1, 1), rew("b", 0, 1), rew("c", 1, 0.25), rew("c", 2, 0.75)}
	return trajs, rewards
}

// runTask runs t once in iteration n of a run on st, with the tables as
// its trajectories and rewards inputs, and returns the node.
func runTask(t *testing.T, st artifacts.Store, r *pipeline.Run, n int, task *pipeline.Task, trajs []tables.Trajectory, rewards []tables.Reward) *pipeline.Node {
	t.Helper()
	ctx := context.Background()
	in := map[string]pipeline.Artifact{
		pipeline.OutTrajectories: standintest.PutInput(t, st, fmt.Sprintf("in/%d/trajectories.parquet", n), tables.Trajectories, trajs),
		pipeline.OutRewards:      standintest.PutInput(t, st, fmt.Sprintf("in/%d/rewards.parquet", n), tables.Rewards, rewards),
	}
	node := r.Iteration(n).Go(ctx, task, pipeline.Call{Inputs: in, Params: map[string]int{"iteration": n}})
	_ = node.Wait(ctx)
	return node
}

func openRun(t *testing.T) (artifacts.Store, *pipeline.Run) {
	t.Helper()
	ctx := context.Background()
	st, err := local.Create(ctx, filepath.Join(t.TempDir(), "store"), "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := pipeline.Open(ctx, st, pipeline.RunOptions{Name: "adv", WorkDir: t.TempDir(),
		Envs: map[string]pipeline.Settings{"advantages": {}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return st, r
}

func readAdvantages(t *testing.T, st artifacts.Store, ref, path string) []tables.Advantage {
	t.Helper()
	b, err := artifacts.ReadObject(context.Background(), st, ref, path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tables.Read(bytes.NewReader(b), int64(len(b)), path, tables.Advantages)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestTrainTask: the advantages step writes Join's rows, masks and
// reasons included, to advantages.parquet in the iteration's directory,
// and reads back exactly; the same call again is a cache hit.
func TestTrainTask(t *testing.T) {
	eps, half, quarter := 1e-6, 0.5, 0.25
	// The sample stds of groups a ({1, 0}) and c ({0.75, 0.25}): the
	// population ones ×√2.
	sa, sc := half*math.Sqrt2, quarter*math.Sqrt2
	adv := func(p string, i int32, a, mean, std float64, size int32, reason string) tables.Advantage {
		return tables.Advantage{PromptID: p, SampleIndex: i, Advantage: a, GroupMean: mean, GroupStd: std, GroupSize: size, Mask: reason != "", Reason: reason}
	}
	for _, tc := range []struct {
		name string
		o    advantages.TrainOptions
		want []tables.Advantage
	}{
		{"defaults: the sample std", advantages.TrainOptions{}, []tables.Advantage{
			adv("a", 0, half/(sa+eps), 0.5, sa, 2, ""),
			adv("a", 1, -half/(sa+eps), 0.5, sa, 2, ""),
			adv("a", 2, 0, 0.5, sa, 2, "trajectory status timeout"),
			adv("b", 0, 0, 1, 0, 2, "zero reward variance"),
			adv("b", 1, 0, 1, 0, 2, "zero reward variance"),
			adv("c", 0, 0, 0.5, sc, 2, "no reward"),
			adv("c", 1, 0, 0.5, sc, 2, "no token ids"),
			adv("c", 2, quarter/(sc+eps), 0.5, sc, 2, ""),
		}},
		{"population std", advantages.TrainOptions{Options: advantages.Options{PopulationStd: true}}, []tables.Advantage{
			adv("a", 0, half/(half+eps), 0.5, 0.5, 2, ""),
			adv("a", 1, -half/(half+eps), 0.5, 0.5, 2, ""),
			adv("a", 2, 0, 0.5, 0.5, 2, "trajectory status timeout"),
			adv("b", 0, 0, 1, 0, 2, "zero reward variance"),
			adv("b", 1, 0, 1, 0, 2, "zero reward variance"),
			adv("c", 0, 0, 0.5, 0.25, 2, "no reward"),
			adv("c", 1, 0, 0.5, 0.25, 2, "no token ids"),
			adv("c", 2, quarter/(quarter+eps), 0.5, 0.25, 2, ""),
		}},
		{"no std, keep zero std", advantages.TrainOptions{Options: advantages.Options{NoStd: true}, KeepZeroStd: true}, []tables.Advantage{
			adv("a", 0, 0.5, 0.5, sa, 2, ""),
			adv("a", 1, -0.5, 0.5, sa, 2, ""),
			adv("a", 2, 0, 0.5, sa, 2, "trajectory status timeout"),
			adv("b", 0, 0, 1, 0, 2, ""),
			adv("b", 1, 0, 1, 0, 2, ""),
			adv("c", 0, 0, 0.5, sc, 2, "no reward"),
			adv("c", 1, 0, 0.5, sc, 2, "no token ids"),
			adv("c", 2, 0.25, 0.5, sc, 2, ""),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, r := openRun(t)
			trajs, rewards := handBatch()
			task := advantages.TrainTask(tc.o)
			if task.Name != "advantages" || task.Env != "advantages" || !task.Deterministic || task.Version != tc.o.Version() {
				t.Fatalf("task %s/%s env %s deterministic %v", task.Name, task.Version, task.Env, task.Deterministic)
			}
			n := runTask(t, st, r, 1, task, trajs, rewards)
			out, err := n.Result(advantages.OutAdvantages)
			if err != nil {
				t.Fatal(err)
			}
			if out.Path != "iterations/000001/advantages.parquet" {
				t.Errorf("output at %s", out.Path)
			}
			got := readAdvantages(t, st, r.Branch(), out.Path)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rows\n got %+v\nwant %+v", got, tc.want)
			}
			j, err := advantages.Join(trajs, rewards, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, j.Advantages) {
				t.Errorf("rows differ from Join's")
			}
			again := runTask(t, st, r, 1, task, trajs, rewards)
			if err := again.Wait(context.Background()); err != nil || !again.Cached() {
				t.Errorf("the same call again: err %v, cached %v", err, again.Cached())
			}
		})
	}
}

func TestTrainTaskRejectsInconsistentBatch(t *testing.T) {
	st, r := openRun(t)
	trajs, rewards := handBatch()
	n := runTask(t, st, r, 1, advantages.TrainTask(advantages.TrainOptions{}), trajs, append(rewards, rew("z", 0, 1)))
	err := n.Wait(context.Background())
	if !errors.Is(err, advantages.ErrBatch) || !errors.Is(err, pipeline.ErrPermanent) ||
		!strings.Contains(err.Error(), `advantages of iteration 1: inconsistent training batch: a reward scores sample 0 of prompt "z"`) {
		t.Fatalf("err %v, want a permanent ErrBatch", err)
	}
}

// TestTrainTaskRejectsNonfinite: a reward that says ok with a NaN total
// fails the advantages step permanently, naming the file, the row and
// the sample.
func TestTrainTaskRejectsNonfinite(t *testing.T) {
	st, r := openRun(t)
	trajs, rewards := handBatch()
	rewards[3].Total = math.Inf(1)
	n := runTask(t, st, r, 1, advantages.TrainTask(advantages.TrainOptions{}), trajs, rewards)
	err := n.Wait(context.Background())
	const want = `advantages of iteration 1: inconsistent training batch: a value is NaN or infinite: rewards.parquet row 4 (prompt "b", sample 1): total +Inf with status ok; make the reward finite, or give the row status nonfinite so that it is masked, and rescore the iteration (rlpipe rescore --reward)`
	if !errors.Is(err, advantages.ErrNonfinite) || !errors.Is(err, pipeline.ErrPermanent) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v\nwant a permanent error saying %s", err, want)
	}
}

func TestTrainOptionsVersion(t *testing.T) {
	base := advantages.TrainOptions{}
	if v := base.Version(); v != "join-2 epsilon=1e-06 no_std=false keep_zero_std=false std=sample" {
		t.Errorf("version %q", v)
	}
	if (advantages.TrainOptions{Options: advantages.Options{Epsilon: 1e-6}}).Version() != base.Version() {
		t.Errorf("the default epsilon spelled out names another version")
	}
	seen := map[string]bool{base.Version(): true}
	for _, o := range []advantages.TrainOptions{{Options: advantages.Options{NoStd: true}}, {KeepZeroStd: true}, {Options: advantages.Options{Epsilon: 1e-3}}, {Options: advantages.Options{PopulationStd: true}}} {
		if seen[o.Version()] {
			t.Errorf("%+v shares version %q", o, o.Version())
		}
		seen[o.Version()] = true
	}
}

// A task version gives back the options it was made from, and what is not
// a version this code writes is an error that shows it.
func TestParseVersion(t *testing.T) {
	for _, o := range []advantages.TrainOptions{
		{},
		{Options: advantages.Options{NoStd: true}},
		{KeepZeroStd: true},
		{Options: advantages.Options{PopulationStd: true}},
		{Options: advantages.Options{Epsilon: 1.2345678901234e-7, NoStd: true}, KeepZeroStd: true},
	} {
		got, err := advantages.ParseVersion(o.Version())
		if err != nil || got.Version() != o.Version() {
			t.Errorf("ParseVersion(%q) = %+v, %v", o.Version(), got, err)
		}
		if o.Epsilon != 0 && got.Epsilon != o.Epsilon {
			t.Errorf("epsilon %v came back as %v", o.Epsilon, got.Epsilon)
		}
	}
	// The advantages tables of runs made before episodes were masked
	// (join-1) are read with the same options, and those made before the
	// sample std became the default (no std=sample) with the population
	// std they computed.
	for _, v := range []string{"join-1 epsilon=1e-06 no_std=true keep_zero_std=false", "join-2 epsilon=1e-06 no_std=true keep_zero_std=false estimator=dr_grpo"} {
		o, err := advantages.ParseVersion(v, advantages.DrGRPO)
		if err != nil || !o.NoStd || o.KeepZeroStd || !o.PopulationStd {
			t.Errorf("version %q: %+v, %v; want no_std and the population std", v, o, err)
		}
		if pop, ok := advantages.VersionStd(v); !pop || !ok {
			t.Errorf("VersionStd(%q) = %t, %t; want the population std", v, pop, ok)
		}
	}
	if pop, ok := advantages.VersionStd("join-2 epsilon=1e-06 no_std=false keep_zero_std=false std=sample estimator=rloo"); pop || !ok {
		t.Errorf("VersionStd of a sample std's version = %t, %t", pop, ok)
	}
	for _, v := range []string{"grpo-1", "join-3 epsilon=1e-06 no_std=false keep_zero_std=false std=sample", ""} {
		if _, ok := advantages.VersionStd(v); ok {
			t.Errorf("VersionStd(%q) reads it as a version this code writes", v)
		}
	}
	for _, v := range []string{"grpo-1", "join-1", "join-1 epsilon=x no_std=false keep_zero_std=false", "join-1 epsilon=1e-06 no_std=false keep_zero_std=false extra",
		"join-3 epsilon=1e-06 no_std=false keep_zero_std=false", "join-2 epsilon=1e-06 no_std=maybe keep_zero_std=false"} {
		if _, err := advantages.ParseVersion(v); err == nil || !strings.Contains(err.Error(), strconv.Quote(v)) {
			t.Errorf("ParseVersion(%q) = %v, want an error quoting it", v, err)
		}
	}
}

// TestGiven: the rows Join wrote, in any order, give back Join's batch,
// stats included.
func TestGiven(t *testing.T) {
	trajs, rewards := handBatch()
	for _, o := range []advantages.TrainOptions{{}, {Options: advantages.Options{NoStd: true}, KeepZeroStd: true}} {
		j, err := advantages.Join(trajs, rewards, o)
		if err != nil {
			t.Fatal(err)
		}
		rows := append([]tables.Advantage(nil), j.Advantages...)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(rows), func(a, b int) { rows[a], rows[b] = rows[b], rows[a] })
		g, err := advantages.Given(trajs, rewards, rows)
		if err != nil {
			t.Fatal(err)
		}
		if describe(g) != describe(j) || !reflect.DeepEqual(g.Advantages, j.Advantages) || g.Stats != j.Stats ||
			!reflect.DeepEqual(g.Trajectories, j.Trajectories) || fmt.Sprint(g.Scored) != fmt.Sprint(j.Scored) {
			t.Errorf("%+v: Given\n %s %+v\nJoin\n %s %+v", o, describe(g), g.Stats, describe(j), j.Stats)
		}
	}
}

func TestGivenErrors(t *testing.T) {
	trajs, rewards := handBatch()
	j, err := advantages.Join(trajs, rewards, advantages.TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func([]tables.Advantage) []tables.Advantage
		want   string
	}{
		{"unknown sample", func(r []tables.Advantage) []tables.Advantage { r[3].PromptID = "z"; return r },
			`row 4 is sample 0 of prompt "z", which the trajectories do not hold`},
		{"sample twice", func(r []tables.Advantage) []tables.Advantage { r[4] = r[1]; return r },
			`row 5 is sample 1 of prompt "a" again (row 2 was)`},
		{"row missing", func(r []tables.Advantage) []tables.Advantage { return r[:7] },
			`none of the 7 rows is sample 2 of prompt "c"`},
		{"trains on a failed sample", func(r []tables.Advantage) []tables.Advantage { r[2].Mask, r[2].Reason = false, ""; return r },
			`row 3 trains on sample 2 of prompt "a", which is not scored (status trajectory timeout)`},
		{"trains on no tokens", func(r []tables.Advantage) []tables.Advantage { r[6].Mask, r[6].Reason = false, ""; return r },
			`row 7 trains on sample 1 of prompt "c", which has no token ids`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := tc.mutate(append([]tables.Advantage(nil), j.Advantages...))
			_, err := advantages.Given(trajs, rewards, rows)
			want := "inconsistent training batch: the advantages do not fit the trajectories: " + tc.want
			if !errors.Is(err, advantages.ErrRows) || !errors.Is(err, advantages.ErrBatch) || err.Error() != want {
				t.Fatalf("err = %v\nwant ErrRows %q", err, want)
			}
		})
	}
}

// TestStepConformance: the advantages step passes the shared step suite,
// with the options of both trainers' hyperparameters.
func TestStepConformance(t *testing.T) {
	for _, o := range []advantages.TrainOptions{{}, {Options: advantages.Options{NoStd: true}, KeepZeroStd: true}} {
		t.Run(fmt.Sprintf("no_std=%v keep_zero_std=%v", o.NoStd, o.KeepZeroStd), func(t *testing.T) {
			steptest.Run(t, func(testing.TB) pipeline.Step { return advantages.Step(o) })
		})
	}
}
