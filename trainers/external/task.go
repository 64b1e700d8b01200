package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// Task returns the train stage that runs an external trainer: Name
// "train", Env "train" (change the fields to run elsewhere), and a
// Version that digests the command, the hyperparameters and
// Options.Version. It is not Deterministic: the trainer gets the call's
// seed (--seed), which enters the cache key.
//
// Each call computes the iteration's advantages (advantages.Join of the
// trajectories and rewards inputs, masking failed, unscored and, by
// default, zero-variance samples) — or, given an "advantages" input (the
// loop's advantages step), checks that its rows fit the trajectories and
// hands that file to the trainer as it is —, writes the advantages
// (unless given) and the hyperparameters,
// lays out the policy input as --adapter-in and --optimizer-in, runs the
// command with the contract's flags, checks what it wrote, and outputs
//
//	adapter/              the PEFT files of --adapter-out, plus
//	  optimizer/          the files of --optimizer-out (when there are any)
//	train_metrics.json    the batch's Metrics overlaid with --metrics-out
//	advantages.parquet    tables.Advantages, one row per trajectory
//
// and, with hyperparameters.critic (PPO), the adapter's critic/ (what the
// trainer wrote to --critic-out) and values.parquet (tables.TokenValues,
// from --values-out, checked against the trained samples).
//
// advantages.parquet is written only if the task declares it:
// kind.OnAdvantages drops it for a loop whose advantages step writes that
// file. The engine uploads them only when the call succeeds, so a failed call
// leaves the previous adapter current. The contract — flags, files, exit
// statuses — is docs/TRAINERS.md.
func Task(o Options) (*pipeline.Task, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	adv, _ := o.Advantages()
	if c, _ := o.critic(); c != nil {
		// Alone (no advantages step), a PPO call hands the trainer the
		// gae estimator's table: outcome rewards, no sample masked for
		// its group.
		adv.Estimator = advantages.GAEEstimator
		if o.GAE != nil {
			adv.Gamma, adv.Lambda = o.GAE.Gamma, o.GAE.Lambda
		}
	}
	version, err := o.TaskVersion()
	if err != nil {
		return nil, err
	}
	o.Command = append([]string(nil), o.Command...)
	outputs := grpo.Outputs(checkMetricsFile)
	if c, _ := o.critic(); c != nil {
		outputs = append(outputs, grpo.ValuesOutput())
	}
	return &pipeline.Task{
		Name: "train", Version: version, Env: "train",
		Settings: pipeline.Settings{Timeout: o.Timeout},
		Outputs:  outputs,
		Run: func(ctx context.Context, tc *pipeline.TaskContext) error {
			return run(ctx, tc, o, adv)
		},
	}, nil
}

