package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/pipeline/config"
)

// smallArithRun is a store holding a finished 4-iteration run of the
// arithmetic example (evaluations at 0, 2 and 4 on 50 held-out problems),
// and the config it ran with.
func smallArithRun(t testing.TB) (*harness, string) {
	t.Helper()
	h := newStore(t)
	h.ok("dataset", "arith", "main", "--train", "256", "--heldout", "50")
	cfg := h.file("pipeline.yaml", smallArithConfig(t))
	h.ok("run", "-f", cfg)
	return h, cfg
}

// smallArithConfig is the arithmetic example cut to 4 iterations,
// evaluated every 2 with 4 samples.
func smallArithConfig(t testing.TB) string {
	t.Helper()
	return arithExample(t, map[string]string{
		"iterations: 60": "iterations: 4", "every: 10": "every: 2", "n: 16": "n: 4", "k: [1, 4, 8, 16]": "k: [1, 4]",
	})
}

func TestEvalBackfillsFromCache(t *testing.T) {
	h, cfg := smallArithRun(t)
	var out evalRunOut
	h.json(&out, "eval", "-f", cfg, "--checkpoints", "all")
	// 0, 2 and 4 were evaluated by the loop: their 6 calls are cache hits;
	// 1 and 3 are sampled and scored now.
	if len(out.Checkpoints) != 5 || out.Cached != 6 || out.Ran != 4 || len(out.Evals) != 5 {
		t.Fatalf("checkpoints %v, cached %d, ran %d, %d evals", out.Checkpoints, out.Cached, out.Ran, len(out.Evals))
	}
	if out.Evals[0].Checkpoint != "base" || out.Evals[4].Checkpoint != "iteration-000004" {
		t.Errorf("evals out of order: %+v", out.Evals)
	}
	// Again: everything is cached, nothing is committed.
	var again evalRunOut
	h.json(&again, "eval", "-f", cfg, "--checkpoints", "all")
	if again.Cached != 10 || again.Ran != 0 || again.Commit != out.Commit {
		t.Errorf("second back-fill: cached %d ran %d commit %s (was %s)", again.Cached, again.Ran, again.Commit, out.Commit)
	}
	// A new k rescores stored generations: no sampling.
	var newK evalRunOut
	h.json(&newK, "eval", "-f", cfg, "--checkpoints", "2", "--k", "1,2")
	if newK.Cached != 1 || newK.Ran != 1 {
		t.Errorf("new k: cached %d ran %d, want the generation cached and the scoring run", newK.Cached, newK.Ran)
	}
	if _, ok := newK.Evals[0].Metrics["pass@2"]; !ok {
		t.Errorf("pass@2 missing: %+v", newK.Evals[0].Metrics)
	}
	// status lists them all, the base first.
	var st runStatusOut
	h.json(&st, "status", "arith")
	if len(st.Evals) != 5 || st.Evals[0].Iteration != 0 {
		t.Errorf("status evals: %+v", st.Evals)
	}
}

