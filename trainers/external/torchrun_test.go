package external_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/external"
	"github.com/rlpipe/rlpipe/trainers/external/torchtest"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// These tests run trainers/python/grpo_train.py for real — one process
// and under torchrun with two gloo ranks on the CPU — on the embedded
// tiny-arith exported as a Hugging Face Llama (tiny.ExportHF) and on
// tables rlpipe wrote, and hold it to the embedded trainer and to the Go
// engine's LoRA loading. Without the venv (scripts/py-venv.sh) they are
// skipped, saying so.

func fmtPtr(p *float64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatFloat(*p, 'g', 9, 64)
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// adapterDiff compares two adapters' factors: the largest absolute
// difference, and how many elements differ by more than tol.
func adapterDiff(t testing.TB, a, b map[string][]float64, tol float64) (worst float64, over, total int) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("adapters of %d and %d tensors", len(a), len(b))
	}
	for name, x := range a {
		y, ok := b[name]
		if !ok || len(y) != len(x) {
			t.Fatalf("tensor %s: %d values against %d", name, len(x), len(y))
		}
		for i := range x {
			d := math.Abs(x[i] - y[i])
			worst = math.Max(worst, d)
			if d > tol {
				over++
			}
			total++
		}
	}
	return worst, over, total
}

// pythonLogprobs scores each example's completion tokens with transformers
// and PEFT (float32) in the venv.
func pythonLogprobs(t testing.TB, py, model, adapter string, batch []tiny.Example) [][]float64 {
	t.Helper()
	const code = `
import json, sys
import torch
from transformers import AutoModelForCausalLM
from peft import PeftModel
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
model = PeftModel.from_pretrained(model, sys.argv[2]).eval()
out = []
with torch.no_grad():
    for s in json.load(sys.stdin):
        ids = [1] + s["prompt"] + s["completion"]
        lp = model(torch.tensor([ids])).logits[0].float().log_softmax(-1)
        p = 1 + len(s["prompt"])
        out.append([lp[i - 1, ids[i]].item() for i in range(p, len(ids))])
json.dump(out, sys.stdout)
`
	type ex struct {
		Prompt     []int32 `json:"prompt"`
		Completion []int32 `json:"completion"`
	}
	in := make([]ex, len(batch))
	for i, e := range batch {
		in[i] = ex{e.Prompt, e.Completion}
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := pyvenv.Run(t, "score with PEFT", b, py, "-c", code, model, adapter)
	var lps [][]float64
	if err := json.Unmarshal(out, &lps); err != nil {
		t.Fatalf("score with PEFT printed %q: %v", out, err)
	}
	return lps
}

// TestReferenceScriptUnderTorchrun runs the script under torchrun, two
// gloo ranks on the CPU, on rlpipe-written tables and the exported
// tiny-arith: the adapter it writes loads in the Go engine and scores
// the batch as PEFT does, and two ranks train what one process trains.
func TestReferenceScriptUnderTorchrun(t *testing.T) {
	py := slowTorchPython(t, "runs torch three times (about a minute)")
	ddp := torchtest.TorchrunArgv(t, py, 2)
	m, model := torchtest.Export(t)
	f := torchtest.Batch(t, m, filepath.Join(t.TempDir(), "batch"), 1, 8, 4, 0)
	hp := torchtest.Hparams(model)

	two := torchtest.Run(t, ddp, f, hp, "", "", 1)
	one := torchtest.Run(t, []string{py, torchtest.Script(t)}, f, hp, "", "", 1)
	t.Logf("loss: 2 ranks %.9f, 1 process %.9f (%d tokens; grad norm %.6f, %.6f; %.1f s, %.1f s)",
		two.Metrics.Loss, one.Metrics.Loss, two.Metrics.TrainTokens, two.Metrics.GradNorm, one.Metrics.GradNorm,
		two.Metrics.TrainSeconds, one.Metrics.TrainSeconds)
	if two.Metrics.TrainTokens != f.Tokens || one.Metrics.TrainTokens != f.Tokens {
		t.Errorf("trained on %d (2 ranks) and %d (1 process) tokens, want the batch's %d", two.Metrics.TrainTokens, one.Metrics.TrainTokens, f.Tokens)
	}
	if d := math.Abs(two.Metrics.Loss - one.Metrics.Loss); d > 1e-6 {
		t.Errorf("loss differs by %.3g between 2 ranks and 1 process", d)
	}
	// The gradients agree to float32 summation order, which differs
	// between one process and two all-reduced ranks, and between CPUs
	// (torch picks its kernels by the instruction set). Adam divides each
	// gradient by its own magnitude, so a value whose gradient is near
	// zero can move by a visible fraction of one step (lr 2e-3) on that
	// noise: on an AVX-512 Xeon one value of 35,712 moved 2.5e-6 apart.
	// Nearly all must agree within 1e-6, and every one within 1e-5
	// (0.5% of a step).
	worst, over, total := adapterDiff(t, torchtest.LoRA(t, two.Adapter), torchtest.LoRA(t, one.Adapter), 1e-6)
	t.Logf("adapter: largest |2 ranks − 1 process| %.3g; %d of %d values differ by more than 1e-6", worst, over, total)
	if worst > 1e-5 || over > total/1000 {
		t.Errorf("2 ranks and 1 process train adapters up to %.3g apart, %d of %d values by more than 1e-6: want at most 1e-5, and at most 1 in 1,000 beyond 1e-6", worst, over, total)
	}

	// The Go engine loads the adapter torchrun wrote and scores the batch
	// as transformers with PEFT does.
	ad, err := m.LoadAdapter(two.Adapter)
	if err != nil {
		t.Fatalf("load the torchrun adapter in Go: %v", err)
	}
	batch := examples(t, m, f.Batch)
	want := pythonLogprobs(t, py, model, two.Adapter, batch)
	got, _, err := m.Score(context.Background(), ad, batch)
	if err != nil {
		t.Fatal(err)
	}
	worst = 0
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("sequence %d: PEFT scored %d tokens, Go %d", i, len(want[i]), len(got[i]))
		}
		for j := range want[i] {
			worst = math.Max(worst, math.Abs(want[i][j]-float64(got[i][j])))
		}
	}
	t.Logf("torchrun's adapter: largest |Go − PEFT| per-token log-probability over %d sequences: %.3g", len(batch), worst)
	if worst > 1e-4 {
		t.Errorf("the Go engine and PEFT score the torchrun adapter up to %.3g apart", worst)
	}
}

