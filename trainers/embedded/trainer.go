package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/policy"
	"github.com/rlpipe/rlpipe/policy/safetensors"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// Files the trainer adds to a PEFT adapter directory. PEFT and vLLM read
// only adapter_config.json and adapter_model.safetensors and ignore them.
const (
	// OptimizerFile holds AdamW's state: the step count, both moments and
	// the factors (tiny.Trainer.SaveState), so a resumed run continues bit
	// for bit.
	OptimizerFile = "optimizer.safetensors"
	// StateFile is a small JSON record of the training so far (State).
	StateFile = "trainer_state.json"
)

// StateFormat names the layout of StateFile.
const StateFormat = "rlpipe-grpo-embedded/1"

// State is trainer_state.json: what trained the adapter beside it.
type State struct {
	Format string `json:"format"`
	// BaseModel is the version of the base model the adapter belongs to.
	BaseModel string `json:"base_model"`
	// OptimizerSteps counts AdamW steps, Updates the updates (iterations)
	// that took them.
	OptimizerSteps int `json:"optimizer_steps"`
	Updates        int `json:"updates"`
	// Options are those of the last update, defaults applied.
	Options Options `json:"options"`
	// CriticUpdates counts the updates the critic (CriticDir) has
	// taken, CriticOptimizerSteps its AdamW steps; absent without one.
	CriticUpdates        int `json:"critic_updates,omitempty"`
	CriticOptimizerSteps int `json:"critic_optimizer_steps,omitempty"`
}

// Trainer trains a LoRA adapter of an embedded model with GRPO, one
// update per RL iteration, or with lora: none every weight of a copy of
// the model. It is not safe for concurrent use; the base model may be
// shared (it is only read).
type Trainer struct {
	m       *tiny.Model
	o       Options
	ad      *tiny.Adapter // nil with full fine-tuning
	fm      *tiny.Model   // full fine-tuning: the model trained, a copy of m; nil with LoRA
	tr      *tiny.Trainer
	updates int

	// PPO's critic (Options.Critic) and its trainer; nil without.
	critic        *tiny.Critic
	ctr           *tiny.Trainer
	criticUpdates int
	// freshCritic says that Load started a new critic because the
	// adapter had none.
	freshCritic bool

	// poison, set by tests, makes the next loss see a NaN log-probability.
	poison bool
}

