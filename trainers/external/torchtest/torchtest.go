// Package torchtest runs rlpipe's reference PyTorch trainer
// (trainers/python/grpo_train.py) for real in tests and benchmarks: the
// project venv's python and torchrun (scripts/py-venv.sh; the test is
// skipped, saying so, without them), the embedded tiny-arith exported as
// a Hugging Face Llama, an arithmetic batch written as the train stage
// hands it over, and one call of the script under the contract's flags.
package torchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/rlpipe/rlpipe/trainers/grpo"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/internal/pyvenv"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/embedded"
)

// Python is the project venv's python with torch, transformers and peft
// (internal/pyvenv); the test is skipped, saying so, without one.
func Python(t testing.TB) string {
	return pyvenv.Python(t, "run the reference trainer for real")
}

// Script is the reference trainer's absolute path.
func Script(t testing.TB) string {
	return filepath.Join(pyvenv.Root(t), "trainers", "python", "grpo_train.py")
}

// Torchrun is the venv's torchrun, beside its python; the test is
// skipped when there is none.
func Torchrun(t testing.TB, py string) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(py), "torchrun")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("the venv of %s has no torchrun: run scripts/py-venv.sh", py)
	}
	return p
}

// TorchrunArgv is torchrun running the reference script with nproc gloo
// ranks on this machine (--standalone).
func TorchrunArgv(t testing.TB, py string, nproc int) []string {
	return []string{Torchrun(t, py), "--standalone", "--nproc_per_node", strconv.Itoa(nproc), Script(t)}
}

