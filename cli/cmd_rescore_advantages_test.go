package cli

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/rewards/rescore"
)

// exportRows exports ref:path to a local file and reads it as the table
// t; it returns the rows and the file's bytes.
func exportRows[T any](h *harness, ref, path string, t *tables.Table[T]) ([]T, []byte) {
	h.t.Helper()
	dir, err := os.MkdirTemp(h.dir, "export-")
	if err != nil {
		h.t.Fatal(err)
	}
	local := filepath.Join(dir, "table.parquet")
	h.ok("export", ref+":"+path, local)
	rows, err := tables.ReadFile(local, t)
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := os.ReadFile(local)
	if err != nil {
		h.t.Fatal(err)
	}
	return rows, b
}

const advIter4 = "iterations/000004/advantages.parquet"

// TestRescoreAdvantages recomputes the last iteration of a real
// arithmetic run (16 prompts × 8 samples) under RLOO and GRPO variants
// and checks the tables and the figures the command prints.
func TestRescoreAdvantages(t *testing.T) {
	h, _ := smallArithRun(t)
	rewards, _ := exportRows(h, "runs-arith", "iterations/000004/rewards.parquet", tables.Rewards)
	stored, storedBytes := exportRows(h, "runs-arith", advIter4, tables.Advantages)

	// RLOO, the default branch and iteration (the last).
	var rep rescore.AdvantagesReport
	h.json(&rep, "rescore", "--from", "runs-arith", "--advantages", "rloo")
	if rep.Iteration != 4 || rep.Branch != "arith-rloo-000004" || rep.Std != "population" ||
		rep.StoredVersion != "join-2 epsilon=1e-06 no_std=false keep_zero_std=false" ||
		rep.Version != "join-2 epsilon=1e-06 no_std=false keep_zero_std=false estimator=rloo" {
		t.Fatalf("report = %+v", rep)
	}
	rloo, rlooBytes := exportRows(h, "arith-rloo-000004", advIter4, tables.Advantages)
	if len(rloo) != len(stored) || len(stored) != 128 {
		t.Fatalf("%d rloo rows, %d stored", len(rloo), len(stored))
	}
	// Every unmasked row is G/(G−1)·(r − mean) of its group, and it has
	// the sign of the stored GRPO advantage (r − mean)/(std + ε): no flips.
	total := map[[2]any]float64{}
	for _, r := range rewards {
		total[[2]any{r.PromptID, r.SampleIndex}] = r.Total
	}
	for i, a := range rloo {
		s := stored[i]
		if a.PromptID != s.PromptID || a.SampleIndex != s.SampleIndex || a.Mask != s.Mask || a.Reason != s.Reason {
			t.Fatalf("row %d: rloo %+v, stored %+v", i, a, s)
		}
		if a.Mask {
			continue
		}
		g := float64(a.GroupSize)
		if want := g / (g - 1) * (total[[2]any{a.PromptID, a.SampleIndex}] - a.GroupMean); a.Advantage != want {
			t.Errorf("row %d: rloo %v, want %v", i, a.Advantage, want)
		}
		if a.Advantage*s.Advantage < 0 {
			t.Errorf("row %d: rloo %v and grpo %v differ in sign", i, a.Advantage, s.Advantage)
		}
	}
	assertComparison(t, "rloo vs grpo", rep.Comparison, "128 104 1.000000 0 0.000000 0.425248 16 3 3 24 24")

	// The same command to another branch writes the same bytes.
	h.ok("rescore", "--from", "runs-arith", "--advantages", "rloo", "--branch", "rloo-again")
	if _, again := exportRows(h, "rloo-again", advIter4, tables.Advantages); !bytes.Equal(again, rlooBytes) {
		t.Error("rloo twice: the tables differ")
	}
	// GRPO with the run's own options: the stored table, byte for byte.
	h.json(&rep, "rescore", "--from", "runs-arith", "--advantages", "grpo", "--std", "population", "--branch", "grpo-same")
	if _, same := exportRows(h, "grpo-same", advIter4, tables.Advantages); !bytes.Equal(same, storedBytes) {
		t.Error("grpo with the run's options: the table differs from the stored one")
	}
	assertComparison(t, "grpo vs itself", rep.Comparison, "128 104 1.000000 0 0.000000 0.000000 16 3 3 24 24")
	// GRPO with the sample std: ×√((G−1)/G) up to ε, same ranks.
	h.json(&rep, "rescore", "--from", "runs-arith", "--advantages", "grpo", "--std", "sample", "--branch", "grpo-sample")
	assertComparison(t, "grpo sample std", rep.Comparison, "128 104 1.000000 0 0.000000 0.053547 16 3 3 24 24")
	// An earlier iteration, as text.
	out := h.ok("rescore", "--from", "runs-arith", "--advantages", "rloo", "--iteration", "2")
	for _, want := range []string{"advantages of iteration 2 of runs-arith", "under rloo, std population, on branch arith-rloo-000002", "rank correlation", "sign flips", "groups masked, new"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}

// assertComparison checks c's figures: samples, compared, Spearman,
// sign flips and their share, mean |Δ|, groups, groups masked old and
// new, samples masked old and new.
func assertComparison(t *testing.T, name string, c tables.AdvantageComparison, want string) {
	t.Helper()
	rho := "nil"
	if c.Spearman != nil {
		rho = fmt.Sprintf("%.6f", *c.Spearman)
	}
	got := fmt.Sprintf("%d %d %s %d %.6f %.6f %d %d %d %d %d", c.Samples, c.Compared, rho, c.SignFlips, c.SignFlipShare, c.MeanAbsDelta,
		c.Groups, c.GroupsMaskedOld, c.GroupsMaskedNew, c.MaskedOld, c.MaskedNew)
	if got != want {
		t.Errorf("%s: figures %q, want %q", name, got, want)
	}
}

// TestRescoreAdvantagesBadInput: each refusal names what to do next, and
// writes no branch.
func TestRescoreAdvantagesBadInput(t *testing.T) {
	h, cfg := smallArithRun(t)
	// A run of one sample per prompt (RLOO cannot use it).
	lone := strings.Replace(strings.Replace(readFile(t, cfg), "n: 8,", "n: 1,", 1), "run: arith", "run: lone", 1)
	h.ok("run", "-f", h.file("lone.yaml", strings.Replace(lone, "iterations: 4", "iterations: 1", 1)))
	// A copy of the run whose stored rewards hold a NaN at row 5.
	rows, _ := exportRows(h, "runs-arith", "iterations/000004/rewards.parquet", tables.Rewards)
	rows[5].Total = math.NaN()
	nan := filepath.Join(h.dir, "nan.parquet")
	if err := tables.WriteFile(nan, tables.Rewards, rows, nil); err != nil {
		t.Fatal(err)
	}
	h.ok("branch", "create", "nan-rewards", "--from", "runs-arith")
	h.ok("put", nan, "nan-rewards:iterations/000004/rewards.parquet")
	h.ok("commit", "nan-rewards", "-m", "a reward that is not a number")
	h.ok("rescore", "--from", "runs-arith", "--advantages", "rloo")

	for _, c := range []struct {
		name string
		code int
		args []string
		want []string
	}{
		{"unknown estimator", 1, []string{"--from", "runs-arith", "--advantages", "ppo"},
			[]string{`rescore --advantages: unknown advantage estimator "ppo": use dr_grpo or gae or grpo or reinforce_plus_plus_baseline or rloo`}},
		{"gae needs the critic", 2, []string{"--from", "runs-arith", "--advantages", "gae"},
			[]string{"rescore --advantages gae: invalid argument: its advantages are per token, from the trainer's critic, which rescoring does not run; a PPO run keeps them in each iteration's values.parquet"}},
		{"rloo on groups of one", 2, []string{"--from", "runs-lone", "--advantages", "rloo"},
			[]string{"rescore --from runs-lone --iteration 1: groups too small for the estimator: its groups hold 1 sample per prompt and rloo needs 2; sample more per prompt (the generate stage's sampling n: 2 or more)"}},
		{"no such iteration", 1, []string{"--from", "runs-arith", "--advantages", "rloo", "--iteration", "9"},
			[]string{"rescore --from runs-arith --iteration 9: no such iteration: the run's iterations are 1..4 (its last is 4)"}},
		{"not a run", 2, []string{"--from", "main", "--advantages", "rloo"},
			[]string{"rescore --from main: not a run: it holds no run/state.json; name a run's branch (runs-NAME, as `rlpipe status` lists them)"}},
		{"branch exists", 1, []string{"--from", "runs-arith", "--advantages", "rloo"},
			[]string{"rescore --advantages: branch exists: arith-rloo-000004; pick another --branch NAME, or `rlpipe branch delete arith-rloo-000004`"}},
		{"a run's branch", 2, []string{"--from", "runs-arith", "--advantages", "rloo", "--branch", "runs-x"},
			[]string{"rescore --branch runs-x: invalid argument: a branch named runs-… is a run's; pick another --branch"}},
		{"non-finite reward", 1, []string{"--from", "nan-rewards", "--advantages", "rloo", "--branch", "nan-rloo"},
			[]string{"rescore --from nan-rewards: nan-rewards:iterations/000004/rewards.parquet row 5 (prompt ", "): non-finite reward: total is NaN; fix the reward and rescore it first (rlpipe rescore --reward)"}},
		{"bad std", 2, []string{"--from", "runs-arith", "--advantages", "grpo", "--std", "bessel"},
			[]string{`rescore --std "bessel": invalid argument: use sample or population`}},
		{"advantages and reward", 2, []string{"--from", "runs-arith", "--advantages", "grpo", "--reward", "x.yaml"},
			[]string{"rescore --advantages needs --from REF and no --reward"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.fails(c.code, c.want, append([]string{"rescore"}, c.args...)...)
		})
	}
	if out := h.ok("branch", "list"); strings.Contains(out, "nan-rloo") || strings.Contains(out, "lone-rloo") || strings.Contains(out, "runs-x") {
		t.Errorf("a refused rescoring left a branch:\n%s", out)
	}
}