// examples are the batch's samples as the embedded engine scores them:
// the prompt as it tokenizes it (BOS implied) and the sampled token ids.
func examples(t testing.TB, m *tiny.Model, b embedded.Batch) []tiny.Example {
	t.Helper()
	text := map[string]string{}
	for _, p := range b.Prompts {
		text[p.PromptID] = p.Prompt
	}
	var out []tiny.Example
	for _, tr := range b.Trajectories {
		p, err := m.PromptTokens(policy.Request{Prompt: text[tr.PromptID]})
		if err != nil {
			t.Fatal(err)
		}
		s, err := policy.RowSampling(tr.Sampler)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tiny.Example{Prompt: p, Completion: tr.TokenIDs, Temperature: s.Temperature})
	}
	return out
}

// TestReferenceScriptContinuesUnderTorchrun: the second iteration under
// torchrun reads --adapter-in and --optimizer-in and continues AdamW
// where the first left it: the same loss and adapter as one process
// continuing from the same files, and not what a fresh AdamW takes.
func TestReferenceScriptContinuesUnderTorchrun(t *testing.T) {
	py := slowTorchPython(t, "runs torch three times, once under torchrun (about a minute)")
	ddp := torchtest.TorchrunArgv(t, py, 2)
	m, model := torchtest.Export(t)
	f1 := torchtest.Batch(t, m, filepath.Join(t.TempDir(), "batch1"), 1, 8, 4, 0)
	f2 := torchtest.Batch(t, m, filepath.Join(t.TempDir(), "batch2"), 2, 8, 4, 0)
	hp := torchtest.Hparams(model)
	first := torchtest.Run(t, []string{py, torchtest.Script(t)}, f1, hp, "", "", 1)
	if _, err := os.Stat(filepath.Join(first.Optimizer, "optimizer.pt")); err != nil {
		t.Fatalf("iteration 1 wrote no optimizer state: %v", err)
	}

	two := torchtest.Run(t, ddp, f2, hp, first.Adapter, first.Optimizer, 2)
	// One process continuing, and a fresh AdamW: one python for both
	// (torchtest.Many).
	rs := torchtest.Many(t, py, []torchtest.Spec{
		{Files: f2, Hparams: hp, AdapterIn: first.Adapter, OptimizerIn: first.Optimizer, Iteration: 2},
		{Files: f2, Hparams: hp, AdapterIn: first.Adapter, Iteration: 2},
	})
	one, fresh := rs[0], rs[1]
	t.Logf("iteration 2 loss: 2 ranks %.9f, 1 process %.9f, fresh AdamW %.9f", two.Metrics.Loss, one.Metrics.Loss, fresh.Metrics.Loss)
	if two.Metrics.OptimizerSteps != 2 || two.Metrics.Updates != 2 || fresh.Metrics.OptimizerSteps != 1 {
		t.Errorf("optimizer steps %d, updates %d after continuing (want 2, 2); %d steps from a fresh AdamW (want 1)",
			two.Metrics.OptimizerSteps, two.Metrics.Updates, fresh.Metrics.OptimizerSteps)
	}
	var state struct {
		OptimizerSteps int `json:"optimizer_steps"`
		Updates        int `json:"updates"`
	}
	b, err := os.ReadFile(filepath.Join(two.Optimizer, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &state); err != nil || state.OptimizerSteps != 2 || state.Updates != 2 {
		t.Errorf("trainer_state.json %s (%v): want 2 optimizer steps and 2 updates", b, err)
	}
	a2, a1 := torchtest.LoRA(t, two.Adapter), torchtest.LoRA(t, one.Adapter)
	worst, _, _ := adapterDiff(t, a2, a1, 1e-6)
	t.Logf("iteration 2 adapter: largest |2 ranks − 1 process| %.3g", worst)
	if d := math.Abs(two.Metrics.Loss - one.Metrics.Loss); d > 1e-6 || worst > 1e-6 {
		t.Errorf("continuing under torchrun and in one process differ: loss by %.3g, adapter by %.3g", d, worst)
	}
	// AdamW's moments came back: a fresh AdamW's first step moves every
	// factor by about lr, the continued one does not.
	moved, _, _ := adapterDiff(t, a1, torchtest.LoRA(t, fresh.Adapter), 0)
	t.Logf("iteration 2 adapter: largest |continued − fresh AdamW| %.3g", moved)
	if moved < 1e-4 {
		t.Errorf("the continued and the fresh AdamW train adapters only %.3g apart: --optimizer-in was not used", moved)
	}
}

// TestLossParityWithEmbedded: the script's GRPO loss on a batch is the
// embedded trainer's (trainers/embedded, the loss of trainers/grpo) within
// 1e-5 — the same advantages, old log-probabilities that put ratios
// outside the clip range on both sides (and so the same mismatch_kl and
// ratio_max), token, sequence and seq_mean_token_sum_norm aggregation
// (and sequence by verl's name), the gspo, cispo and reinforce losses, beta 0 and
// beta > 0 with each KL estimator, dual-clip, an entropy bonus, the
// tempered policy, the rollout correction, one process and torchrun's
// two ranks — and so is the adapter after the step.
func TestLossParityWithEmbedded(t *testing.T) {
	py := slowTorchPython(t, "runs the script in 18 cases, 15 in one python process and 3 under torchrun (a minute or two)")
	m, model := torchtest.Export(t)
	ctx := context.Background()
	// A start adapter with every factor non-zero: one embedded step.
	o := embedded.Options{LR: 2e-3}
	start := torchtest.StartAdapter(t, m, o, 3, 8, 4)
	f := torchtest.Batch(t, m, filepath.Join(t.TempDir(), "batch"), 4, 8, 4, 0.4)
	// The same problems sampled at T 1.2: logprobs of softmax(z/1.2),
	// which both trainers must score at the row's temperature.
	hot := torchtest.BatchAt(t, m, filepath.Join(t.TempDir(), "hot"), 4, 8, 4, 0.4, 1.2)

	single, ddp := []string{py, torchtest.Script(t)}, torchtest.TorchrunArgv(t, py, 2)
	type lossCase struct {
		name            string
		agg             string
		beta, low, high float64
		argv            []string
		dual            float64
		temp            float64 // 0: the batch at T 1
		kl              grpo.KLEstimator
		entropy         float64
		// rc is the rollout correction (bypass: the weights reported,
		// the rejection applied).
		rc   grpo.RolloutCorrection
		loss grpo.PolicyLoss // nil: ppo_clip
	}
	cases := []lossCase{
		{name: "token", agg: "token", low: 0.2, high: 0.2, argv: single},
		{name: "token-beta-clip-higher", agg: "token", beta: 0.04, low: 0.2, high: 0.28, argv: single},
		{name: "sequence-beta", agg: "sequence", beta: 0.04, low: 0.1, high: 0.3, argv: single},
		// Two ranks each hold half of the sequences: the sequence mean
		// must still divide by the whole minibatch's count.
		{name: "sequence-beta-torchrun", agg: "sequence", beta: 0.04, low: 0.1, high: 0.3, argv: ddp},
		// Dual-clip at a c the batch's negative-advantage ratios pass.
		{name: "token-dual-clip", agg: "token", low: 0.2, high: 0.2, argv: single, dual: 1.3},
		// The tempered policy: logits / T in the ratio, the gradient and
		// the KL reference, in both.
		{name: "token-beta-temperature-1.2", agg: "token", beta: 0.04, low: 0.2, high: 0.2, argv: single, temp: 1.2},
		// The k1 estimator (whose per-token values take both signs).
		{name: "token-beta-k1", agg: "token", beta: 0.04, low: 0.2, high: 0.28, argv: single, kl: grpo.K1},
		// An entropy bonus, whose gradient runs through every logit, with
		// k2; and the same at T 1.2, where the entropy is softmax(z/T)'s.
		{name: "sequence-k2-entropy", agg: "sequence", beta: 0.04, low: 0.2, high: 0.2, argv: single, kl: grpo.K2, entropy: 0.05},
		{name: "token-k2-entropy-temperature-1.2", agg: "token", beta: 0.04, low: 0.2, high: 0.2, argv: single, temp: 1.2, kl: grpo.K2, entropy: 0.05},
		// verl's rollout correction at bounds the ±0.4 shifts cross: the
		// rejection drops the same tokens, under torchrun too, where each
		// rank holds half the sequences and the kept count is the sum.
		{name: "token-rollout-correction", agg: "token", low: 0.2, high: 0.2, argv: single,
			rc: grpo.RolloutCorrection{IS: "token", ISThreshold: 1.3, RS: "token_k1", RSThreshold: 1.4}},
		{name: "sequence-rollout-correction-torchrun", agg: "sequence", low: 0.2, high: 0.2, argv: ddp,
			rc: grpo.RolloutCorrection{IS: "sequence", ISThreshold: 1.2, RS: "seq_mean_k3", RSThreshold: 0.06}},
		// Dr. GRPO's constant normaliser: G·L_max over the minibatch,
		// L_max the longest completion, whichever rank holds it.
		{name: "seq-mean-token-sum-norm-beta", agg: "seq_mean_token_sum_norm", beta: 0.04, low: 0.2, high: 0.28, argv: single},
		{name: "seq-mean-token-sum-norm-torchrun", agg: "seq_mean_token_sum_norm", low: 0.2, high: 0.2, argv: ddp},
		// verl's name of sequence.
		{name: "seq-mean-token-mean", agg: "seq_mean_token_mean", low: 0.2, high: 0.2, argv: single},
		// GSPO's sequence ratio (with its paper's sequence aggregation;
		// the geometric mean of a sequence's ratios leaves [0.8, 1.2]
		// rarely, so a narrower range makes whole sequences clip) and
		// CISPO's clipped stop-gradient weight.
		{name: "gspo-sequence", agg: "sequence", low: 0.05, high: 0.05, argv: single, loss: grpo.GSPO},
		{name: "cispo-token", agg: "token", low: 0.2, high: 0.28, argv: single, loss: grpo.CISPO},
		// The plain policy gradient, and with the rollout correction in
		// bypass mode, where the IS weights act on it (verl's
		// bypass_pg_is) and not on a ratio loss.
		{name: "reinforce-token", agg: "token", low: 0.2, high: 0.2, argv: single, loss: grpo.Reinforce},
		{name: "reinforce-rollout-correction", agg: "token", low: 0.2, high: 0.2, argv: single, loss: grpo.Reinforce,
			rc: grpo.RolloutCorrection{IS: "token", ISThreshold: 1.3, RS: "token_k1", RSThreshold: 1.4}},
	}
	// batchOf is the batch a case trains on, hparams its script's
	// hyperparameters.
	batchOf := func(temp float64) torchtest.Files {
		if temp != 0 {
			return hot
		}
		return f
	}
	hparams := func(c lossCase) map[string]any {
		hp := torchtest.Hparams(model)
		hp["eps_low"], hp["eps_high"], hp["beta"], hp["aggregation"] = c.low, c.high, c.beta, c.agg
		if c.dual > 0 {
			hp["dual_clip"] = c.dual
		}
		if c.kl != "" {
			hp["kl_estimator"] = string(c.kl)
		}
		if c.entropy > 0 {
			hp["entropy_coeff"] = c.entropy
		}
		if c.rc.On() {
			hp["rollout_is"], hp["rollout_is_threshold"], hp["rollout_rs"], hp["rollout_rs_threshold"] = c.rc.IS, c.rc.ISThreshold, c.rc.RS, c.rc.RSThreshold
		}
		if c.loss != nil {
			hp["loss"] = c.loss.Name()
		}
		return hp
	}
	// The one-process cases' script calls all run in one python process
	// (torchtest.Many: torch imported once, not 15 times); the torchrun
	// cases each start torchrun in their subtest.
	var specs []torchtest.Spec
	var names []string
	for _, c := range cases {
		if c.argv[0] == py {
			specs = append(specs, torchtest.Spec{Files: batchOf(c.temp), Hparams: hparams(c), AdapterIn: start, Iteration: 1})
			names = append(names, c.name)
		}
	}
	scripted := map[string]torchtest.Result{}
	for i, r := range torchtest.Many(t, py, specs) {
		scripted[names[i]] = r
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := batchOf(c.temp)
			eo := embedded.Options{LR: 2e-3, EpsLow: c.low, EpsHigh: c.high, Beta: c.beta, Aggregation: grpo.Aggregation(c.agg), KeepZeroStd: true, DualClip: c.dual,
				KLEstimator: c.kl, EntropyCoeff: c.entropy, PolicyLoss: c.loss,
				RolloutIS: c.rc.IS, RolloutISThreshold: c.rc.ISThreshold, RolloutRS: c.rc.RS, RolloutRSThreshold: c.rc.RSThreshold}
			et, err := embedded.Load(m, eo, start)
			if err != nil {
				t.Fatal(err)
			}
			res, err := et.Update(ctx, f.Batch)
			if err != nil {
				t.Fatal(err)
			}
			goDir := filepath.Join(t.TempDir(), "go")
			if err := et.Adapter().Save(goDir); err != nil {
				t.Fatal(err)
			}
			py, ok := scripted[c.name]
			if !ok {
				py = torchtest.Run(t, c.argv, f, hparams(c), start, "", 1)
			}
			em := res.Metrics
			var clipped string
			if len(em.Steps) == 1 {
				s := em.Steps[0]
				clipped = fmt.Sprintf("clipped low %.3f high %.3f", s.ClipLow, s.ClipHigh)
			}
			dl, dp := math.Abs(py.Metrics.Loss-em.Loss), math.Abs(py.Metrics.PolicyLoss-em.PolicyLoss)
			t.Logf("loss: torch %.9f, Go %.9f (|Δ| %.3g); policy loss |Δ| %.3g; grad norm torch %.6f, Go %.6f; %s",
				py.Metrics.Loss, em.Loss, dl, dp, py.Metrics.GradNorm, em.GradNorm, clipped)
			if dl > 1e-5 || dp > 1e-5 {
				t.Errorf("loss: torch %.9f, Go %.9f; policy loss: torch %.9f, Go %.9f", py.Metrics.Loss, em.Loss, py.Metrics.PolicyLoss, em.PolicyLoss)
			}
			if math.Abs(py.Metrics.GradNorm-em.GradNorm) > 1e-4*math.Max(1, em.GradNorm) {
				t.Errorf("gradient norm: torch %.9f, Go %.9f", py.Metrics.GradNorm, em.GradNorm)
			}
			if py.Metrics.SamplesUsed != len(f.Batch.Trajectories) {
				t.Errorf("torch trained on %d samples, want %d", py.Metrics.SamplesUsed, len(f.Batch.Trajectories))
			}
			// The same tokens clip: at most one token apart (a ratio on
			// the boundary may round either way).
			one := 1.0 / float64(f.Tokens)
			s := em.Steps[0]
			if math.Abs(py.Metrics.ClipLow-s.ClipLow) > one+1e-12 || math.Abs(py.Metrics.ClipHigh-s.ClipHigh) > one+1e-12 {
				t.Errorf("clip fractions: torch low %.4f high %.4f, Go low %.4f high %.4f", py.Metrics.ClipLow, py.Metrics.ClipHigh, s.ClipLow, s.ClipHigh)
			}
			if c.loss == grpo.Reinforce { // nothing to clip
				if s.ClipLow != 0 || s.ClipHigh != 0 {
					t.Errorf("clip fractions low %.4f high %.4f: reinforce clips nothing", s.ClipLow, s.ClipHigh)
				}
			} else if s.ClipLow == 0 || s.ClipHigh == 0 {
				t.Errorf("clip fractions low %.4f high %.4f: the batch should clip on both sides", s.ClipLow, s.ClipHigh)
			}
			// The train/inference mismatch before the step: the same k3
			// over the same tokens, the same largest ratio.
			t.Logf("mismatch_kl: torch %.9f, Go %.9f; ratio_max: torch %.6f, Go %.6f", py.Metrics.MismatchKL, em.MismatchKL, py.Metrics.RatioMax, em.RatioMax)
			if math.Abs(py.Metrics.MismatchKL-em.MismatchKL) > 1e-6 || math.Abs(py.Metrics.RatioMax-em.RatioMax) > 1e-4*em.RatioMax || !(em.MismatchKL > 0) {
				t.Errorf("mismatch_kl: torch %.9f, Go %.9f (want equal and > 0); ratio_max: torch %.6f, Go %.6f",
					py.Metrics.MismatchKL, em.MismatchKL, py.Metrics.RatioMax, em.RatioMax)
			}
			if (c.dual > 0) != (py.Metrics.ClipDual != nil && em.ClipDual != nil) ||
				(c.dual > 0 && (math.Abs(*py.Metrics.ClipDual-*em.ClipDual) > one+1e-12 || *em.ClipDual == 0)) {
				t.Errorf("clip_frac_dual: torch %v, Go %v (want equal within a token, and > 0)", fmtPtr(py.Metrics.ClipDual), fmtPtr(em.ClipDual))
			}
			if c.rc.On() {
				pf, ef := py.Metrics.RolloutFigures, em.RolloutFigures
				t.Logf("rollout correction: %s; train tokens torch %d, Go %d", rolloutFiguresMatch(t, pf, ef, one), py.Metrics.TrainTokens, em.TrainTokens)
				if ef.RSMasked == nil || *ef.RSMasked == 0 || *ef.RSMasked == 1 || py.Metrics.TrainTokens != em.TrainTokens {
					t.Errorf("masked %s, train tokens torch %d, Go %d: want some tokens dropped, the same count", fmtPtr(ef.RSMasked), py.Metrics.TrainTokens, em.TrainTokens)
				}
			}
			if (c.beta > 0) != (py.Metrics.KL != nil && em.KL != nil) || (c.beta > 0 && math.Abs(*py.Metrics.KL-*em.KL) > 1e-6) {
				t.Errorf("kl: torch %v, Go %v", fmtPtr(py.Metrics.KL), fmtPtr(em.KL))
			}
			if math.Abs(py.Metrics.Entropy-em.Entropy) > 1e-5 {
				t.Errorf("entropy: torch %.9f, Go %.9f", py.Metrics.Entropy, em.Entropy)
			}

			// The adapters after the step. AdamW's first step moves a
			// factor by lr·g/(|g|+1e-8): by lr exactly where the gradient
			// is well above 1e-8, and by a fraction of it, sensitive to
			// rounding, where it is about 1e-9.
			st, pa, ga := torchtest.LoRA(t, start), torchtest.LoRA(t, py.Adapter), torchtest.LoRA(t, goDir)
			var full, fullOver, partial int
			var worstFull, worstAll float64
			for name, x := range st {
				for i := range x {
					dg, dp := ga[name][i]-x[i], pa[name][i]-x[i]
					d := math.Abs(dg - dp)
					worstAll = math.Max(worstAll, d)
					// Moved by at least 0.999·lr: |g| ≥ ~1e-5, where a
					// float32 rounding of g moves the step by far less than
					// 1e-6 (at 0.99·lr, |g| ≈ 1e-6, GSPO's and CISPO's
					// steps differed by up to 1.25e-6 on one factor).
					if math.Abs(dg) < 0.999*eo.LR {
						partial++
						continue
					}
					full++
					worstFull = math.Max(worstFull, d)
					if d > 1e-6 {
						fullOver++
					}
				}
			}
			t.Logf("adapter after the step: %d factors moved by lr, largest |torch − Go| %.3g; %d moved by less (|g| near AdamW's eps), largest %.3g",
				full, worstFull, partial, worstAll)
			if fullOver > 0 {
				t.Errorf("%d of the %d factors that moved by lr differ by more than 1e-6 (up to %.3g)", fullOver, full, worstFull)
			}
			// Both adapters score the batch alike: within 1e-3, not the
			// 1e-4 of the parity tests, because the factors AdamW moved by
			// less than lr moved by an amount that rounding decides (up to
			// 7.3e-4 apart at lr 2e-3 on the 3-layer tiny-arith), and a few
			// of them move a logprob by up to 1.9e-4.
			at, err := m.LoadAdapter(py.Adapter)
			if err != nil {
				t.Fatal(err)
			}
			batch := examples(t, m, f.Batch)
			lt, _, err := m.Score(ctx, at, batch)
			if err != nil {
				t.Fatal(err)
			}
			lg, _, err := m.Score(ctx, et.Adapter(), batch)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i := range lt {
				for j := range lt[i] {
					worst = math.Max(worst, math.Abs(float64(lt[i][j]-lg[i][j])))
				}
			}
			t.Logf("the batch scored with the two updated adapters: largest per-token |Δ logprob| %.3g", worst)
			if worst > 1e-3 {
				t.Errorf("the adapters torch and Go trained score the batch up to %.3g apart", worst)
			}
		})
	}
}

