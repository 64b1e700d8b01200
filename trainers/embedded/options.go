package embedded

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/rlpipe/rlpipe/advantages"
	"github.com/rlpipe/rlpipe/pipeline"
	"github.com/rlpipe/rlpipe/policy/tiny"
	"github.com/rlpipe/rlpipe/trainers/grpo"
)

// CodeVersion is the trainer code's version. It enters every train task's
// Version, so bump it when the same inputs and options would train a
// different adapter or write different outputs (2: kl is null, not 0,
// when β = 0 leaves it uncomputed; 3: episodes train on their trainable
// tokens, and a prompt's assistant messages are followed by EOS; 4: the
// advantages a call without the advantages input computes divide by the
// sample std, the default since issue 36).
const CodeVersion = "grpo-embedded-4"

// Defaults of Options, chosen on the embedded model (see doc.go for the
// measurements behind them).
const (
	DefaultLR          = 1e-3
	DefaultClipNorm    = 1.0
	DefaultEpochs      = 1
	DefaultMinibatches = 1
	DefaultShards      = 2
	DefaultRank        = 8
	DefaultAlpha       = 16
	DefaultLoRASeed    = 1
)

// Options are the trainer's hyperparameters. The zero value means the
// defaults; EnsureDefaults fills them in and Validate checks the result.
// Options marshal to JSON (the field names below), and every field enters
// the train task's Version, so changing one invalidates cached training.
type Options struct {
	// LR is AdamW's learning rate (default 1e-3, constant). On the
	// embedded model 1e-3 climbs as fast as 2e-3 and more steadily.
	LR float64 `yaml:"lr,omitempty" json:"lr"`
	// WeightDecay is AdamW's decoupled weight decay on the LoRA factors
	// (default 0).
	WeightDecay float64 `yaml:"weight_decay,omitempty" json:"weight_decay"`
	// ClipNorm clips the gradient's global L2 norm (default 1; a negative
	// value turns clipping off).
	ClipNorm float64 `yaml:"clip_norm,omitempty" json:"clip_norm"`
	// Epochs is how many passes an update makes over its batch (default 1).
	Epochs int `yaml:"epochs,omitempty" json:"epochs"`
	// Minibatches splits the batch into that many optimizer steps per
	// epoch (default 1: the whole batch in one step, from the adapter
	// the update starts with).
	// Samples are cut in (prompt id, sample index) order, so a group
	// stays together.
	Minibatches int `yaml:"minibatches,omitempty" json:"minibatches"`
	// EpsLow and EpsHigh clip the ratio to [1−EpsLow, 1+EpsHigh]
	// (default 0.2 each; DAPO's clip-higher is EpsHigh 0.28). With one
	// minibatch and one epoch the ratio is 1 and clipping idle only
	// on-policy (overlap.max_staleness 0, the embedded sampler); with
	// the shipped max_staleness 1 it is not: see the package doc for the
	// measured clip fractions and ratio_max.
	EpsLow  float64 `yaml:"eps_low,omitempty" json:"eps_low"`
	EpsHigh float64 `yaml:"eps_high,omitempty" json:"eps_high"`
	// DualClip, when set, is dual-clip PPO's c (> 1; 3 is usual): a
	// token with a negative advantage and a ratio above c adds −c·A to
	// the loss, with no gradient, so a stale sample whose ratio ran away
	// cannot push the policy without bound. 0 (default) is off; it enters
	// the version only when set.
	DualClip float64 `yaml:"dual_clip,omitempty" json:"dual_clip,omitempty"`
	// Beta weighs the KL to the base model (the adapter off); default
	// 0, which also skips scoring the batch with the base model.
	Beta float64 `yaml:"beta,omitempty" json:"beta"`
	// KLEstimator is the per-token KL estimate Beta weighs: k3 (default,
	// e^δ − δ − 1), k1 (−δ) or k2 (½δ²), δ = logπ_ref − logπ; verl's
	// low_var_kl, kl and mse name the same. It enters the version only
	// when it names another than k3.
	KLEstimator grpo.KLEstimator `yaml:"kl_estimator,omitempty" json:"kl_estimator,omitempty"`
	// EntropyCoeff, when positive, is an entropy bonus: the loss loses
	// c·H per trainable token (H the adapter's entropy there),
	// aggregated like the rest of the loss, as verl's entropy_coeff. 0
	// (default) is off; it enters the version only when set.
	EntropyCoeff float64 `yaml:"entropy_coeff,omitempty" json:"entropy_coeff,omitempty"`
	// Aggregation is "token" (default: every token of the batch weighs
	// the same, DAPO), "sequence" (each completion's mean, then the
	// batch's: the original GRPO) or "seq_mean_token_sum_norm" (each
	// completion's sum, averaged, over the longest completion: Dr.
	// GRPO). verl's token_mean and seq_mean_token_mean are the first two.
	Aggregation grpo.Aggregation `yaml:"aggregation,omitempty" json:"aggregation"`
	// Loss names the policy loss: ppo_clip (default, the clipped
	// surrogate), gspo, cispo or reinforce (docs/TRAINERS.md), a name of the
	// registry's Losses. It enters the version only when it names
	// another loss than ppo_clip.
	Loss string `yaml:"loss,omitempty" json:"loss,omitempty"`
	// PolicyLoss is the loss Loss names: the grpo stage looks it up in
	// the registry; a program calling Task itself sets it (grpo.GSPO).
	// Nil is grpo.PPOClip.
	PolicyLoss grpo.PolicyLoss `yaml:"-" json:"-"`
	// NoStd drops the division of advantages by the group's standard
	// deviation: Dr. GRPO's advantage (Dr. GRPO with Aggregation
	// seq_mean_token_sum_norm, its loss normaliser).
	NoStd bool `yaml:"no_std,omitempty" json:"no_std"`
	// KeepZeroStd keeps groups whose rewards are all equal in the batch.
	// Their advantages are 0, so they only dilute a token-mean loss and
	// add KL terms; by default they are dropped (masked with the reason
	// "zero reward variance"), as DAPO's dynamic sampling does.
	KeepZeroStd bool `yaml:"keep_zero_std,omitempty" json:"keep_zero_std"`
	// RescoreStale lets a sample with staleness > 0 and no logprobs
	// (a server that returned none) be rescored with the trainer's
	// adapter before the update. That adapter is N−1 while N−1−s sampled
	// it, so the ratio is anchored on a policy that did not sample and
	// the staleness correction is gone; by default such a sample fails
	// the update (ErrStaleNoLogprobs). It enters the version only when
	// set.
	RescoreStale bool `yaml:"rescore_stale,omitempty" json:"rescore_stale,omitempty"`
	// Critic, when set, trains PPO's critic beside the policy and trains
	// the policy on GAE's per-token advantages (ppo.go,
	// docs/TRAINERS.md); it needs GAE. It enters the version only when
	// set.
	Critic *CriticOptions `yaml:"critic,omitempty" json:"critic,omitempty"`
	// KLInReward moves the KL to the base model from the loss into PPO's
	// per-token rewards: −Beta·(logπ_old − logπ_ref) on every trainable
	// token. It needs GAE, and enters the version only when set.
	KLInReward bool `yaml:"kl_in_reward,omitempty" json:"kl_in_reward,omitempty"`
	// GAE is PPO's estimator, set from the advantages section
	// (estimator: gae) by the grpo stage; nil trains on the advantages
	// table's sequence advantages. It enters the version only when set.
	GAE *GAEOptions `yaml:"-" json:"gae,omitempty"`
	// RolloutIS, RolloutISThreshold, RolloutRS, RolloutRSThreshold and
	// RolloutRSThresholdLower are verl's rollout correction under its
	// names (grpo.RolloutCorrection; docs/TRAINERS.md): truncated IS
	// weights (token or sequence, capped at the threshold, default 2)
	// and rejection of the tokens or sequences whose statistic leaves
	// the bounds. The embedded trainer anchors on the sampler's logprobs
	// (verl's bypass mode), so the IS weights are reported, not applied
	// (the ratio already is the weight), except to loss reinforce, which
	// has no ratio (verl's bypass_pg_is); the rejection masks. Each
	// enters the version only when set.
	RolloutIS               string  `yaml:"rollout_is,omitempty" json:"rollout_is,omitempty"`
	RolloutISThreshold      float64 `yaml:"rollout_is_threshold,omitempty" json:"rollout_is_threshold,omitempty"`
	RolloutRS               string  `yaml:"rollout_rs,omitempty" json:"rollout_rs,omitempty"`
	RolloutRSThreshold      float64 `yaml:"rollout_rs_threshold,omitempty" json:"rollout_rs_threshold,omitempty"`
	RolloutRSThresholdLower float64 `yaml:"rollout_rs_threshold_lower,omitempty" json:"rollout_rs_threshold_lower,omitempty"`
	// LoRA shapes the adapter created on the first iteration (when the
	// train stage gets no policy input). A policy input keeps its own
	// shape.
	LoRA LoRAOptions `yaml:"lora,omitempty" json:"lora"`
	// MaxShardSize, with lora: none, is the size in bytes above which the
	// full weights are written as shards and model.safetensors.index.json
	// (default 2 GiB, rlpipe's choice; transformers' save_pretrained has the same option). It enters the
	// version only when set.
	MaxShardSize int64 `yaml:"max_shard_size,omitempty" json:"max_shard_size,omitempty"`
	// Shards is the number of parts each step's batch is split into for
	// data parallelism (default 2). Results depend on it, not on the
	// number of cores.
	Shards int `yaml:"shards,omitempty" json:"shards"`
}

