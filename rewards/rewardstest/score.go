package rewardstest

import (
	"bytes"
	"context"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/rewards"
)

// ScoreRows scores trajs with p as the reward stage does: written as a
// trajectories table, read back by Program.ScoreFile with prompts (one
// scoring batch up to 4,096 rows: one call per Python function), and its
// rewards table read back, in row order. An error fails t.
func ScoreRows(t testing.TB, p *rewards.Program, trajs []tables.Trajectory, prompts []tables.Prompt) []tables.Reward {
	t.Helper()
	ps, err := rewards.NewPrompts(prompts)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := ScoreFile(t, p, trajs, &rewards.ScoreOptions{Prompts: ps})
	return got
}

// ScoreFile writes trajs as a trajectories table, scores it with
// Program.ScoreFile and the options o (batches, concurrency, the prompts
// however the test indexed them), and reads the rewards table back, in
// row order, with the call's summary. An error fails t.
func ScoreFile(t testing.TB, p *rewards.Program, trajs []tables.Trajectory, o *rewards.ScoreOptions) ([]tables.Reward, rewards.Summary) {
	t.Helper()
	var in, out bytes.Buffer
	if err := tables.Write(&in, tables.Trajectories, trajs, nil); err != nil {
		t.Fatal(err)
	}
	sum, err := p.ScoreFile(context.Background(), &out, bytes.NewReader(in.Bytes()), int64(in.Len()), o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tables.Read(bytes.NewReader(out.Bytes()), int64(out.Len()), "rewards", tables.Rewards)
	if err != nil {
		t.Fatal(err)
	}
	return got, sum
}
