package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
)

// TestRunFilterGroups: `rlpipe run` of the stand-in example with
// filter_groups draws refill rounds when an iteration's first batch holds
// too few groups with a reward spread, records each iteration's rounds in
// filter_groups.json, and moves the cursor past every prompt drawn.
func TestRunFilterGroups(t *testing.T) {
	h := newStore(t)
	h.ok("import", "../examples/standin/prompts.jsonl", "main:data/prompts.parquet", "--table", "prompts")
	h.ok("commit", "main", "-m", "add prompts")
	src := readFile(t, "../examples/standin/pipeline.yaml")
	for _, d := range []string{"100ms", "200ms", "1s"} {
		src = strings.ReplaceAll(src, "sleep: "+d, "sleep: 1ms")
	}
	src = strings.Replace(src, "iterations: 6", "iterations: 3", 1) + "filter_groups: {max_num_gen_batches: 3}\n"
	cfg := h.file("pipeline.yaml", src)

	var out runOut
	h.json(&out, "run", "-f", cfg)
	// 40 prompts, batches of 8: each iteration took a refill round, so
	// 16 prompts; 9 calls an iteration (3 per round, the merge, train,
	// health).
	if out.Iterations != 3 || out.Cursor != 48 || out.Tasks != 27 || out.StageSeconds["generate-round-01"] == 0 {
		t.Errorf("run: %+v", out.Summary)
	}
	for n, want := range map[int]string{1: "0:3 8:6", 2: "16:7 24:5", 3: "32:6 40:4"} {
		var f pipeline.FilterGroups
		if err := json.Unmarshal([]byte(h.ok("cat", fmt.Sprintf("runs-standin@:iterations/%06d/filter_groups.json", n))), &f); err != nil {
			t.Fatal(err)
		}
		var rounds []string
		for _, r := range f.Rounds {
			rounds = append(rounds, fmt.Sprintf("%d:%d", r.Cursor, r.Informative))
		}
		if got := strings.Join(rounds, " "); got != want || f.GroupsKept != 8 || f.GroupsDropped != 8 || f.Stop != pipeline.StopFull {
			t.Errorf("iteration %d: rounds %s (want %s), %+v", n, got, want, f)
		}
	}
	// Running it again has nothing to do: the rounds are committed.
	var again runOut
	h.json(&again, "run", "-f", cfg)
	if again.NewIterations != 0 || again.Tasks != 0 || again.Commit != out.Commit {
		t.Errorf("again: %+v", again.Summary)
	}
}
