package external_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/pipeline/standin/standintest"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/trainers/external"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// standInCritic is the stand-in trainer's PPO side: a critic (the
// adapter's factors, a zero value head of 8 inputs) in --critic-out, and
// in --values-out one line per unmasked sample, its reward on the last
// token. Modes break it one way each.
func standInCritic(a contractArgs, mode string, cfg safetensors.AdapterConfig, mods map[string]safetensors.LoRA,
	adv []tables.Advantage, trajs []tables.Trajectory) error {
	if mode != "critic-no-head" {
		if err := safetensors.WriteAdapterDir(a.criticOut, cfg, mods); err != nil {
			return err
		}
		head := safetensors.NewFile(nil)
		head.Tensors["v_head.weight"] = safetensors.FromFloat32([]int{1, 8}, make([]float32, 8))
		bias := float32(0)
		if mode == "critic-nan-head" {
			bias = float32(math.NaN())
		}
		head.Tensors["v_head.bias"] = safetensors.FromFloat32([]int{1}, []float32{bias})
		if err := safetensors.WriteFile(filepath.Join(a.criticOut, external.ValueHeadFile), head); err != nil {
			return err
		}
	}
	tokens := map[string]int{}
	for _, t := range trajs {
		tokens[fmt.Sprint(t.PromptID, "/", t.SampleIndex)] = len(t.TokenIDs)
	}
	f, err := os.Create(a.valuesOut)
	if err != nil {
		return err
	}
	defer f.Close()
	if mode == "critic-unknown-row" {
		if _, err := f.WriteString(`{"prompt_id": "nope", "sample_index": 7, "rewards": [], "values": [], "returns": [], "advantages": []}` + "\n"); err != nil {
			return err
		}
	}
	// Written in reverse order: rlpipe sorts the rows.
	for i := len(adv) - 1; i >= 0; i-- {
		x := adv[i]
		if x.Mask {
			continue
		}
		n := tokens[fmt.Sprint(x.PromptID, "/", x.SampleIndex)]
		zeros, rewards := make([]any, n), make([]any, n)
		for j := range zeros {
			zeros[j], rewards[j] = 0.0, 0.0
		}
		rewards[n-1] = x.Advantage
		values := slices.Clone(zeros)
		switch {
		case mode == "critic-null" && i == 1:
			values[n-1] = nil
		case mode == "critic-short" && i == 1:
			values = values[1:]
		}
		b, err := json.Marshal(map[string]any{"prompt_id": x.PromptID, "sample_index": x.SampleIndex,
			"rewards": rewards, "values": values, "returns": rewards, "advantages": zeros})
		if err != nil {
			return err
		}
		if _, err := f.Write(append(b, '\n')); err != nil {
			return err
		}
		if mode == "critic-twice" {
			if _, err := f.Write(append(b, '\n')); err != nil {
				return err
			}
		}
	}
	return nil
}

// ppoTask is the stand-in trainer in mode with the critic on and GAE's
// γ 1, λ 0.95; edit changes the critic's keys.
func ppoTask(t *testing.T, mode string, critic map[string]any) *pipeline.Task {
	return trainTask(t, mode, func(o *external.Options) {
		o.Hyperparameters[external.Critic] = critic
		o.GAE = &external.GAE{Gamma: 1, Lambda: 0.95}
	})
}

// A PPO loop through the contract: the critic the trainer writes is
// committed as the adapter's critic/ and handed back as --critic-in, its
// values become values.parquet (one row per trained sample, sorted),
// and the trainer reads GAE's γ and λ in hyperparameters.critic.
func TestLoopWithCritic(t *testing.T) {
	st := standintest.NewStore(t, 12)
	loopOK(t, openRun(t, st, "ppo", 1, nil), 2, stages(t, ppoTask(t, "ok", map[string]any{"lr": 1e-3})))
	for it := 1; it <= 2; it++ {
		dir := fmt.Sprintf("iterations/%06d/", it)
		files := objects(t, st, "runs-ppo", dir+"adapter/"+grpo.CriticDir+"/")
		if want := []string{"adapter_config.json", "adapter_model.safetensors", external.ValueHeadFile}; !slices.Equal(files, want) {
			t.Errorf("iteration %d: critic/ holds %v, want %v", it, files, want)
		}
		var m trainMetrics
		if err := json.Unmarshal(standintest.Read(t, st, "runs-ppo", dir+grpo.MetricsFile), &m); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "values.parquet")
		if err := os.WriteFile(path, standintest.Read(t, st, "runs-ppo", dir+grpo.ValuesFile), 0o644); err != nil {
			t.Fatal(err)
		}
		rows, err := tables.ReadFile(path, tables.TokenValues)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != m.Used || m.Used == 0 {
			t.Errorf("iteration %d: values.parquet has %d rows for %d samples trained", it, len(rows), m.Used)
		}
		if !slices.IsSortedFunc(rows, func(a, b tables.TokenValue) int {
			return strings.Compare(fmt.Sprintf("%s/%09d", a.PromptID, a.SampleIndex), fmt.Sprintf("%s/%09d", b.PromptID, b.SampleIndex))
		}) {
			t.Errorf("iteration %d: values.parquet is not sorted by (prompt_id, sample_index)", it)
		}
		if got := m.Received.CriticIn; got != (it == 2) {
			t.Errorf("iteration %d: --critic-in given: %t, want %t", it, got, it == 2)
		}
		c, _ := m.Received.Hparams[external.Critic].(map[string]any)
		if c["gamma"] != 1.0 || c["lambda"] != 0.95 || c["lr"] != 1e-3 {
			t.Errorf("iteration %d: the trainer's hyperparameters.critic %v, want lr 0.001 with gamma 1 and lambda 0.95", it, c)
		}
	}
}