// LoRAOptions shape a new adapter. Written as the scalar none (lora:
// none) they turn LoRA off: full fine-tuning of every weight.
type LoRAOptions struct {
	// None trains every weight of the model instead of an adapter: the
	// train output is then a full Hugging Face model directory
	// (docs/TRAINERS.md). It enters the version only when set.
	None bool `yaml:"-" json:"none,omitempty"`
	// Rank (default 8) and Alpha (default 16): the update is (α/r)·B·A.
	Rank  int     `yaml:"rank,omitempty" json:"rank"`
	Alpha float64 `yaml:"alpha,omitempty" json:"alpha"`
	// Targets are the adapted module names (nil: all linears, q_proj,
	// k_proj, v_proj, o_proj, gate_proj, up_proj and down_proj).
	Targets []string `yaml:"targets,omitempty" json:"targets,omitempty"`
	// Seed initialises A (default 1).
	Seed uint64 `yaml:"seed,omitempty" json:"seed"`
}

// LoRANone is the keyword of lora: none.
const LoRANone = "none"

// Keywords are the scalars lora takes besides its keys (kind.Keyworded).
func (*LoRAOptions) Keywords() []string { return []string{LoRANone} }

// UnmarshalYAML decodes lora: none, or lora's keys.
func (l *LoRAOptions) UnmarshalYAML(unmarshal func(any) error) error {
	var v any
	if err := unmarshal(&v); err != nil {
		return err
	}
	if s, ok := v.(string); ok {
		if s != LoRANone {
			return fmt.Errorf("lora: %q is not a keyword it takes; write lora: none for full fine-tuning, or its keys (rank, alpha, targets, seed)", s)
		}
		*l = LoRAOptions{None: true}
		return nil
	}
	type plain LoRAOptions
	return unmarshal((*plain)(l))
}

