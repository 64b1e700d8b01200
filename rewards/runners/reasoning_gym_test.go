package runners_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/rewards"
	"github.com/rlpipe/rlpipe/rewards/rewardstest"
)

// countdownRows makes countdown problems with reasoning_gym.create_dataset
// and, for each, three completions — its answer, an expression of the
// wrong numbers, text — with the score reasoning_gym's score_answer gives
// each when called directly on the dataset's own entry.
const countdownRows = `
import json, sys, reasoning_gym
ds = reasoning_gym.create_dataset("countdown", size=3, seed=42)
for i, e in enumerate(ds):
    wrong = "+".join(str(n) for n in e["metadata"]["numbers"][:-1])
    for j, c in enumerate([e["answer"], wrong, "no idea"]):
        print(json.dumps({"id": "countdown-%d" % i, "question": e["question"], "answer": e["answer"],
                          "metadata": json.dumps(e["metadata"]), "sample": j, "completion": c,
                          "score": ds.score_answer(c, e)}))
`

type countdownRow struct {
	ID         string  `json:"id"`
	Question   string  `json:"question"`
	Answer     string  `json:"answer"`
	Metadata   string  `json:"metadata"`
	Sample     int32   `json:"sample"`
	Completion string  `json:"completion"`
	Score      float64 `json:"score"`
}

// TestReasoningGymVerifier: a reasoning-gym family that scores from the
// row's metadata (countdown: the numbers and the target) scores through
// the verifier path — the spec of docs/REWARDS.md, python: the project
// venv, .Row handed to the checker, which calls reasoning_gym's own
// score_answer — exactly as score_answer called directly in Python does;
// CEL's row reads the same metadata.
func TestReasoningGymVerifier(t *testing.T) {
	if testing.Short() {
		t.Skip("imports reasoning_gym in a sandbox per row (a few seconds of CPU each): not under -short")
	}
	py := pyvenv.Python(t, "score reasoning-gym rows with its own score_answer through a verifier")
	venv := filepath.Dir(filepath.Dir(py))
	var rows []countdownRow
	sc := bufio.NewScanner(bytes.NewReader(pyvenv.Run(t, "make countdown rows with reasoning_gym", []byte(countdownRows), py, "-")))
	for sc.Scan() {
		var r countdownRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("read a row %q: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 9 {
		t.Fatalf("%d rows from reasoning_gym, want 9", len(rows))
	}

	text := strings.Replace(docsBlock("### A verifier's `python:`"), "python: ../.venv-py", "python: "+venv, 1) + `components:
  - name: score
    expr: double(verifiers.countdown.reason)
  - name: target
    expr: row.metadata.target
    weight: 0
`
	prog := rewardstest.Program(t, filepath.Join(t.TempDir(), "reward.yaml"), text)

	var trajs []tables.Trajectory
	var prompts []tables.Prompt
	for _, r := range rows {
		if r.Sample == 0 {
			prompts = append(prompts, tables.Prompt{PromptID: r.ID, Prompt: r.Question, Answer: r.Answer, Metadata: r.Metadata, Source: "reasoning_gym:countdown", Split: "train"})
		}
		trajs = append(trajs, tables.Trajectory{PromptID: r.ID, SampleIndex: r.Sample, GroupID: r.ID, Completion: r.Completion,
			FinishReason: "stop", Status: tables.StatusOK})
	}
	var pb bytes.Buffer
	if err := tables.Write(&pb, tables.Prompts, prompts, nil); err != nil {
		t.Fatal(err)
	}
	idx, err := prog.ReadPrompts(context.Background(), bytes.NewReader(pb.Bytes()), int64(pb.Len()), "prompts")
	if err != nil {
		t.Fatal(err)
	}
	got, sum := rewardstest.ScoreFile(t, prog, trajs, &rewards.ScoreOptions{Prompts: idx})
	if sum.Scored != 9 {
		t.Errorf("summary %+v, want 9 rows scored", sum)
	}
	seen := map[float64]bool{}
	for i, r := range got {
		want := rows[i]
		if r.Status != tables.StatusOK || r.Components["score"] != want.Score {
			t.Errorf("%s sample %d (%q): status %s, score %v, error %v; score_answer gives %v",
				want.ID, want.Sample, want.Completion, r.Status, r.Components["score"], deref(r.Error), want.Score)
		}
		var meta struct{ Target float64 }
		if err := json.Unmarshal([]byte(want.Metadata), &meta); err != nil {
			t.Fatal(err)
		}
		if r.Components["target"] != meta.Target {
			t.Errorf("%s: CEL's row.metadata.target is %v, the metadata's %v", want.ID, r.Components["target"], meta.Target)
		}
		seen[want.Score] = true
	}
	// The three kinds of completion score apart: the metadata decided.
	if len(seen) != 3 {
		t.Errorf("scores %v: want three different ones (right, wrong numbers, not an expression)", seen)
	}
}