// A later iteration whose policy has no critic/ while the critic is on is
// refused, naming the adapter and the next step, before the trainer
// runs; critic.missing: fresh starts a new critic instead, logged.
func TestMissingCritic(t *testing.T) {
	for _, missing := range []string{"", external.MissingFresh} {
		t.Run("missing="+missing, func(t *testing.T) {
			st := standintest.NewStore(t, 12)
			first := openRun(t, st, "m", 1, nil)
			loopOK(t, first, 1, stages(t, trainTask(t, "ok", nil)))
			first.Close() // the next open takes the run's lock
			critic := map[string]any{"lr": 1e-3}
			if missing != "" {
				critic[external.CriticMissing] = missing
			}
			logs := &standintest.LogBuffer{}
			_, err := openRun(t, st, "m", 2, logs).Loop(context.Background(), loopConfig(2), stages(t, ppoTask(t, "ok", critic)))
			if missing == external.MissingFresh {
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(logs.String(), "the policy input has no critic/: a new critic starts (hyperparameters.critic.missing: fresh)") {
					t.Errorf("the fresh critic was not logged:\n%s", logs.String())
				}
				if files := objects(t, st, "runs-m", "iterations/000002/adapter/critic/"); len(files) != 3 {
					t.Errorf("iteration 2's critic/ holds %v", files)
				}
				return
			}
			const want = "train iteration 2: the policy input has no critic: the policy input iterations/000001/adapter has no critic/ directory while hyperparameters.critic is on: " +
				"continue from an adapter trained with the critic, or set hyperparameters.critic.missing: fresh to start a new critic"
			var te *pipeline.TaskError
			if !errors.As(err, &te) || te.Attempts != 1 || !errors.Is(err, pipeline.ErrPermanent) || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want after one attempt %q", err, want)
			}
			if strings.Contains(logs.String(), "stand-in trainer: iteration 2") {
				t.Error("the trainer ran; the refusal must come before it")
			}
		})
	}
}

// What the trainer writes for the critic is checked like the adapter: a
// bad critic or values file fails the call at once, naming the flag, the
// file, the line and the sample.
func TestCriticContractFaults(t *testing.T) {
	for _, tc := range []struct {
		mode string
		says []string
	}{
		{"critic-no-head", []string{"the trainer exited 0 without writing adapter_config.json into --critic-out"}},
		{"critic-nan-head", []string{`--critic-out: `, `value_head.safetensors: tensor "v_head.bias" holds a NaN or infinite value at element 0; the critic diverged`}},
		{"critic-null", []string{"--values-out ", `line 11: sample 1 of prompt "`, `": values entry `, `is null, a value that was not finite; the critic diverged or its state is corrupt`}},
		{"critic-short", []string{`line 11: sample 1 of prompt "`, `": values has `, ` entries for its `}},
		{"critic-twice", []string{`line 2: sample 3 of prompt "`, `" again (first on line 1)`}},
		{"critic-unknown-row", []string{`line 1: sample 7 of prompt "nope" was not handed to the trainer to train on (masked or absent in advantages.parquet)`}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			_, err := openRun(t, standintest.NewStore(t, 12), "f", 2, nil).Loop(context.Background(), loopConfig(1), stages(t, ppoTask(t, tc.mode, map[string]any{})))
			var te *pipeline.TaskError
			if !errors.As(err, &te) || te.Attempts != 1 || !errors.Is(err, external.ErrContract) {
				t.Fatalf("err = %v, want a contract error after one attempt", err)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
		})
	}
}

// GAE's γ and λ enter the train version only with the critic on, so
// every other run keeps its version; a critic that is not a mapping, or
// a missing key rlpipe cannot act on, fails the options.
func TestCriticOptions(t *testing.T) {
	version := func(hp map[string]any, gae *external.GAE) string {
		t.Helper()
		v, err := external.Options{Command: []string{"t"}, Hyperparameters: hp, GAE: gae}.TaskVersion()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	plain := map[string]any{"lr": 1e-5}
	ppo := map[string]any{"lr": 1e-5, external.Critic: map[string]any{"lr": 1e-4}}
	if version(plain, nil) != version(plain, &external.GAE{Gamma: 0.9, Lambda: 0.9}) {
		t.Error("GAE changed the version of a run without the critic")
	}
	if version(ppo, &external.GAE{Gamma: 1, Lambda: 1}) == version(ppo, &external.GAE{Gamma: 1, Lambda: 0.95}) {
		t.Error("lambda did not change the version of a run with the critic")
	}
	for _, tc := range []struct {
		critic any
		err    string
	}{
		{"yes", "invalid external trainer options: hyperparameters.critic is yes (string); it must be a mapping, e.g. {lr: 1.0e-5}"},
		{map[string]any{"missing": "rebuild"}, "invalid external trainer options: hyperparameters.critic.missing is rebuild; use refuse or fresh"},
	} {
		_, err := external.Task(external.Options{Command: []string{"t"}, Hyperparameters: map[string]any{external.Critic: tc.critic}})
		if !errors.Is(err, external.ErrOptions) || err.Error() != tc.err {
			t.Errorf("critic %v: err = %v, want %q", tc.critic, err, tc.err)
		}
	}
}
