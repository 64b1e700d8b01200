package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/configtest"
	"github.com/rlpipe/rlpipe/sandbox"
)

// A Python reward function that hangs does not end the run: a two-
// iteration run of the embedded policy whose function hangs on the chunk
// holding one prompt (every iteration samples every prompt) completes;
// in each iteration's rewards that chunk's rows have status error saying
// the worker timed out and was restarted, and the other chunk is scored.
func TestRunSurvivesAHangingFunction(t *testing.T) {
	if err := sandbox.Available(); err != nil {
		t.Skipf("no sandbox here for the Python worker: %v", err)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 is not installed")
	}
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "16", "--heldout", "8")
	prompts, _ := exportRows(h, "main", "data/arith-train.parquet", tables.Prompts)
	hang := prompts[0].PromptID
	h.file("fns/correct.py", fmt.Sprintf(`import time


def correct(completions, prompts, answer, prompt_id, **columns):
    if %q in prompt_id:
        time.sleep(3600)
    return [1.0 if c == a else 0.0 for c, a in zip(completions, answer)]
`, hang))
	for _, d := range []string{filepath.Dir(h.dir), h.dir} { // the sandbox runs as nobody when the tests run as root
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec := h.file("reward.yaml", `functions:
  - name: correct
    function: fns/correct.py:correct
    python: /usr/bin/python3
    workers: 2
    limits: {wall: 2s}
components:
  - name: correct
    expr: functions.correct
`)
	cfg := arithExample(t, map[string]string{"iterations: 60": "iterations: 2", "n: 16": "n: 2", "k: [1, 4, 8, 16]": "k: [1]",
		"n: 8, temperature": "n: 2, temperature"})
	cfg = configtest.Edit(t, "the example", cfg, map[string]string{"spec: " + configtest.Abs(t, "../examples/arithmetic/reward.yaml"): "spec: " + spec})
	h.ok("run", "-f", h.file("pipeline.yaml", cfg))

	const reason = "function correct: the worker ended: timeout (no answer within the wall limit 2s); restarted"
	for _, it := range []string{"000001", "000002"} {
		rows, _ := exportRows(h, "runs-arith", "iterations/"+it+"/rewards.parquet", tables.Rewards)
		var scored []int // the rows the function was given, in order
		for i, r := range rows {
			if r.Status == "ok" || r.Status == "error" {
				scored = append(scored, i)
			}
		}
		half := len(scored) / 2
		t.Logf("iteration %s: %d rows, %d scored, hang prompt %s", it, len(rows), len(scored), hang)
		for c, chunk := range [][]int{scored[:half], scored[half:]} {
			hung := slices.ContainsFunc(chunk, func(i int) bool { return rows[i].PromptID == hang })
			for _, i := range chunk {
				r := rows[i]
				switch {
				case hung && (r.Status != "error" || r.Error == nil || *r.Error != reason):
					t.Errorf("iteration %s, chunk %d (holds %s), row %d: status %s, error %v; want error %q", it, c, hang, i, r.Status, r.Error, reason)
				case !hung && r.Status != "ok":
					t.Errorf("iteration %s, chunk %d, row %d: status %s, want ok", it, c, i, r.Status)
				}
			}
		}
		if !slices.ContainsFunc(rows, func(r tables.Reward) bool { return r.PromptID == hang }) {
			t.Errorf("iteration %s did not sample %s", it, hang)
		}
	}
}