// MarshalYAML writes lora: none back as the keyword, so the effective
// config a run records parses to the same options.
func (l LoRAOptions) MarshalYAML() (any, error) {
	if l.None {
		return LoRANone, nil
	}
	type plain LoRAOptions
	return plain(l), nil
}

// EnsureDefaults fills in the zero fields.
func (o *Options) EnsureDefaults() {
	o.LR = cmp.Or(o.LR, DefaultLR)
	o.ClipNorm = cmp.Or(o.ClipNorm, DefaultClipNorm)
	o.Epochs = cmp.Or(o.Epochs, DefaultEpochs)
	o.Minibatches = cmp.Or(o.Minibatches, DefaultMinibatches)
	o.EpsLow = cmp.Or(o.EpsLow, 0.2)
	o.EpsHigh = cmp.Or(o.EpsHigh, 0.2)
	o.Aggregation = cmp.Or(o.Aggregation, grpo.TokenMean).Canonical()
	if o.KLEstimator = o.KLEstimator.Canonical(); o.KLEstimator == grpo.K3 {
		o.KLEstimator = "" // the default keeps the default's version
	}
	if o.Loss == "" && o.PolicyLoss != nil {
		o.Loss = o.PolicyLoss.Name()
	}
	if o.Loss == grpo.PPOClip.Name() {
		o.Loss = "" // the default keeps the default's version
	}
	c := o.rolloutCorrection()
	c.EnsureDefaults()
	o.RolloutISThreshold, o.RolloutRSThresholdLower = c.ISThreshold, c.RSThresholdLower
	o.Shards = cmp.Or(o.Shards, DefaultShards)
	o.LoRA.Rank = cmp.Or(o.LoRA.Rank, DefaultRank)
	o.LoRA.Alpha = cmp.Or(o.LoRA.Alpha, DefaultAlpha)
	o.LoRA.Seed = cmp.Or(o.LoRA.Seed, DefaultLoRASeed)
	o.Critic.ensureDefaults(o.LR)
}

