package external_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
	"github.com/rlpipe/rlpipe/trainers/external"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// These tests run trainers/python/grpo_train.py for real — one process
// and under torchrun with two gloo ranks on the CPU — on the embedded
// tiny-arith exported as a Hugging Face Llama (tiny.ExportHF) and on
// tables rlpipe wrote, and hold it to the embedded trainer and to the Go
// engine's LoRA loading. Without the venv (scripts/py-venv.sh) they are
// skipped, saying so.

// torchrun is the venv's torchrun, beside its python.
func torchrun(t testing.TB, py string) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(py), "torchrun")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("the venv of %s has no torchrun: run scripts/py-venv.sh", py)
	}
	return p
}

// torchrunArgv is two gloo ranks on this machine running the script.
func torchrunArgv(t testing.TB, py string) []string {
	return []string{torchrun(t, py), "--standalone", "--nproc_per_node", "2", script}
}

// exportArith writes the embedded tiny-arith as a Hugging Face model
// directory (what `rlpipe policy export` writes) and returns it with the
// model.
func exportArith(t testing.TB) (*tiny.Model, string) {
	t.Helper()
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny-arith")
	if err := m.ExportHF(dir); err != nil {
		t.Fatal(err)
	}
	return m, dir
}

// batchFiles are one iteration's tables, as the train stage hands them to
// the trainer, and the same batch for the embedded trainer.
type batchFiles struct {
	prompts, trajectories, advantages string
	batch                             embedded.Batch
	// tokens is the number of completion tokens trained on.
	tokens int
}

