package external_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/external"
	"github.com/rlpipe/rlpipe/trainers/external/torchtest"
)

// ppoHparams are the torch tests' hyperparameters with the critic on.
func ppoHparams(model string, critic map[string]any) map[string]any {
	hp := torchtest.Hparams(model)
	hp["critic"] = critic
	return hp
}

// critic runs one PPO call of the script: the contract's flags plus
// --critic-out, --values-out and, when in is not "", --critic-in.
func ppoCall(t *testing.T, argv []string, f torchtest.Files, hp map[string]any, adapterIn, optimizerIn, criticIn string, iteration int) (torchtest.Result, string, string) {
	t.Helper()
	sp, critic, values := ppoSpec(t, f, hp, adapterIn, optimizerIn, criticIn, iteration)
	return torchtest.Run(t, argv, f, hp, adapterIn, optimizerIn, iteration, sp.Extra...), critic, values
}

// ppoSpec is ppoCall's call for torchtest.Many, with the critic
// directory and the values file it will write.
func ppoSpec(t *testing.T, f torchtest.Files, hp map[string]any, adapterIn, optimizerIn, criticIn string, iteration int) (torchtest.Spec, string, string) {
	t.Helper()
	out := t.TempDir()
	critic, values := filepath.Join(out, "critic"), filepath.Join(out, "values.jsonl")
	extra := []string{"--critic-out", critic, "--values-out", values}
	if criticIn != "" {
		extra = append(extra, "--critic-in", criticIn)
	}
	return torchtest.Spec{Files: f, Hparams: hp, AdapterIn: adapterIn, OptimizerIn: optimizerIn, Iteration: iteration, Extra: extra}, critic, values
}

