package tiny

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// PretrainConfig configures supervised warm-starting on addition.
type PretrainConfig struct {
	Model Config
	// Seed seeds the initial weights and the training problems.
	Seed uint64
	// Steps AdamW steps of BatchSize problems each, drawn with
	// TrainingProblem (so never held out).
	Steps     int
	BatchSize int
	// LR rises linearly over Warmup steps, then stays constant, so a run of
	// n steps is exactly the first n steps of a longer one.
	LR          float64
	Warmup      int
	WeightDecay float64
	ClipNorm    float64
	// Shards fixes the data-parallel split (see TrainConfig); Workers does
	// not change the result.
	Shards  int
	Workers int
	// ChainShare is the share of examples that are two-turn running sums,
	// "a+b=S⏎S+d=" with the completion S+d and EOS (ChainExample): text
	// after an EOS and at later positions, which multi-turn episodes
	// need. 0 (the shipped tiny-arith) draws single problems only.
	ChainShare float64
	// Family, when set, draws the examples from another task in place of
	// addition: FamilyBasicArithmetic draws RGTrainingProblem's
	// reasoning-gym questions (ChainShare is then ignored);
	// FamilyToolSum draws ToolTrainingExample.s episodes
	// (ToolExample), trained on their replies only. "" is addition.
	Family string
}

// DefaultPretrainConfig reproduces weights/base.safetensors byte for byte.
func DefaultPretrainConfig() PretrainConfig {
	return PretrainConfig{
		Model: DefaultConfig(), Seed: 1, Steps: 2250, BatchSize: 64,
		LR: 3e-3, Warmup: 100, WeightDecay: 0.01, ClipNorm: 1, Shards: 2,
	}
}

// ModelTinyChain names the shipped base pretrained for multi-turn episodes
// (weights/chain.safetensors, EmbeddedChain).
const ModelTinyChain = "tiny-chain"

// DefaultChainPretrainConfig reproduces weights/chain.safetensors byte for
// byte: the default pretraining with half of its examples two-turn
// running sums, named tiny-chain, 2 layers (tiny-arith has 3; tiny-chain
// was made with 2 and its multi-turn demo learns well from them), and
// 4,100 steps (where its two-turn episodes leave the agentic demo room to
// improve).
func DefaultChainPretrainConfig() PretrainConfig {
	c := DefaultPretrainConfig()
	c.Model.Name, c.Model.Layers, c.ChainShare, c.Steps = ModelTinyChain, 2, 0.5, 4100
	return c
}

// PretrainProgress reports a step of Pretrain.
type PretrainProgress struct {
	StepStats
	LR      float64
	Elapsed time.Duration
	// Model is the model being trained, valid during the callback only
	// (to evaluate it, say).
	Model *Model
}

// Pretrain trains a fresh model with plain NLL on the answer and EOS of
// "a+b=" problems (and, with ChainShare, of two-turn running sums). It is deterministic: the same config gives the same
// weights, byte for byte, whatever the number of workers. progress, if not
// nil, is called after every step.
func Pretrain(ctx context.Context, cfg PretrainConfig, progress func(PretrainProgress)) (*Model, error) {
	if cfg.Steps < 0 || cfg.BatchSize <= 0 {
		return nil, fmt.Errorf("pretrain: steps %d must be ≥ 0 and batch size %d positive", cfg.Steps, cfg.BatchSize)
	}
	if cfg.Family != "" && cfg.Family != FamilyBasicArithmetic && cfg.Family != FamilyToolSum {
		return nil, fmt.Errorf("pretrain: unknown family %q (use %q, %q, or none for addition)", cfg.Family, FamilyBasicArithmetic, FamilyToolSum)
	}
	if cfg.Family == FamilyBasicArithmetic && cfg.Model.Context < rgMinContext {
		// Otherwise no question fits and the draw never ends.
		return nil, fmt.Errorf("pretrain: family %s needs a context of at least %d, have %d", cfg.Family, rgMinContext, cfg.Model.Context)
	}
	m, err := New(cfg.Model, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	tr, err := NewTrainer(m, nil, TrainConfig{LR: cfg.LR, WeightDecay: cfg.WeightDecay, ClipNorm: cfg.ClipNorm, Shards: cfg.Shards, Workers: cfg.Workers})
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7072657472616e)) // "pretran"
	batch := make([]Example, cfg.BatchSize)
	loss, masks := NLL, make([][]bool, cfg.BatchSize)
	if cfg.Family == FamilyToolSum {
		loss = maskedNLL(masks)
	}
	start := time.Now()
	for step := 0; step < cfg.Steps; step++ {
		for i := range batch {
			if cfg.Family == FamilyToolSum {
				if batch[i], masks[i], err = m.ToolExample(ToolTrainingExample(rng)); err != nil {
					return nil, fmt.Errorf("pretrain: %w", err)
				}
				continue
			}
			if cfg.Family == FamilyBasicArithmetic {
				if batch[i], err = m.RGExample(RGTrainingProblem(rng, cfg.Model.Context)); err != nil {
					return nil, fmt.Errorf("pretrain: %w", err)
				}
				continue
			}
			p := TrainingProblem(rng)
			// A share of 0 draws nothing more: tiny-arith's stream of
			// problems is unchanged.
			if cfg.ChainShare > 0 && rng.Float64() < cfg.ChainShare {
				batch[i], err = m.ChainExample(p, 1+rng.IntN(9))
			} else {
				batch[i], err = m.Example(p)
			}
			if err != nil {
				return nil, fmt.Errorf("pretrain: %w", err)
			}
		}
		lr := cfg.LR
		if step < cfg.Warmup {
			lr = cfg.LR * float64(step+1) / float64(cfg.Warmup)
		}
		tr.SetLR(lr)
		st, err := tr.Step(ctx, batch, loss)
		if err != nil {
			return nil, fmt.Errorf("pretrain: step %d: %w", step+1, err)
		}
		if progress != nil {
			progress(PretrainProgress{StepStats: st, LR: lr, Elapsed: time.Since(start), Model: m})
		}
	}
	return m, nil
}