func run(ctx context.Context, tc *pipeline.TaskContext, o Options, ao advantages.TrainOptions) error {
	p := grpo.Params{Iteration: tc.Iteration}
	if err := tc.Params(&p); err != nil {
		return err
	}
	b, err := grpo.ReadBatch(tc)
	if err != nil {
		return err
	}
	given := b.Advantages
	adv, metrics, err := prepare(b.Prompts, b.Trajectories, b.Rewards, given, ao)
	if errors.Is(err, advantages.ErrRows) {
		err = fmt.Errorf("%s: %w", grpo.AdvantagesFile, err)
	}
	if err != nil {
		return pipeline.Permanent(fmt.Errorf("train iteration %d: %w", p.Iteration, err))
	}
	metrics.Iteration = p.Iteration

	work, err := tc.WorkDir()
	if err != nil {
		return err
	}
	dir := filepath.Join(work, "trainer")
	ps := newPaths(dir)
	ps.Trajectories, ps.Prompts = tc.InputPath("trajectories"), tc.InputPath("prompts")
	for _, d := range []string{dir, ps.AdapterOut, ps.OptimizerOut} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// The trainer reads the advantages the call outputs, or the given
	// file when the call outputs none.
	if out := tc.OutputPath(grpo.OutAdvantages); out != "" {
		if err := tables.WriteFile(out, tables.Advantages, adv, nil); err != nil {
			return fmt.Errorf("write advantages: %w", err)
		}
		ps.Advantages = out
	} else if given != nil {
		ps.Advantages = tc.InputPath(grpo.InAdvantages)
	} else {
		ps.Advantages = filepath.Join(dir, grpo.AdvantagesFile)
		if err := tables.WriteFile(ps.Advantages, tables.Advantages, adv, nil); err != nil {
			return fmt.Errorf("write advantages: %w", err)
		}
	}
	crit, err := o.critic()
	if err != nil {
		return pipeline.Permanent(fmt.Errorf("train iteration %d: %w", p.Iteration, err))
	}
	if crit != nil {
		ps.CriticOut, ps.ValuesOut = filepath.Join(dir, criticOutDir), filepath.Join(dir, valuesOutFile)
		if err := os.MkdirAll(ps.CriticOut, 0o755); err != nil {
			return err
		}
	}
	hb, err := json.MarshalIndent(o.hparams(crit), "", "  ")
	if err != nil {
		return pipeline.Permanent(fmt.Errorf("%w: hyperparameters: %v", ErrOptions, err))
	}
	if err := os.WriteFile(ps.Hparams, append(hb, '\n'), 0o644); err != nil {
		return err
	}
	if policy := tc.InputPath("policy"); policy != "" {
		if err := ps.splitPolicy(policy, dir); err != nil {
			return pipeline.Permanent(fmt.Errorf("train iteration %d: %w", p.Iteration, err))
		}
	}
	if err := freshCritic(tc, crit, ps, p.Iteration); err != nil {
		return pipeline.Permanent(fmt.Errorf("train iteration %d: %w", p.Iteration, err))
	}

	argv := append(append([]string(nil), o.Command...), ps.flags(p.Iteration, tc.Seed)...)
	env := []string{
		"PYTHONUNBUFFERED=1",
		"RLPIPE_TRAINER_CONTRACT=" + strconv.Itoa(ContractVersion),
		"RLPIPE_TASK=" + tc.Task, "RLPIPE_ATTEMPT=" + strconv.Itoa(tc.Attempt),
		"RLPIPE_ITERATION=" + strconv.Itoa(p.Iteration), "RLPIPE_SEED=" + strconv.FormatUint(tc.Seed, 10),
	}
	keys := slices.Sorted(maps.Keys(o.Env))
	for _, k := range keys {
		env = append(env, k+"="+o.Env[k])
	}
	log := tc.Logger()
	log.Debug().Strs("argv", redactAll(argv, redactor(append(os.Environ(), env...)))).Strs("env_keys", keys).Bool("adapter_in", ps.AdapterIn != "").
		Bool("optimizer_in", ps.OptimizerIn != "").Int("samples", metrics.Samples).Int("samples_used", metrics.Used).
		Msg("run external trainer")
	pr := process{argv: argv, env: env, dir: o.Dir, grace: o.KillGrace, log: log}
	if err := pr.run(ctx); err != nil {
		return fmt.Errorf("train iteration %d: %w", p.Iteration, err)
	}

	trainerMetrics, err := ps.checkOutputs()
	if err == nil && crit != nil {
		err = writeValues(tc, ps, trainedTokens(b.Trajectories, adv), samplesUsed(trainerMetrics))
	}
	if err != nil {
		return pipeline.Permanent(fmt.Errorf("train iteration %d: %w", p.Iteration, err))
	}
	if err := ps.assemble(tc.OutputPath(grpo.OutAdapter)); err != nil {
		return err
	}
	mb, err := mergeMetrics(metrics, trainerMetrics)
	if err != nil {
		return fmt.Errorf("train iteration %d: metrics: %w", p.Iteration, err)
	}
	return os.WriteFile(tc.OutputPath(grpo.OutMetrics), mb, 0o644)
}