// expectedPass1 is tiny-arith's exact expected pass@1 at temperature 1
// on a fixed set of training problems under the adapter directory dir.
func expectedPass1(t *testing.T, m *tiny.Model, dir string) float64 {
	t.Helper()
	var a *tiny.Adapter
	if dir != "" {
		var err error
		if a, err = m.LoadAdapter(dir); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(99, 1))
	probs := make([]tiny.Problem, 64)
	for i := range probs {
		probs[i] = tiny.TrainingProblem(rng)
	}
	p, err := m.ExpectedPass1(context.Background(), a, probs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// PPO with the critic learns with one sample per prompt, where GRPO's
// advantages mask every sample as alone in its group: each iteration
// samples from the adapter the previous call wrote and continues from its
// optimizer and critic state.
func TestReferenceScriptPPOLearnsWithOneSample(t *testing.T) {
	py := slowTorchPython(t, "PPO on tiny-arith with n: 1 for 4 iterations (two or three minutes on a busy machine)")
	m, model := torchtest.Export(t)
	argv := []string{py, torchtest.Script(t)}
	hp := ppoHparams(model, map[string]any{"lr": 1e-2})
	hp["lr"] = 5e-3
	before := expectedPass1(t, m, "")
	adapter, optimizer, critic := "", "", ""
	var rewards []float64
	for it := 1; it <= 4; it++ {
		f := torchtest.PPOBatch(t, m, adapter, filepath.Join(t.TempDir(), fmt.Sprint(it)), uint64(it), 48, 1)
		r, c, v := ppoCall(t, argv, f, hp, adapter, optimizer, critic, it)
		rows := torchtest.ReadValues(t, v)
		if len(rows) != 48 {
			t.Fatalf("iteration %d: %d rows of values, want 48", it, len(rows))
		}
		t.Logf("iteration %d: train reward %.3f, loss %.4g, %s", it, f.MeanReward(), r.Metrics.Loss, r.Output[max(0, len(r.Output)-200):])
		rewards = append(rewards, f.MeanReward())
		adapter, optimizer, critic = r.Adapter, r.Optimizer, c
	}
	after := expectedPass1(t, m, adapter)
	t.Logf("expected pass@1 on 64 training problems: %.4f -> %.4f; train rewards %v", before, after, rewards)
	if !(after > before+0.02) || math.IsNaN(after) {
		t.Errorf("expected pass@1 %.4f -> %.4f after 4 PPO iterations with n: 1, want a gain above 0.02", before, after)
	}
}

// The script's per-token rewards (the KL in the reward), GAE, whitening
// and value loss equal verl's own functions (compute_gae_advantage_return
// with its masked_whiten, compute_value_loss, kl_penalty "kl"), run by
// testdata/peer_ppo_critic.py on a random batch with observation tokens
// in the masks, for (γ, λ) of (1, 1), (1, 0.95), (0.99, 0.9) and (1, 0).
func TestCriticArithmeticMatchesVerl(t *testing.T) {
	py := pyvenv.Peer(t)
	out := pyvenv.Run(t, "peer_ppo_critic.py", nil, py, filepath.Join("testdata", "peer_ppo_critic.py"))
	var got struct {
		VerlError     string             `json:"verl_error"`
		Tokens        int                `json:"tokens"`
		ClippedTokens int                `json:"clipped_tokens"`
		Worst         map[string]float64 `json:"worst"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("peer_ppo_critic.py: %v\n%s", err, out)
	}
	if got.VerlError != "" {
		t.Skipf("verl does not import under %s: %s", py, got.VerlError)
	}
	if got.ClippedTokens == 0 {
		t.Errorf("the value clip binds on no token of %d: the value loss check does not test it", got.Tokens)
	}
	for _, key := range []string{"rewards", "advantages", "returns", "value_loss", "vf_clip_frac"} {
		d, ok := got.Worst[key]
		if !ok || d > 1e-9 {
			t.Errorf("%s: largest difference from verl %v (reported: %v), want within 1e-9", key, d, ok)
		}
	}
	t.Logf("%d tokens, value clip on %d: largest differences %v", got.Tokens, got.ClippedTokens, got.Worst)
}

// A fresh critic predicts 0 everywhere (zero head); --critic-out holds a
// PEFT LoRA the Go side reads, the value head and the AdamW state; given
// back as --critic-in, the critic continues — with its moments: without
// optimizer.pt the same critic moves elsewhere — and during
// critic.warmup the actor's adapter comes out unchanged.
func TestReferenceScriptCriticRoundTrip(t *testing.T) {
	py := slowTorchPython(t, "three PPO calls of the script on tiny-arith")
	m, model := torchtest.Export(t)
	argv := []string{py, torchtest.Script(t)}
	f := torchtest.PPOBatch(t, m, "", t.TempDir(), 5, 16, 1)
	hp := ppoHparams(model, map[string]any{"lr": 1e-2})

	one, critic1, values1 := ppoCall(t, argv, f, hp, "", "", "", 1)
	for _, row := range torchtest.ReadValues(t, values1) {
		for j, v := range row.Values {
			if v != 0 {
				t.Fatalf("fresh critic: value %v at token %d of sample %d of %s, want 0 (a zero value head)", v, j+1, row.SampleIndex, row.PromptID)
			}
		}
	}
	if _, mods, err := safetensors.ReadAdapterDir(critic1); err != nil || len(mods) == 0 {
		t.Fatalf("critic-out is not a PEFT LoRA directory: %d modules, %v", len(mods), err)
	}
	head, err := safetensors.ReadFile(filepath.Join(critic1, "value_head.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if w, b := head.Tensors["v_head.weight"], head.Tensors["v_head.bias"]; w.DType != safetensors.F32 || !slices.Equal(w.Shape, []int{1, m.Config().Dim}) || !slices.Equal(b.Shape, []int{1}) {
		t.Errorf("value head: weight %v %v, bias %v, want F32 [1 %d] and [1]", w.DType, w.Shape, b.Shape, m.Config().Dim)
	}

	// Iteration 2, in warm-up: the critic continues, the actor stays;
	// and the same call without the critic's optimizer.pt, whose moments
	// then differ (checked below). Both in one python (torchtest.Many).
	hp2 := ppoHparams(model, map[string]any{"lr": 1e-2, "warmup": 2})
	bare := filepath.Join(t.TempDir(), "critic")
	copyDir(t, critic1, bare)
	if err := os.Remove(filepath.Join(bare, "optimizer.pt")); err != nil {
		t.Fatal(err)
	}
	sp2, critic2, values2 := ppoSpec(t, f, hp2, one.Adapter, one.Optimizer, critic1, 2)
	sp3, critic3, _ := ppoSpec(t, f, hp2, one.Adapter, one.Optimizer, bare, 2)
	two := torchtest.Many(t, py, []torchtest.Spec{sp2, sp3})[0]
	var moved bool
	for _, row := range torchtest.ReadValues(t, values2) {
		for _, v := range row.Values {
			moved = moved || v != 0
		}
	}
	if !moved {
		t.Error("iteration 2: the critic given as --critic-in predicts 0 everywhere: it did not continue from iteration 1's")
	}
	if a, b := torchtest.LoRA(t, one.Adapter), torchtest.LoRA(t, two.Adapter); !equalFactors(a, b) {
		t.Error("critic.warmup 2 at iteration 2: the actor's adapter changed, want it unchanged")
	}
	if two.Metrics.OptimizerSteps != one.Metrics.OptimizerSteps {
		t.Errorf("warm-up: the actor's optimizer_steps %d, want %d (no actor step)", two.Metrics.OptimizerSteps, one.Metrics.OptimizerSteps)
	}

	// The call without the critic's optimizer.pt: the moments differ.
	withMoments, fresh := torchtest.LoRA(t, critic2), torchtest.LoRA(t, critic3)
	d := maxDiff(withMoments, fresh)
	t.Logf("critic after iteration 2: AdamW continued vs fresh differ by up to %.3g", d)
	if d == 0 {
		t.Error("the critic's AdamW state made no difference: --critic-in's optimizer.pt was not loaded")
	}
	var cm struct {
		Steps int `json:"critic_optimizer_steps"`
	}
	torchtest.ReadJSON(t, filepath.Join(two.Dir, "metrics.json"), &cm)
	if cm.Steps != 2 {
		t.Errorf("critic_optimizer_steps %d after two calls, want 2", cm.Steps)
	}
}

// Bad critic hyperparameters exit 78 before torch loads, naming the key.
func TestReferenceScriptCriticConfig(t *testing.T) {
	py := python(t)
	for _, tc := range []struct {
		name string
		hp   string
		says string
	}{
		{"negative lr", `{"critic": {"lr": -1}}`, "hyperparameters.critic.lr: -1 must be > 0"},
		{"misspelt key", `{"critic": {"cliprange": 0.2}}`, "unknown hyperparameter critic.'cliprange' (did you mean 'cliprange_value'?)"},
		{"missing", `{"critic": {"missing": "rebuild"}}`, `hyperparameters.critic.missing: 'rebuild'; use "refuse" or "fresh"`},
		{"warmup", `{"critic": {"warmup": 1.5}}`, "hyperparameters.critic.warmup: 1.5 is not an integer"},
		{"lambda", `{"critic": {"lambda": 1.5}}`, "hyperparameters.critic.lambda: 1.5 must be in [0, 1]"},
		{"not an object", `{"critic": 3}`, "hyperparameters.critic: 3 must be an object {lr, warmup, cliprange_value, missing}"},
		{"kl_in_reward at beta 0", `{"critic": {}, "kl_in_reward": true}`, "hyperparameters.kl_in_reward: true but beta is 0, which weighs the KL; set beta, e.g. 0.01"},
		{"kl_in_reward without critic", `{"kl_in_reward": true}`, "hyperparameters.kl_in_reward: the KL goes into PPO's per-token rewards, which need hyperparameters.critic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			hp := filepath.Join(dir, "hparams.json")
			body := `{"base_model": "m", ` + tc.hp[1:]
			if err := os.WriteFile(hp, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(py, script, "--trajectories", "t", "--advantages", "a", "--prompts", "p", "--hparams", hp,
				"--adapter-out", dir, "--optimizer-out", dir, "--metrics-out", filepath.Join(dir, "m.json"), "--critic-out", dir)
			cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+t.TempDir())
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != external.ExitConfig {
				t.Fatalf("err = %v, want exit status %d\n%s", err, external.ExitConfig, out)
			}
			if !strings.Contains(string(out), tc.says) {
				t.Errorf("output %q lacks %q", out, tc.says)
			}
		})
	}
}

// A critic whose value is not finite fails the call with exit 65, naming
// the first row; nothing is written.
func TestReferenceScriptNonFiniteValue(t *testing.T) {
	py := slowTorchPython(t, "two PPO calls of the script on tiny-arith")
	m, model := torchtest.Export(t)
	argv := []string{py, torchtest.Script(t)}
	f := torchtest.PPOBatch(t, m, "", t.TempDir(), 5, 4, 1)
	hp := ppoHparams(model, map[string]any{})
	one, critic, _ := ppoCall(t, argv, f, hp, "", "", "", 1)
	bad := filepath.Join(t.TempDir(), "critic")
	copyDir(t, critic, bad)
	head, err := safetensors.ReadFile(filepath.Join(bad, "value_head.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	head.Tensors["v_head.bias"] = safetensors.FromFloat32([]int{1}, []float32{float32(math.NaN())})
	if err := safetensors.WriteFile(filepath.Join(bad, "value_head.safetensors"), head); err != nil {
		t.Fatal(err)
	}
	r, err := torchtest.Call(t, argv, f, hp, one.Adapter, one.Optimizer, 2, "--critic-in", bad, "--values-out", filepath.Join(t.TempDir(), "v.jsonl"))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != external.ExitDataErr {
		t.Fatalf("err = %v, want exit status %d\n%s", err, external.ExitDataErr, r.Output)
	}
	row := f.Batch.Advantages[0]
	want := fmt.Sprintf("sample %d of prompt '%s': the critic's value of completion token 1 is nan", row.SampleIndex, row.PromptID)
	if !strings.Contains(r.Output, want) {
		t.Errorf("output lacks %q:\n%s", want, r.Output)
	}
	if _, err := os.Stat(filepath.Join(r.Adapter, "adapter_model.safetensors")); err == nil {
		t.Error("a failed call wrote an adapter")
	}
}

// valueDiffs are the largest differences, per list, between two sets of
// values rows of the same samples in the same order.
func valueDiffs(t *testing.T, a, b []torchtest.TokenValues) map[string]float64 {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d and %d rows of values", len(a), len(b))
	}
	worst := map[string]float64{}
	for i := range a {
		x, y := a[i], b[i]
		if x.PromptID != y.PromptID || x.SampleIndex != y.SampleIndex {
			t.Fatalf("row %d: %s/%d and %s/%d", i, x.PromptID, x.SampleIndex, y.PromptID, y.SampleIndex)
		}
		for name, pair := range map[string][2][]float64{"rewards": {x.Rewards, y.Rewards}, "values": {x.Values, y.Values},
			"returns": {x.Returns, y.Returns}, "advantages": {x.Advantages, y.Advantages}} {
			if len(pair[0]) != len(pair[1]) {
				t.Fatalf("row %d: %s has %d and %d entries", i, name, len(pair[0]), len(pair[1]))
			}
			for j := range pair[0] {
				worst[name] = math.Max(worst[name], math.Abs(pair[0][j]-pair[1][j]))
			}
		}
	}
	return worst
}

func equalFactors(a, b map[string][]float64) bool { return len(a) == len(b) && maxDiff(a, b) == 0 }

func maxDiff(a, b map[string][]float64) float64 {
	d := 0.0
	for k, x := range a {
		y, ok := b[k]
		if !ok || len(x) != len(y) {
			return math.Inf(1)
		}
		for i := range x {
			d = math.Max(d, math.Abs(x[i]-y[i]))
		}
	}
	return d
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// ppoMetrics are the script's PPO figures.
type ppoMetrics struct {
	ValueLoss         float64  `json:"value_loss"`
	VFClipFrac        float64  `json:"vf_clip_frac"`
	CriticGradNorm    float64  `json:"critic_grad_norm"`
	ExplainedVariance *float64 `json:"explained_variance"`
	ValuesMean        float64  `json:"values_mean"`
	ReturnsMean       float64  `json:"returns_mean"`
	CriticSteps       int      `json:"critic_optimizer_steps"`
}

// PPO under torchrun trains what one process trains: every row's old
// values, returns and whitened advantages (the whitening statistics are
// the whole batch's, not a rank's), the losses, the value clip, the
// critic's gradient norm and the critic it writes over three minibatch
// steps, continuing from a critic with non-zero values.
func TestReferenceScriptPPOUnderTorchrun(t *testing.T) {
	py := slowTorchPython(t, "runs the PPO script three times, once under torchrun (about two minutes)")
	m, model := torchtest.Export(t)
	f := torchtest.PPOBatch(t, m, "", filepath.Join(t.TempDir(), "batch"), 2, 12, 1)
	hp := ppoHparams(model, map[string]any{"lr": 1e-2, "cliprange_value": 0.05})
	// Three steps of 4 rows (2 per rank): after the first the critic has
	// moved, so the value clip binds.
	hp["beta"], hp["kl_in_reward"], hp["minibatch_size"] = 0.04, true, 4
	one := []string{py, torchtest.Script(t)}
	first, critic, _ := ppoCall(t, one, f, hp, "", "", "", 1)
	r1, c1, v1 := ppoCall(t, one, f, hp, first.Adapter, first.Optimizer, critic, 2)
	r2, c2, v2 := ppoCall(t, torchtest.TorchrunArgv(t, py, 2), f, hp, first.Adapter, first.Optimizer, critic, 2)
	rows1, rows2 := torchtest.ReadValues(t, v1), torchtest.ReadValues(t, v2)
	if len(rows1) != 12 {
		t.Fatalf("%d rows of values, want 12", len(rows1))
	}
	worst := valueDiffs(t, rows1, rows2)
	var m1, m2 ppoMetrics
	torchtest.ReadJSON(t, filepath.Join(r1.Dir, "metrics.json"), &m1)
	torchtest.ReadJSON(t, filepath.Join(r2.Dir, "metrics.json"), &m2)
	t.Logf("1 process vs 2 ranks: per-token differences %v; value loss %.9f / %.9f, vf clip %.4f / %.4f, critic grad norm %.9f / %.9f, loss %.9f / %.9f, explained variance %v",
		worst, m1.ValueLoss, m2.ValueLoss, m1.VFClipFrac, m2.VFClipFrac, m1.CriticGradNorm, m2.CriticGradNorm, r1.Metrics.Loss, r2.Metrics.Loss, *m1.ExplainedVariance)
	for name, d := range worst {
		if d > 1e-6 {
			t.Errorf("%s differ by up to %.3g between one process and 2 ranks, want within 1e-6", name, d)
		}
	}
	if m1.VFClipFrac == 0 {
		t.Error("the value clip never binds: the test does not compare it")
	}
	for _, c := range []struct {
		name string
		a, b float64
		tol  float64
	}{
		{"value loss", m1.ValueLoss, m2.ValueLoss, 1e-6}, {"vf clip fraction", m1.VFClipFrac, m2.VFClipFrac, 1e-9},
		{"critic gradient norm", m1.CriticGradNorm, m2.CriticGradNorm, 1e-6}, {"loss", r1.Metrics.Loss, r2.Metrics.Loss, 1e-6},
		{"values mean", m1.ValuesMean, m2.ValuesMean, 1e-6}, {"returns mean", m1.ReturnsMean, m2.ReturnsMean, 1e-6},
	} {
		if math.Abs(c.a-c.b) > c.tol {
			t.Errorf("%s: %.9g in one process, %.9g under torchrun, want within %g", c.name, c.a, c.b, c.tol)
		}
	}
	d, over, total := adapterDiff(t, torchtest.LoRA(t, c1), torchtest.LoRA(t, c2), 1e-6)
	t.Logf("critic after the step: largest |2 ranks − 1 process| %.3g; %d of %d values beyond 1e-6", d, over, total)
	if d > 1e-5 || over > total/1000 {
		t.Errorf("the critics 2 ranks and 1 process write are up to %.3g apart (%d of %d values beyond 1e-6)", d, over, total)
	}
	if m1.CriticSteps != 6 || m2.CriticSteps != 6 {
		t.Errorf("critic_optimizer_steps %d and %d after two calls of 3 steps, want 6", m1.CriticSteps, m2.CriticSteps)
	}
}
