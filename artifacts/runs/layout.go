package runs

import (
	"fmt"
	"strconv"
	"strings"
)

// BranchPrefix starts the branch name of every run (lakeFS branch names
// cannot hold a "/", hence not "runs/").
const BranchPrefix = "runs-"

// Branch is the branch run's records live on.
func Branch(run string) string { return BranchPrefix + run }

// RunOf is the run a branch holds, ok false for a branch that is not a
// run's.
func RunOf(branch string) (run string, ok bool) {
	run, ok = strings.CutPrefix(branch, BranchPrefix)
	return run, ok && run != ""
}

// LockPath is where the lease on run is kept, on the engine's lock
// branch (not on the run's own branch, so that taking it commits nothing
// to the run).
func LockPath(run string) string { return "runs/" + run + ".json" }

// Paths of a run's records.
const (
	// ConfigPath holds the run's effective config, secrets redacted, with
	// its hash in a comment.
	ConfigPath = "run/config.yaml"
	// StatePath holds State, committed with every iteration.
	StatePath = "run/state.json"
	// IterationsPrefix starts every path of an iteration's records.
	IterationsPrefix = "iterations/"
	// EvalsPrefix starts every path of an evaluation's records.
	EvalsPrefix = "evals/"
	// EventsPrefix starts the paths of the iterations' event streams and
	// task metrics.
	EventsPrefix = "events/"
	// HealthReportPath is the training-health table of the whole run.
	HealthReportPath = "reports/health.parquet"
	// RescoreReportPath is the report a rescoring commits on its branch.
	RescoreReportPath = "reports/rescore.json"
)

// Files of an iteration's directory (IterationPath) and an evaluation's
// (EvalPath).
const (
	PromptsFile      = "prompts.parquet"
	TrajectoriesFile = "trajectories.parquet"
	RewardsFile      = "rewards.parquet"
	AdvantagesFile   = "advantages.parquet"
	// ValuesFile is PPO's per-token values (tables.TokenValues), an
	// output of a train stage with a critic.
	ValuesFile       = "values.parquet"
	HealthFile       = "health.parquet"
	TrainMetricsFile = "train_metrics.json"
	// AdapterDir is the checkpoint's directory in an iteration's.
	AdapterDir = "adapter"
	// AdapterConfigFile marks a directory as a PEFT adapter.
	AdapterConfigFile = "adapter_config.json"
	SamplesFile       = "samples.parquet"
	SummaryFile       = "summary.parquet"
)

// Commit metadata of an iteration's commit.
const (
	MetaRun        = "rlpipe.run"
	MetaIteration  = "rlpipe.iteration"
	MetaConfigHash = "rlpipe.config-hash"
	// MetaEval names the eval set of an evaluation's commit.
	MetaEval = "rlpipe.eval"
)

// IterationDir is iteration n's directory: "iterations/000007".
func IterationDir(n int) string { return fmt.Sprintf("iterations/%06d", n) }

// IterationPath is a file of iteration n: "iterations/000007/rewards.parquet".
func IterationPath(n int, file string) string { return IterationDir(n) + "/" + file }

// AdapterPath is iteration n's checkpoint directory.
func AdapterPath(n int) string { return IterationPath(n, AdapterDir) }

// EventsPath is iteration n's event stream.
func EventsPath(n int) string { return fmt.Sprintf("events/%06d.jsonl", n) }

// MetricsPath is iteration n's IterationMetrics.
func MetricsPath(n int) string { return fmt.Sprintf("events/%06d.metrics.json", n) }

// EvalDir is where the evaluation of a checkpoint (0: the starting
// policy) on an eval set is written.
func EvalDir(checkpoint int, set string) string { return fmt.Sprintf("evals/%06d/%s", checkpoint, set) }

// EvalPath is a file of an evaluation: "evals/000007/heldout/summary.parquet".
func EvalPath(checkpoint int, set, file string) string { return EvalDir(checkpoint, set) + "/" + file }

// IterationPattern names file of every iteration, for messages and docs:
// "iterations/NNNNNN/trajectories.parquet".
func IterationPattern(file string) string { return IterationsPrefix + "NNNNNN/" + file }

// EvalPattern names file of every evaluation, for messages and docs:
// "evals/NNNNNN/<set>/summary.parquet".
func EvalPattern(file string) string { return EvalsPrefix + "NNNNNN/<set>/" + file }

// ParseIterationPath splits a path under IterationsPrefix into its
// iteration and the rest ("rewards.parquet", "adapter/adapter_config.json");
// ok is false for any other path.
func ParseIterationPath(p string) (n int, rest string, ok bool) {
	tail, ok := strings.CutPrefix(p, IterationsPrefix)
	if !ok {
		return 0, "", false
	}
	num, rest, _ := strings.Cut(tail, "/")
	if n, ok = number(num); !ok {
		return 0, "", false
	}
	return n, rest, true
}

// ParseEvalPath splits a path under EvalsPrefix into its checkpoint, its
// set and the rest ("summary.parquet"); ok is false for any other path.
func ParseEvalPath(p string) (checkpoint int, set, rest string, ok bool) {
	tail, ok := strings.CutPrefix(p, EvalsPrefix)
	if !ok {
		return 0, "", "", false
	}
	parts := strings.SplitN(tail, "/", 3)
	if len(parts) < 2 || parts[1] == "" {
		return 0, "", "", false
	}
	if checkpoint, ok = number(parts[0]); !ok {
		return 0, "", "", false
	}
	if len(parts) == 3 {
		rest = parts[2]
	}
	return checkpoint, parts[1], rest, true
}

// number parses the six-digit directory names of iterations and
// checkpoints (more digits past 999999).
func number(s string) (int, bool) {
	if len(s) < 6 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// InIteration reports whether p is a file of some iteration's directory
// named file ("iterations/NNNNNN/<file>"), and which.
func InIteration(p, file string) (n int, ok bool) {
	n, rest, ok := ParseIterationPath(p)
	return n, ok && rest == file
}
