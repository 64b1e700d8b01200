package external_test

import (
	"context"
	"maps"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/external/torchtest"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// TestPPOParityWithEmbedded: from the same actor adapter and the same
// critic/ (the script's LoRA and value head, both trainers' critic AdamW
// starting fresh) on the same n: 1 batch, the script — in one process and
// under torchrun with 2 ranks — and the embedded trainer compute the same
// old values, rewards (the KL in the reward), returns and whitened GAE
// advantages per token, the same value loss, clip fraction, critic
// gradient norm and actor loss; and so with GSPO's sequence ratio on
// the per-token advantages, which clips the same tokens. One optimizer
// step on the whole batch, as TestLossParityWithEmbedded: the value clip,
// which cannot bind at a critic's first step, is checked against verl by
// TestCriticArithmeticMatchesVerl.
func TestPPOParityWithEmbedded(t *testing.T) {
	py := slowTorchPython(t, "runs the PPO script in two python processes and once under torchrun, and the embedded trainer three times (three to four minutes)")
	m, model := torchtest.Export(t)
	f := torchtest.PPOBatch(t, m, "", filepath.Join(t.TempDir(), "batch"), 6, 12, 1)
	hp := ppoHparams(model, map[string]any{"lr": 1e-2, "cliprange_value": 0.05})
	hp["beta"], hp["kl_in_reward"] = 0.04, true
	single := []string{py, torchtest.Script(t)}
	// The start: an actor adapter and a critic with non-zero values, from
	// one script call; both trainers then start their critic's AdamW and
	// the actor's fresh, from the same files.
	// Two steps of 6 rows: the first moves the fresh critic's zero value
	// head, the second its LoRA B (zero until the head is not), so the
	// parity below covers the gradients of A and B too.
	start := maps.Clone(hp)
	start["minibatch_size"] = 6
	first, critic, _ := ppoCall(t, single, f, start, "", "", "", 1)
	policy := filepath.Join(t.TempDir(), "policy")
	copyDir(t, first.Adapter, policy)
	copyDir(t, critic, filepath.Join(policy, grpo.CriticDir))
	if err := os.Remove(filepath.Join(policy, grpo.CriticDir, "optimizer.pt")); err != nil {
		t.Fatal(err)
	}
	criticIn := filepath.Join(policy, grpo.CriticDir)
	adapterIn := filepath.Join(t.TempDir(), "adapter")
	copyDir(t, first.Adapter, adapterIn)

	// embeddedUpdate is the embedded trainer's step from the same start,
	// with loss (nil: ppo_clip) at clip range eps (0: the default).
	embeddedUpdate := func(t *testing.T, loss grpo.PolicyLoss, eps float64) (embedded.Metrics, []torchtest.TokenValues) {
		t.Helper()
		eo := embedded.Options{LR: 2e-3, Beta: 0.04, KLInReward: true, KeepZeroStd: true, PolicyLoss: loss, EpsLow: eps, EpsHigh: eps,
			Critic: &embedded.CriticOptions{LR: 1e-2, ClipRangeValue: 0.05}, GAE: &embedded.GAEOptions{Gamma: 1, Lambda: 1}}
		et, err := embedded.Load(m, eo, policy)
		if err != nil {
			t.Fatal(err)
		}
		res, err := et.Update(context.Background(), f.Batch)
		if err != nil {
			t.Fatal(err)
		}
		if res.Metrics.PPOFigures == nil {
			t.Fatal("the embedded trainer reports no PPO figures")
		}
		var rows []torchtest.TokenValues
		for _, v := range res.Values {
			rows = append(rows, torchtest.TokenValues(v))
		}
		return res.Metrics, rows
	}
	cases := []struct {
		name string
		argv []string
		loss grpo.PolicyLoss // nil: ppo_clip
		eps  float64
	}{
		{name: "one process", argv: single},
		{name: "torchrun", argv: torchtest.TorchrunArgv(t, py, 2)},
		// GSPO's one ratio per sequence with GAE's advantage per token,
		// as verl's compute_policy_loss_gspo takes them; at ε 0.003 the
		// sequences whose ratio left [0.997, 1.003] clip their tokens
		// each by its own advantage's sign.
		{name: "gspo", argv: single, loss: grpo.GSPO, eps: 0.003},
	}
	// Each case's script call; the one-process ones all run in one
	// python (torchtest.Many), torchrun's in its subtest.
	type call struct {
		spec           torchtest.Spec
		critic, values string
		result         torchtest.Result
	}
	calls := map[string]*call{}
	var specs []torchtest.Spec
	var many []*call
	for _, c := range cases {
		hp := maps.Clone(hp)
		if c.loss != nil {
			hp["loss"], hp["eps_low"], hp["eps_high"] = c.loss.Name(), c.eps, c.eps
		}
		cl := &call{}
		cl.spec, cl.critic, cl.values = ppoSpec(t, f, hp, adapterIn, "", criticIn, 2)
		calls[c.name] = cl
		if c.argv[0] == py {
			specs, many = append(specs, cl.spec), append(many, cl)
		}
	}
	for i, r := range torchtest.Many(t, py, specs) {
		many[i].result = r
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gm, goRows := embeddedUpdate(t, c.loss, c.eps)
			cl := calls[c.name]
			r, criticOut, values := cl.result, cl.critic, cl.values
			if c.argv[0] != py {
				sp := cl.spec
				r = torchtest.Run(t, c.argv, f, sp.Hparams, sp.AdapterIn, sp.OptimizerIn, sp.Iteration, sp.Extra...)
			}
			// With beta > 0 the script scores the reference with PEFT's
			// adapters disabled, which froze the critic's LoRA: only its
			// value head trained.
			if d := maxDiff(torchtest.LoRA(t, criticIn), torchtest.LoRA(t, criticOut)); d == 0 || math.IsInf(d, 1) {
				t.Errorf("the script's critic LoRA factors moved by %g in a step, want a move (and the same factors)", d)
			}
			// The script's rows, then the embedded trainer's.
			worst := valueDiffs(t, torchtest.ReadValues(t, values), goRows)
			var pm ppoMetrics
			torchtest.ReadJSON(t, filepath.Join(r.Dir, "metrics.json"), &pm)
			t.Logf("script vs embedded: per-token %v; value loss %.9f / %.9f; vf clip %.4f / %.4f; critic grad norm %.9f / %.9f; loss %.9f / %.9f",
				worst, pm.ValueLoss, gm.ValueLoss, pm.VFClipFrac, gm.VFClipFrac, pm.CriticGradNorm, gm.CriticGradNorm, r.Metrics.Loss, gm.Loss)
			if len(gm.Steps) != 1 {
				t.Fatalf("the embedded trainer took %d steps, want 1", len(gm.Steps))
			}
			one := 1.0/float64(f.Tokens) + 1e-12
			t.Logf("actor: policy loss %.9f / %.9f; grad norm %.9f / %.9f; clipped low %.4f / %.4f, high %.4f / %.4f",
				r.Metrics.PolicyLoss, gm.PolicyLoss, r.Metrics.GradNorm, gm.GradNorm, r.Metrics.ClipLow, gm.Steps[0].ClipLow, r.Metrics.ClipHigh, gm.Steps[0].ClipHigh)
			if c.loss == grpo.GSPO && (gm.Steps[0].ClipLow == 0 || gm.Steps[0].ClipHigh == 0) {
				t.Errorf("GSPO clipped low %.4f high %.4f: the batch should clip tokens on both sides", gm.Steps[0].ClipLow, gm.Steps[0].ClipHigh)
			}
			for name, d := range worst {
				if d > 1e-5 {
					t.Errorf("%s differ by up to %.3g between the script and the embedded trainer, want within 1e-5", name, d)
				}
			}
			for _, x := range []struct {
				name string
				a, b float64
				tol  float64
			}{
				{"value loss", pm.ValueLoss, gm.ValueLoss, 1e-5}, {"vf clip fraction", pm.VFClipFrac, gm.VFClipFrac, 1e-9},
				// The norm is about 1.04: 1e-6 is relative too. Measured:
				// 2.5e-8 (one process). Each module's gradient agreed to
				// 4.4e-6 relative when dumped, float32's noise.
				{"critic gradient norm", pm.CriticGradNorm, gm.CriticGradNorm, 1e-6}, {"actor loss", r.Metrics.Loss, gm.Loss, 1e-5},
				{"values mean", pm.ValuesMean, gm.ValuesMean, 1e-5}, {"returns mean", pm.ReturnsMean, gm.ReturnsMean, 1e-5},
				{"policy loss", r.Metrics.PolicyLoss, gm.PolicyLoss, 1e-5}, {"gradient norm", r.Metrics.GradNorm, gm.GradNorm, 1e-4},
				// At most a token apart: a ratio on the boundary may round
				// either way.
				{"clip fraction low", r.Metrics.ClipLow, gm.Steps[0].ClipLow, one}, {"clip fraction high", r.Metrics.ClipHigh, gm.Steps[0].ClipHigh, one},
			} {
				if math.Abs(x.a-x.b) > x.tol {
					t.Errorf("%s: %.9g from the script, %.9g from the embedded trainer, want within %g", x.name, x.a, x.b, x.tol)
				}
			}
		})
	}
}
