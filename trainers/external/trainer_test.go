package external_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/rollouts/rolloutstest"
	"github.com/rlpipe/rlpipe/trainers/external"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// The test binary doubles as the external trainer: run with trainerEnv
// set, it acts on the contract's flags as the mode says instead of
// running tests.
const (
	trainerEnv = "RLPIPE_TEST_EXTERNAL_TRAINER"
	pidFileEnv = "RLPIPE_TEST_PID_FILE"
	// secret is an HF_TOKEN value that must never reach a log or an error.
	secret = "hf_s3cr3tV4lu3ThatMustNotLeak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(trainerEnv); mode != "" {
		os.Exit(standInTrainer(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// contractArgs are the flags the contract passes.
type contractArgs struct {
	trajectories, advantages, prompts, hparams string
	adapterOut, optimizerOut, metricsOut       string
	adapterIn, optimizerIn                     string
	criticIn, criticOut, valuesOut             string // PPO's (critic_test.go)
	iteration                                  int
	seed                                       uint64
}

// received is what the stand-in trainer reports, under "received" in its
// metrics, about the call it got.
type received struct {
	Iteration        int            `json:"iteration"`
	Seed             string         `json:"seed"`
	AdapterIn        bool           `json:"adapter_in"`
	OptimizerIn      bool           `json:"optimizer_in"`
	AdapterInSHA256  string         `json:"adapter_in_sha256"`
	OptimizerInSteps int            `json:"optimizer_in_steps"`
	Advantages       int            `json:"advantages"`
	Unmasked         int            `json:"unmasked"`
	Trajectories     int            `json:"trajectories"`
	Prompts          int            `json:"prompts"`
	Hparams          map[string]any `json:"hparams"`
	Contract         string         `json:"contract"`
	CriticIn         bool           `json:"critic_in"`
}

// standInTrainer is a trainer honouring the contract with a deterministic
// "update": it nudges the LoRA B factors of the previous adapter (a fresh
// embedded-model adapter on the first call) by an amount derived from the
// advantages, and counts steps in its optimizer state. Modes other than
// "ok" break the contract in one chosen way.
func standInTrainer(mode string, args []string) int {
	var a contractArgs
	fs := flag.NewFlagSet("stand-in trainer", flag.ContinueOnError)
	for name, p := range map[string]*string{"trajectories": &a.trajectories, "advantages": &a.advantages, "prompts": &a.prompts,
		"hparams": &a.hparams, "adapter-out": &a.adapterOut, "optimizer-out": &a.optimizerOut, "metrics-out": &a.metricsOut,
		"adapter-in": &a.adapterIn, "optimizer-in": &a.optimizerIn,
		"critic-in": &a.criticIn, "critic-out": &a.criticOut, "values-out": &a.valuesOut} {
		fs.StringVar(p, name, "", "")
	}
	fs.IntVar(&a.iteration, "iteration", 0, "")
	fs.Uint64Var(&a.seed, "seed", 0, "")
	if err := fs.Parse(args); err != nil {
		return external.ExitUsage
	}
	fmt.Printf("stand-in trainer: iteration %d, mode %s\n", a.iteration, mode)
	switch mode {
	case "no-output":
		return 0
	case "exit3":
		fmt.Fprintf(os.Stderr, "loading the base model with token %s\n", os.Getenv("HF_TOKEN"))
		fmt.Fprintln(os.Stderr, "torch.OutOfMemoryError: CUDA out of memory (stand-in)")
		return 3
	case "bad-config":
		fmt.Fprintln(os.Stderr, "hyperparameters.lr: -1 must be positive")
		return external.ExitConfig
	case "hang", "hang-ignore-term":
		return hang(mode == "hang-ignore-term")
	case "child":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
		return 0
	case "unlisted-shard", "weights":
		if err := writeWeights(a, mode == "unlisted-shard"); err != nil {
			fmt.Fprintln(os.Stderr, "stand-in trainer:", err)
			return 1
		}
		return 0
	}
	if err := update(a, mode); err != nil {
		fmt.Fprintln(os.Stderr, "stand-in trainer:", err)
		return 1
	}
	return 0
}

// writeWeights writes full weights (lora: none) of the iteration in two
// shards with their index; with unlisted also a third shard the index
// does not list, as a trainer that wrote into a directory holding an
// older checkpoint would.
func writeWeights(a contractArgs, unlisted bool) error {
	f := safetensors.NewFile(map[string]string{"format": "pt"})
	f.Tensors["model.norm.weight"] = safetensors.FromFloat32([]int{4}, []float32{1, 1, 1, float32(a.iteration)})
	f.Tensors["lm_head.weight"] = safetensors.FromFloat32([]int{2, 4}, make([]float32, 8))
	if err := safetensors.WriteModel(a.adapterOut, f, 20); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(a.adapterOut, "config.json"), []byte(`{"architectures": ["LlamaForCausalLM"]}`), 0o644); err != nil {
		return err
	}
	if !unlisted {
		return os.WriteFile(a.metricsOut, []byte(`{"loss": 0}`), 0o644)
	}
	b, err := os.ReadFile(filepath.Join(a.adapterOut, safetensors.ShardName(1, 2)))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(a.adapterOut, safetensors.ShardName(3, 3)), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(a.metricsOut, []byte(`{"loss": 0}`), 0o644)
}

// hang starts a child that ignores SIGTERM, records its pid, and sleeps.
func hang(ignoreTerm bool) int {
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	self, _ := os.Executable()
	c := exec.Command(self)
	c.Env = append(os.Environ(), trainerEnv+"=child")
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.WriteFile(os.Getenv(pidFileEnv), []byte(strconv.Itoa(c.Process.Pid)), 0o644); err != nil {
		return 1
	}
	time.Sleep(time.Hour)
	return 0
}

func update(a contractArgs, mode string) error {
	adv, err := tables.ReadFile(a.advantages, tables.Advantages)
	if err != nil {
		return err
	}
	trajs, err := tables.ReadFile(a.trajectories, tables.Trajectories)
	if err != nil {
		return err
	}
	prompts, err := tables.ReadFile(a.prompts, tables.Prompts)
	if err != nil {
		return err
	}
	r := received{Iteration: a.iteration, Seed: strconv.FormatUint(a.seed, 10), AdapterIn: a.adapterIn != "", OptimizerIn: a.optimizerIn != "", CriticIn: a.criticIn != "",
		Advantages: len(adv), Trajectories: len(trajs), Prompts: len(prompts), Contract: os.Getenv("RLPIPE_TRAINER_CONTRACT")}
	hb, err := os.ReadFile(a.hparams)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(hb, &r.Hparams); err != nil {
		return err
	}
	var cfg safetensors.AdapterConfig
	var mods map[string]safetensors.LoRA
	if a.adapterIn != "" {
		b, err := os.ReadFile(filepath.Join(a.adapterIn, safetensors.AdapterWeightsFile))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		r.AdapterInSHA256 = hex.EncodeToString(sum[:])
		if cfg, mods, err = safetensors.ReadAdapterDir(a.adapterIn); err != nil {
			return err
		}
	} else {
		m, err := tiny.Embedded()
		if err != nil {
			return err
		}
		ad, err := m.NewAdapter(tiny.LoRAConfig{Seed: 1})
		if err != nil {
			return err
		}
		tmp, err := os.MkdirTemp("", "fresh-adapter-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if err := ad.Save(tmp); err != nil {
			return err
		}
		if cfg, mods, err = safetensors.ReadAdapterDir(tmp); err != nil {
			return err
		}
	}
	steps := 0
	if a.optimizerIn != "" {
		b, err := os.ReadFile(filepath.Join(a.optimizerIn, "state.json"))
		if err != nil {
			return err
		}
		var st struct{ Steps int }
		if err := json.Unmarshal(b, &st); err != nil {
			return err
		}
		steps, r.OptimizerInSteps = st.Steps, st.Steps
	}
	meanAbs := 0.0
	for _, x := range adv {
		if !x.Mask {
			r.Unmasked++
			meanAbs += math.Abs(x.Advantage)
		}
	}
	if r.Unmasked > 0 {
		meanAbs /= float64(r.Unmasked)
	}
	delta := float32(1e-3 * (1 + meanAbs))
	names := slices.Sorted(maps.Keys(mods))
	for k, name := range names {
		l := mods[name]
		b, err := l.B.Float32()
		if err != nil {
			return err
		}
		for j := range b {
			b[j] += delta * float32((j+k+steps)%3-1)
		}
		if mode == "nan" && k == len(names)-1 {
			b[3] = float32(math.NaN())
		}
		l.B = safetensors.FromFloat32(l.B.Shape, b)
		mods[name] = l
	}
	switch mode {
	case "bad-shape":
		// One B factor of rank r+1: WriteAdapterDir refuses it, so write
		// the files by hand, as a buggy script would.
		f := safetensors.NewFile(map[string]string{"format": "pt"})
		for k, name := range names {
			an, bn := safetensors.LoRATensorNames(name)
			f.Tensors[an] = mods[name].A
			f.Tensors[bn] = mods[name].B
			if k == 0 {
				shape := []int{mods[name].B.Shape[0], cfg.R + 1}
				f.Tensors[bn] = safetensors.FromFloat32(shape, make([]float32, shape[0]*shape[1]))
			}
		}
		if err := safetensors.WriteFile(filepath.Join(a.adapterOut, safetensors.AdapterWeightsFile), f); err != nil {
			return err
		}
		cb, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(a.adapterOut, safetensors.AdapterConfigFile), cb, 0o644); err != nil {
			return err
		}
	default:
		if err := safetensors.WriteAdapterDir(a.adapterOut, cfg, mods); err != nil {
			return err
		}
	}
	if mode == "malformed" {
		w := filepath.Join(a.adapterOut, safetensors.AdapterWeightsFile)
		b, err := os.ReadFile(w)
		if err != nil {
			return err
		}
		if err := os.WriteFile(w, b[:len(b)/2], 0o644); err != nil {
			return err
		}
	}
	if a.criticOut != "" {
		if err := standInCritic(a, mode, cfg, mods, adv, trajs); err != nil {
			return err
		}
	}
	sb, _ := json.Marshal(map[string]int{"steps": steps + 1})
	if err := os.WriteFile(filepath.Join(a.optimizerOut, "state.json"), sb, 0o644); err != nil {
		return err
	}
	mb, err := json.Marshal(map[string]any{"loss": -meanAbs, "kl": 0.0, "grad_norm": float64(delta), "optimizer_steps": steps + 1,
		"samples_used": r.Unmasked, "received": r})
	if err != nil {
		return err
	}
	return os.WriteFile(a.metricsOut, mb, 0o644)
}

// The loop around the trainer: the stand-in sampler and reward, and the
// real rollout stage sampling the embedded model with the adapters the
// trainer writes (4 samples, at most 5 tokens, with logprobs).

const datasetPath = standintest.DatasetPath

func stages(t testing.TB, train *pipeline.Task) pipeline.Stages {
	t.Helper()
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	s := standin.Stages(standin.Options{})
	return pipeline.Stages{Sample: s.Sample, Generate: rolloutstest.EmbeddedGenerate(t, m, 4), Reward: s.Reward, Train: train}
}

// trainTask is the external train stage running this test binary as the
// trainer in the given mode.
func trainTask(t testing.TB, mode string, edit func(*external.Options)) *pipeline.Task {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := external.Options{
		Command:         []string{self},
		Hyperparameters: map[string]any{"lr": 1e-5, "lora": map[string]any{"rank": 8}, "keep_zero_std": false},
		Env:             map[string]string{trainerEnv: mode, "HF_TOKEN": secret},
	}
	if edit != nil {
		edit(&o)
	}
	task, err := external.Task(o)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func openRun(t testing.TB, st artifacts.Store, name string, attempts int, logs io.Writer) *pipeline.Run {
	t.Helper()
	quick := pipeline.Settings{Retry: pipeline.Retry{Attempts: attempts, Backoff: time.Millisecond}}
	log := zerolog.Nop()
	if logs != nil {
		log = zerolog.New(logs).Level(zerolog.DebugLevel)
	}
	r, err := pipeline.Open(context.Background(), st, pipeline.RunOptions{Name: name, Seed: 3, WorkDir: t.TempDir(), Logger: log,
		Envs: map[string]pipeline.Settings{"sample": quick, "generate": quick, "reward": quick, "advantages": quick, "train": quick}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// loopOK runs r's loop to iterations with stages s; an error fails the
// test.
func loopOK(t testing.TB, r *pipeline.Run, iterations int, s pipeline.Stages) runs.State {
	t.Helper()
	state, err := r.Loop(context.Background(), loopConfig(iterations), s)
	if err != nil {
		t.Fatal(err)
	}
	return state
}

func loopConfig(iterations int) pipeline.LoopConfig {
	return pipeline.LoopConfig{Iterations: iterations, BatchSize: 3, Dataset: pipeline.StoreArtifact("main", datasetPath)}
}

// objects lists the paths under ref:prefix.
func objects(t testing.TB, st artifacts.Store, ref, prefix string) []string {
	t.Helper()
	var out []string
	for e, err := range st.ListObjects(context.Background(), ref, &artifacts.ListOptions{Prefix: prefix}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimPrefix(e.Path, prefix))
	}
	return out
}

type trainMetrics struct {
	Iteration      int      `json:"iteration"`
	Loss           *float64 `json:"loss"`
	OptimizerSteps int      `json:"optimizer_steps"`
	Samples        int      `json:"samples"`
	Used           int      `json:"samples_used"`
	Reward         *struct {
		Count int     `json:"count"`
		Mean  float64 `json:"mean"`
	} `json:"reward"`
	Received received `json:"received"`
}

// TestLoopRunsExternalTrainer runs three iterations of a real loop —
// rollouts of the embedded model with each new adapter — whose train
// stage is the stand-in trainer behind the contract.
func TestLoopRunsExternalTrainer(t *testing.T) {
	st := standintest.NewStore(t, 12)
	logs := &standintest.LogBuffer{}
	run := openRun(t, st, "ext", 1, logs)
	state := loopOK(t, run, 3, stages(t, trainTask(t, "ok", nil)))
	const branch = "runs-ext"
	if state.Iteration != 3 || state.Adapters["3"] != "iterations/000003/adapter" {
		t.Fatalf("state %+v", state)
	}
	m, err := tiny.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	var prevAdapter []byte
	seeds := map[string]bool{}
	for n := 1; n <= 3; n++ {
		it := fmt.Sprintf("iterations/%06d/", n)
		files := objects(t, st, branch, it+"adapter/")
		want := []string{"adapter_config.json", "adapter_model.safetensors", "optimizer/state.json"}
		if strings.Join(files, " ") != strings.Join(want, " ") {
			t.Errorf("iteration %d: adapter files %v, want %v", n, files, want)
		}
		var tm trainMetrics
		if err := json.Unmarshal(standintest.Read(t, st, branch, it+grpo.MetricsFile), &tm); err != nil {
			t.Fatal(err)
		}
		r := tm.Received
		first := n == 1
		switch {
		case r.Iteration != n || tm.Iteration != n:
			t.Errorf("iteration %d: the trainer got --iteration %d, metrics say %d", n, r.Iteration, tm.Iteration)
		case r.AdapterIn == first || r.OptimizerIn == first:
			t.Errorf("iteration %d: --adapter-in %v, --optimizer-in %v", n, r.AdapterIn, r.OptimizerIn)
		case r.OptimizerInSteps != n-1 || tm.OptimizerSteps != n:
			t.Errorf("iteration %d: optimizer state in %d steps, out %d", n, r.OptimizerInSteps, tm.OptimizerSteps)
		case r.Contract != strconv.Itoa(external.ContractVersion):
			t.Errorf("iteration %d: RLPIPE_TRAINER_CONTRACT %q", n, r.Contract)
		case r.Hparams["lr"] != 1e-5 || r.Hparams["keep_zero_std"] != false:
			t.Errorf("iteration %d: hparams %v", n, r.Hparams)
		case r.Seed == "0" || seeds[r.Seed]:
			t.Errorf("iteration %d: seed %s (seen %v)", n, r.Seed, seeds)
		}
		seeds[r.Seed] = true
		if !first {
			sum := sha256.Sum256(prevAdapter)
			if r.AdapterInSHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("iteration %d: --adapter-in is not iteration %d's adapter", n, n-1)
			}
		}
		prevAdapter = standintest.Read(t, st, branch, it+"adapter/adapter_model.safetensors")

		// The batch's figures come from rlpipe, the step's from the
		// trainer, which overrides samples_used.
		if tm.Loss == nil || tm.Reward == nil || tm.Reward.Count != tm.Samples || tm.Samples != 12 || tm.Used != r.Unmasked {
			t.Errorf("iteration %d: metrics %+v", n, tm)
		}
		trajs := standintest.ReadRows(t, st, branch, it+"trajectories.parquet", tables.Trajectories)
		adv := standintest.ReadRows(t, st, branch, it+grpo.AdvantagesFile, tables.Advantages)
		if len(adv) != len(trajs) || r.Advantages != len(adv) || r.Trajectories != len(trajs) || r.Prompts != 3 {
			t.Errorf("iteration %d: %d advantages, %d trajectories; the trainer read %d and %d", n, len(adv), len(trajs), r.Advantages, r.Trajectories)
		}
		for _, a := range adv {
			if !a.Mask && (a.GroupStd == 0 || a.Advantage == 0) || a.Mask && a.Reason == "" {
				t.Errorf("iteration %d: advantage row %+v", n, a)
			}
		}
		// The rollout stage of the next iteration loads the adapter.
		if _, err := m.LoadAdapter(standintest.Fetch(t, st, branch, it+"adapter")); err != nil {
			t.Errorf("iteration %d: the embedded model cannot load the adapter: %v", n, err)
		}
		if n > 1 {
			for _, tr := range trajs {
				if !strings.Contains(tr.PolicyVersion, "+adapter-") {
					t.Fatalf("iteration %d sampled from %q, not iteration %d's adapter", n, tr.PolicyVersion, n-1)
				}
			}
		}
	}
	if !strings.Contains(logs.String(), "stand-in trainer: iteration 3") {
		t.Error("the trainer's stdout is not in the task log")
	}
	if strings.Contains(logs.String(), secret) {
		t.Error("the log holds the secret")
	}
}

// TestNoOutputKeepsPreviousAdapter: a trainer that exits 0 without writing
// anything fails the iteration at once, naming the missing file and the
// contract, and the run branch keeps the previous iteration's adapter.
func TestNoOutputKeepsPreviousAdapter(t *testing.T) {
	ctx := context.Background()
	st := standintest.NewStore(t, 12)
	first := openRun(t, st, "f", 3, nil)
	loopOK(t, first, 1, stages(t, trainTask(t, "ok", nil)))
	first.Close()
	run := openRun(t, st, "f", 3, nil)
	_, err := run.Loop(ctx, loopConfig(2), stages(t, trainTask(t, "no-output", nil)))
	var te *pipeline.TaskError
	if !errors.As(err, &te) || te.Task != "train" || te.Attempts != 1 {
		t.Fatalf("err = %v, want the train task failing after one attempt", err)
	}
	if !errors.Is(err, external.ErrContract) || !errors.Is(err, pipeline.ErrOutput) || !errors.Is(err, pipeline.ErrPermanent) {
		t.Errorf("err = %v, want ErrContract, ErrOutput, ErrPermanent", err)
	}
	for _, s := range []string{"exited 0 without writing adapter_config.json", "--adapter-out", "docs/TRAINERS.md"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
	var state runs.State
	if err := json.Unmarshal(standintest.Read(t, st, "runs-f", "run/state.json"), &state); err != nil {
		t.Fatal(err)
	}
	if state.Iteration != 1 || len(state.Adapters) != 1 || state.Adapters["1"] != "iterations/000001/adapter" {
		t.Errorf("state after the failure: %+v", state)
	}
	if got := objects(t, st, "runs-f", "iterations/000002/adapter/"); len(got) != 0 {
		t.Errorf("iteration 2 left adapter files %v", got)
	}
}

// TestTrainerFaults: each way a trainer can fail gives an error that says
// what happened and where, and is retried only when retrying can help.
func TestTrainerFaults(t *testing.T) {
	for _, tc := range []struct {
		mode     string
		attempts int // of 2 allowed
		is       []error
		says     []string
	}{
		{"exit3", 2, nil, []string{"exited with status 3", "CUDA out of memory (stand-in)", "<redacted>", "--adapter-out", "--seed"}},
		{"bad-config", 1, []error{pipeline.ErrPermanent}, []string{"status 78 (configuration error", "hyperparameters.lr: -1 must be positive"}},
		{"bad-shape", 1, []error{external.ErrContract, safetensors.ErrAdapter}, []string{"adapter_model.safetensors", `lora_B.weight" has shape [`, "want [out, 8]"}},
		{"malformed", 1, []error{external.ErrContract, safetensors.ErrFormat}, []string{"adapter_model.safetensors"}},
		{"nan", 1, []error{external.ErrContract}, []string{`lora_B.weight" holds a NaN or infinite value at element 3`}},
		{"unlisted-shard", 1, []error{external.ErrContract, policy.ErrShards}, []string{"--adapter-out: check the shards of ",
			"shard model-00003-of-00003.safetensors is not listed in model.safetensors.index.json: not a policy checkpoint: shards do not match their index (the directory is incomplete or mixes two checkpoints; write it again)"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			logs := &standintest.LogBuffer{}
			_, err := openRun(t, standintest.NewStore(t, 12), "f", 2, logs).Loop(context.Background(), loopConfig(1), stages(t, trainTask(t, tc.mode, nil)))
			var te *pipeline.TaskError
			if !errors.As(err, &te) || te.Task != "train" {
				t.Fatalf("err = %v, want the train task's", err)
			}
			if te.Attempts != tc.attempts {
				t.Errorf("%d attempts, want %d", te.Attempts, tc.attempts)
			}
			for _, e := range tc.is {
				if !errors.Is(err, e) {
					t.Errorf("err is not %v: %v", e, err)
				}
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
			var ee *external.ExitError
			if errors.As(err, &ee) && (len(ee.Command) < 2 || !strings.HasSuffix(ee.Command[len(ee.Command)-2], "--seed")) {
				t.Errorf("command %q does not end with the contract's flags", ee.Command)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
				t.Error("the secret leaked into the error or the log")
			}
		})
	}
}

// TestTimeoutKillsProcessGroup: when the engine's timeout passes, the
// trainer and a child that ignores SIGTERM are both gone.
func TestTimeoutKillsProcessGroup(t *testing.T) {
	for _, mode := range []string{"hang", "hang-ignore-term"} {
		t.Run(mode, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			train := trainTask(t, mode, func(o *external.Options) {
				o.Timeout, o.KillGrace = 3*time.Second, 200*time.Millisecond
				o.Env[pidFileEnv] = pidFile
			})
			_, err := openRun(t, standintest.NewStore(t, 12), "h", 1, nil).Loop(context.Background(), loopConfig(1), stages(t, train))
			if !errors.Is(err, pipeline.ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			b, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatalf("the trainer did not start its child: %v", err)
			}
			pid, _ := strconv.Atoi(string(b))
			for i := 0; alive(pid); i++ {
				if i == 200 {
					t.Fatalf("child %d still runs", pid)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
