package reasoninggym_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/environments/datasets"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/rewardstest"
)

// shippedPython is reward.yaml's python: line, the project venv relative
// to the spec.
const shippedPython = "python: ../../.venv-py"

// setup generates size rows of families (held of them held out) with
// seed 1 and compiles reward.yaml with the venv the test found
// ($RLPIPE_PY_VENV may name another than the repository's .venv-py, which
// the spec names), memoizing rows when pure.
func setup(tb testing.TB, families string, size, held int, pure bool) (*datasets.GymSet, *rewards.Program) {
	tb.Helper()
	py := pyvenv.Python(tb, "score with reasoning-gym's own scorers from the project venv")
	fams, err := datasets.ParseGymFamilies(families)
	if err != nil {
		tb.Fatal(err)
	}
	set, err := datasets.Gym(context.Background(), &datasets.GymOptions{Python: py, Families: fams, Size: size, HeldOut: held, Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	src, err := os.ReadFile("reward.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Contains(src, []byte(shippedPython)) || !bytes.Contains(src, []byte("pure: true")) {
		tb.Fatalf("reward.yaml does not say %q and pure: true", shippedPython)
	}
	src = bytes.Replace(src, []byte(shippedPython), []byte("python: "+filepath.Dir(filepath.Dir(py))), 1)
	if !pure {
		src = bytes.Replace(src, []byte("pure: true"), []byte("pure: false"), 1)
	}
	return set, rewardstest.Program(tb, "reward.yaml", string(src))
}

// TestRewardScoresWithTheFamilysOwnScorer generates rows of four families
// with `dataset reasoning-gym`'s generator and scores, in one batch of
// mixed families through the sandboxed worker, three completions per
// row: the reference answer (1.0), the reference inside <answer> tags
// after some reasoning (1.0), and a wrong answer (0.0; countdown's own
// scorer gives 0.01 to an answer that is not an expression). countdown and
// knights_knaves score from the row's metadata, not from the answer
// string alone. A row whose metadata names no family is not scored: its
// status says so.
func TestRewardScoresWithTheFamilysOwnScorer(t *testing.T) {
	set, prog := setup(t, "chain_sum,number_sorting,countdown,knights_knaves", 8, 4, true)
	prompts := append(append([]tables.Prompt{}, set.HeldOut...), set.Train...)
	other := tables.Prompt{PromptID: "other", Prompt: "2+2=", Answer: "4", Metadata: `{"a":2}`, Source: "arith"}

	type want struct {
		completion string
		score      float64
	}
	var trajs []tables.Trajectory
	var wants []want
	for _, p := range prompts {
		family, _, _ := strings.Cut(strings.TrimPrefix(p.Source, "reasoning-gym/"), "@")
		wrong := 0.0
		if family == "countdown" {
			wrong = 0.01
		}
		for i, w := range []want{
			{p.Answer, 1},
			{"Let me think.\n<answer>" + p.Answer + "</answer>", 1},
			{"no idea", wrong},
		} {
			trajs = append(trajs, tables.Trajectory{PromptID: p.PromptID, GroupID: p.PromptID, SampleIndex: int32(i), Completion: w.completion, Status: tables.StatusOK})
			wants = append(wants, w)
		}
	}
	trajs = append(trajs, tables.Trajectory{PromptID: other.PromptID, GroupID: other.PromptID, Completion: "4", Status: tables.StatusOK})
	table, err := rewards.NewPrompts(append(prompts, other))
	if err != nil {
		t.Fatal(err)
	}
	got, sum := rewardstest.ScoreFile(t, prog, trajs, &rewards.ScoreOptions{Prompts: table, Concurrency: 1})
	if sum.Scored != 24 || len(got) != 25 {
		t.Fatalf("scored %d of %d rows (%+v), want 24 of 25", sum.Scored, len(got), sum)
	}
	if r := got[24]; r.Status != rewards.StatusError || r.Error == nil || *r.Error != "function reasoning_gym returned None: not scored" {
		t.Errorf("a row that is not reasoning-gym's: %+v", r)
	}
	for i, r := range got[:24] {
		if r.Status != rewards.StatusOK || r.Components["correct"] != wants[i].score || r.Total != wants[i].score {
			e := ""
			if r.Error != nil {
				e = *r.Error
			}
			t.Errorf("row %d (%s, %q): %s %v %s, want %v", i, r.PromptID, wants[i].completion, r.Status, r.Components, e, wants[i].score)
		}
	}
}

// BenchmarkReward scores 1,000 rows of two families (the reference answer
// each) per op through the sandboxed worker, in batches of 256 rows: the
// rows/s of reasoning-gym's scorers through rlpipe. pure is off, so every
// row reaches the worker.
func BenchmarkReward(b *testing.B) {
	set, prog := setup(b, "chain_sum,number_sorting", 1001, 1, false)
	trajs := make([]tables.Trajectory, len(set.Train))
	for i, p := range set.Train {
		trajs[i] = tables.Trajectory{PromptID: p.PromptID, GroupID: p.PromptID, Completion: p.Answer, Status: tables.StatusOK}
	}
	table, err := rewards.NewPrompts(set.Train)
	if err != nil {
		b.Fatal(err)
	}
	var in bytes.Buffer
	if err := tables.Write(&in, tables.Trajectories, trajs, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var out bytes.Buffer
		sum, err := prog.ScoreFile(context.Background(), &out, bytes.NewReader(in.Bytes()), int64(in.Len()),
			&rewards.ScoreOptions{Prompts: table, Concurrency: 1, BatchRows: 256})
		if err != nil || sum.Scored != int64(len(trajs)) {
			b.Fatalf("scored %+v: %v", sum, err)
		}
	}
	b.ReportMetric(float64(b.N*len(trajs))/b.Elapsed().Seconds(), "rows/s")
}