// arithBatch samples n training problems × g completions from the
// embedded policy (temperature 1, with logprobs; a fixed seed), rewards
// the right sums, computes the advantages rlpipe hands the trainer, and
// writes the three tables under dir. shift, when not zero, moves the
// old log-probabilities of every other token by ±shift, so that ratios
// leave the clip range on both sides from the first step.
func arithBatch(t testing.TB, m *tiny.Model, dir string, seed uint64, n, g int, shift float32) batchFiles {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	var prompts []tables.Prompt
	var reqs []policy.Request
	answers := map[string]string{}
	for i := 0; i < n; i++ {
		p := tiny.TrainingProblem(rng)
		id := fmt.Sprintf("p%03d", i)
		prompts = append(prompts, tables.Prompt{PromptID: id, Prompt: p.Prompt(), Answer: p.Answer(), Metadata: "{}", Source: "test", Split: "train"})
		reqs = append(reqs, policy.Request{ID: id, Prompt: p.Prompt(), Seed: int64(seed)*1000 + int64(i)})
		answers[id] = p.Answer()
	}
	out, err := tiny.NewPolicy(m).Generate(context.Background(), reqs, policy.Sampling{N: g, Temperature: 1, MaxTokens: 5, Logprobs: true})
	if err != nil {
		t.Fatal(err)
	}
	var trajs []tables.Trajectory
	var rewards []tables.Reward
	for i, ss := range out {
		for j, s := range ss {
			row := policy.TrajectoryRow(s, reqs[i], j, policy.RowParams{Iteration: 1}, m.Version(), "{}")
			if shift != 0 {
				row.Logprobs = append([]float32(nil), row.Logprobs...)
				for k := range row.Logprobs {
					switch (k + j) % 3 {
					case 0:
						row.Logprobs[k] += shift
					case 1:
						row.Logprobs[k] -= shift
					}
				}
			}
			trajs = append(trajs, row)
			r := 0.0
			if s.Text == answers[reqs[i].ID] {
				r = 1
			}
			rewards = append(rewards, tables.Reward{PromptID: reqs[i].ID, SampleIndex: int32(j), Components: map[string]float64{"correct": r},
				Total: r, Status: tables.StatusOK})
		}
	}
	// Keep the groups whose rewards are all equal: a batch of a fixed
	// size whatever the samples.
	j, err := advantages.Join(trajs, rewards, advantages.TrainOptions{KeepZeroStd: true})
	if err != nil {
		t.Fatal(err)
	}
	f := batchFiles{
		prompts:      filepath.Join(dir, "prompts.parquet"),
		trajectories: filepath.Join(dir, "trajectories.parquet"),
		advantages:   filepath.Join(dir, "advantages.parquet"),
		batch:        embedded.Batch{Prompts: prompts, Trajectories: trajs, Rewards: rewards, Advantages: j.Advantages},
	}
	for i, a := range j.Advantages {
		if !a.Mask {
			f.tokens += len(j.Trajectories[i].TokenIDs)
		}
	}
	if err := tables.WriteFile(f.prompts, tables.Prompts, prompts, nil); err != nil {
		t.Fatal(err)
	}
	if err := tables.WriteFile(f.trajectories, tables.Trajectories, trajs, nil); err != nil {
		t.Fatal(err)
	}
	if err := tables.WriteFile(f.advantages, tables.Advantages, j.Advantages, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

// scriptRun is one call of the script: where it wrote and what.
type scriptRun struct {
	dir, adapter, optimizer string
	metrics                 scriptMetrics
	output                  string
}

type scriptMetrics struct {
	Loss           float64  `json:"loss"`
	PolicyLoss     float64  `json:"policy_loss"`
	KL             *float64 `json:"kl"`
	GradNorm       float64  `json:"grad_norm"`
	TrainTokens    int      `json:"train_tokens"`
	OptimizerSteps int      `json:"optimizer_steps"`
	Updates        int      `json:"updates"`
	SamplesUsed    int      `json:"samples_used"`
	TrainSeconds   float64  `json:"train_seconds"`
	ClipLow        float64  `json:"clip_frac_low"`
	ClipHigh       float64  `json:"clip_frac_high"`
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatFloat(*p, 'g', 9, 64)
}

// runScript runs argv (the script, alone or under torchrun) with the
// contract's flags on f, writing under a new directory of its own.
func runScript(t testing.TB, argv []string, f batchFiles, hp map[string]any, adapterIn, optimizerIn string, iteration int) scriptRun {
	t.Helper()
	dir, err := os.MkdirTemp(t.TempDir(), "call-")
	if err != nil {
		t.Fatal(err)
	}
	r := scriptRun{dir: dir, adapter: filepath.Join(dir, "adapter"), optimizer: filepath.Join(dir, "optimizer")}
	hb, _ := json.Marshal(hp)
	hpath := filepath.Join(dir, "hparams.json")
	if err := os.WriteFile(hpath, hb, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{r.adapter, r.optimizer} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args := append(append([]string(nil), argv[1:]...), "--trajectories", f.trajectories, "--advantages", f.advantages, "--prompts", f.prompts,
		"--hparams", hpath, "--adapter-out", r.adapter, "--optimizer-out", r.optimizer, "--metrics-out", filepath.Join(dir, "metrics.json"),
		"--iteration", strconv.Itoa(iteration), "--seed", "11")
	if adapterIn != "" {
		args = append(args, "--adapter-in", adapterIn)
	}
	if optimizerIn != "" {
		args = append(args, "--optimizer-in", optimizerIn)
	}
	cmd := exec.Command(argv[0], args...)
	cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+filepath.Join(dir, "pycache"), "OMP_NUM_THREADS=1")
	out, err := cmd.CombinedOutput()
	r.output = string(out)
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(argv[0]), err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r.metrics); err != nil {
		t.Fatal(err)
	}
	return r
}

// loraValues reads an adapter directory's factors as float64, by tensor
// name.
func loraValues(t testing.TB, dir string) map[string][]float64 {
	t.Helper()
	_, mods, err := safetensors.ReadAdapterDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for m, l := range mods {
		an, bn := safetensors.LoRATensorNames(m)
		for name, ts := range map[string]safetensors.Tensor{an: l.A, bn: l.B} {
			v, err := ts.Float32()
			if err != nil {
				t.Fatal(err)
			}
			out[name] = widen(v)
		}
	}
	return out
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
	b, _ := json.Marshal(in)
	cmd := exec.Command(py, "-c", code, model, adapter)
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("score with PEFT: %v\n%s", err, stderr.Bytes())
	}
	var lps [][]float64
	if err := json.Unmarshal(out, &lps); err != nil {
		t.Fatalf("score with PEFT printed %q: %v", out, err)
	}
	return lps
}

// The hyperparameters of the torch runs: the exported tiny-arith in
// float32, the embedded trainer's LoRA shape, learning rate and clip.
func torchHparams(model string) map[string]any {
	return map[string]any{
		"base_model": model, "dtype": "float32", "lr": 2e-3, "clip_norm": 1.0, "micro_batch_size": 8,
		"lora": map[string]any{"rank": 8, "alpha": 16, "targets": []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}},
	}
}

