package external_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/trainers/external"
)

// The reference script needs torch, transformers, peft and pyarrow, which
// make test does not install; these tests check what runs without them:
// it compiles, parses the contract's flags, checks hyperparameters before
// importing torch, plans DDP's micro-batches consistently and splits
// episodes. torch_test.go runs it for real when the project's venv with
// torch is there (scripts/py-venv.sh).

var script = filepath.Join("..", "python", "grpo_train.py")

func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	return p
}

// checkScript runs the Python code with the script's folder as its
// argument (for `import grpo_train`); it must print "ok" alone.
func checkScript(t *testing.T, py, what, code string) {
	t.Helper()
	cmd := exec.Command(py, "-c", code, filepath.Dir(script))
	cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
}

func TestReferenceScriptCompiles(t *testing.T) {
	py := python(t)
	cmd := exec.Command(py, "-m", "py_compile", script)
	// Keep the bytecode out of the source tree.
	cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("py_compile %s: %v\n%s", script, err, out)
	}
}

// TestReferenceScriptUnderTheContract runs the real script as the train
// stage of a loop: it accepts every flag rlpipe passes, and invalid
// hyperparameters end the task at once with status 78 and the key.
func TestReferenceScriptUnderTheContract(t *testing.T) {
	py := python(t)
	for _, tc := range []struct {
		hp   map[string]any
		says string
	}{
		{map[string]any{"base_model": "Qwen/Qwen2.5-0.5B-Instruct", "lr": -1}, "hyperparameters.lr: -1 must be > 0"},
		{map[string]any{"base_model": "Qwen/Qwen2.5-0.5B-Instruct", "lora": map[string]any{"rnak": 8}}, "unknown hyperparameter lora.'rnak' (did you mean 'rank'?)"},
		{map[string]any{"lr": 1e-5}, "hyperparameters.base_model is required"},
		{map[string]any{"base_model": "m", "aggregation": "tokens"}, `hyperparameters.aggregation: 'tokens'; use "token", "sequence", "seq_mean_token_sum_norm" (or verl's "token_mean" and "seq_mean_token_mean")`},
		{map[string]any{"base_model": "m", "dual_clip": 0.5}, "hyperparameters.dual_clip: 0.5 must be above 1 (3 is usual), or 0 for off"},
		{map[string]any{"base_model": "m", "kl_estimator": "k4"}, `hyperparameters.kl_estimator: 'k4'; use k1, k2 or k3 (verl's kl, mse or low_var_kl)`},
		{map[string]any{"base_model": "m", "entropy_coeff": -0.01}, "hyperparameters.entropy_coeff: -0.01 must be >= 0"},
		{map[string]any{"base_model": "m", "loss": "dpo"}, `hyperparameters.loss: 'dpo'; use "ppo_clip", "gspo", "cispo", "reinforce"`},
		{map[string]any{"base_model": "m", "loss": "gspo", "dual_clip": 3}, `hyperparameters.dual_clip: 3; dual clip applies to loss ppo_clip only, not gspo (remove dual_clip or the loss)`},
		{map[string]any{"base_model": "m", "loss": "reinforce", "dual_clip": 3}, `hyperparameters.dual_clip: 3; dual clip applies to loss ppo_clip only, not reinforce (remove dual_clip or the loss)`},
		{map[string]any{"base_model": "m", "lora": "full"}, `hyperparameters.lora: 'full' must be an object {rank, alpha, dropout, targets}, or "none" for full fine-tuning`},
		{map[string]any{"base_model": "m", "max_shard_size": 1 << 20}, "hyperparameters.max_shard_size: applies to full fine-tuning only (lora: none); remove it, or set lora: none"},
		{map[string]any{"base_model": "m", "lora": "none", "max_shard_size": 0}, "hyperparameters.max_shard_size: 0 must be >= 1"},
		{map[string]any{"base_model": "m", "lora": "none", "critic": map[string]any{}}, "hyperparameters.critic: PPO's critic is a LoRA adapter on the actor's base, which lora: none does not have; remove critic, or train the actor with a LoRA adapter"},
	} {
		t.Run(tc.says, func(t *testing.T) {
			train := trainTask(t, "", func(o *external.Options) {
				o.Command = []string{py, script}
				o.Hyperparameters = tc.hp
				o.Env = map[string]string{"PYTHONPYCACHEPREFIX": t.TempDir()}
			})
			_, err := openRun(t, standintest.NewStore(t, 12), "py", 2, nil).Loop(context.Background(), loopConfig(1), stages(t, train))
			var ee *external.ExitError
			if !errors.As(err, &ee) || ee.Code != external.ExitConfig || !errors.Is(err, pipeline.ErrPermanent) {
				t.Fatalf("err = %v, want exit status %d, not retried", err, external.ExitConfig)
			}
			if !strings.Contains(ee.Tail, tc.says) {
				t.Errorf("stderr tail %q lacks %q", ee.Tail, tc.says)
			}
		})
	}
}

// TestReferenceScriptPlan checks the script's split of minibatches over
// DDP processes: each sample trains exactly once per epoch, and every
// process runs the same number of micro-batches in each minibatch.
func TestReferenceScriptPlan(t *testing.T) {
	py := python(t)
	code := `
import sys
sys.path.insert(0, sys.argv[1])
from grpo_train import plan
for n in (0, 1, 5, 16, 37):
    for world in (1, 2, 3, 8):
        for mbs, micro in ((0, 4), (8, 2), (5, 3), (1, 1)):
            hp = {"minibatch_size": mbs, "micro_batch_size": micro}
            plans = [plan(n, hp, world, r) for r in range(world)]
            seen = sorted(i for p in plans for mb in p for m in mb for i in m)
            assert seen == list(range(n)), (n, world, mbs, micro, seen)
            for k in range(len(plans[0])):
                counts = {len(p[k]) for p in plans}
                assert len(counts) == 1, (n, world, mbs, micro, k, counts)
                assert all(len(m) <= micro for p in plans for m in p[k])
print("ok")
`
	checkScript(t, py, "plan check", code)
}

