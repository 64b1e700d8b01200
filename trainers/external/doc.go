// Package external is the train stage that runs a trainer outside rlpipe
// — a PyTorch/TRL/PEFT script on a GPU host, launched directly or through
// torchrun — behind a small file contract, so the loop around it (the
// store, the cache, resume, the rollout stages that load its adapters)
// stays the same as with the embedded trainer.
//
// # The contract
//
// For each iteration rlpipe computes the GRPO advantages itself
// (advantages.Join of the trajectories and rewards, as the embedded
// trainer), writes the hyperparameters as a JSON object, and runs
//
//	COMMAND... --trajectories P --advantages P --prompts P --hparams F \
//	    --adapter-out D --optimizer-out D --metrics-out F \
//	    [--adapter-in D [--optimizer-in D]] --iteration N --seed S
//
// The inputs are Parquet tables (artifacts/tables: trajectories,
// advantages, prompts). --adapter-in is the previous adapter as PEFT
// wrote it, --optimizer-in the optimizer state the trainer wrote to
// --optimizer-out last time; both are absent on the first iteration. The
// trainer writes a PEFT LoRA adapter (save_pretrained) to --adapter-out,
// whatever it needs to continue (optimizer.pt) to --optimizer-out, which
// exists and may stay empty, and a JSON object of figures to
// --metrics-out. Exit status 0 means done; 2, 65 and 78 mean retrying
// cannot help (ExitUsage, ExitDataErr, ExitConfig); anything else is
// retried as the task environment says.
//
// After a 0 exit the outputs are checked — the adapter must load as a
// PEFT LoRA directory (safetensors.ReadAdapterDir: names, ranks, shapes)
// with finite values, the metrics must be a JSON object — and a failure
// names the flag, the file and the tensor (ErrContract, not retried).
// The adapter output is the PEFT files with the optimizer state in an
// OptimizerDir subdirectory, which the next call splits apart again; the
// metrics output is the batch's Metrics with the trainer's keys laid over
// them.
//
// # PPO with a critic
//
// With hyperparameters.critic (and the gae estimator, checked when the
// run is planned) the trainer also gets --critic-out D and --values-out F,
// and --critic-in D from the policy's grpo.CriticDir when it has one; a
// later iteration's policy without one is refused unless critic.missing
// is fresh. The critic it writes must pass the adapter's checks plus a
// finite value head (ValueHeadFile) and becomes the adapter output's
// critic/; its per-token values are checked against the trained samples
// and written as the values output (tables.TokenValues). Options.GAE's γ
// and λ are written into the critic's hyperparameters.
//
// # Processes
//
// The command runs in its own process group with rlpipe's environment,
// Options.Env and RLPIPE_TRAINER_CONTRACT, RLPIPE_ITERATION, RLPIPE_SEED,
// PYTHONUNBUFFERED. Its output goes to the task's log at Debug level,
// line by line; the last lines of stderr go into an *ExitError. Values
// of secret-looking variables (HF_TOKEN, WANDB_API_KEY) are replaced by
// <redacted> in both, and Env values are never logged. When the call is
// cancelled or its timeout passes, the group gets SIGTERM (torchrun then
// stops its workers), SIGKILL after Options.KillGrace, and nothing of it
// outlives the call.
//
// # torchrun
//
// torchrun exits 1 whatever its workers did. When the output holds its
// report of a failed job, the *ExitError's Rank is the worker it blames
// (RankFailure: the rank, its exit status or signal, pid, host, its
// recorded traceback) with that worker's last lines, picked out by the
// "[rankN]:" prefix the reference script writes under torchrun; the
// worker's status, not torchrun's, decides whether to retry. Package
// torchtest runs the reference script for real, alone and under
// torchrun, when the project's venv is there.
//
// docs/TRAINERS.md is the full contract, with the reference script
// trainers/python/grpo_train.py and how to run it on one GPU host or on
// several with torchrun.
package external