// TestTorchrunRankDies: a torchrun worker killed mid-call (rank 1, with
// SIGKILL, as it loads the model: after the process group formed and
// rank 0 broadcast the batch) fails the train task with an
// error naming the rank, how it died and its last lines; the task is
// retried, and what the run commits is the retry's whole output — the
// failed attempt left nothing behind.
func TestTorchrunRankDies(t *testing.T) {
	py := slowTorchPython(t, "runs a loop iteration with torchrun twice (about a minute)")
	_, model := torchtest.Export(t)
	mark := t.TempDir() // tells this test's workers from anyone else's
	hp := torchtest.Hparams(model)
	hp["keep_zero_std"] = true
	train, err := external.Task(external.Options{Command: torchtest.TorchrunArgv(t, py, 2), Hyperparameters: hp,
		Env: map[string]string{"PYTHONPYCACHEPREFIX": filepath.Join(mark, "pycache"), "RLPIPE_TEST_MARK": mark}})
	if err != nil {
		t.Fatal(err)
	}

	// Kill rank 1 of the first attempt when it says it is loading the
	// model, found by its environment.
	killed := make(chan int, 1)
	logs := &watchBuffer{on: "[rank1]: grpo_train: rank 1 of 2", fire: func() {
		pid, err := findProcess(map[string]string{"RLPIPE_TEST_MARK": mark, "RLPIPE_ATTEMPT": "1", "RANK": "1"})
		if err != nil {
			t.Errorf("find rank 1: %v", err)
			return
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Errorf("kill rank 1 (pid %d): %v", pid, err)
			return
		}
		killed <- pid
	}}
	var events standin.Events
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: 2, Backoff: time.Millisecond}}
	st := standintest.NewStore(t, 12)
	run, err := pipeline.Open(context.Background(), st, pipeline.RunOptions{Name: "kill", Seed: 3, WorkDir: t.TempDir(),
		Logger:  zerolog.New(logs).Level(zerolog.DebugLevel),
		Envs:    map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "advantages": quick, "train": quick},
		OnEvent: events.Add})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if _, err := run.Loop(context.Background(), loopConfig(1), stages(t, train)); err != nil {
		t.Fatalf("the loop did not recover from the killed rank: %v", err)
	}
	var pid int
	select {
	case pid = <-killed:
	default:
		t.Fatal("rank 1 was never killed")
	}

	var retried []pipeline.Event
	commits := 0
	for _, e := range events.All() {
		switch {
		case e.Kind == pipeline.EventRetried && e.Stage == "train":
			retried = append(retried, e)
		case e.Kind == pipeline.EventCommitted:
			commits++
		}
	}
	if len(retried) != 1 || commits != 1 {
		t.Fatalf("%d retried train attempts and %d commits, want 1 and 1", len(retried), commits)
	}
	msg := retried[0].Error
	t.Logf("the failed attempt's error:\n%s", msg)
	for _, want := range []string{
		fmt.Sprintf("torchrun rank 1 (local rank 1, pid %d", pid), "was killed by signal SIGKILL",
		"rank 1's last output:", "grpo_train: rank 1 of 2 (cpu)", "--adapter-out",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q", want)
		}
	}
	// What was committed is the retry's adapter, whole.
	files := objects(t, st, "runs-kill", "iterations/000001/adapter/")
	want := []string{"README.md", "adapter_config.json", "adapter_model.safetensors", "optimizer/optimizer.pt", "optimizer/trainer_state.json"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("committed adapter files %v, want %v", files, want)
	}
	var tm struct {
		OptimizerSteps int `json:"optimizer_steps"`
		Updates        int `json:"updates"`
	}
	if err := json.Unmarshal(standintest.Read(t, st, "runs-kill", "iterations/000001/"+grpo.MetricsFile), &tm); err != nil || tm.OptimizerSteps != 1 || tm.Updates != 1 {
		t.Errorf("committed metrics: %d optimizer steps, %d updates (%v); want 1 and 1", tm.OptimizerSteps, tm.Updates, err)
	}
}

