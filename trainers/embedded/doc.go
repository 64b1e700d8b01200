// Package embedded trains the embedded policy (policy/tiny) with GRPO: it
// is the train stage of an RL loop whose generate stage samples the tiny
// model, and a Trainer usable outside a pipeline.
//
// # One update
//
// An RL iteration hands the trainer its prompts, the trajectories sampled
// for them (G per prompt, with token ids and log-probabilities) and their
// rewards. Trainer.Update then
//
//  1. joins the three tables by prompt id and sample index and computes
//     group-relative advantages A = (r − mean) / (std + ε) within each
//     prompt's group, std the sample std (package advantages; the
//     advantages section's std: population divides by the population
//     std; Options.NoStd drops the division: Dr. GRPO's advantage, which
//     with Aggregation seq_mean_token_sum_norm is Dr. GRPO). A
//     trajectory that failed (status other than ok) or has no reward is
//     masked and stays out of its group's statistics — it is never
//     trained on as a reward of 0. By default groups whose rewards are
//     all equal are left out too: their advantages are 0.
//  2. rebuilds each kept sample as a tiny.Example: the prompt text
//     tokenized as the sampler tokenized it, and the sampled token ids,
//     the final EOS included, at the temperature T its sampler column
//     records (1 when it records none): the policy trained is the
//     tempered one, logπ = log softmax(z/T), which is what sampled, and
//     the gradient flows through z/T (a row sampled with top_p below 1
//     fails the update: ErrBatch). The trajectories' log-probabilities
//     are the old policy's: the behaviour policy's, of softmax(z/T),
//     whichever adapter sampled, so ρ keeps the staleness correction. A sample without them is rescored
//     with the adapter before the update, which is exact on-policy only: a
//     stale one (staleness > 0) fails the update with ErrStaleNoLogprobs
//     unless Options.RescoreStale accepts it; with Options.Beta > 0
//     the base model (adapter off) scores the batch once for the KL term,
//     at each row's temperature too.
//  3. takes Epochs × Minibatches AdamW steps on the LoRA factors (the base
//     stays frozen and may be shared with samplers), each minimising the
//     clipped surrogate −min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A) + β·KL
//     (or Options.Loss's policy term, GSPO's or CISPO's, in its place;
//     the KL estimator is Options.KLEstimator, k3 by default) minus
//     Options.EntropyCoeff times the entropy (a bonus, off by default),
//     averaged over tokens (default) or sequences, or Dr. GRPO's
//     sequence sums over the longest completion. With Options.RolloutRS
//     set, verl's rejection drops the tokens or completions whose ratio
//     to the sampler leaves its bounds from the loss; Options.RolloutIS
//     reports truncated IS weights (verl's bypass mode: the ratio already
//     is the weight, so they are not applied, except to the Reinforce
//     loss, which has no ratio). The loss's gradient with respect to each
//     token's log-probability (and, with the bonus, its entropy) is
//     handed to tiny.Trainer, which backpropagates it.
//
// A NaN or infinite loss, ratio or gradient fails the update with an
// error wrapping grpo.ErrNonFinite; the train stage marks it
// pipeline.Permanent (the same inputs would fail again), so the loop
// stops with the previous iteration's adapter still the run's latest.
//
// # Episodes
//
// A multi-turn episode (a trajectories row with sequence_ids and
// trainable) trains as one sequence: the tokens before its first
// trainable one are its prompt, and the loss and the KL are taken over
// its trainable tokens only — the replies the policy sampled, never the
// observations between them — with the episode's advantage (one per
// episode, group-normalised over the prompt's G episodes). A one-turn
// episode trains exactly as the single-turn sample of the same tokens
// (TestOneTurnEpisodeTrainsAsItsSample). A mask that does not mark
// exactly the replies' token ids fails the update (ErrBatch) naming the
// episode; an episode without an exact sequence is masked by advantages.Join
// (advantages.ReasonNoSequence).
//
// # The adapter directory
//
// The stage's adapter output is a PEFT adapter directory that vLLM, PEFT
// and the tiny policy load as is, plus two files they ignore:
//
//	adapter_config.json          PEFT config (r, lora_alpha, target_modules)
//	adapter_model.safetensors    lora_A / lora_B of every adapted linear
//	optimizer.safetensors        AdamW: step count, both moments, the factors
//	trainer_state.json           State: base model, steps, updates, options
//
// With lora: none (LoRAOptions.None, full fine-tuning) the trainer trains
// every weight of a copy of the model, and the same output is a Hugging
// Face model directory instead, as tiny.Model.ExportHFSharded writes it
// (config.json, generation_config.json, the tokenizer files,
// model.safetensors or shards above Options.MaxShardSize and
// model.safetensors.index.json), with optimizer.safetensors (the weights
// and both moments) and trainer_state.json beside it. A trainer continues
// only the kind it trains (ErrCheckpointKind). docs/TRAINERS.md has the
// measurements.
//
// The next iteration's train stage receives this directory as its policy
// input and continues from it, moments included, so a run stopped after
// iteration k and resumed ends with the same bytes as a run that never
// stopped. An adapter from elsewhere (Loop's InitialPolicy, a PEFT
// directory without optimizer.safetensors) starts with fresh moments.
// Every output is a function of the inputs and the options alone —
// metrics hold no timings — and the task is Deterministic, so a repeated
// call is a cache hit. The stage writes straight into its output paths:
// the engine uploads them only after the call returns nil, so an attempt
// that crashes half way leaves nothing in the store, and its retry starts
// over from the same policy input.
//
// # Outputs of a train call
//
//	iterations/NNNNNN/adapter/            the directory above
//	iterations/NNNNNN/train_metrics.json  Metrics
//	iterations/NNNNNN/advantages.parquet  tables.Advantages, one row per trajectory
//	iterations/NNNNNN/values.parquet      PPO's per-token values (with the critic)
//
// In a pipeline the loop's advantages step (advantages.TrainTask) writes
// advantages.parquet before the train call, which reads it as its
// "advantages" input and trains on those rows; used as a task on its
// own, the train call computes and writes them itself.
//
// Metrics carry what the strongest RL frameworks log: loss, policy loss,
// KL, entropy, clip fractions (low/high), mean |ρ−1|, gradient norm and
// tokens per step; the train/inference mismatch before the update
// (mismatch_kl, the k3 KL from the sampler's logprobs, and ratio_max) and,
// when set, the rollout correction's (rollout_is_mean, rollout_is_max,
// rollout_is_capped_frac, rollout_rs_masked_frac,
// rollout_rs_seq_masked_frac); reward mean/std/min/max in total and per component;
// frac_reward_zero_std (of the groups with two or more scored samples;
// null under n: 1); samples used, masked (by reason) and errored;
// response length mean/max and the fraction stopped by max_tokens; mean
// staleness. Training speed is left out on purpose (BenchmarkUpdate
// measures it; the engine's events/NNNNNN.metrics.json hold the stage's
// seconds).
//
// # PPO
//
// With Options.Critic (trainer.critic) and Options.GAE (advantages:
// {estimator: gae}) the trainer runs PPO: a critic — a second LoRA
// adapter of the policy's shape and a value head on the final norm's
// output (tiny.Critic) — values every completion token once before the
// update; the sample's reward on its last trainable token (with
// KLInReward, −β·(logπ_old − logπ_ref) on each) becomes GAE's
// advantages and returns over the trainable tokens, carrying across an
// episode's observations; the advantages are whitened over the batch and
// replace the sequence's advantage in the policy loss, while the critic
// takes an AdamW step of its own on verl's clipped value loss on the same
// minibatch. The critic is saved under the adapter directory's CriticDir
// (a PEFT adapter, value_head.safetensors, its optimizer state); a later
// iteration's adapter without it fails with ErrNoCritic unless
// CriticOptions.Missing is MissingFresh. The update also returns the
// values table (Result.Values, written as values.parquet) and PPO's
// metrics (PPOFigures). docs/TRAINERS.md has the formulas and the
// measurements: on the demo's configuration with one sample per prompt,
// where GRPO trains on nothing, PPO takes the held-out exact pass@1 from
// 0.3129 to 0.6868 in 60 iterations (GRPO with 8: 0.7432; PPO with 8:
// 0.7478); TestPPOLearnsWithOneSample pins a shorter run.
//
// # Defaults, and what they do on the embedded model
//
// LoRA r 8, α 16 on every linear (q, k, v, o, up, down), seed 1; AdamW lr
// 1e-3, no weight decay, gradient clipped to norm 1; one epoch of one
// minibatch; ε 0.2/0.2; β 0 (no reference pass); token-mean aggregation;
// std-normalised advantages; zero-variance groups dropped.
//
// One epoch of one minibatch makes ρ exactly 1, and clipping idle, only
// on-policy (overlap.max_staleness 0, the embedded sampler, whose
// numerics are the trainer's), at any temperature: the sampler records
// log softmax(z/T) and the trainer scores at the row's T (at T 1.2,
// ignoring T would show mismatch_kl 0.0068 and ratio_max 1.061 on
// policy-fresh samples; docs/TRAINERS.md, The tempered policy). Every shipped example runs with
// max_staleness 1: iteration N trains adapter N−1 on samples of adapter
// N−2, so ρ moves and clipping acts. Measured from the train metrics on
// a 30-iteration run of examples/arithmetic (its pipeline.yaml with
// iterations 30 and no eval; lr 2e-3): in iterations 2–30 the clipped
// fraction of tokens (clip_frac_low + clip_frac_high) ranged 0–17.0%
// (median 1.8%, 0 in 5 iterations), ratio_max 1.12–3.24 (3.24 in
// iteration 3), mismatch_kl 0.0002–0.055 (median 0.0022); iteration 1,
// on-policy, had ρ = 1 on every token.
//
// Measured with the earlier shipped weights (a GPT-style model of 1,800
// steps, before tiny became a Llama) through a real loop (the rollout
// stage sampling 8 completions at temperature 1, at most 5 tokens, an
// exact-answer reward), 16 prompts an iteration, the exact expected
// pass@1 on tiny.HeldOutProblems(500) (base 0.4470) gains, in points, the
// range over run seeds (1–8 up to 50 iterations, 1–3 at 100, 1–2 at 200):
//
//	iterations        10         20         30         50         100          200
//	lr 1e-3           +3.3–4.6   +5.7–7.2   +6.7–7.7   +8.2–9.4   +10.6–11.2   +12.0–12.8
//	lr 2e-3           +2.0–3.8   +7.3–8.1   +5.5–7.1   +6.5–9.1   +9.6–10.7
//
// At 100 iterations with lr 1e-3, β 0.04 (+11.0–11.3), keeping
// zero-variance groups (+10.6–10.8) and sequence aggregation
// (+11.0–11.1) do no better than the defaults, so β stays 0 and saves the
// reference pass (about 15% of an update). The table is the earlier
// GPT-style model's. With the 2-layer Llama (2,700 steps, held-out pass@1
// 0.2388) the demo's 60 iterations at lr 2e-3 gained +8.2 points and no
// setting passed +8.6 (docs/ROLLOUTS.md); with today's 3-layer base
// (2,250 steps, 0.3129) they gain +44.1 with the sample std (+43.0, and
// +43.3 at lr 1e-3, with the population std before issue 36).
//
// An iteration of the whole loop (sample, generate, reward, train,
// commit to a local store) takes 0.13–0.17 s on two otherwise idle cores:
// 50 iterations — past 8 points on every seed tried — take 7–9 s (about
// 20 s with other work on the machine). TestLearns pins a 20-iteration
// run (0.3295 → 0.7008 on 200 held-out problems); RLPIPE_SLOW=1 go test
// -run TestExplore reproduces the table (see its environment variables).
// BenchmarkUpdate measures an update of 16 × 8 samples.
package embedded
