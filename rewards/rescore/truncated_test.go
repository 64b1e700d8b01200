package rescore_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/rewards/rescore"
)

// TestRescoreAdvantagesKeepsMaskTruncated: a run whose advantages step
// masked truncated samples (advantages.mask_truncated_completions) is
// recomputed under another estimator with the mask kept: the version
// names it, and each sample that stopped at the length limit is masked
// "truncated" in the new table.
func TestRescoreAdvantagesKeepsMaskTruncated(t *testing.T) {
	ctx := context.Background()
	st := runLoopWithAdvantages(t, advantages.TrainOptions{MaskTruncated: true})
	// The stand-in's samples all stop and have no token ids (no trainer
	// could take them); give them tokens, and make two of iteration 1's
	// stop at the length limit, as a max_tokens would.
	path := runs.IterationPath(1, runs.TrajectoriesFile)
	trajs := standintest.ReadRows(t, st, "runs-r", path, tables.Trajectories)
	long := map[[2]any]bool{}
	for i := range trajs {
		trajs[i].TokenIDs = []int32{int32(i)}
	}
	for _, i := range []int{1, 6} {
		trajs[i].FinishReason = advantages.FinishLength
		long[[2]any{trajs[i].PromptID, trajs[i].SampleIndex}] = true
	}
	var buf bytes.Buffer
	if err := tables.Write(&buf, tables.Trajectories, trajs, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObject(ctx, "runs-r", path, &buf, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, "runs-r", "two samples hit max_tokens", nil); err != nil {
		t.Fatal(err)
	}
	rep, err := rescore.Advantages(ctx, st, rescore.AdvantagesOptions{From: "runs-r", Iteration: 1, Estimator: "rloo",
		Estimators: advantages.Estimators{advantages.GRPO, advantages.RLOO}})
	if err != nil {
		t.Fatal(err)
	}
	const stored = "join-2 epsilon=1e-06 no_std=false keep_zero_std=false std=sample mask_truncated_completions=true"
	if rep.StoredVersion != stored || rep.Version != "join-2 epsilon=1e-06 no_std=false keep_zero_std=false std=sample estimator=rloo mask_truncated_completions=true" {
		t.Fatalf("versions: stored %q, new %q", rep.StoredVersion, rep.Version)
	}
	rows := standintest.ReadRows(t, st, rep.Branch, runs.IterationPath(1, runs.AdvantagesFile), tables.Advantages)
	reasons := map[string]int{}
	for _, a := range rows {
		isLong := long[[2]any{a.PromptID, a.SampleIndex}]
		if isLong != (a.Reason == advantages.ReasonTruncated) || (isLong && !a.Mask) {
			t.Errorf("sample %d of %s: mask %v reason %q, finish length %v", a.SampleIndex, a.PromptID, a.Mask, a.Reason, isLong)
		}
		if a.Mask {
			reasons[a.Reason]++
		}
	}
	if got := fmt.Sprint(reasons); got != "map[truncated:2 zero reward variance:3]" || rep.Comparison.MaskedNew != 5 {
		t.Errorf("masked %s (%d in all), want 2 truncated and 3 of zero variance", got, rep.Comparison.MaskedNew)
	}
	if !strings.HasPrefix(rep.Branch, "r-rloo-") {
		t.Errorf("branch %s", rep.Branch)
	}
}
