package advantages_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

func traj(p string, i int32, status string, toks ...int32) tables.Trajectory {
	return tables.Trajectory{PromptID: p, SampleIndex: i, Status: status, TokenIDs: toks}
}

func rew(p string, i int32, v float64) tables.Reward {
	return tables.Reward{PromptID: p, SampleIndex: i, Total: v, Status: tables.StatusOK}
}

// describe lists a batch's rows as "a0:+1.000" or "a2:<reason>".
func describe(b advantages.Batch) string {
	var out []string
	for i, a := range b.Advantages {
		t := b.Trajectories[i]
		s := fmt.Sprintf("%s%d:", t.PromptID, t.SampleIndex)
		if a.Mask {
			s += a.Reason
		} else {
			s += fmt.Sprintf("%+.3f", a.Advantage)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// joined is Join's batch of trajs and rewards under o, whose rows must
// read as want (describe).
func joined(t *testing.T, trajs []tables.Trajectory, rewards []tables.Reward, o advantages.TrainOptions, want string) advantages.Batch {
	t.Helper()
	b, err := advantages.Join(trajs, rewards, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(b); got != want {
		t.Errorf("advantages\n got %s\nwant %s", got, want)
	}
	return b
}

func TestJoin(t *testing.T) {
	ok := tables.StatusOK
	trajs := []tables.Trajectory{
		traj("b", 1, ok, 5), traj("b", 0, ok, 5), // equal rewards
		traj("a", 2, tables.StatusTimeout), traj("a", 1, ok, 7, 8), traj("a", 0, ok, 9),
		traj("c", 0, ok), traj("c", 1, ok, 4), traj("c", 2, ok, 4), traj("d", 0, ok, 3),
	}
	rewards := []tables.Reward{rew("a", 0, 1), rew("a", 1, 0), {PromptID: "a", SampleIndex: 2, Status: "timeout", Total: math.NaN()},
		rew("b", 0, 1), rew("b", 1, 1), rew("c", 0, 1), rew("c", 1, 0), {PromptID: "d", SampleIndex: 0, Status: "error", Total: math.NaN()}}
	for _, tc := range []struct {
		name string
		o    advantages.TrainOptions
		want string
	}{
		{"defaults: the sample std", advantages.TrainOptions{},
			"a0:+0.707 a1:-0.707 a2:trajectory status timeout b0:zero reward variance b1:zero reward variance c0:no token ids c1:-0.707 c2:no reward d0:reward status error"},
		{"population std", advantages.TrainOptions{Options: advantages.Options{PopulationStd: true}},
			"a0:+1.000 a1:-1.000 a2:trajectory status timeout b0:zero reward variance b1:zero reward variance c0:no token ids c1:-1.000 c2:no reward d0:reward status error"},
		{"keep zero std, no std", advantages.TrainOptions{Options: advantages.Options{NoStd: true}, KeepZeroStd: true},
			"a0:+0.500 a1:-0.500 a2:trajectory status timeout b0:+0.000 b1:+0.000 c0:no token ids c1:-0.500 c2:no reward d0:reward status error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := joined(t, trajs, rewards, tc.o, tc.want)
			if b.Stats != (advantages.Stats{Groups: 4, MultiSample: 3, ZeroStd: 1, Masked: 3}) {
				t.Errorf("stats %+v", b.Stats)
			}
			scored := 0
			for _, r := range b.Scored {
				if r.Scored() {
					scored++
				}
			}
			if scored != 6 || b.Scored[2].Status != "trajectory timeout" || b.Scored[7].Status != "missing" {
				t.Errorf("scored %d of %d, a2 %q, c2 %q", scored, len(b.Scored), b.Scored[2].Status, b.Scored[7].Status)
			}
		})
	}
}

func TestJoinErrors(t *testing.T) {
	ok := tables.StatusOK
	for _, tc := range []struct {
		name    string
		trajs   []tables.Trajectory
		rewards []tables.Reward
		want    string
	}{
		{"sample twice", []tables.Trajectory{traj("a", 0, ok), traj("a", 0, ok)}, nil,
			`inconsistent training batch: trajectories hold sample 0 of prompt "a" twice`},
		{"reward without sample", []tables.Trajectory{traj("a", 0, ok)}, []tables.Reward{rew("z", 3, 1)},
			`inconsistent training batch: a reward scores sample 3 of prompt "z", which the trajectories do not hold`},
		{"reward twice", []tables.Trajectory{traj("a", 0, ok)}, []tables.Reward{rew("a", 0, 1), rew("a", 0, 1)},
			`inconsistent training batch: rewards score sample 0 of prompt "a" twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := advantages.Join(tc.trajs, tc.rewards, advantages.TrainOptions{})
			if !errors.Is(err, advantages.ErrBatch) || err.Error() != tc.want {
				t.Fatalf("err = %v, want ErrBatch %q", err, tc.want)
			}
		})
	}
}
