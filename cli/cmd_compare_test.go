package cli

import (
	"strings"
	"testing"
)

// TestCompare: two tiny real runs of the arithmetic example on branches
// of one store, the second with a smaller learning rate and LoRA rank
// and one iteration fewer; a main commit that is no run; a branch whose
// recorded config this rlpipe cannot parse; and the mistakes. One setup for every case.
func TestCompare(t *testing.T) {
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "32", "--heldout", "10")
	edits := map[string]string{"iterations: 60": "iterations: 2", "batch_size: 16": "batch_size: 4", "sampling: {n: 8,": "sampling: {n: 4,",
		"every: 10": "every: 2", "n: 16": "n: 2", "k: [1, 4, 8, 16]": "k: [1, 2]"}
	h.ok("run", "-f", h.file("a.yaml", arithExample(t, edits)))
	edits["iterations: 60"] = "iterations: 1"
	edits["trainer: {lr: 2.0e-3}"] = "trainer: {lr: 1.0e-3, lora: {rank: 4}}"
	h.ok("run", "-f", h.file("b.yaml", arithExample(t, edits)), "--run", "arith-lr")

	t.Run("json", func(t *testing.T) {
		var out compareOut
		h.json(&out, "compare", "arith", "arith-lr")
		if len(out.Runs) != 2 {
			t.Fatalf("%d runs", len(out.Runs))
		}
		a, b := out.Runs[0], out.Runs[1]
		if a.Run != "arith" || a.Ref != "runs-arith" || a.Iterations != 2 || a.Planned != 2 || len(a.Commit) != 64 ||
			b.Run != "arith-lr" || b.Ref != "runs-arith-lr" || b.Iterations != 1 || b.Planned != 1 {
			t.Fatalf("runs: %+v %+v", a, b)
		}
		if a.WallSeconds <= 0 || b.WallSeconds <= 0 {
			t.Errorf("wall seconds %v and %v, want both above 0", a.WallSeconds, b.WallSeconds)
		}
		// The defaults are filled in: LoRA α and ε come from the trainer.
		for k, want := range map[string]string{"trainer.lora.alpha": "16", "trainer.eps_low": "0.2", "trainer.lora.rank": "8", "stages.train.env": "train"} {
			if got := a.Config[k]; got != want {
				t.Errorf("effective config of arith: %s = %q, want %q", k, got, want)
			}
		}
		var diff []string
		for _, d := range out.ConfigDiff {
			diff = append(diff, d.Key+"="+*d.Values[0]+","+*d.Values[1])
		}
		sameLines(t, "config diff", diff, []string{"iterations=2,1", "trainer.lora.rank=8,4", "trainer.lr=0.002,0.001"}, "\n")
		// Final at the last checkpoint, best over all (the starting policy
		// included; a tie goes to the earlier, as pass@1's 0.3000 here),
		// each with the interval `evals` prints.
		var figs []string
		for _, f := range a.Figures {
			figs = append(figs, f.Set+" "+f.Metric+" "+f.Final.Checkpoint+" "+f.Best.Checkpoint)
			if f.Final.Interval == nil || f.Best.Interval == nil || f.Best.Value < f.Final.Value {
				t.Errorf("figure %+v", f)
			}
		}
		sameLines(t, "figures of arith", figs, []string{
			"heldout exact_pass@1 iteration-000002 base",
			"heldout pass@1 iteration-000002 base",
			"heldout pass@2 iteration-000002 base",
		}, "\n")
	})

	t.Run("text", func(t *testing.T) {
		out := h.ok("compare", "arith", "arith-lr")
		for _, want := range []string{
			"arith     heldout  exact_pass@1  0.2903  [0.0965, 0.5306]  iteration-000002  0.3287  [0.1125, 0.5793]  base\n",
			"arith     heldout  pass@1        0.3000  [0.1000, 0.6000]  iteration-000002  0.3000  [0.1000, 0.6000]  base\n",
			"arith-lr  heldout  pass@1        0.3500  [0.1000, 0.6000]  iteration-000001  0.3500  [0.1000, 0.6000]  iteration-000001\n",
			"CONFIG KEY         arith  arith-lr\niterations         2      1\ntrainer.lora.rank  8      4\ntrainer.lr         0.002  0.001\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if same := h.ok("compare", "arith", "arith"); !strings.HasSuffix(same, "\neffective configs: the same\n") {
			t.Errorf("a run against itself:\n%s", same)
		}
	})

	// A branch of the run whose recorded config this rlpipe cannot read.
	h.ok("branch", "create", "runs-bad", "--from", "runs-arith")
	h.ok("put", h.file("bad.yaml", "iterations: 2\nlearning_rate: 1\n"), "runs-bad:run/config.yaml")
	h.ok("commit", "runs-bad", "-m", "a config of another rlpipe")

	for _, tc := range []struct {
		name string
		code int
		args []string
		want string
	}{
		{"one run", ExitUsage, []string{"compare", "arith"}, "rlpipe: compare: missing RUN\n"},
		{"unknown run", ExitFailure, []string{"compare", "arith", "nope"},
			"compare: no run nope: neither branch runs-nope nor a ref nope exists (see `rlpipe status`)"},
		{"config does not parse", ExitFailure, []string{"compare", "arith", "bad"},
			"rlpipe: compare bad: the recorded config does not parse with this rlpipe (`rlpipe cat runs-bad:run/config.yaml` shows it; the rlpipe that made the run compares it): " +
				`runs-bad:run/config.yaml:2:1: unknown key "learning_rate" at the top level (known keys: advantages, batch_size, dataset, environments, eval, filter_groups, initial_policy, iterations, machine, overlap, policy, run, seed, stages, store, tracking, trainer)` + "\n"},
		{"not a run", ExitFailure, []string{"compare", "arith", "main"},
			"compare main: main has no run/config.yaml: it is not a run (`rlpipe status` lists the runs)"},
	} {
		t.Run(tc.name, func(t *testing.T) { h.fails(tc.code, []string{tc.want}, tc.args...) })
	}
}