// TestReferenceScriptUnderTorchrun runs the script under torchrun, two
// gloo ranks on the CPU, on rlpipe-written tables and the exported
// tiny-arith: the adapter it writes loads in the Go engine and scores
// the batch as PEFT does, and two ranks train what one process trains.
func TestReferenceScriptUnderTorchrun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs torch three times (about a minute)")
	}
	py := torchPython(t)
	ddp := torchrunArgv(t, py)
	m, model := exportArith(t)
	f := arithBatch(t, m, filepath.Join(t.TempDir(), "batch"), 1, 8, 4, 0)
	hp := torchHparams(model)

	two := runScript(t, ddp, f, hp, "", "", 1)
	one := runScript(t, []string{py, script}, f, hp, "", "", 1)
	t.Logf("loss: 2 ranks %.9f, 1 process %.9f (%d tokens; grad norm %.6f, %.6f; %.1f s, %.1f s)",
		two.metrics.Loss, one.metrics.Loss, two.metrics.TrainTokens, two.metrics.GradNorm, one.metrics.GradNorm,
		two.metrics.TrainSeconds, one.metrics.TrainSeconds)
	if two.metrics.TrainTokens != f.tokens || one.metrics.TrainTokens != f.tokens {
		t.Errorf("trained on %d (2 ranks) and %d (1 process) tokens, want the batch's %d", two.metrics.TrainTokens, one.metrics.TrainTokens, f.tokens)
	}
	if d := math.Abs(two.metrics.Loss - one.metrics.Loss); d > 1e-6 {
		t.Errorf("loss differs by %.3g between 2 ranks and 1 process", d)
	}
	worst, over, total := adapterDiff(t, loraValues(t, two.adapter), loraValues(t, one.adapter), 1e-6)
	t.Logf("adapter: largest |2 ranks − 1 process| %.3g; %d of %d values differ by more than 1e-6", worst, over, total)
	if worst > 1e-6 {
		t.Errorf("2 ranks and 1 process train adapters up to %.3g apart", worst)
	}

	// The Go engine loads the adapter torchrun wrote and scores the batch
	// as transformers with PEFT does.
	ad, err := m.LoadAdapter(two.adapter)
	if err != nil {
		t.Fatalf("load the torchrun adapter in Go: %v", err)
	}
	batch := examples(t, m, f.batch)
	want := pythonLogprobs(t, py, model, two.adapter, batch)
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
		out = append(out, tiny.Example{Prompt: p, Completion: tr.TokenIDs})
	}
	return out
}

// TestReferenceScriptContinuesUnderTorchrun: the second iteration under
// torchrun reads --adapter-in and --optimizer-in and continues AdamW
// where the first left it: the same loss and adapter as one process
// continuing from the same files, and not what a fresh AdamW takes.
func TestReferenceScriptContinuesUnderTorchrun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs torch four times (about a minute)")
	}
	py := torchPython(t)
	ddp := torchrunArgv(t, py)
	m, model := exportArith(t)
	f1 := arithBatch(t, m, filepath.Join(t.TempDir(), "batch1"), 1, 8, 4, 0)
	f2 := arithBatch(t, m, filepath.Join(t.TempDir(), "batch2"), 2, 8, 4, 0)
	hp := torchHparams(model)
	first := runScript(t, []string{py, script}, f1, hp, "", "", 1)
	if _, err := os.Stat(filepath.Join(first.optimizer, "optimizer.pt")); err != nil {
		t.Fatalf("iteration 1 wrote no optimizer state: %v", err)
	}

	two := runScript(t, ddp, f2, hp, first.adapter, first.optimizer, 2)
	one := runScript(t, []string{py, script}, f2, hp, first.adapter, first.optimizer, 2)
	fresh := runScript(t, []string{py, script}, f2, hp, first.adapter, "", 2)
	t.Logf("iteration 2 loss: 2 ranks %.9f, 1 process %.9f, fresh AdamW %.9f", two.metrics.Loss, one.metrics.Loss, fresh.metrics.Loss)
	if two.metrics.OptimizerSteps != 2 || two.metrics.Updates != 2 || fresh.metrics.OptimizerSteps != 1 {
		t.Errorf("optimizer steps %d, updates %d after continuing (want 2, 2); %d steps from a fresh AdamW (want 1)",
			two.metrics.OptimizerSteps, two.metrics.Updates, fresh.metrics.OptimizerSteps)
	}
	var state struct {
		OptimizerSteps int `json:"optimizer_steps"`
		Updates        int `json:"updates"`
	}
	b, err := os.ReadFile(filepath.Join(two.optimizer, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &state); err != nil || state.OptimizerSteps != 2 || state.Updates != 2 {
		t.Errorf("trainer_state.json %s (%v): want 2 optimizer steps and 2 updates", b, err)
	}
	a2, a1 := loraValues(t, two.adapter), loraValues(t, one.adapter)
	worst, _, _ := adapterDiff(t, a2, a1, 1e-6)
	t.Logf("iteration 2 adapter: largest |2 ranks − 1 process| %.3g", worst)
	if d := math.Abs(two.metrics.Loss - one.metrics.Loss); d > 1e-6 || worst > 1e-6 {
		t.Errorf("continuing under torchrun and in one process differ: loss by %.3g, adapter by %.3g", d, worst)
	}
	// AdamW's moments came back: a fresh AdamW's first step moves every
	// factor by about lr, the continued one does not.
	moved, _, _ := adapterDiff(t, a1, loraValues(t, fresh.adapter), 0)
	t.Logf("iteration 2 adapter: largest |continued − fresh AdamW| %.3g", moved)
	if moved < 1e-4 {
		t.Errorf("the continued and the fresh AdamW train adapters only %.3g apart: --optimizer-in was not used", moved)
	}
}