// New returns a trainer of a fresh adapter (o.LoRA's shape and seed: B is
// zero, so the policy starts as the base model), or with o.LoRA.None of
// a copy of the base model's weights.
func New(m *tiny.Model, o Options) (*Trainer, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.LoRA.None {
		return newFull(m, o, m.Clone())
	}
	ad, err := m.NewAdapter(tiny.LoRAConfig{Name: "grpo", Rank: o.LoRA.Rank, Alpha: o.LoRA.Alpha, Targets: o.LoRA.Targets, Seed: o.LoRA.Seed})
	if err != nil {
		return nil, fmt.Errorf("%w: lora: %v", ErrOptions, err)
	}
	tr, err := tiny.NewTrainer(m, ad, o.trainConfig())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOptions, err)
	}
	t := &Trainer{m: m, o: o, ad: ad, tr: tr}
	if o.Critic != nil {
		if err := t.newCritic(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Load returns a trainer that continues from the adapter directory dir: a
// PEFT adapter, with the optimizer state and trainer state that Save
// writes beside it when they are there (an adapter from elsewhere starts
// with fresh AdamW moments). The adapter keeps its own rank and targets;
// o.LoRA does not apply. With o.Critic, the critic continues from dir's
// CriticDir; an adapter without one that this trainer trained before
// (its StateFile counts updates) fails with ErrNoCritic unless
// o.Critic.Missing is MissingFresh, and one from elsewhere starts a
// fresh critic.
func Load(m *tiny.Model, o Options, dir string) (*Trainer, error) {
	return load(m, o, dir, false)
}

// load is Load; freshCritic lets a fresh critic start whatever the
// adapter's history (the run's first iteration).
func load(m *tiny.Model, o Options, dir string, freshCritic bool) (*Trainer, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	kind, err := policy.CheckpointKind(dir)
	if err != nil {
		return nil, err
	}
	var t *Trainer
	switch {
	case kind == policy.KindWeights && !o.LoRA.None:
		return nil, fmt.Errorf("%s holds full weights, but the trainer trains a LoRA adapter: %w (set trainer: {lora: none} to continue full fine-tuning)", dir, ErrCheckpointKind)
	case kind == policy.KindAdapter && o.LoRA.None:
		return nil, fmt.Errorf("%s is a PEFT adapter, but trainer.lora is none (full fine-tuning): %w (start full fine-tuning from the base model, or remove lora: none to train the adapter)", dir, ErrCheckpointKind)
	case o.LoRA.None:
		fm, err := tiny.LoadWeightsDir(m, dir)
		if err != nil {
			return nil, err
		}
		if t, err = newFull(m, o, fm); err != nil {
			return nil, err
		}
	default:
		ad, err := m.LoadAdapter(dir)
		if err != nil {
			return nil, err
		}
		tr, err := tiny.NewTrainer(m, ad, o.trainConfig())
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrOptions, err)
		}
		t = &Trainer{m: m, o: o, ad: ad, tr: tr}
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("load trainer state: %w", err)
	default:
		var st State
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("load trainer state %s: %w", filepath.Join(dir, StateFile), err)
		}
		if st.BaseModel != m.Version() {
			return nil, fmt.Errorf("load trainer state %s: the adapter was trained on %s, not %s", filepath.Join(dir, StateFile), st.BaseModel, m.Version())
		}
		t.updates, t.criticUpdates = st.Updates, st.CriticUpdates
	}
	opt := filepath.Join(dir, OptimizerFile)
	if _, err := os.Stat(opt); err == nil {
		if err := t.tr.LoadState(opt); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load optimizer state: %w", err)
	}
	if o.Critic != nil {
		if err := t.loadCritic(dir, freshCritic || t.updates == 0); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// newFull returns a trainer of every weight of fm, a model of m's shape
// that it changes in place.
func newFull(m *tiny.Model, o Options, fm *tiny.Model) (*Trainer, error) {
	tr, err := tiny.NewTrainer(fm, nil, o.trainConfig())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOptions, err)
	}
	return &Trainer{m: m, o: o, fm: fm, tr: tr}, nil
}

// release gives the work buffers of the policy's and the critic's
// trainers back to the model (tiny.Trainer.Release); t must not be used
// afterwards.
func (t *Trainer) release() {
	t.tr.Release()
	if t.ctr != nil {
		t.ctr.Release()
	}
}

// Adapter returns the adapter being trained, nil with full fine-tuning.
// It changes with every update; score or sample with it between updates
// only.
func (t *Trainer) Adapter() *tiny.Adapter { return t.ad }

// Model returns the model being trained with full fine-tuning (lora:
// none), nil with LoRA. It changes with every update; score or sample
// with it between updates only.
func (t *Trainer) Model() *tiny.Model { return t.fm }

// State returns the trainer's state as Save records it.
func (t *Trainer) State() State {
	st := State{Format: StateFormat, BaseModel: t.m.Version(), OptimizerSteps: t.tr.Steps(), Updates: t.updates, Options: t.o}
	if t.critic != nil {
		st.CriticUpdates, st.CriticOptimizerSteps = t.criticUpdates, t.ctr.Steps()
	}
	return st
}

