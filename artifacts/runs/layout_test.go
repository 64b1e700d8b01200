package runs_test

import (
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/runs"
)

func TestPaths(t *testing.T) {
	for got, want := range map[string]string{
		runs.Branch("arith"):                          "runs-arith",
		runs.IterationDir(7):                          "iterations/000007",
		runs.IterationPath(7, runs.RewardsFile):       "iterations/000007/rewards.parquet",
		runs.AdapterPath(12):                          "iterations/000012/adapter",
		runs.EventsPath(3):                            "events/000003.jsonl",
		runs.MetricsPath(3):                           "events/000003.metrics.json",
		runs.EvalDir(0, "heldout"):                    "evals/000000/heldout",
		runs.EvalPath(10, "gsm8k", runs.SummaryFile):  "evals/000010/gsm8k/summary.parquet",
		runs.IterationPath(1234567, runs.PromptsFile): "iterations/1234567/prompts.parquet",
		runs.LockPath("arith"):                        "runs/arith.json",
		runs.IterationPath(1, runs.TrainMetricsFile):  "iterations/000001/train_metrics.json",
		runs.EvalPath(1, "h", runs.SamplesFile):       "evals/000001/h/samples.parquet",
		runs.IterationPath(2, runs.AdvantagesFile):    "iterations/000002/advantages.parquet",
		runs.IterationPath(2, runs.TrajectoriesFile):  "iterations/000002/trajectories.parquet",
		runs.IterationPath(2, runs.HealthFile):        "iterations/000002/health.parquet",
		runs.IterationPattern(runs.TrajectoriesFile):  "iterations/NNNNNN/trajectories.parquet",
		runs.EvalPattern(runs.SummaryFile):            "evals/NNNNNN/<set>/summary.parquet",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
	if run, ok := runs.RunOf("runs-arith"); !ok || run != "arith" {
		t.Errorf("RunOf(runs-arith) = %q, %v", run, ok)
	}
	for _, b := range []string{"main", "runs-", "rescore-1a2b"} {
		if run, ok := runs.RunOf(b); ok {
			t.Errorf("RunOf(%q) = %q, want no run", b, run)
		}
	}
}

func TestParsePaths(t *testing.T) {
	for _, c := range []struct {
		path string
		n    int
		rest string
		ok   bool
	}{
		{"iterations/000007/rewards.parquet", 7, "rewards.parquet", true},
		{"iterations/000007/adapter/adapter_config.json", 7, "adapter/adapter_config.json", true},
		{"iterations/000007", 7, "", true},
		{"iterations/1234567/x", 1234567, "x", true},
		{"iterations/7/rewards.parquet", 0, "", false},
		{"iterations/00000x/rewards.parquet", 0, "", false},
		{"iterations/-00001/rewards.parquet", 0, "", false},
		{"evals/000007/heldout/summary.parquet", 0, "", false},
	} {
		n, rest, ok := runs.ParseIterationPath(c.path)
		if n != c.n || rest != c.rest || ok != c.ok {
			t.Errorf("ParseIterationPath(%q) = %d, %q, %v; want %d, %q, %v", c.path, n, rest, ok, c.n, c.rest, c.ok)
		}
	}
	for _, c := range []struct {
		path, set, rest string
		n               int
		ok              bool
	}{
		{"evals/000010/heldout/summary.parquet", "heldout", "summary.parquet", 10, true},
		{"evals/000000/gsm8k", "gsm8k", "", 0, true},
		{"evals/000010/", "", "", 0, false},
		{"evals/10/heldout/summary.parquet", "", "", 0, false},
		{"iterations/000010/heldout/summary.parquet", "", "", 0, false},
	} {
		n, set, rest, ok := runs.ParseEvalPath(c.path)
		if n != c.n || set != c.set || rest != c.rest || ok != c.ok {
			t.Errorf("ParseEvalPath(%q) = %d, %q, %q, %v", c.path, n, set, rest, ok)
		}
	}
	if n, ok := runs.InIteration("iterations/000003/trajectories.parquet", runs.TrajectoriesFile); !ok || n != 3 {
		t.Errorf("InIteration = %d, %v", n, ok)
	}
	if _, ok := runs.InIteration("iterations/000003/adapter/trajectories.parquet", runs.TrajectoriesFile); ok {
		t.Error("InIteration matched a file below the iteration's directory")
	}
}