// TestLossParityWithEmbedded: the script's GRPO loss on a batch is the
// embedded trainer's (trainers/embedded, the loss of trainers/grpo) within
// 1e-5 — the same advantages, old log-probabilities that put ratios
// outside the clip range on both sides, token and sequence aggregation,
// beta 0 and beta > 0 — and so is the adapter after the step.
func TestLossParityWithEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs torch three times (about a minute)")
	}
	py := torchPython(t)
	m, model := exportArith(t)
	ctx := context.Background()
	// A start adapter with every factor non-zero: one embedded step.
	o := embedded.Options{LR: 2e-3}
	tr, err := embedded.New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	warm := arithBatch(t, m, filepath.Join(t.TempDir(), "warm"), 3, 8, 4, 0)
	if _, err := tr.Update(ctx, warm.batch); err != nil {
		t.Fatal(err)
	}
	start := filepath.Join(t.TempDir(), "start")
	if err := tr.Adapter().Save(start); err != nil {
		t.Fatal(err)
	}
	f := arithBatch(t, m, filepath.Join(t.TempDir(), "batch"), 4, 8, 4, 0.4)

	for _, c := range []struct {
		name            string
		agg             string
		beta, low, high float64
	}{
		{"token", "token", 0, 0.2, 0.2},
		{"token-beta-clip-higher", "token", 0.04, 0.2, 0.28},
		{"sequence-beta", "sequence", 0.04, 0.1, 0.3},
	} {
		t.Run(c.name, func(t *testing.T) {
			eo := embedded.Options{LR: 2e-3, EpsLow: c.low, EpsHigh: c.high, Beta: c.beta, Aggregation: grpo.Aggregation(c.agg), KeepZeroStd: true}
			et, err := embedded.Load(m, eo, start)
			if err != nil {
				t.Fatal(err)
			}
			res, err := et.Update(ctx, f.batch)
			if err != nil {
				t.Fatal(err)
			}
			goDir := filepath.Join(t.TempDir(), "go")
			if err := et.Adapter().Save(goDir); err != nil {
				t.Fatal(err)
			}
			hp := torchHparams(model)
			hp["eps_low"], hp["eps_high"], hp["beta"], hp["aggregation"] = c.low, c.high, c.beta, c.agg
			py := runScript(t, []string{py, script}, f, hp, start, "", 1)
			em := res.Metrics
			var clipped string
			if len(em.Steps) == 1 {
				s := em.Steps[0]
				clipped = fmt.Sprintf("clipped low %.3f high %.3f", s.ClipLow, s.ClipHigh)
			}
			dl, dp := math.Abs(py.metrics.Loss-em.Loss), math.Abs(py.metrics.PolicyLoss-em.PolicyLoss)
			t.Logf("loss: torch %.9f, Go %.9f (|Δ| %.3g); policy loss |Δ| %.3g; grad norm torch %.6f, Go %.6f; %s",
				py.metrics.Loss, em.Loss, dl, dp, py.metrics.GradNorm, em.GradNorm, clipped)
			if dl > 1e-5 || dp > 1e-5 {
				t.Errorf("loss: torch %.9f, Go %.9f; policy loss: torch %.9f, Go %.9f", py.metrics.Loss, em.Loss, py.metrics.PolicyLoss, em.PolicyLoss)
			}
			if math.Abs(py.metrics.GradNorm-em.GradNorm) > 1e-4*math.Max(1, em.GradNorm) {
				t.Errorf("gradient norm: torch %.9f, Go %.9f", py.metrics.GradNorm, em.GradNorm)
			}
			if py.metrics.SamplesUsed != len(f.batch.Trajectories) {
				t.Errorf("torch trained on %d samples, want %d", py.metrics.SamplesUsed, len(f.batch.Trajectories))
			}
			// The same tokens clip: at most one token apart (a ratio on
			// the boundary may round either way).
			one := 1.0 / float64(f.tokens)
			s := em.Steps[0]
			if math.Abs(py.metrics.ClipLow-s.ClipLow) > one+1e-12 || math.Abs(py.metrics.ClipHigh-s.ClipHigh) > one+1e-12 {
				t.Errorf("clip fractions: torch low %.4f high %.4f, Go low %.4f high %.4f", py.metrics.ClipLow, py.metrics.ClipHigh, s.ClipLow, s.ClipHigh)
			}
			if s.ClipLow == 0 || s.ClipHigh == 0 {
				t.Errorf("clip fractions low %.4f high %.4f: the batch should clip on both sides", s.ClipLow, s.ClipHigh)
			}
			if (c.beta > 0) != (py.metrics.KL != nil && em.KL != nil) || (c.beta > 0 && math.Abs(*py.metrics.KL-*em.KL) > 1e-6) {
				t.Errorf("kl: torch %v, Go %v", fmtPtr(py.metrics.KL), fmtPtr(em.KL))
			}

			// The adapters after the step. AdamW's first step moves a
			// factor by lr·g/(|g|+1e-8): by lr exactly where the gradient
			// is well above 1e-8, and by a fraction of it, sensitive to
			// rounding, where it is about 1e-9.
			st, pa, ga := loraValues(t, start), loraValues(t, py.adapter), loraValues(t, goDir)
			var full, fullOver, partial int
			var worstFull, worstAll float64
			for name, x := range st {
				for i := range x {
					dg, dp := ga[name][i]-x[i], pa[name][i]-x[i]
					d := math.Abs(dg - dp)
					worstAll = math.Max(worstAll, d)
					if math.Abs(dg) < 0.99*eo.LR {
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
			// Both adapters score the batch alike.
			at, err := m.LoadAdapter(py.adapter)
			if err != nil {
				t.Fatal(err)
			}
			batch := examples(t, m, f.batch)
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
			if worst > 1e-4 {
				t.Errorf("the adapters torch and Go trained score the batch up to %.3g apart", worst)
			}
		})
	}
}

// TestTorchrunRankDies: a torchrun worker killed mid-call (rank 1, with
// SIGKILL, once it has loaded the model) fails the train task with an
// error naming the rank, how it died and its last lines; the task is
// retried, and what the run commits is the retry's whole output — the
// failed attempt left nothing behind.
func TestTorchrunRankDies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a loop iteration with torchrun twice (about a minute)")
	}
	py := torchPython(t)
	_, model := exportArith(t)
	mark := t.TempDir() // tells this test's workers from anyone else's
	hp := torchHparams(model)
	hp["keep_zero_std"] = true
	train, err := external.Task(external.Options{Command: torchrunArgv(t, py), Hyperparameters: hp,
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
	var mu sync.Mutex
	var events []pipeline.Event
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: 2, Backoff: time.Millisecond}}
	st := newStore(t)
	run, err := pipeline.Open(context.Background(), st, pipeline.RunOptions{Name: "kill", Seed: 3, WorkDir: t.TempDir(),
		Logger: zerolog.New(logs).Level(zerolog.DebugLevel),
		Envs:   map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "advantages": quick, "train": quick},
		OnEvent: func(e pipeline.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}})
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

	mu.Lock()
	defer mu.Unlock()
	var retried []pipeline.Event
	commits := 0
	for _, e := range events {
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
	if err := json.Unmarshal(readObject(t, st, "runs-kill", "iterations/000001/"+external.MetricsFile), &tm); err != nil || tm.OptimizerSteps != 1 || tm.Updates != 1 {
		t.Errorf("committed metrics: %d optimizer steps, %d updates (%v); want 1 and 1", tm.OptimizerSteps, tm.Updates, err)
	}
}

// watchBuffer collects a run's log and calls fire, once, when a line
// holding on is written.
type watchBuffer struct {
	syncBuffer
	on   string
	once sync.Once
	fire func()
}

func (w *watchBuffer) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
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
		o.Command = torchrunArgv(t, py)
		o.Hyperparameters = map[string]any{"base_model": "m", "lr": -1}
		o.Env = map[string]string{"PYTHONPYCACHEPREFIX": t.TempDir()}
	})
	_, err := openRun(t, newStore(t), "cfg", 2, nil).Loop(context.Background(), loopConfig(1), stages(t, train))
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
