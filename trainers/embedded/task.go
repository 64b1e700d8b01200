package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/runs"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// faults make a task fail on purpose, for tests.
type faults struct {
	// crash, when it returns true, makes the attempt write part of its
	// adapter and fail with a transient error.
	crash func(iteration, attempt int) bool
	// nan, when it returns true, puts a NaN into the update's loss.
	nan func(iteration int) bool
}

// Task returns the train stage for the base model m: Name "train", Env
// "train" (change the field to run elsewhere), Deterministic, and a
// Version that digests the options and the model's version. Each call
// reads the iteration's prompts, trajectories and rewards, continues from
// the policy input (the previous adapter directory with its optimizer
// state) or starts a fresh adapter, takes one update, and writes
//
//	adapter/              adapter_config.json, adapter_model.safetensors,
//	                      optimizer.safetensors, trainer_state.json
//	                      (with lora: none a Hugging Face model directory:
//	                      config.json, model.safetensors or shards, …)
//	train_metrics.json    Metrics
//	advantages.parquet    tables.Advantages, one row per trajectory
//
// into the work directory. With an "advantages" input (the loop's
// advantages step, advantages.TrainTask with the same NoStd and
// KeepZeroStd) the update trains on those rows instead of computing them,
// and advantages.parquet is written only if the task still declares it
// (kind.OnAdvantages drops it: the step wrote that file). The engine
// uploads the outputs only when the call succeeds, so a failed attempt
// never leaves a partial adapter in the store. Invalid options fail every call at once (Permanent) with the
// option's JSON key; check them earlier with Options.Validate.
func Task(m *tiny.Model, o Options) *pipeline.Task {
	return newTask(m, o, faults{})
}

func newTask(m *tiny.Model, o Options, f faults) *pipeline.Task {
	o.EnsureDefaults()
	version, verr := o.Version(m)
	return &pipeline.Task{
		Name: "train", Version: version, Env: "train", Deterministic: true,
		Outputs: outputs(o),
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			if verr != nil {
				return pipeline.Permanent(fmt.Errorf("train stage: %w", verr))
			}
			return run(ctx, tc, m, o, f)
		},
	}
}

func run(ctx context.Context, tc *pipeline.TaskContext, m *tiny.Model, o Options, f faults) error {
	var p grpo.Params
	if err := tc.Params(&p); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return pipeline.Permanent(fmt.Errorf("train stage: %w", err))
	}
	b, err := grpo.ReadBatch(tc)
	if err != nil {
		return err
	}
	var t *Trainer
	if dir := tc.InputPath("policy"); dir != "" {
		t, err = load(m, o, dir, p.Iteration <= 1)
		if errors.Is(err, ErrNoCritic) {
			return pipeline.Permanent(fmt.Errorf("train iteration %d: load the policy input %s: %w (no %s/ directory) while trainer.critic is on, and a critic is never silently reinitialised: continue from an adapter trained with the critic, or set trainer.critic.missing: fresh to start a new one",
				p.Iteration, runs.AdapterPath(p.Iteration-1), err, CriticDir))
		}
		if err != nil {
			return pipeline.Permanent(fmt.Errorf("train iteration %d: load the policy input: %w", p.Iteration, err))
		}
		if t.freshCritic && p.Iteration > 1 {
			log := tc.Logger() // it names the run and the iteration
			log.Info().Msg("the policy input has no critic/: a new critic starts (trainer.critic.missing: fresh)")
		}
	} else if t, err = New(m, o); err != nil {
		return pipeline.Permanent(fmt.Errorf("train iteration %d: %w", p.Iteration, err))
	}
	defer t.release() // the task's trainer ends with the call
	t.poison = f.nan != nil && f.nan(p.Iteration)
	res, err := t.Update(ctx, b)
	if err != nil {
		if errors.Is(err, advantages.ErrRows) {
			err = fmt.Errorf("%s: %w", grpo.AdvantagesFile, err)
		}
		err = fmt.Errorf("train iteration %d: %w", p.Iteration, err)
		if errors.Is(err, grpo.ErrNonFinite) || errors.Is(err, ErrBatch) || errors.Is(err, tiny.ErrVocabulary) {
			// The same inputs would fail the same way.
			err = pipeline.Permanent(err)
		}
		return err
	}
	res.Metrics.Iteration = p.Iteration
	log := tc.Logger()
	log.Debug().Int("samples_used", res.Metrics.Used).Float64("loss", res.Metrics.Loss).
		Float64("reward_mean", res.Metrics.Reward.Mean).Msg("train update")
	dir := tc.OutputPath(grpo.OutAdapter)
	if f.crash != nil && f.crash(p.Iteration, tc.Attempt) {
		return crashMidWrite(t, dir, p.Iteration, tc.Attempt)
	}
	if err := t.Save(dir); err != nil {
		return err
	}
	mb, err := json.MarshalIndent(res.Metrics, "", "  ")
	if err != nil {
		return fmt.Errorf("train iteration %d: metrics: %w", p.Iteration, err)
	}
	if err := os.WriteFile(tc.OutputPath(grpo.OutMetrics), append(mb, '\n'), 0o644); err != nil {
		return err
	}
	if path := tc.OutputPath(OutValues); path != "" {
		if err := tables.WriteFile(path, tables.TokenValues, res.Values, nil); err != nil {
			return fmt.Errorf("write values: %w", err)
		}
	}
	if path := tc.OutputPath(grpo.OutAdvantages); path != "" {
		if err := tables.WriteFile(path, tables.Advantages, res.Advantages, nil); err != nil {
			return fmt.Errorf("write advantages: %w", err)
		}
	}
	return nil
}

// crashMidWrite leaves half an adapter in the output directory and fails
// as a crashed process would, with a transient error.
func crashMidWrite(t *Trainer, dir string, iteration, attempt int) error {
	if err := t.Save(dir); err != nil {
		return err
	}
	w := filepath.Join(dir, "adapter_model.safetensors")
	if t.fm != nil {
		w = filepath.Join(dir, safetensors.ModelFile)
	}
	b, err := os.ReadFile(w)
	if err != nil {
		return err
	}
	if err := os.WriteFile(w, b[:len(b)/2], 0o644); err != nil {
		return err
	}
	return fmt.Errorf("train iteration %d: planned crash of attempt %d while writing the adapter", iteration, attempt)
}

// outputs are the train task's outputs: grpo.Outputs, and OutValues
// with the critic.
func outputs(o Options) []pipeline.Output {
	out := grpo.Outputs(checkMetrics)
	if o.Critic != nil {
		out = append(out, pipeline.Output{Name: OutValues, File: runs.ValuesFile, Check: func(path string) error { return tables.CheckFile(path, tables.TokenValues) }})
	}
	return out
}

func checkMetrics(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var m Metrics
	return json.Unmarshal(b, &m)
}