// Export writes the embedded tiny-arith as a Hugging Face model
// directory (what `rlpipe policy export` writes) and returns it with the
// model.
func Export(t testing.TB) (*tiny.Model, string) {
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

// Files are one iteration's tables, as the train stage hands them to
// the trainer, and the same batch for the embedded trainer.
type Files struct {
	Prompts, Trajectories, Advantages string
	// Batch is the same batch for the embedded trainer.
	Batch embedded.Batch
	// Tokens is the number of completion tokens trained on.
	Tokens int
}

// StartAdapter takes one embedded step with o on a Batch (seed, n, g, no
// shift) and saves the adapter under a temporary directory, which it
// returns: a start adapter whose factors are all non-zero, so that a
// step from it moves every one.
func StartAdapter(t testing.TB, m *tiny.Model, o embedded.Options, seed uint64, n, g int) string {
	t.Helper()
	tr, err := embedded.New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	warm := Batch(t, m, filepath.Join(t.TempDir(), "warm"), seed, n, g, 0)
	if _, err := tr.Update(context.Background(), warm.Batch); err != nil {
		t.Fatal(err)
	}
	start := filepath.Join(t.TempDir(), "start")
	if err := tr.Adapter().Save(start); err != nil {
		t.Fatal(err)
	}
	return start
}

// Batch samples n training problems × g completions from the
// embedded policy (temperature 1, with logprobs; a fixed seed), rewards
// the right sums, computes the advantages rlpipe hands the trainer, and
// writes the three tables under dir. shift, when not zero, moves the
// old log-probabilities of every other token by ±shift, so that ratios
// leave the clip range on both sides from the first step.
func Batch(t testing.TB, m *tiny.Model, dir string, seed uint64, n, g int, shift float32) Files {
	t.Helper()
	return BatchAt(t, m, dir, seed, n, g, shift, 1)
}

// BatchAt is Batch sampled at temperature temp: the trajectories record
// it in their sampler column (temperature 1 records "{}", as Batch always
// did), and their logprobs are of softmax(z/temp).
func BatchAt(t testing.TB, m *tiny.Model, dir string, seed uint64, n, g int, shift float32, temp float64) Files {
	t.Helper()
	return batch(t, m, "", dir, seed, n, g, shift, temp)
}

// batch is BatchAt sampling from the adapter directory adapter ("" for
// the base model).
func batch(t testing.TB, m *tiny.Model, adapter, dir string, seed uint64, n, g int, shift float32, temp float64) Files {
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
	pol, name := tiny.NewPolicy(m), ""
	if adapter != "" {
		name = "current"
		if err := pol.LoadAdapter(context.Background(), name, adapter); err != nil {
			t.Fatal(err)
		}
	}
	sp := policy.Sampling{N: g, Temperature: temp, MaxTokens: 5, Logprobs: true, Adapter: name}
	out, err := pol.Generate(context.Background(), reqs, sp)
	if err != nil {
		t.Fatal(err)
	}
	sampler := "{}"
	if temp != 1 {
		if sampler, err = sp.JSON(); err != nil {
			t.Fatal(err)
		}
	}
	var trajs []tables.Trajectory
	var rewards []tables.Reward
	for i, ss := range out {
		for j, s := range ss {
			row := policy.TrajectoryRow(s, reqs[i], j, policy.RowParams{Iteration: 1}, m.Version(), sampler)
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
	f := Files{
		Prompts:      filepath.Join(dir, "prompts.parquet"),
		Trajectories: filepath.Join(dir, "trajectories.parquet"),
		Advantages:   filepath.Join(dir, "advantages.parquet"),
		Batch:        embedded.Batch{Prompts: prompts, Trajectories: trajs, Rewards: rewards, Advantages: j.Advantages},
	}
	for i, a := range j.Advantages {
		if !a.Mask {
			f.Tokens += len(j.Trajectories[i].TokenIDs)
		}
	}
	if err := tables.WriteFile(f.Prompts, tables.Prompts, prompts, nil); err != nil {
		t.Fatal(err)
	}
	if err := tables.WriteFile(f.Trajectories, tables.Trajectories, trajs, nil); err != nil {
		t.Fatal(err)
	}
	if err := tables.WriteFile(f.Advantages, tables.Advantages, j.Advantages, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

// Result is one call of the script: where it wrote, what it measured,
// and how long the call took.
type Result struct {
	Dir, Adapter, Optimizer string
	Metrics                 Metrics
	Output                  string
	Wall                    time.Duration
}

// Metrics are the script's --metrics-out figures the tests read.
type Metrics struct {
	Loss           float64  `json:"loss"`
	PolicyLoss     float64  `json:"policy_loss"`
	KL             *float64 `json:"kl"`
	Entropy        float64  `json:"entropy"`
	GradNorm       float64  `json:"grad_norm"`
	TrainTokens    int      `json:"train_tokens"`
	OptimizerSteps int      `json:"optimizer_steps"`
	Updates        int      `json:"updates"`
	SamplesUsed    int      `json:"samples_used"`
	TrainSeconds   float64  `json:"train_seconds"`
	ClipLow        float64  `json:"clip_frac_low"`
	ClipHigh       float64  `json:"clip_frac_high"`
	ClipDual       *float64 `json:"clip_frac_dual"`
	MismatchKL     float64  `json:"mismatch_kl"`
	RatioMax       float64  `json:"ratio_max"`
	// The rollout correction's figures, when it is on.
	grpo.RolloutFigures
}

// Run runs argv (the script, alone or under torchrun) with the
// contract's flags on f, writing under a new directory of its own, and
// the extra flags after them.
func Run(t testing.TB, argv []string, f Files, hp map[string]any, adapterIn, optimizerIn string, iteration int, extra ...string) Result {
	t.Helper()
	r, err := Call(t, argv, f, hp, adapterIn, optimizerIn, iteration, extra...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(argv[0]), err, r.Output)
	}
	return r
}

// Call is Run returning the script's failure (an *exec.ExitError) with
// its output in Result.Output.
func Call(t testing.TB, argv []string, f Files, hp map[string]any, adapterIn, optimizerIn string, iteration int, extra ...string) (Result, error) {
	t.Helper()
	r, flags := prepare(t, Spec{Files: f, Hparams: hp, AdapterIn: adapterIn, OptimizerIn: optimizerIn, Iteration: iteration, Extra: extra})
	cmd := exec.Command(argv[0], append(append([]string(nil), argv[1:]...), flags...)...)
	cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+filepath.Join(r.Dir, "pycache"), "OMP_NUM_THREADS=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r.Wall = time.Since(start)
	r.Output = string(out)
	if err != nil {
		return r, err
	}
	readMetrics(t, &r)
	return r, nil
}

// Spec is one call of the script for Many: Run's arguments but the
// command.
type Spec struct {
	Files                  Files
	Hparams                map[string]any
	AdapterIn, OptimizerIn string
	Iteration              int
	Extra                  []string
	// Resume, in Many, is the 1-based index of an earlier call whose
	// outputs are this call's --adapter-in and --optimizer-in, in place
	// of AdapterIn and OptimizerIn (0: none).
	Resume int
}

// Many is Run of the script in one process (no torchrun) for each of
// specs, in one python process: many.py, beside this file, imports the
// script once and calls its entry point with each call's flags, so
// torch, transformers and peft are imported once and not once a call
// (about 4 s of a call's 5 on the tiny model). Each call gets its own
// directory, as Run's, and its own seed from the flags: the figures are
// those of separate processes. A call that fails fails the test with
// what it printed.
func Many(t testing.TB, py string, specs []Spec) []Result {
	t.Helper()
	dir := t.TempDir()
	type call struct {
		Argv []string `json:"argv"`
		Dir  string   `json:"dir"`
	}
	rs, calls := make([]Result, len(specs)), make([]call, len(specs))
	for i, sp := range specs {
		if sp.Resume > 0 {
			if sp.Resume > i {
				t.Fatalf("call %d resumes call %d, which does not come before it", i+1, sp.Resume)
			}
			sp.AdapterIn, sp.OptimizerIn = rs[sp.Resume-1].Adapter, rs[sp.Resume-1].Optimizer
		}
		var flags []string
		rs[i], flags = prepare(t, sp)
		calls[i] = call{Argv: flags, Dir: rs[i].Dir}
	}
	b, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(dir, "calls.json")
	if err := os.WriteFile(list, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join(pyvenv.Root(t), "trainers", "external", "torchtest", "many.py"), Script(t), list)
	cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+filepath.Join(dir, "pycache"), "OMP_NUM_THREADS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("many.py running %d calls of the script: %v\n%s", len(specs), err, out)
	}
	for i := range rs {
		r := &rs[i]
		o, err := os.ReadFile(filepath.Join(r.Dir, "output"))
		if err != nil {
			t.Fatalf("call %d of %d: %v (many.py stopped before it?)\n%s", i+1, len(specs), err, out)
		}
		r.Output = string(o)
		var ex struct {
			Exit    int     `json:"exit"`
			Seconds float64 `json:"seconds"`
		}
		ReadJSON(t, filepath.Join(r.Dir, "exit.json"), &ex)
		r.Wall = time.Duration(ex.Seconds * float64(time.Second))
		if ex.Exit != 0 {
			t.Fatalf("call %d of %d of the script (in many.py): exit %d\n%s", i+1, len(specs), ex.Exit, r.Output)
		}
		readMetrics(t, r)
	}
	return rs
}

// prepare makes a call's directory, with its hyperparameters file and
// the directories the script writes into, and returns the script's
// flags for it.
func prepare(t testing.TB, sp Spec) (Result, []string) {
	t.Helper()
	dir, err := os.MkdirTemp(t.TempDir(), "call-")
	if err != nil {
		t.Fatal(err)
	}
	r := Result{Dir: dir, Adapter: filepath.Join(dir, "adapter"), Optimizer: filepath.Join(dir, "optimizer")}
	hb, err := json.Marshal(sp.Hparams)
	if err != nil {
		t.Fatalf("hyperparameters: %v", err)
	}
	hpath := filepath.Join(dir, "hparams.json")
	if err := os.WriteFile(hpath, hb, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{r.Adapter, r.Optimizer} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := sp.Files
	flags := []string{"--trajectories", f.Trajectories, "--advantages", f.Advantages, "--prompts", f.Prompts,
		"--hparams", hpath, "--adapter-out", r.Adapter, "--optimizer-out", r.Optimizer, "--metrics-out", filepath.Join(dir, "metrics.json"),
		"--iteration", strconv.Itoa(sp.Iteration), "--seed", "11"}
	if sp.AdapterIn != "" {
		flags = append(flags, "--adapter-in", sp.AdapterIn)
	}
	if sp.OptimizerIn != "" {
		flags = append(flags, "--optimizer-in", sp.OptimizerIn)
	}
	return r, append(flags, sp.Extra...)
}

// readMetrics reads the call's metrics.json into r.Metrics.
func readMetrics(t testing.TB, r *Result) {
	t.Helper()
	ReadJSON(t, filepath.Join(r.Dir, "metrics.json"), &r.Metrics)
}

// ReadJSON decodes the JSON file at path into v, failing t when it
// cannot.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// LoRA reads an adapter directory's factors as float64, by tensor
// name.
func LoRA(t testing.TB, dir string) map[string][]float64 {
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
			f := make([]float64, len(v))
			for i, x := range v {
				f[i] = float64(x)
			}
			out[name] = f
		}
	}
	return out
}

// Hparams are the hyperparameters of the tests' torch runs: model (the
// exported tiny-arith) in float32, the embedded trainer's LoRA shape,
// learning rate and clip.
func Hparams(model string) map[string]any {
	return map[string]any{
		"base_model": model, "dtype": "float32", "lr": 2e-3, "clip_norm": 1.0, "micro_batch_size": 8,
		"lora": map[string]any{"rank": 8, "alpha": 16, "targets": []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}},
	}
}
