package rescore_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/rewards/rescore"
	"github.com/rlpipe/rlpipe/rewards/rewardstest"
)

// Rescoring works on a run of episodes as on one of completions: the new
// spec sees each episode's turns, and the episodes' token sequences and
// masks are left as they were.
func TestRescoreEpisodes(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 0)
	if _, err := st.CreateBranch(ctx, runs.Branch("ep"), "main"); err != nil {
		t.Fatal(err)
	}
	turn := func(role, content string) tables.Turn { return tables.Turn{Role: role, Content: content} }
	rows := []tables.Trajectory{
		{PromptID: "g1", SampleIndex: 0, GroupID: "000001-g1", Completion: "50", Status: tables.StatusOK,
			Turns:    []tables.Turn{turn("user", "guess"), turn("assistant", "50"), turn("user", "correct")},
			TokenIDs: []int32{63, 58, 0}, Sequence: []int32{1, 5, 0, 2, 63, 58, 0}, Trainable: []int32{0, 0, 0, 0, 1, 1, 1}},
		{PromptID: "g1", SampleIndex: 1, GroupID: "000001-g1", Completion: "25", Status: tables.StatusOK,
			Turns: []tables.Turn{turn("user", "guess"), turn("assistant", "40"), turn("user", "lower"), turn("assistant", "25"), turn("user", "correct")}},
		{PromptID: "g1", SampleIndex: 2, GroupID: "000001-g1", Status: tables.StatusTruncated, Error: strPtr("turn budget of 2 turns spent"),
			Turns: []tables.Turn{turn("user", "guess"), turn("assistant", "1"), turn("user", "higher"), turn("assistant", "2"), turn("user", "higher")}},
	}
	var buf bytes.Buffer
	if err := tables.Write(&buf, tables.Trajectories, rows, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObject(ctx, runs.Branch("ep"), runs.IterationPath(1, runs.TrajectoriesFile), &buf, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, runs.Branch("ep"), "iteration 1", &artifacts.CommitOptions{Metadata: map[string]string{runs.MetaRun: "ep", runs.MetaIteration: "1"}}); err != nil {
		t.Fatal(err)
	}
	// Fewer turns score higher: 1 for one guess, 0.5 for two.
	spec := rewardstest.Program(t, "new.yaml", "components:\n  - name: quick\n    expr: '2.0 / double(size(turns) - 1)'\n")
	rep := rescored(ctx, t, st, rescore.Options{From: runs.Branch("ep"), Reward: spec})
	b := standintest.Read(t, st, rep.Branch, runs.IterationPath(1, runs.RewardsFile))
	got, err := tables.Read(bytes.NewReader(b), int64(len(b)), "rewards", tables.Rewards)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Total != 1 || got[1].Total != 0.5 || got[2].Scored() {
		t.Fatalf("rewards %+v: want 1, 0.5 and the truncated episode unscored", got)
	}
	tb := standintest.Read(t, st, rep.Branch, runs.IterationPath(1, runs.TrajectoriesFile))
	back, err := tables.Read(bytes.NewReader(tb), int64(len(tb)), "trajectories", tables.Trajectories)
	if err != nil || len(back[0].Trainable) != 7 || back[0].Trainable[4] != 1 {
		t.Errorf("the episodes' masks after rescoring: %+v, %v", back, err)
	}
}

func strPtr(s string) *string { return &s }