// Save writes the adapter as a PEFT directory, or with full fine-tuning
// the model as a Hugging Face model directory (sharded above
// Options.MaxShardSize), plus OptimizerFile and StateFile, into dir
// (created if needed). The same trainer state always writes the same
// bytes. The adapter and optimizer files are not synced (unsynced): dir is the train task's
// output, which the store syncs as it takes it in; a caller that keeps
// dir as the only copy syncs it itself.
func (t *Trainer) Save(dir string) error {
	if t.fm != nil {
		if err := t.fm.ExportHFSharded(dir, t.o.MaxShardSize); err != nil {
			return fmt.Errorf("save the full weights: %w", err)
		}
		// optimizer.safetensors sits beside the weights: an index keeps
		// vLLM from loading it as weights.
		if err := safetensors.IndexSingle(dir); err != nil {
			return fmt.Errorf("save the full weights: %w", err)
		}
	} else if err := t.ad.SaveWith(dir, unsynced); err != nil {
		return err
	}
	if err := t.tr.SaveStateWith(filepath.Join(dir, OptimizerFile), unsynced); err != nil {
		return err
	}
	if t.critic != nil {
		if err := t.saveCritic(dir); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(t.State(), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, StateFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("save trainer state: %w", err)
	}
	return nil
}

// unsynced is how Save writes: without fsyncs. The engine copies a
// task's outputs into the store, which syncs them; syncing the scratch
// copy first cost five to seven fsyncs an iteration that protected
// nothing (a task whose outputs are lost before the commit runs again).
var unsynced = &safetensors.WriteOptions{NoSync: true}

// Result is what an update reports.
type Result struct {
	Metrics Metrics
	// Advantages has one row per trajectory, in (prompt id, sample index)
	// order, masked rows saying why.
	Advantages []tables.Advantage
	// Values has PPO's per-token figures of each trained sample, in the
	// same order; nil without the critic.
	Values []tables.TokenValue
}

// Update takes one GRPO update on a batch: advantages within each
// prompt's group, then Epochs passes of Minibatches AdamW steps on the
// clipped surrogate (plus β·KL to the base model). Samples that failed,
// were not scored, have no token ids or (by default) belong to a group of
// equal rewards are left out. A batch with nothing left to train on takes
// no step. A non-finite loss, ratio or gradient fails the update with an
// error wrapping grpo.ErrNonFinite; the adapter must then be discarded
// (it may hold part of the update).
func (t *Trainer) Update(ctx context.Context, b Batch) (Result, error) {
	p, err := prepare(t.m, b, t.o)
	if err != nil {
		return Result{}, err
	}
	res := Result{Advantages: p.advantages}
	res.Metrics = batchMetrics(p)
	if len(p.samples) > 0 {
		steps, ppo, err := t.train(ctx, p.samples)
		if err != nil {
			return Result{}, err
		}
		res.Metrics.addSteps(steps, min(t.o.Minibatches, len(p.samples)))
		if ppo != nil {
			res.Values = ppo.valueRows(p.samples)
			res.Metrics.addPPO(steps, ppo.figures)
		}
	}
	if t.critic != nil {
		if res.Values == nil {
			res.Values = []tables.TokenValue{}
		}
		t.criticUpdates++
	}
	t.updates++
	res.Metrics.OptimizerSteps = t.tr.Steps()
	res.Metrics.Updates = t.updates
	return res, nil
}

func (t *Trainer) train(ctx context.Context, samples []sample) ([]StepMetrics, *ppoBatch, error) {
	examples := make([]tiny.Example, len(samples))
	for i, s := range samples {
		examples[i] = s.ex
	}
	// Samples without logprobs take them from the policy before the
	// update: exact for samples drawn on-policy; a stale one only gets
	// here with RescoreStale (prepare refuses it otherwise).
	var missing []int
	for i, s := range samples {
		if s.old == nil {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		sub := make([]tiny.Example, len(missing))
		for k, i := range missing {
			sub[k] = examples[i]
		}
		lp, _, err := t.policyModel().Score(ctx, t.ad, sub)
		if err != nil {
			return nil, nil, fmt.Errorf("score old logprobs: %w", err)
		}
		for k, i := range missing {
			samples[i].old = lp[k]
		}
	}
	var ref [][]float64
	if t.o.Beta > 0 {
		lp, _, err := t.m.Score(ctx, nil, examples)
		if err != nil {
			return nil, nil, fmt.Errorf("score reference logprobs: %w", err)
		}
		ref = make([][]float64, len(lp))
		for i, l := range lp {
			ref[i] = widen(l)
		}
	}
	var ppo *ppoBatch
	if t.critic != nil {
		var err error
		if ppo, err = t.ppoTargets(ctx, samples, examples, ref); err != nil {
			return nil, nil, err
		}
	}
	// During the critic's warm-up the policy takes no step.
	actor := t.critic == nil || t.criticUpdates >= t.o.Critic.Warmup
	lo := t.o.lossOptions()
	if ppo == nil && lo.Beta == 0 && lo.EntropyCoeff == 0 {
		// Every term of the loss is a multiple of the sample's
		// advantage: a sample of advantage 0 (a group whose rewards are
		// all equal, kept) gets a zero gradient, and the step skips its
		// backward pass, keeping every bit.
		for i, s := range samples {
			examples[i].NoGradient = s.advantage == 0
		}
	}
	var steps []StepMetrics
	M := min(t.o.Minibatches, len(samples))
	for epoch := 0; epoch < t.o.Epochs; epoch++ {
		for k := 0; k < M; k++ {
			from, to := k*len(samples)/M, (k+1)*len(samples)/M
			var sm StepMetrics
			if ppo != nil {
				cs, err := t.criticStep(ctx, samples, examples[from:to], ppo, from)
				if err != nil {
					return nil, nil, err
				}
				sm.CriticStep = &cs
			}
			if !actor {
				steps = append(steps, sm)
				continue
			}
			var ls grpo.LossStats
			loss := func(lps, ents, grad, gradEnt [][]float32) (float64, error) {
				seqs := make([]grpo.Sequence, len(lps))
				for i := range lps {
					s := samples[from+i]
					seqs[i] = grpo.Sequence{Logprobs: widen(lps[i]), OldLogprobs: s.old, Entropies: widen(ents[i]), Advantage: s.advantage, Trainable: s.trainable}
					if ref != nil {
						seqs[i].RefLogprobs = ref[from+i]
					}
					if ppo != nil {
						seqs[i].Advantages = ppo.adv[from+i]
					}
				}
				if t.poison && len(seqs) > 0 && len(seqs[0].Logprobs) > 0 {
					seqs[0].Logprobs[0] = math.NaN()
				}
				st, g, err := grpo.Gradient(seqs, lo)
				if err != nil {
					return 0, err
				}
				narrow(g.Logprobs, grad)
				narrow(g.Entropies, gradEnt) // an entropy bonus's; nil without

				ls = st
				return st.Loss, nil
			}
			ss, err := t.tr.StepEntropy(ctx, examples[from:to], loss)
			if err != nil {
				return nil, nil, fmt.Errorf("optimizer step %d (epoch %d, minibatch %d of %d): %w", t.tr.Steps()+1, epoch+1, k+1, M, err)
			}
			if math.IsNaN(ss.GradNorm) || math.IsInf(ss.GradNorm, 0) {
				return nil, nil, fmt.Errorf("optimizer step %d: gradient norm %g: %w; the adapter is corrupt", ss.Step, ss.GradNorm, grpo.ErrNonFinite)
			}
			sm.LossStats, sm.GradNorm = ls, ss.GradNorm
			steps = append(steps, sm)
		}
	}
	return steps, ppo, nil
}

// policyModel is the model the policy being trained runs on: the base
// model with the adapter, or the fully fine-tuned copy.
func (t *Trainer) policyModel() *tiny.Model {
	if t.fm != nil {
		return t.fm
	}
	return t.m
}

// narrow copies src into dst, row for row, as float32.
func narrow(src [][]float64, dst [][]float32) {
	for i, row := range src {
		for j, v := range row {
			dst[i][j] = float32(v)
		}
	}
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