// Validate reports the first option that cannot work, naming its JSON
// key.
func (o Options) Validate() error {
	bad := func(key string, format string, args ...any) error {
		return &OptionError{Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !(o.LR > 0) || !finite(o.LR):
		return bad("lr", "%g; it must be positive (try 1e-3)", o.LR)
	case o.WeightDecay < 0 || !finite(o.WeightDecay):
		return bad("weight_decay", "%g; it must be ≥ 0", o.WeightDecay)
	case !finite(o.ClipNorm):
		return bad("clip_norm", "%g; it must be finite (negative turns clipping off)", o.ClipNorm)
	case o.Epochs < 1:
		return bad("epochs", "%d; it must be ≥ 1", o.Epochs)
	case o.Minibatches < 1:
		return bad("minibatches", "%d; it must be ≥ 1", o.Minibatches)
	case !(o.EpsLow > 0 && o.EpsLow < 1):
		return bad("eps_low", "%g; it must be in (0, 1)", o.EpsLow)
	case o.EpsHigh <= 0 || !finite(o.EpsHigh):
		return bad("eps_high", "%g; it must be positive", o.EpsHigh)
	case o.DualClip != 0 && !(o.DualClip > 1 && finite(o.DualClip)):
		return bad("dual_clip", "%g; it must be above 1 (3 is usual), or 0 for off", o.DualClip)
	case o.Beta < 0 || !finite(o.Beta):
		return bad("beta", "%g; it must be ≥ 0 (0.0–0.04 is typical)", o.Beta)
	case !o.KLEstimator.Known():
		return bad("kl_estimator", "%q; use k1, k2 or k3 (verl's kl, mse or low_var_kl)", o.KLEstimator)
	case o.EntropyCoeff < 0 || !finite(o.EntropyCoeff):
		return bad("entropy_coeff", "%g; it must be ≥ 0 (0 is off; 0.001–0.01 is typical)", o.EntropyCoeff)
	case o.DualClip != 0 && o.Loss != "":
		return bad("dual_clip", "%g; dual clip applies to loss ppo_clip only, not %s (remove dual_clip or the loss)", o.DualClip, o.Loss)
	case !slices.Contains(grpo.Aggregations, o.Aggregation):
		return bad("aggregation", "%q; use %q, %q or %q", o.Aggregation, grpo.TokenMean, grpo.SequenceMean, grpo.SeqMeanTokenSumNorm)
	case o.Loss != "" && (o.PolicyLoss == nil || o.PolicyLoss.Name() != o.Loss):
		return bad("loss", "%q has no policy loss of that name set beside it; set PolicyLoss to it (grpo.GSPO, grpo.CISPO)", o.Loss)
	case o.Shards < 1:
		return bad("shards", "%d; it must be ≥ 1", o.Shards)
	case o.rolloutCorrection().Check() != nil:
		e := o.rolloutCorrection().Check()
		return bad(e.Key, "%s", e.Msg)
	case o.MaxShardSize < 0:
		return bad("max_shard_size", "%d; it must be a positive number of bytes (default 2 GiB)", o.MaxShardSize)
	case o.MaxShardSize > 0 && !o.LoRA.None:
		return bad("max_shard_size", "%d; it applies to full weights only: set lora: none, or remove it", o.MaxShardSize)
	case o.LoRA.None && o.Critic != nil:
		return bad("critic", "PPO's critic is a LoRA adapter of the policy adapter's shape, and lora is none: remove lora: none or the critic")
	case o.LoRA.Rank < 1:
		return bad("lora.rank", "%d; it must be ≥ 1", o.LoRA.Rank)
	case !(o.LoRA.Alpha > 0) || !finite(o.LoRA.Alpha):
		return bad("lora.alpha", "%g; it must be positive", o.LoRA.Alpha)
	}
	return o.validatePPO()
}

// OptionError is an option that cannot work: Key is its key ("lora.rank").
type OptionError struct{ Key, Msg string }

func (e *OptionError) Error() string { return ErrOptions.Error() + ": " + e.Key + ": " + e.Msg }

// Unwrap makes it an ErrOptions.
func (e *OptionError) Unwrap() error { return ErrOptions }

// trainConfig is the AdamW configuration of the options.
func (o Options) trainConfig() tiny.TrainConfig {
	return tiny.TrainConfig{LR: o.LR, WeightDecay: o.WeightDecay, ClipNorm: max(o.ClipNorm, 0), Shards: o.Shards}
}

func (o Options) lossOptions() grpo.LossOptions {
	lo := grpo.LossOptions{EpsLow: o.EpsLow, EpsHigh: o.EpsHigh, Beta: o.Beta, KL: o.KLEstimator, EntropyCoeff: o.EntropyCoeff,
		Aggregation: o.Aggregation, DualClip: o.DualClip, Policy: o.PolicyLoss, Correction: o.rolloutCorrection()}
	if o.KLInReward {
		lo.Beta = 0 // the KL is in PPO's rewards instead
	}
	return lo
}

// rolloutCorrection is the rollout correction the options ask for.
func (o Options) rolloutCorrection() grpo.RolloutCorrection {
	return grpo.RolloutCorrection{IS: o.RolloutIS, ISThreshold: o.RolloutISThreshold, RS: o.RolloutRS,
		RSThreshold: o.RolloutRSThreshold, RSThresholdLower: o.RolloutRSThresholdLower}
}

// Version is the train task's version for a base model: CodeVersion and a
// digest of the options (defaults applied) and of the model's version.
// It fails on options JSON cannot hold (a NaN), which Validate rejects.
func (o Options) Version(m *tiny.Model) (string, error) {
	o.EnsureDefaults()
	v, err := pipeline.CodeDigest(CodeVersion, struct {
		Code    string  `json:"code"`
		Model   string  `json:"model"`
		Options Options `json:"options"`
	}{CodeVersion, m.Version(), o})
	if err != nil {
		return "", fmt.Errorf("train task version: encode the options: %w", err)
	}
	return v, nil
}

// advantages are the options of the advantages the trainer trains on.
func (o Options) advantages() advantages.TrainOptions {
	to := advantages.TrainOptions{Options: advantages.Options{NoStd: o.NoStd}, KeepZeroStd: o.KeepZeroStd}
	if o.GAE != nil {
		to.Estimator, to.Gamma, to.Lambda = advantages.GAEEstimator, o.GAE.Gamma, o.GAE.Lambda
	}
	return to
}