// watchBuffer collects a run's log and calls fire, once, when a line
// holding on is written.
type watchBuffer struct {
	standintest.LogBuffer
	on   string
	once sync.Once
	fire func()
}

func (w *watchBuffer) Write(p []byte) (int, error) {
	n, err := w.LogBuffer.Write(p)
	if bytes.Contains(p, []byte(w.on)) {
		w.once.Do(w.fire)
	}
	return n, err
}

// findProcess finds the one process of this user whose environment holds
// every pair of env.
func findProcess(env map[string]string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		have := map[string]bool{}
		for _, kv := range bytes.Split(b, []byte{0}) {
			have[string(kv)] = true
		}
		all := true
		for k, v := range env {
			all = all && have[k+"="+v]
		}
		if all {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d processes match %v: %v", len(found), env, found)
	}
	return found[0], nil
}

// TestTorchrunConfigErrorIsPermanent: torchrun exits 1 whatever its
// workers' statuses; rlpipe reads the worker's 78 in torchrun's report
// and fails at once, without retrying, naming the hyperparameter.
func TestTorchrunConfigErrorIsPermanent(t *testing.T) {
	py := torchPython(t)
	train := trainTask(t, "", func(o *external.Options) {
		o.Command = torchtest.TorchrunArgv(t, py, 2)
		o.Hyperparameters = map[string]any{"base_model": "m", "lr": -1}
		o.Env = map[string]string{"PYTHONPYCACHEPREFIX": t.TempDir()}
	})
	_, err := openRun(t, standintest.NewStore(t, 12), "cfg", 2, nil).Loop(context.Background(), loopConfig(1), stages(t, train))
	var te *pipeline.TaskError
	var ee *external.ExitError
	if !errors.As(err, &te) || te.Attempts != 1 || !errors.As(err, &ee) || !errors.Is(err, pipeline.ErrPermanent) {
		t.Fatalf("err = %v, want the train task's, permanent, after 1 attempt", err)
	}
	if ee.Code != 1 || ee.Rank == nil || ee.Rank.ExitCode != external.ExitConfig {
		t.Fatalf("exit %d, rank %+v: want torchrun's 1 and a rank's 78", ee.Code, ee.Rank)
	}
	for _, want := range []string{"exited with status 78 (configuration error", "grpo_train: hyperparameters.lr: -1 must be > 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// rolloutFiguresMatch wants the rollout correction's figures of the
// script (torch) and the embedded trainer (goFig) equal: the IS weights'
// mean within 1e-5, the capped and masked fractions within one token's
// share, one; it returns both sets for the log.
func rolloutFiguresMatch(t *testing.T, torch, goFig grpo.RolloutFigures, one float64) string {
	t.Helper()
	for _, p := range []struct {
		name           string
		torch, goValue *float64
		tol            float64
	}{{"rollout_is_mean", torch.ISMean, goFig.ISMean, 1e-5}, {"rollout_is_capped_frac", torch.ISCapped, goFig.ISCapped, one + 1e-12},
		{"rollout_rs_masked_frac", torch.RSMasked, goFig.RSMasked, one + 1e-12}} {
		if p.torch == nil || p.goValue == nil || math.Abs(*p.torch-*p.goValue) > p.tol {
			t.Errorf("%s: torch %s, Go %s", p.name, fmtPtr(p.torch), fmtPtr(p.goValue))
		}
	}
	return fmt.Sprintf("torch is_mean %s capped %s masked %s (seq %s), Go %s, %s, %s (%s)",
		fmtPtr(torch.ISMean), fmtPtr(torch.ISCapped), fmtPtr(torch.RSMasked), fmtPtr(torch.RSSeqMasked),
		fmtPtr(goFig.ISMean), fmtPtr(goFig.ISCapped), fmtPtr(goFig.RSMasked), fmtPtr(goFig.RSSeqMasked))
}