func TestEvalBadInput(t *testing.T) {
	h, cfg := smallArithRun(t)
	h.fails(1, []string{"k=8 but only n=4 samples per problem", "--n 8"}, "eval", "-f", cfg, "--k", "1,8")
	h.fails(1, []string{"checkpoint 7 of runs-arith is not an adapter", "iterations/000007/adapter/adapter_config.json"}, "eval", "-f", cfg, "--checkpoints", "7")
	h.fails(1, []string{`no run "nope"`}, "eval", "-f", cfg, "--run", "nope")
	// An eval set that overlaps the training prompts: a loud warning.
	overlap := strings.Replace(readFile(t, cfg), "set: main:data/arith-heldout.parquet", "set: main:data/arith-overlap.parquet", 1)
	local := filepath.Join(h.dir, "train.parquet")
	h.ok("export", "main:data/arith-train.parquet", local)
	h.ok("put", local, "main:data/arith-overlap.parquet")
	h.ok("commit", "main", "-m", "an eval set that is the training set")
	ov := h.file("overlap.yaml", overlap)
	if r := h.run("eval", "-f", ov, "--checkpoints", "0"); r.code != 0 || !strings.Contains(r.stderr, "WARNING: 256 of 256 eval problems") {
		t.Errorf("eval: exit %d, no overlap warning on stderr %q", r.code, r.stderr)
	}
	// The warning stays out of -o json, which is one JSON document.
	var eo evalRunOut
	h.json(&eo, "eval", "-f", ov, "--checkpoints", "0")
	// rlpipe run says it too, on stderr, before running.
	if r := h.run("run", "-f", ov, "--run", "overlapping", "--no-report"); r.code != 0 || !strings.Contains(r.stderr, "WARNING: 256 of 256 eval problems") {
		t.Errorf("run: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestOverlapByText: the same questions imported twice, under other ids
// (as a JSONL file and a Hugging Face folder give them), are found by
// their text, whitespace aside, and the warning names them; an eval set
// of other questions gets no warning.
func TestOverlapByText(t *testing.T) {
	h := newStore(t)
	rows := func(ps ...[2]string) string {
		var b strings.Builder
		for _, p := range ps {
			fmt.Fprintf(&b, `{"prompt_id":%q,"prompt":%q,"answer":"1","metadata":"{}","source":"s","split":"test"}`+"\n", p[0], p[1])
		}
		return b.String()
	}
	put := func(name, content string) {
		h.ok("import", h.file(name+".jsonl", content), "main:data/"+name+".parquet", "--table", "prompts")
	}
	put("train", rows([2]string{"gsm8k-0001", "Natalia sold clips to 48 of her friends.\nHow many clips did she sell?"},
		[2]string{"gsm8k-0002", "Weng earns $12 an hour."}, [2]string{"gsm8k-0003", "Betty is saving money."}))
	put("eval", rows([2]string{"hf-gsm8k-a1", "  Natalia sold clips to 48 of her friends. How many clips did she sell?"},
		[2]string{"hf-gsm8k-b2", "Julie is reading a 120-page book."}, [2]string{"gsm8k-0003", "Betty  is saving money. "},
		[2]string{"hf-gsm8k-c3", "Weng earns $12 an\thour."}, [2]string{"hf-gsm8k-d4", "Weng earns $12 an hour."}))
	put("other", rows([2]string{"hf-gsm8k-b2", "Julie is reading a 120-page book."}, [2]string{"hf-gsm8k-e5", "Natalia sold clips to 48 of her friends."}))
	h.ok("commit", "main", "-m", "train and eval sets")

	ctx := context.Background()
	st, err := artifacts.Open(ctx, h.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	warning := func(set string) string {
		var b strings.Builder
		cfg := &config.Config{Dataset: "main:data/train.parquet", Eval: &config.Eval{Set: set}}
		if err := warnOverlap(ctx, st, cfg, &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	want := "WARNING: 4 of 5 eval problems (main:data/eval.parquet) are also training prompts (main:data/train.parquet), " +
		"3 of them under another prompt_id with the same prompt text: held-out figures will overstate what the policy learned\n" +
		`  shared: eval "hf-gsm8k-a1" = train "gsm8k-0001" (same text); "gsm8k-0003" (same prompt_id and text); eval "hf-gsm8k-c3" = train "gsm8k-0002" (same text); and 1 more` + "\n" +
		"  remove them from the eval set (or from the training set) to measure held-out problems\n"
	if got := warning("main:data/eval.parquet"); got != want {
		t.Errorf("warning:\n%s\nwant:\n%s", got, want)
	}
	if got := warning("main:data/other.parquet"); got != "" {
		t.Errorf("an eval set of other questions: %q, want no warning", got)
	}
}

func TestRunNoOverlap(t *testing.T) {
	h, cfg := smallArithRun(t)
	staleness := func(run string) string {
		var rows []map[string]any
		h.json(&rows, "cat", "runs-"+run+":iterations/000003/trajectories.parquet", "--limit", "1")
		if len(rows) != 1 {
			t.Fatalf("%d rows", len(rows))
		}
		return fmt.Sprint(rows[0]["staleness"])
	}
	h.ok("run", "-f", cfg, "--run", "onpolicy", "--no-overlap")
	if got := staleness("arith") + staleness("onpolicy"); got != "10" {
		t.Errorf("staleness with overlap, then without: %s, want 1 then 0", got)
	}
}

// standinEvalConfig is a stand-in loop of 6 iterations scored by a cel
// reward and evaluated (start and last checkpoint) on 10 held-out
// problems: no policy section, the stand-in generate stage samples the
// eval set itself.
const standinEvalConfig = `run: ev
seed: 7
iterations: 6
batch_size: 8
dataset: main:data/prompts.parquet
overlap: {max_staleness: 1}
eval: {set: main:data/heldout.parquet, every: 1000, n: 4, k: [1, 4], max_tokens: 8, seed: 3}
stages:
  sample:   {kind: standin}
  generate: {kind: standin, samples_per_prompt: 4}
  reward:   {kind: cel, spec: reward.yaml}
  train:    {kind: standin}
`

// TestRunRewardNeverFinite: a reward that is NaN (or +Inf) on every row
// stops `rlpipe run` at the first iteration, saying so and what to do —
// where the run once exited 0 printing "reward 0.000", and with an eval
// section failed with "avg@k: k=1 but only n=0 samples per problem".
func TestRunRewardNeverFinite(t *testing.T) {
	for _, tc := range []struct{ name, expr, value string }{
		{"NaN", "0.0 / (double(sample_index) * 0.0)", "NaN"},
		{"+Inf", "1.0 / (double(sample_index) * 0.0)", "+Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newStore(t)
			h.ok("import", "../examples/standin/prompts.jsonl", "main:data/prompts.parquet", "--table", "prompts")
			h.ok("import", h.file("heldout.jsonl", standinHeldout(t, 10)), "main:data/heldout.parquet", "--table", "prompts")
			h.ok("commit", "main", "-m", "add prompts")
			h.file("reward.yaml", "components:\n  - name: correct\n    expr: '"+tc.expr+"'\n")
			cfg := h.file("pipeline.yaml", standinEvalConfig)
			stderr := h.fails(ExitFailure, []string{"run ev: stopped after iteration 0: ", "no sample has a finite reward (",
				"component correct: the value is " + tc.value + "): make every component and the total finite on every row"}, "run", "-f", cfg, "--no-report")
			if strings.Contains(stderr, "avg@k") {
				t.Errorf("the eval's confusing error is back:\n%s", stderr)
			}
		})
	}
}

// standinHeldout is the first n stand-in prompts renamed, as a held-out set.
func standinHeldout(t testing.TB, n int) string {
	t.Helper()
	lines := strings.SplitAfter(readFile(t, "../examples/standin/prompts.jsonl"), "\n")[:n]
	return strings.ReplaceAll(strings.Join(lines, ""), `"add-`, `"held-`)
}

func TestEvalStandinRunWithoutPolicy(t *testing.T) {
	h := newStore(t)
	h.ok("import", "../examples/standin/prompts.jsonl", "main:data/prompts.parquet", "--table", "prompts")
	h.ok("import", h.file("heldout.jsonl", standinHeldout(t, 10)), "main:data/heldout.parquet", "--table", "prompts")
	h.ok("commit", "main", "-m", "add prompts")
	h.file("reward.yaml", "components:\n  - name: correct\n    expr: 'num_equal(extract_answer(completion), answer, 1e-6) ? 1.0 : 0.0'\n")
	cfg := h.file("pipeline.yaml", standinEvalConfig)
	h.ok("run", "-f", cfg, "--no-report")
	var out evalRunOut
	h.json(&out, "eval", "-f", cfg, "--checkpoints", "all")
	// The loop evaluated 0 and 6 (4 cached calls); 1 to 5 run now.
	if fmt.Sprint(out.Checkpoints) != "[0 1 2 3 4 5 6]" || out.Cached != 4 || out.Ran != 10 {
		t.Fatalf("checkpoints %v, cached %d, ran %d", out.Checkpoints, out.Cached, out.Ran)
	}
	var got []string
	for _, e := range out.Evals {
		got = append(got, fmt.Sprintf("%s %d×%d pass@1 %.4f pass@4 %.4f", e.Checkpoint, e.Problems, e.N, e.Metrics["pass@1"], e.Metrics["pass@4"]))
	}
	want := []string{
		"base 10×4 pass@1 0.3500 pass@4 0.8000",
		"iteration-000001 10×4 pass@1 0.2750 pass@4 0.7000",
		"iteration-000002 10×4 pass@1 0.3750 pass@4 1.0000",
		"iteration-000003 10×4 pass@1 0.3500 pass@4 0.7000",
		"iteration-000004 10×4 pass@1 0.3250 pass@4 1.0000",
		"iteration-000005 10×4 pass@1 0.3750 pass@4 1.0000",
		"iteration-000006 10×4 pass@1 0.5750 pass@4 0.9000",
	}
	sameLines(t, "evals", got, want, "\n")
	var again evalRunOut
	h.json(&again, "eval", "-f", cfg, "--checkpoints", "all")
	if again.Cached != 14 || again.Ran != 0 || again.Commit != out.Commit {
		t.Fatalf("again: cached %d, ran %d, commit %s (was %s): want everything cached and no commit", again.Cached, again.Ran, again.Commit, out.Commit)
	}

	// A generate stage that cannot sample the eval set needs a policy.
	noPolicy := strings.Replace(standinEvalConfig, "  generate: {kind: standin, samples_per_prompt: 4}",
		"  generate:\n    kind: command\n    command: [cp, \"{{inputs.prompts}}\", \"{{outputs.trajectories}}\"]\n    outputs: [{name: trajectories, file: trajectories.parquet}]", 1)
	h.fails(ExitFailure, []string{"eval: evaluation samples from the policy section, which is missing"}, "run", "-f", h.file("nopolicy.yaml", noPolicy), "--no-report")
}