// The reference script takes an episode as its exact sequence, cut before
// its first trainable token, with the replies' old logprobs in their
// places; a one-turn episode is the single-turn sample of the same
// tokens, and a mask that is not the replies' tokens is refused.
func TestReferenceScriptEpisodes(t *testing.T) {
	py := python(t)
	code := `
import sys
sys.path.insert(0, sys.argv[1])
from grpo_train import episode_sample, DataError
row = lambda seq, marks, ids, lps: {"prompt_id": "p", "sample_index": 3, "sequence_ids": seq, "trainable": marks, "token_ids": ids, "logprobs": lps}
# One turn: prompt 5 6, reply 7 2.
assert episode_sample(row([5, 6, 7, 2], [0, 0, 1, 1], [7, 2], [-0.5, -0.25])) == ([5, 6], [7, 2], [1, 1], [-0.5, -0.25])
# Two turns: the observation 8 between the replies is given, its old logprob unread.
assert episode_sample(row([5, 6, 7, 2, 8, 9, 2], [0, 0, 1, 1, 0, 1, 1], [7, 2, 9, 2], [-1, -2, -3, -4])) == \
    ([5, 6], [7, 2, 8, 9, 2], [1, 1, 0, 1, 1], [-1.0, -2.0, 0.0, -3.0, -4.0])
assert episode_sample(row([5, 7, 2], [0, 1, 1], [7, 2], None)) == ([5], [7, 2], [1, 1], None)
for bad, want in (
    (row([5, 6, 7, 2], [1, 0, 1, 1], [7, 2], None), "token 1 of sequence_ids is trainable but is not reply token 1"),
    (row([5, 6, 7, 2], [0, 0, 1, 0], [7, 2], None), "its mask marks 1 tokens for 2 reply tokens"),
    (row([5, 6], [0, 0], [], None), "marks no token of its 2"),
    (row([5, 6, 7], [0, 1], [6], None), "sequence_ids has 3 tokens and trainable 2"),
):
    try:
        episode_sample(bad)
    except DataError as e:
        assert want in str(e) and "episode 3 of prompt 'p'" in str(e), (want, str(e))
    else:
        raise AssertionError("accepted: " + want)
print("ok")
`
	checkScript(t, py, "episode check", code)
}

// The reference script never rescores a row an older adapter sampled
// (staleness > 0) with the trainer's adapter unless rescore_stale says
// so: recompute_old_logprobs is a config error (exit 78) and a missing
// logprobs column a data error (exit 65), each naming the row.
func TestReferenceScriptStaleRows(t *testing.T) {
	checkGRPOTrain(t, "stale rows check", `
from grpo_train import check_stale, ConfigError, DataError
row = {"prompt_id": "p", "sample_index": 3, "staleness": 1}
hp = lambda **kw: {"recompute_old_logprobs": False, "rescore_stale": False, **kw}
check_stale({**row, "staleness": 0}, True, hp(recompute_old_logprobs=True))
check_stale({**row, "staleness": None}, True, hp())
check_stale(row, False, hp())
check_stale(row, True, hp(rescore_stale=True))
check_stale(row, False, hp(recompute_old_logprobs=True, rescore_stale=True))
for kw, missing, err, want in (
    ({"recompute_old_logprobs": True}, False, ConfigError,
     "hyperparameters.recompute_old_logprobs: sample 3 of prompt 'p' (staleness 1) would be rescored with the adapter after the one that sampled it, dropping the staleness correction; run on-policy (overlap.max_staleness: 0), remove recompute_old_logprobs, or set rescore_stale: true to accept it"),
    ({}, True, DataError,
     "sample 3 of prompt 'p' (staleness 1) has no logprobs: rescoring it with the trainer's adapter would drop the staleness correction; have the policy return logprobs, run on-policy (overlap.max_staleness: 0), or set rescore_stale: true to accept it"),
):
    try:
        check_stale(row, missing, hp(**kw))
    except err as e:
        assert str(e) == want, str(e)
    else:
        raise AssertionError("accepted: " + want)
`)
}

// The script's update-level mismatch figures are trainers/grpo.MismatchOf's:
// the token-weighted k3 of the first epoch's steps, the largest ratio of
// any step (the numbers of TestMismatchOf).
func TestReferenceScriptMismatch(t *testing.T) {
	checkGRPOTrain(t, "mismatch check", `
from grpo_train import mismatch
steps = [{"behaviour_kl": 0.2, "ratio_max": 1.5, "tokens": 3}, {"behaviour_kl": 0.6, "ratio_max": 2.5, "tokens": 1},
         {"behaviour_kl": 9.0, "ratio_max": 1.1, "tokens": 4}]
assert mismatch([], 0) == {"mismatch_kl": 0.0, "ratio_max": 0.0}
one = mismatch(steps[:1], 1)
assert abs(one["mismatch_kl"] - 0.2) < 1e-15 and one["ratio_max"] == 1.5, one
got = mismatch(steps, 2)
assert abs(got["mismatch_kl"] - (0.2 * 3 + 0.6) / 4) < 1e-15 and got["ratio_max"] == 2.5, got
`)
}

// checkGRPOTrain runs checks, Python code that imports from grpo_train
// and raises when a check fails, with the script's folder on the path.
func checkGRPOTrain(t *testing.T, what, checks string) {
	t.Helper()
	checkScript(t, python(t), what, "import sys\nsys.path.insert(0, sys.argv[1])\n"+checks+"\nprint(\"ok\")\n")
}
