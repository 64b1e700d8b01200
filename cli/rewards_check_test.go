package cli

import (
	"path/filepath"
	"testing"
)

// TestRewardsCheckSampleErrors: rewards check --sample answers a sample
// it cannot score with CLI advice and exit 1: a prompts table given for
// trajectories (it said "pass ScoreOptions.Prompts", Go API advice), a
// trajectories table with no prompts beside it for a spec that reads
// answer, and a sample whose every row fails (it exited 0).
func TestRewardsCheckSampleErrors(t *testing.T) {
	h, cfg := newRunHarness(t, "1ms")
	h.ok("run", "-f", cfg)
	answer := h.file("answer.yaml", "components:\n  - name: correct\n    expr: 'completion == answer ? 1.0 : 0.0'\n")
	local := filepath.Join(h.dir, "trajectories.parquet")
	h.ok("export", "runs-standin:iterations/000001/trajectories.parquet", local)
	h.ok("put", local, "main:alone/trajectories.parquet")
	for _, c := range []struct{ name, spec, sample, want string }{
		{"a prompts table", answer, "runs-standin:iterations/000001/prompts.parquet",
			"rlpipe: rewards check --sample runs-standin:iterations/000001/prompts.parquet: that is a prompts table; --sample scores a trajectories table, " +
				"such as a run's runs-NAME:iterations/000001/trajectories.parquet (`rlpipe ls runs-NAME:iterations/000001/` lists one)\n"},
		{"no prompts beside the sample", answer, "main:alone/trajectories.parquet",
			"rlpipe: rewards check --sample main:alone/trajectories.parquet: the spec reads the prompts table (answer) and there is no main:alone/prompts.parquet beside the sample to join: " +
				"sample a run's trajectories, where the prompts sit beside them (e.g. --sample runs-NAME:iterations/000001/trajectories.parquet), " +
				"or put the prompts there (rlpipe import prompts.jsonl main:alone/prompts.parquet --table prompts)\n"},
		{"every row fails", h.file("zero.yaml", "components:\n  - name: broken\n    expr: 'completion.size() / 0 > 1 ? 1.0 : 0.0'\n"),
			"runs-standin:iterations/000001/trajectories.parquet",
			"rlpipe: rewards check --sample runs-standin:iterations/000001/trajectories.parquet: all 3 rows failed (3 errors, 0 nonfinite); " +
				"the first, prompt add-001 sample 0: component broken: division by zero: the spec cannot score this sample; fix what the ERROR column says and check again\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := h.fails(ExitFailure, nil, "rewards", "check", c.spec, "--sample", c.sample, "--rows", "3"); got != c.want {
				t.Fatalf("stderr\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}
