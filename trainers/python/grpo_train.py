#!/usr/bin/env python3
"""GRPO with a LoRA adapter: rlpipe's reference external trainer.

rlpipe's external train stage (trainers/external, docs/TRAINERS.md) runs
this script once per RL iteration as

    grpo_train.py --trajectories P --advantages P --prompts P --hparams F \
        --adapter-out D --optimizer-out D --metrics-out F \
        [--adapter-in D [--optimizer-in D]] --iteration N --seed S

and the script takes one GRPO update of the policy's LoRA adapter:

  * it reads the iteration's Parquet tables (pyarrow): the advantages rlpipe
    computed (rows with mask=true are skipped), the sampled completions'
    token ids and old log-probabilities (rows whose status is not "ok" are
    skipped), and the prompts, tokenized with the model's chat template when
    a prompt has messages;
  * it loads the base model (transformers) with the previous adapter
    (peft, --adapter-in) or a fresh one, and AdamW's state (--optimizer-in);
  * for `epochs` passes over the batch, cut into minibatches of
    `minibatch_size` sequences (one optimizer step each), it minimises the
    clipped surrogate (or GSPO's, or CISPO's) plus beta times a KL
    estimate (k3 by default, k1 or k2) to the base model (the adapter
    disabled), minus entropy_coeff times the policy's entropy (an entropy
    bonus, off by default), aggregated per token, per sequence or as
    sequence sums over a constant (Dr. GRPO's), with gradient-norm
    clipping;
  * it writes the adapter with save_pretrained (--adapter-out), the
    optimizer and RNG states with torch.save (--optimizer-out/optimizer.pt)
    and a JSON object of figures (--metrics-out).

With hyperparameters.lora "none" it fine-tunes every weight instead: the
model loads from --adapter-in (a previous full-weights checkpoint) or
base_model, and --adapter-out receives a whole Hugging Face model
directory (save_pretrained, sharded above max_shard_size bytes, with the
tokenizer files), which vLLM and transformers load as it is.

With hyperparameters.critic the update is PPO's instead (ppo_critic.py,
beside this file): a LoRA critic with a value head on the same base, GAE
advantages per token, the clipped value loss, and the flags --critic-in D,
--critic-out D and --values-out F (README.md).

Under torchrun (WORLD_SIZE > 1) every process trains its share of each
minibatch under DistributedDataParallel. One process reads the inputs and
broadcasts them (the lowest rank that can see --hparams, so only the node
rlpipe runs on needs the work directory) and the same process writes the
outputs while the others wait at a barrier.

Exit statuses follow the contract: 0 done, 78 invalid hyperparameters,
65 a batch that cannot be trained on (inconsistent tables, a non-finite
gradient), 2 unparseable flags (argparse); rlpipe retries anything else.

Requirements: python >= 3.10, torch >= 2.3, transformers >= 4.43,
peft >= 0.12, pyarrow >= 14, safetensors. See README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import math
import os
import random
import sys
import time
from typing import Any

import ppo_critic

CONTRACT = 1
EXIT_DATAERR = 65
EXIT_CONFIG = 78
STATE_FORMAT = "rlpipe-grpo-torch/1"
OPTIMIZER_FILE = "optimizer.pt"
STATE_FILE = "trainer_state.json"

# Hyperparameters and their defaults. Names follow rlpipe's embedded
# trainer (trainers/embedded) where the two share a knob.
DEFAULTS: dict[str, Any] = {
    "base_model": None,  # required: a Hugging Face id or a local path
    "lora": {
        "rank": 16,
        "alpha": 32,
        "dropout": 0.0,
        "targets": ["q_proj", "k_proj", "v_proj", "o_proj"],
    },
    "lr": 1e-5,
    "betas": [0.9, 0.999],
    "weight_decay": 0.0,
    "clip_norm": 1.0,  # max gradient L2 norm; <= 0 turns clipping off
    "epochs": 1,
    "minibatch_size": 0,  # sequences per optimizer step; 0 = the whole batch
    "micro_batch_size": 4,  # sequences per forward pass on each process
    "eps_low": 0.2,
    "eps_high": 0.2,  # DAPO's clip-higher: 0.28
    "beta": 0.0,  # weight of the KL to the base model
    "kl_estimator": "k3",  # k1 (-δ), k2 (δ²/2) or k3 (e^δ - δ - 1), δ = logπ_ref - logπ; verl's kl, mse, low_var_kl
    "entropy_coeff": 0.0,  # entropy bonus: minus this times the entropy per token; 0 = off
    "dual_clip": 0.0,  # dual-clip PPO's c (> 1, e.g. 3) for negative advantages; 0 = off
    "aggregation": "token",  # "sequence" or "seq_mean_token_sum_norm" (verl's token_mean, seq_mean_token_mean: the first two)
    "loss": "ppo_clip",  # the policy loss: ppo_clip, gspo, cispo or reinforce (as the embedded trainer's)
    "dtype": "bfloat16",  # of the base model: bfloat16, float16, float32
    "gradient_checkpointing": False,
    "recompute_old_logprobs": False,  # rescore with the trainer's forward pass (on-policy rows only)
    "rescore_stale": False,  # also rescore rows with staleness > 0 (drops the staleness correction)
    # verl's rollout correction (docs/TRAINERS.md): truncated IS weights
    # ("token" or "sequence", capped at the threshold, 0 = 2) and rejection
    # ("token_k1" ... "seq_max_k3") of what leaves the bounds.
    "rollout_is": None,
    "rollout_is_threshold": 0.0,
    "rollout_rs": None,
    "rollout_rs_threshold": 0.0,
    "rollout_rs_threshold_lower": 0.0,  # k1 only; 0 = 1/rollout_rs_threshold
    "max_length": 0,  # skip longer prompt+completion sequences; 0 = no limit
    "trust_remote_code": False,
    "chat_template": True,  # tokenize prompts with messages by the chat template
    # Read by rlpipe when it computes the advantages; accepted here so one
    # hyperparameters object serves both.
    "no_std": False,
    "keep_zero_std": False,
    # PPO: a LoRA critic and GAE (ppo_critic.py); None = GRPO's update.
    "critic": None,
    "kl_in_reward": False,  # with critic: -beta*k1 per token in the reward, no KL in the loss
}


# lora: none is full fine-tuning (docs/TRAINERS.md): every parameter
# trains and --adapter-out receives a whole Hugging Face model directory,
# its weights sharded above max_shard_size bytes (Hugging Face's name and
# its default, 2 GiB, as `rlpipe policy export` and the embedded trainer
# shard). These keys exist only then, so a LoRA run's trainer_state.json
# keeps its bytes.
FULL = "none"
FULL_DEFAULTS: dict[str, Any] = {"max_shard_size": 2 << 30}
# What a full-weights directory carries besides config.json and the
# weights, copied from the directory the model was loaded from.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja", "generation_config.json")


# verl's names of the KL estimators (core_algos.kl_penalty).
KL_NAMES = {"kl": "k1", "mse": "k2", "low_var_kl": "k3"}


def kl_term(delta, estimator: str):
    """The per-token KL estimate beta weighs, delta = logπ_ref - logπ, as
    rlpipe's trainers/grpo.KLEstimator computes it."""
    if estimator == "k1":
        return -delta
    if estimator == "k2":
        return 0.5 * delta * delta
    return delta.exp() - delta - 1


class ConfigError(Exception):
    """Invalid hyperparameters or inputs that do not fit them (exit 78)."""


class DataError(Exception):
    """A batch that cannot be trained on (exit 65)."""


def log(msg: str) -> None:
    """Writes a line to stderr; under torchrun prefixed "[rankN]: ", as
    torchrun's own log prefix does, so rlpipe can pick a failed rank's
    last lines out of the combined output of every worker."""
    prefix = f"[rank{os.environ.get('RANK', '0')}]: " if int(os.environ.get("WORLD_SIZE", "1")) > 1 else ""
    print(f"{prefix}grpo_train: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- arguments


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="One GRPO update of a LoRA adapter (rlpipe external trainer contract %d)." % CONTRACT
    )
    p.add_argument("--trajectories", required=True, help="trajectories table (Parquet)")
    p.add_argument("--advantages", required=True, help="advantages table (Parquet)")
    p.add_argument("--prompts", required=True, help="prompts table (Parquet)")
    p.add_argument("--hparams", required=True, help="hyperparameters (a JSON object)")
    p.add_argument("--adapter-out", required=True, help="directory for the new PEFT adapter")
    p.add_argument("--optimizer-out", required=True, help="directory for the optimizer state")
    p.add_argument("--metrics-out", required=True, help="file for the metrics (a JSON object)")
    p.add_argument("--adapter-in", help="the previous PEFT adapter (absent on the first iteration)")
    p.add_argument("--optimizer-in", help="the previous optimizer state (absent on the first iteration)")
    p.add_argument("--iteration", type=int, default=0, help="the RL iteration, from 1")
    p.add_argument("--seed", type=int, default=0, help="the call's seed (an unsigned 64-bit integer)")
    p.add_argument("--critic-in", help="the previous critic state (PPO; absent for a fresh critic)")
    p.add_argument("--critic-out", help="directory for the critic state (PPO)")
    p.add_argument("--values-out", help="file for the per-token values, returns and advantages (PPO, JSON lines)")
    args, unknown = p.parse_known_args(argv)
    if unknown:
        # A newer rlpipe may add flags within the same contract version.
        log(f"ignoring flags this script does not know: {' '.join(unknown)}")
    return args


# ---------------------------------------------------------- hyperparameters


def _number(hp: dict, key: str, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False, integer: bool = False, where: str = "") -> None:
    key_name = where + key
    v = hp[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not float(v).is_integer()):
        raise ConfigError(f"hyperparameters.{key_name}: {v!r} is not {'an integer' if integer else 'a number'}")
    if not math.isfinite(v):
        raise ConfigError(f"hyperparameters.{key_name}: {v!r} is not finite")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ConfigError(f"hyperparameters.{key_name}: {v!r} must be {'>' if lo_open else '>='} {lo}")
    if hi is not None and v >= hi:
        raise ConfigError(f"hyperparameters.{key_name}: {v!r} must be < {hi}")
    if integer:
        hp[key] = int(v)


def _unknown(keys, known, where: str) -> None:
    for k in sorted(keys):
        if k not in known:
            near = difflib.get_close_matches(k, list(known), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(f"unknown hyperparameter {where}{k!r}{hint}; known: {', '.join(sorted(known))}")


def load_hparams(path: str) -> dict[str, Any]:
    """Reads and checks the hyperparameters, defaults filled in."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        raise ConfigError(f"read --hparams {path}: {e}") from e
    if not isinstance(raw, dict):
        raise ConfigError(f"--hparams {path} is not a JSON object")
    _unknown(raw, {**DEFAULTS, **FULL_DEFAULTS}, "")
    hp = {**DEFAULTS, **raw}
    lora = raw.get("lora") or {}
    if lora == FULL:
        # Full fine-tuning: every parameter of the model trains, and the
        # output is a whole Hugging Face model directory.
        check_full(hp)
    elif not isinstance(lora, dict):
        raise ConfigError(f"hyperparameters.lora: {lora!r} must be an object {{rank, alpha, dropout, targets}}, "
                          f"or \"{FULL}\" for full fine-tuning")
    else:
        for key in FULL_DEFAULTS:
            if key in raw:
                raise ConfigError(f"hyperparameters.{key}: applies to full fine-tuning only (lora: {FULL}); "
                                  "remove it, or set lora: none")
        _unknown(lora, DEFAULTS["lora"], "lora.")
        hp["lora"] = {**DEFAULTS["lora"], **lora}

    if not isinstance(hp["base_model"], str) or not hp["base_model"]:
        raise ConfigError("hyperparameters.base_model is required (e.g. \"Qwen/Qwen2.5-1.5B-Instruct\")")
    _number(hp, "lr", 0, lo_open=True)
    _number(hp, "weight_decay", 0)
    _number(hp, "clip_norm")
    _number(hp, "epochs", 1, integer=True)
    _number(hp, "minibatch_size", 0, integer=True)
    _number(hp, "micro_batch_size", 1, integer=True)
    _number(hp, "eps_low", 0, 1, lo_open=True)
    _number(hp, "eps_high", 0, lo_open=True)
    _number(hp, "beta", 0)
    _number(hp, "entropy_coeff", 0)
    est = hp["kl_estimator"]
    if not isinstance(est, str) or KL_NAMES.get(est, est) not in ("k1", "k2", "k3"):
        raise ConfigError(f"hyperparameters.kl_estimator: {est!r}; use k1, k2 or k3 (verl's kl, mse or low_var_kl)")
    hp["kl_estimator"] = KL_NAMES.get(est, est)
    _number(hp, "dual_clip", 0)
    if 0 < hp["dual_clip"] <= 1:
        raise ConfigError(f"hyperparameters.dual_clip: {hp['dual_clip']!r} must be above 1 (3 is usual), or 0 for off")
    _number(hp, "max_length", 0, integer=True)
    b = hp["betas"]
    if not (isinstance(b, list) and len(b) == 2 and all(isinstance(x, (int, float)) and 0 <= x < 1 for x in b)):
        raise ConfigError(f"hyperparameters.betas: {b!r} must be two numbers in [0, 1), e.g. [0.9, 0.999]")
    if hp["loss"] not in LOSSES:
        raise ConfigError(f"hyperparameters.loss: {hp['loss']!r}; use " + ", ".join(f'"{x}"' for x in LOSSES))
    if hp["dual_clip"] > 0 and hp["loss"] != "ppo_clip":
        raise ConfigError(f"hyperparameters.dual_clip: {hp['dual_clip']!r}; dual clip applies to loss ppo_clip only, "
                          f"not {hp['loss']} (remove dual_clip or the loss)")
    hp["aggregation"] = canonical_aggregation(hp["aggregation"])
    if hp["dtype"] not in ("bfloat16", "float16", "float32"):
        raise ConfigError(f"hyperparameters.dtype: {hp['dtype']!r}; use bfloat16, float16 or float32")
    for key in ("gradient_checkpointing", "recompute_old_logprobs", "rescore_stale", "trust_remote_code",
                "chat_template", "no_std", "keep_zero_std"):
        if not isinstance(hp[key], bool):
            raise ConfigError(f"hyperparameters.{key}: {hp[key]!r} must be true or false")
    check_rollout_correction(hp)
    if not full(hp):
        lo = hp["lora"]
        _number(lo, "rank", 1, integer=True)
        _number(lo, "alpha", 0, lo_open=True)
        _number(lo, "dropout", 0, 1)
        t = lo["targets"]
        if not (t == "all-linear" or (isinstance(t, list) and t and all(isinstance(x, str) and x for x in t))):
            raise ConfigError(f"hyperparameters.lora.targets: {t!r} must be a list of module names or \"all-linear\"")
    check_critic(hp)
    return hp


def full(hp: dict) -> bool:
    """Whether the hyperparameters ask for full fine-tuning (lora: none)."""
    return hp["lora"] == FULL


def check_full(hp: dict) -> None:
    """Fills in and checks full fine-tuning's own keys (FULL_DEFAULTS)."""
    for key, v in FULL_DEFAULTS.items():
        hp.setdefault(key, v)
    _number(hp, "max_shard_size", 1, integer=True)
    if hp.get("critic") is not None:
        raise ConfigError(f"hyperparameters.critic: PPO's critic is a LoRA adapter on the actor's base, which "
                          f"lora: {FULL} does not have; remove critic, or train the actor with a LoRA adapter")


# ------------------------------------------------- the rollout correction

ROLLOUT_RS = ("token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3",
              "seq_mean_k1", "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3")
LOG_WEIGHT_BOUND = 20.0  # verl's SAFETY_BOUND


def check_rollout_correction(hp: dict) -> None:
    """Checks the rollout correction's keys and fills in the thresholds,
    with the messages of rlpipe's trainers/grpo.RolloutCorrection.Check."""
    for key in ("rollout_is_threshold", "rollout_rs_threshold", "rollout_rs_threshold_lower"):
        v = hp[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(f"hyperparameters.{key}: {v!r} is not a number")
        hp[key] = float(v)
    is_, rs = hp["rollout_is"], hp["rollout_rs"]
    k1 = isinstance(rs, str) and rs.endswith("_k1")
    if is_ is not None and hp["rollout_is_threshold"] == 0:
        hp["rollout_is_threshold"] = 2.0
    if k1 and hp["rollout_rs_threshold_lower"] == 0 and hp["rollout_rs_threshold"] > 0:
        hp["rollout_rs_threshold_lower"] = 1 / hp["rollout_rs_threshold"]
    c, up, low = hp["rollout_is_threshold"], hp["rollout_rs_threshold"], hp["rollout_rs_threshold_lower"]
    g = lambda x: f"{x:g}"  # noqa: E731 (Go's %g)
    problems = [
        (is_ is not None and is_ not in ("token", "sequence"),
         "rollout_is", f"{json.dumps(is_)}; use token or sequence (verl's rollout_is levels)"),
        (is_ is None and c != 0, "rollout_is_threshold",
         f"{g(c)} without rollout_is; set rollout_is: token or sequence, or remove it"),
        (is_ is not None and not (c > 0 and math.isfinite(c)), "rollout_is_threshold",
         f"{g(c)}; it must be positive (2 is verl's default)"),
        (rs is not None and rs not in ROLLOUT_RS, "rollout_rs",
         f"{json.dumps(rs)}; use one of {', '.join(ROLLOUT_RS)} (verl's rollout_rs names)"),
        (rs is None and up != 0, "rollout_rs_threshold",
         f"{g(up)} without rollout_rs; set rollout_rs (e.g. token_k1), or remove it"),
        (rs is None and low != 0, "rollout_rs_threshold_lower",
         f"{g(low)} without rollout_rs; set rollout_rs (e.g. token_k1), or remove it"),
        (rs is not None and up == 0, "rollout_rs",
         f"{rs} needs rollout_rs_threshold (e.g. 2 for a k1 statistic: ratios in [1/2, 2])"),
        (rs is not None and not (up > 0 and math.isfinite(up)), "rollout_rs_threshold",
         f"{g(up)}; rollout_rs {rs} needs a positive threshold (e.g. 2 for a k1 statistic)"),
        (low != 0 and not k1, "rollout_rs_threshold_lower",
         f"{g(low)}; only the k1 statistics have a lower bound, not {rs}"),
        (k1 and not (0 < low <= up), "rollout_rs_threshold_lower",
         f"{g(low)}; it must be positive and at most rollout_rs_threshold {g(up)}"),
    ]
    for bad, key, msg in problems:
        if bad:
            raise ConfigError(f"hyperparameters.{key}: {msg}")


def rollout_correction(hp: dict, lw, m):
    """verl's rollout correction of one sequence, as rlpipe's
    trainers/grpo.RolloutCorrection: lw is each token's log IS ratio (a
    float64 tensor), m its trainable mask. Returns the truncated IS
    weights (None without rollout_is), the mask of the tokens the
    rejection keeps, and the figures' sums (tokens, sequences, weights'
    sum and max, tokens capped, tokens masked, sequences masked)."""
    import torch

    n = float(m.sum())
    f = dict(tokens=n, seqs=1.0, wsum=0.0, wmax=0.0, capped=0.0, masked=0.0, seqs_masked=0.0)
    keep = m.clone()
    if n == 0:
        return None, keep, f
    on = m > 0
    w = None
    c = hp["rollout_is_threshold"]
    if hp["rollout_is"] == "sequence":
        raw = math.exp(min(max(float((lw * m).sum()), -LOG_WEIGHT_BOUND), LOG_WEIGHT_BOUND))
        w = torch.full_like(lw, min(raw, c)) * m
        f["capped"], f["wmax"] = n if raw > c else 0.0, raw
    elif hp["rollout_is"] == "token":
        raw = torch.exp(lw.clamp(-LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND))
        w = raw.clamp(max=c) * m
        f["capped"], f["wmax"] = float(((raw > c) & on).sum()), float(w[on].max())
    if w is not None:
        f["wsum"] = float(w.sum())
    rs = hp["rollout_rs"]
    if rs is not None:
        safe = lw.clamp(-LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND)
        stat = {"1": -safe, "2": 0.5 * safe * safe, "3": torch.exp(safe) - 1 - safe}[rs[-1]]
        lo, hi = -math.inf, hp["rollout_rs_threshold"]
        if rs.endswith("_k1"):
            lo, hi = math.log(hp["rollout_rs_threshold_lower"]), math.log(hi)
        if rs.startswith("token_"):
            keep = ((stat >= lo) & (stat <= hi) & on).to(m.dtype)
        else:
            v = stat[on]
            v = float(v.sum()) if rs.startswith("seq_sum_") else float(v.mean()) if rs.startswith("seq_mean_") else float(v.max())
            keep = m.clone() if lo <= v <= hi else torch.zeros_like(m)
        f["masked"] = n - float(keep.sum())
        f["seqs_masked"] = 1.0 if f["masked"] > 0 else 0.0
    return w, keep, f


def rollout_figures(hp: dict, f: dict) -> dict:
    """The rollout correction's metrics from summed figures, under
    trainers/grpo.RolloutFigures' names; none when it is off."""
    out = {}
    t = f["tokens"]
    if hp["rollout_is"] is not None and t > 0:
        out.update(rollout_is_mean=f["wsum"] / t, rollout_is_max=f["wmax"], rollout_is_capped_frac=f["capped"] / t)
    if hp["rollout_rs"] is not None and t > 0:
        out.update(rollout_rs_masked_frac=f["masked"] / t, rollout_rs_seq_masked_frac=f["seqs_masked"] / f["seqs"])
    return out


# ----------------------------------------------------------- aggregation

# The aggregations, as the embedded trainer names them (trainers/grpo), and
# verl's names of the first two.
AGGREGATIONS = ("token", "sequence", "seq_mean_token_sum_norm")
AGGREGATION_ALIASES = {"token_mean": "token", "seq_mean_token_mean": "sequence"}


def canonical_aggregation(a: Any) -> str:
    """hyperparameters.aggregation's canonical name; a ConfigError if it
    names none."""
    if isinstance(a, str) and a in AGGREGATION_ALIASES:
        return AGGREGATION_ALIASES[a]
    if a not in AGGREGATIONS:
        raise ConfigError(f"hyperparameters.aggregation: {a!r}; use " + ", ".join(f'"{x}"' for x in AGGREGATIONS)
                          + " (or verl's " + " and ".join(f'"{x}"' for x in AGGREGATION_ALIASES) + ")")
    return a


def aggregation_norm(samples: list[dict], members) -> dict:
    """What a minibatch's aggregations divide by, over all its sequences
    whichever process holds them: its trained tokens, its sequences, and
    for seq_mean_token_sum_norm the sequences with a trained token times
    the longest completion (its tokens, trained or not): Dr. GRPO's G·L_max,
    as the embedded trainer takes it."""
    masks = [samples[i]["mask"] for i in members]
    return {"tokens": sum(sum(m) for m in masks), "seqs": len(masks),
            "sum_norm": sum(1 for m in masks if sum(m) > 0) * max((len(m) for m in masks), default=0)}


def token_weight(hp: dict, norm: dict, n: int) -> float:
    """The weight in the minibatch's loss of each trained token of a
    sequence with n trained tokens: 1/Σ|y| (token), 1/(G·|y_i|)
    (sequence), 1/(G·L_max) (seq_mean_token_sum_norm)."""
    agg = hp["aggregation"]
    if agg == "token":
        return 1.0 / norm["tokens"]
    if agg == "sequence":
        return 1.0 / (norm["seqs"] * n)
    return 1.0 / norm["sum_norm"]


# ---------------------------------------------------------- policy losses

LOSSES = ("ppo_clip", "gspo", "cispo", "reinforce")


def policy_term(hp: dict, lp, log_ratio, ratio, m, a: float):
    """The policy term of each token of a sequence (masked tokens 0) by
    hp["loss"], as the embedded trainer's trainers/grpo computes it, and
    the float masks of the tokens the clip acted on below and above (the
    clip fractions count them). lp are the tokens' logprobs (with their
    gradient), log_ratio = logπ − logπ_old (0 where masked), ratio its
    exp, m the trained tokens, a the sequence's advantage."""
    import torch

    lo, hi = 1 - hp["eps_low"], 1 + hp["eps_high"]
    if hp["loss"] == "reinforce":
        # The plain policy gradient −A·logπ: no ratio, no clip. The
        # rollout correction's IS weights multiply it in bypass mode too
        # (correct_step), verl's bypass_pg_is.
        zeros = torch.zeros_like(lp)
        return -a * lp * m, zeros, zeros
    if hp["loss"] == "gspo" and torch.is_tensor(a):
        # PPO's per-token advantages with the sequence's one ratio, as
        # verl's compute_policy_loss_gspo takes them: each token clips by
        # its own advantage's sign.
        log_s = float((log_ratio * m).sum() / m.sum())
        s_val = math.exp(min(log_s, 10.0))
        pg = -s_val * torch.exp(lp - lp.detach()) * a
        if log_s > 10:
            pg = pg.detach()
        none = torch.zeros_like(a, dtype=torch.bool)
        low = (a < 0) if s_val < lo else none
        high = (a > 0) if s_val > hi else none
        pg = torch.where(low, -lo * a, torch.where(high, -hi * a, pg))
        return pg * m, low.float() * m, high.float() * m
    if hp["loss"] == "gspo":
        # One ratio per sequence, s = exp(mean_t log ρ_t) over the trained
        # tokens (log s capped at 10, no gradient above), each token
        # carrying s_t = sg(s)·π_t/sg(π_t); clipped at the sequence level.
        log_s = float((log_ratio * m).sum() / m.sum())
        s_val = math.exp(min(log_s, 10.0))
        carried = s_val * torch.exp(lp - lp.detach())
        zeros = torch.zeros_like(lp)
        if a < 0 and s_val < lo:
            return torch.full_like(lp, -lo * a) * m, m, zeros
        if a > 0 and s_val > hi:
            return torch.full_like(lp, -hi * a) * m, zeros, m
        pg = -carried * a
        if log_s > 10:
            pg = pg.detach()
        return pg * m, zeros, zeros
    if hp["loss"] == "cispo":
        # REINFORCE weighted by the clipped ratio under a stop-gradient:
        # −sg(clip(ρ))·A·logπ, log ρ clamped to ±20; a clipped token keeps
        # its gradient, and counts whatever the advantage's sign.
        rho = torch.exp(log_ratio.clamp(-20, 20)).detach()
        pg = -rho.clamp(lo, hi) * a * lp
        return pg * m, (rho < lo).float() * m, (rho > hi).float() * m
    clipped = ratio.clamp(lo, hi)
    pg = torch.maximum(-ratio * a, -clipped * a)  # -min(ρA, clip(ρ)A)
    # a is the sequence's advantage, or under PPO a tensor of GAE's per token.
    neg, pos = torch.as_tensor(a < 0, device=lp.device), torch.as_tensor(a > 0, device=lp.device)
    if hp["dual_clip"] > 0 and bool(neg.any()):  # dual-clip: at most -c·A, no gradient past ρ = c
        cap = -hp["dual_clip"] * (a if torch.is_tensor(a) else torch.full_like(pg, a))
        pg = torch.where(neg, torch.minimum(pg, cap), pg)
    low = ((ratio < lo) & neg).float() * m
    high = ((ratio > hi) & pos).float() * m
    return pg * m, low, high


def check_critic(hp: dict) -> None:
    """Checks hyperparameters.critic (PPO) and kl_in_reward, defaults filled in."""
    if not isinstance(hp["kl_in_reward"], bool):
        raise ConfigError(f"hyperparameters.kl_in_reward: {hp['kl_in_reward']!r} must be true or false")
    c = hp["critic"]
    if c is None:
        if hp["kl_in_reward"]:
            raise ConfigError("hyperparameters.kl_in_reward: the KL goes into PPO's per-token rewards, which need "
                              "hyperparameters.critic (and the gae estimator); remove kl_in_reward, or add critic")
        return
    if hp["kl_in_reward"] and hp["beta"] == 0:
        raise ConfigError("hyperparameters.kl_in_reward: true but beta is 0, which weighs the KL; set beta, e.g. 0.01")
    if not isinstance(c, dict):
        raise ConfigError(f"hyperparameters.critic: {c!r} must be an object {{lr, warmup, cliprange_value, missing}}")
    _unknown(c, ppo_critic.DEFAULTS, "critic.")
    c = hp["critic"] = {**ppo_critic.DEFAULTS, **c}
    if c["lr"] is not None:
        _number(c, "lr", 0, lo_open=True, where="critic.")
    _number(c, "warmup", 0, integer=True, where="critic.")
    _number(c, "cliprange_value", 0, lo_open=True, where="critic.")
    _number(c, "gamma", 0, where="critic.")
    _number(c, "lambda", 0, where="critic.")
    for key in ("gamma", "lambda"):
        if c[key] > 1:
            raise ConfigError(f"hyperparameters.critic.{key}: {c[key]!r} must be in [0, 1]")
    if c["missing"] not in ("refuse", "fresh"):
        raise ConfigError(f"hyperparameters.critic.missing: {c['missing']!r}; use \"refuse\" or \"fresh\"")


# ---------------------------------------------------------- distribution


class Dist:
    """The process group under torchrun, or a world of one."""

    def __init__(self) -> None:
        import torch

        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        self.dist = None
        if self.world > 1:
            import torch.distributed as dist

            dist.init_process_group(backend="nccl" if cuda else "gloo")
            self.dist = dist

    def io_rank(self, has_inputs: bool) -> int | None:
        """The lowest rank that can read the inputs."""
        if self.dist is None:
            return 0 if has_inputs else None
        seen: list[Any] = [None] * self.world
        self.dist.all_gather_object(seen, has_inputs)
        return next((r for r, ok in enumerate(seen) if ok), None)

    def broadcast(self, obj: Any, src: int) -> Any:
        if self.dist is None:
            return obj
        box = [obj]
        self.dist.broadcast_object_list(box, src=src)
        return box[0]

    def all_sum(self, values: list[float]) -> list[float]:
        if self.dist is None:
            return values
        import torch

        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        self.dist.all_reduce(t)
        return t.tolist()

    def all_max(self, value: float) -> float:
        if self.dist is None:
            return value
        import torch

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def barrier(self) -> None:
        if self.dist is not None:
            self.dist.barrier()

    def close(self) -> None:
        if self.dist is not None:
            self.dist.destroy_process_group()


# ---------------------------------------------------------------- inputs


def read_rows(path: str, columns: list[str], optional: tuple[str, ...] = ()) -> list[dict]:
    """The rows of a Parquet file, with columns and the optional ones the
    file has (an older table lacks the newer columns: they read as None)."""
    import pyarrow.parquet as pq

    have = set(pq.read_schema(path).names)
    rows = pq.read_table(path, columns=columns + [c for c in optional if c in have]).to_pylist()
    for r in rows:
        for c in optional:
            r.setdefault(c, None)
    return rows


def episode_sample(t: dict) -> tuple[list[int], list[int], list[int], list[float] | None]:
    """A multi-turn episode (a row with sequence_ids and trainable) as one
    sequence: the tokens before its first trainable one are the prompt, the
    rest the completion, with its mask (1: a reply's token, in the loss; 0:
    an observation's or the template's, given) and the old logprobs of the
    replies (the row's logprobs, in order) in the trainable places, 0.0 in
    the others, which are never read. Nothing is re-tokenized: the
    trainable tokens must be the replies' token_ids, in order."""
    where = f"episode {t['sample_index']} of prompt {t['prompt_id']!r}"
    seq, marks = t["sequence_ids"], t["trainable"]
    if len(seq) != len(marks):
        raise DataError(f"{where}: sequence_ids has {len(seq)} tokens and trainable {len(marks)}")
    if 1 not in marks:
        raise DataError(f"{where}: its trainable mask marks no token of its {len(seq)}")
    first = marks.index(1)
    replies, lps = t["token_ids"] or [], t["logprobs"]
    if lps is not None and len(lps) != len(replies):
        raise DataError(f"{where} has {len(lps)} logprobs for {len(replies)} token ids")
    completion, mask = list(seq[first:]), [int(m) for m in marks[first:]]
    old = None if lps is None else [0.0] * len(completion)
    k = 0
    for j, m in enumerate(mask):
        if m != 1:
            continue
        if k >= len(replies) or replies[k] != completion[j]:
            raise DataError(f"{where}: token {first + j + 1} of sequence_ids is trainable but is not reply token {k + 1} "
                            "of token_ids: the mask does not cover exactly the policy's tokens")
        if old is not None:
            old[j] = float(lps[k])
        k += 1
    if k != len(replies):
        raise DataError(f"{where}: its mask marks {k} tokens for {len(replies)} reply tokens in token_ids")
    return list(seq[:first]), completion, mask, old


def check_stale(t: dict, missing: bool, hp: dict) -> None:
    """Refuses to rescore a row an older adapter sampled (staleness > 0)
    with the trainer's adapter, which would anchor the ratio on a policy
    that did not sample it, unless rescore_stale says the user wants it."""
    stale = t.get("staleness") or 0
    if stale <= 0 or hp["rescore_stale"]:
        return
    where = f"sample {t['sample_index']} of prompt {t['prompt_id']!r} (staleness {stale})"
    if hp["recompute_old_logprobs"]:
        raise ConfigError(
            f"hyperparameters.recompute_old_logprobs: {where} would be rescored with the adapter after the one that "
            "sampled it, dropping the staleness correction; run on-policy (overlap.max_staleness: 0), remove "
            "recompute_old_logprobs, or set rescore_stale: true to accept it"
        )
    if missing:
        raise DataError(
            f"{where} has no logprobs: rescoring it with the trainer's adapter would drop the staleness correction; "
            "have the policy return logprobs, run on-policy (overlap.max_staleness: 0), or set rescore_stale: true to accept it"
        )


def sample_temperature(t: dict) -> float:
    """The temperature a row trains at: its sampler column's (the JSON of
    the sampling, docs/TABLES.md), so that logpi is log softmax(z/T) of the
    distribution that sampled it and whose logprobs the sampler recorded.
    No column, or no temperature in it, reads as 1; a greedy sample (0)
    trains at 1, its logprobs being the model's own. top_p below 1 is
    refused: no trainer can rebuild the nucleus the sampler drew from."""
    where = f"sample {t['sample_index']} of prompt {t['prompt_id']!r}"
    raw = t.get("sampler") or ""
    if not raw:
        return 1.0
    try:
        sampling = json.loads(raw)
    except ValueError as e:
        raise DataError(f"{where}: sampler column {raw!r} is not a JSON object of sampling parameters: {e}") from None
    if not isinstance(sampling, dict):
        raise DataError(f"{where}: sampler column {raw!r} is not a JSON object of sampling parameters")
    top_p = sampling.get("top_p") or 0
    if 0 < top_p < 1:
        raise DataError(f"{where}: sampler column: top_p {top_p:g} trains a policy rlpipe cannot score (the nucleus changes "
                        "with every token); sample the train stage's rollouts without top_p (temperature alone is trained exactly)")
    temp = sampling.get("temperature", 1)
    if not isinstance(temp, (int, float)) or not math.isfinite(temp) or temp < 0:
        raise DataError(f"{where}: sampler column: temperature {temp!r} is not a temperature (a finite number >= 0)")
    return float(temp) if temp != 0 else 1.0


def read_inputs(args: argparse.Namespace, hp: dict) -> dict:
    """Reads and joins the tables and tokenizes the samples to train on.

    Runs on the I/O rank only; the result is broadcast.
    """
    from transformers import AutoTokenizer

    advantages = read_rows(args.advantages, ["prompt_id", "sample_index", "advantage", "mask", "reason"])
    trajectories = read_rows(args.trajectories, ["prompt_id", "sample_index", "token_ids", "logprobs", "status"],
                             optional=("sequence_ids", "trainable", "staleness", "sampler"))
    prompts = {r["prompt_id"]: r for r in read_rows(args.prompts, ["prompt_id", "prompt", "messages"])}
    trajs = {(r["prompt_id"], r["sample_index"]): r for r in trajectories}

    tok = AutoTokenizer.from_pretrained(hp["base_model"], trust_remote_code=hp["trust_remote_code"])
    prompt_ids: dict[str, list[int]] = {}
    # The BOS the tokenizer puts before a text, if any. A server's episode
    # sequence starts with it (vLLM renders it); rlpipe's embedded policy
    # leaves it out, as its engine adds its own. An episode without it gets
    # it, so the model sees what it saw when it sampled, as single-turn
    # prompts do through add_special_tokens.
    probe = tok("1", add_special_tokens=True)["input_ids"]
    bos = tok.bos_token_id if tok.bos_token_id is not None and probe[:1] == [tok.bos_token_id] else None

    def encode_prompt(pid: str) -> list[int]:
        if pid in prompt_ids:
            return prompt_ids[pid]
        p = prompts.get(pid)
        if p is None:
            raise DataError(f"prompt {pid!r} has samples but no row in --prompts")
        msgs = p.get("messages")
        if msgs and hp["chat_template"] and getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(
                [{"role": m["role"], "content": m["content"]} for m in msgs],
                add_generation_prompt=True, tokenize=True,
            )
            if not isinstance(ids, list):  # a BatchEncoding in newer transformers
                ids = ids["input_ids"]
        else:
            text = p.get("prompt") or "".join(m["content"] for m in msgs or [])
            ids = tok(text, add_special_tokens=True)["input_ids"]
        prompt_ids[pid] = list(ids)
        return prompt_ids[pid]

    samples, skipped = [], {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    for a in advantages:
        if a["mask"]:
            continue
        t = trajs.get((a["prompt_id"], a["sample_index"]))
        if t is None:
            raise DataError(f"sample {a['sample_index']} of prompt {a['prompt_id']!r} has an advantage but no trajectory")
        if t["status"] != "ok":
            skip(f"trajectory status {t['status']}")
            continue
        completion = t["token_ids"] or []
        if not completion:
            skip("no token ids")
            continue
        if t["sequence_ids"] is not None:
            # A multi-turn episode: its exact sequence, trained on its
            # replies' tokens only.
            prompt, completion, mask, old = episode_sample(t)
            if bos is not None and prompt[:1] != [bos]:
                prompt = [bos] + prompt
        else:
            prompt, mask, old = encode_prompt(a["prompt_id"]), None, t["logprobs"]
            if old is not None and len(old) != len(completion):
                raise DataError(
                    f"sample {a['sample_index']} of prompt {a['prompt_id']!r} has {len(old)} logprobs for {len(completion)} tokens"
                )
        if hp["max_length"] and len(prompt) + len(completion) > hp["max_length"]:
            skip("longer than max_length")
            continue
        check_stale(t, old is None, hp)
        sample = {
            "prompt_id": a["prompt_id"],
            "sample_index": a["sample_index"],
            "prompt": prompt,
            "completion": list(completion),
            "mask": mask or [1] * len(completion),
            "old": None if old is None or hp["recompute_old_logprobs"] else list(old),
            "advantage": float(a["advantage"]),
            "temperature": sample_temperature(t),
        }
        if old is not None and hp["recompute_old_logprobs"]:
            # verl's decoupled mode: the sampler's logprobs beside the
            # recomputed anchor, for the rollout correction.
            sample["behaviour"] = list(old)
        samples.append(sample)

    adapter_files = None
    if args.adapter_in and full(hp):
        # A previous full-weights checkpoint: every process loads it from
        # its path, so under torchrun it must be on storage every node
        # sees (a directory of gigabytes is not broadcast as bytes).
        if not os.path.isfile(os.path.join(args.adapter_in, "config.json")):
            raise ConfigError(f"--adapter-in {args.adapter_in} holds no config.json: with lora: {FULL} the policy "
                              "input must be a full-weights directory (a LoRA run's adapter cannot continue as full "
                              "fine-tuning; start a new run)")
    elif args.adapter_in:
        if full_dir(args.adapter_in):
            raise ConfigError(f"--adapter-in {args.adapter_in} is a full-weights directory (config.json, no "
                              f"adapter_config.json): continue it with hyperparameters.lora: {FULL}")
        adapter_files = {}
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            with open(os.path.join(args.adapter_in, name), "rb") as f:
                adapter_files[name] = f.read()
    optimizer_state = None
    if args.optimizer_in:
        path = os.path.join(args.optimizer_in, OPTIMIZER_FILE)
        if os.path.exists(path):
            with open(path, "rb") as f:
                optimizer_state = f.read()
        else:
            log(f"--optimizer-in holds no {OPTIMIZER_FILE}; AdamW starts fresh")
    updates = 0
    if args.optimizer_in and os.path.exists(os.path.join(args.optimizer_in, STATE_FILE)):
        with open(os.path.join(args.optimizer_in, STATE_FILE), encoding="utf-8") as f:
            updates = int(json.load(f).get("updates", 0))
    return {
        "samples": samples,
        "skipped": skipped,
        "adapter_files": adapter_files,
        "optimizer_state": optimizer_state,
        "updates": updates,
        "pad_id": tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0),
    }


# ---------------------------------------------------------------- model


def full_dir(path: str) -> bool:
    """Whether path is a full-weights directory: config.json without
    adapter_config.json (policy.CheckpointKind's rule)."""
    return os.path.isfile(os.path.join(path, "config.json")) and not os.path.exists(
        os.path.join(path, "adapter_config.json"))


def load_causal_lm(hp: dict, path: str, d: Dist):
    """The model at path (a Hugging Face id or directory) in hp's dtype, on
    this process's device, without the generation cache."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[hp["dtype"]]
    m = AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype, trust_remote_code=hp["trust_remote_code"]).to(d.device)
    m.config.use_cache = False
    return m


def build_model(hp: dict, inputs: dict, d: Dist, adapter_in: str | None = None):
    """The policy to train: with lora: none the whole model (the previous
    checkpoint at adapter_in, else the base), every parameter trainable;
    otherwise the base with the previous LoRA adapter or a fresh one."""
    import tempfile

    from peft import LoraConfig, PeftModel, get_peft_model

    base = load_causal_lm(hp, adapter_in if full(hp) and adapter_in else hp["base_model"], d)
    if full(hp):
        base.requires_grad_(True)
        if hp["gradient_checkpointing"]:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return base
    if hp["gradient_checkpointing"]:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        base.enable_input_require_grads()
    files = inputs["adapter_files"]
    if files:
        # Every process loads the previous adapter through PEFT from the
        # bytes the I/O rank read; it keeps its own rank and targets.
        with tempfile.TemporaryDirectory() as tmp:
            for name, data in files.items():
                with open(os.path.join(tmp, name), "wb") as f:
                    f.write(data)
            model = PeftModel.from_pretrained(base, tmp, is_trainable=True)
    else:
        lo = hp["lora"]
        model = get_peft_model(base, LoraConfig(
            r=lo["rank"], lora_alpha=lo["alpha"], lora_dropout=lo["dropout"],
            target_modules=lo["targets"], bias="none", task_type="CAUSAL_LM",
        ))
    return model


def trainable(model) -> list[tuple[str, Any]]:
    return sorted(((n, p) for n, p in model.named_parameters() if p.requires_grad), key=lambda x: x[0])


def sequence_logprobs(model, batch: list[dict], pad_id: int, device, entropy: bool, entropy_grad: bool = False):
    """Log-probabilities (and entropies) of each sample's completion tokens,
    of softmax(z/T) at the sample's temperature; the entropies carry a
    gradient only with entropy_grad (an entropy bonus)."""
    import torch

    ids, mask = ppo_critic.pad(batch, pad_id)
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False).logits
    lps, ents = [], []
    for i, s in enumerate(batch):
        p, c = len(s["prompt"]), len(s["completion"])
        # The logits at position t predict the token at t + 1.
        # At the temperature the sample was drawn at: log softmax(z/T), as
        # TRL's selective_log_softmax(logits / temperature) and verl's
        # logits.div_(temperature); the reference pass goes through here too.
        z = logits[i, p - 1 : p - 1 + c].float()
        temp = s.get("temperature", 1.0)
        if temp != 1.0:
            z = z / temp
        lp = z.log_softmax(-1)
        target = torch.tensor(s["completion"], dtype=torch.long, device=device)
        lps.append(lp.gather(-1, target[:, None]).squeeze(-1))
        if entropy:
            with contextlib.nullcontext() if entropy_grad else torch.no_grad():
                ents.append(-(lp.exp() * lp).sum(-1))
    return lps, ents


# ---------------------------------------------------------------- training


def plan(n: int, hp: dict, world: int, rank: int) -> list[list[list[int]]]:
    """Per minibatch, this process's micro-batches of sample indices.

    Samples stay in (prompt id, sample index) order; a minibatch's samples
    go to processes round-robin. Every process runs the same number of
    micro-batches in a minibatch (an empty one is a zero-weight pass), so
    DDP's gradient all-reduces line up.
    """
    size = hp["minibatch_size"] or max(n, 1)
    out = []
    for start in range(0, n, size):
        members = list(range(start, min(start + size, n)))
        mine = members[rank::world]
        per = -(-len(members) // world)  # the largest share
        count = max(1, -(-per // hp["micro_batch_size"]))
        mb = hp["micro_batch_size"]
        out.append([mine[k * mb : (k + 1) * mb] for k in range(count)])
    return out


def train(args: argparse.Namespace, hp: dict | None) -> int:
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    d = Dist()
    try:
        io_rank = d.io_rank(hp is not None)
        if io_rank is None:
            raise ConfigError(
                f"no process can read --hparams {args.hparams}: run rank 0's node where rlpipe runs, "
                "or put rlpipe's work directory on storage every node mounts"
            )
        payload: dict[str, Any] | None = None
        if d.rank == io_rank:
            try:
                payload = {"hp": hp, "inputs": read_inputs(args, hp)}
            except (ConfigError, DataError) as e:
                payload = {"error": (type(e).__name__, str(e))}
        payload = d.broadcast(payload, io_rank)
        if "error" in payload:
            kind, msg = payload["error"]
            raise (ConfigError if kind == "ConfigError" else DataError)(msg)
        hp, inputs = payload["hp"], payload["inputs"]
        samples = inputs["samples"]

        seed = args.seed % (1 << 63)
        random.seed(seed + d.rank)
        torch.manual_seed(seed + d.rank)

        log(f"rank {d.rank} of {d.world} ({d.device}): {len(samples)} samples, iteration {args.iteration}; "
            f"loading {hp['base_model']} ({hp['dtype']})")
        model = build_model(hp, inputs, d, args.adapter_in)
        params = trainable(model)
        if d.dist is not None:
            for _, p in params:  # the I/O rank's adapter everywhere
                d.dist.broadcast(p.data, src=io_rank)
        names = [n for n, _ in params]
        opt = torch.optim.AdamW([p for _, p in params], lr=hp["lr"], betas=tuple(hp["betas"]),
                                weight_decay=hp["weight_decay"])
        steps_before = 0
        if inputs["optimizer_state"] is not None:
            state = torch.load(io.BytesIO(inputs["optimizer_state"]), map_location="cpu", weights_only=True)
            if state.get("param_names") == names:
                opt.load_state_dict(state["optimizer"])
                for g in opt.param_groups:  # this call's hyperparameters win
                    g.update(lr=hp["lr"], betas=tuple(hp["betas"]), weight_decay=hp["weight_decay"])
                steps_before = int(state.get("optimizer_steps", 0))
            else:
                log("the optimizer state does not match the adapter's parameters; AdamW starts fresh")
        peft_model = model
        if d.dist is not None:
            model = DDP(model, device_ids=[d.local_rank] if d.device.type == "cuda" else None)
        # PPO: the critic's adapter joins after DDP took the actor's
        # parameters, so DDP syncs the actor's gradient only.
        critic = None
        if hp["critic"] is not None:
            critic = ppo_critic.Critic(peft_model, hp, d, io_rank, args.critic_in, inputs["pad_id"], log)

        micro = plan(len(samples), hp, d.world, d.rank)
        mine = sorted({i for mb in micro for m in mb for i in m})
        started = time.monotonic()

        # Before any step: the old log-probabilities the table lacks (exact
        # for on-policy samples) and, with beta > 0, the base model's.
        peft_model.eval()
        with torch.no_grad():
            need_old = [i for i in mine if samples[i]["old"] is None]
            for k in range(0, len(need_old), hp["micro_batch_size"]):
                idx = need_old[k : k + hp["micro_batch_size"]]
                lps, _ = sequence_logprobs(peft_model, [samples[i] for i in idx], inputs["pad_id"], d.device, False)
                for i, lp in zip(idx, lps):
                    samples[i]["old"] = lp.tolist()
            if hp["beta"] > 0:
                # The reference is the base model: the adapter disabled,
                # or with full weights the base loaded beside the policy.
                ref = load_causal_lm(hp, hp["base_model"], d).eval() if full(hp) else peft_model
                with contextlib.nullcontext() if full(hp) else peft_model.disable_adapter():
                    for k in range(0, len(mine), hp["micro_batch_size"]):
                        idx = mine[k : k + hp["micro_batch_size"]]
                        lps, _ = sequence_logprobs(ref, [samples[i] for i in idx], inputs["pad_id"], d.device, False)
                        for i, lp in zip(idx, lps):
                            samples[i]["ref"] = lp.tolist()
                del ref
        if critic is not None:
            critic.prepare(samples, mine, hp["micro_batch_size"])
        model.train()
        actor_steps = 0

        step_metrics = []
        for epoch in range(hp["epochs"]):
            for k, mbs in enumerate(micro):
                size = hp["minibatch_size"] or len(samples)
                members = range(k * size, min((k + 1) * size, len(samples)))
                norm = aggregation_norm(samples, members)
                rc = None
                if hp["rollout_is"] is not None or hp["rollout_rs"] is not None:
                    rc = correct_step(model, samples, mbs, hp, inputs["pad_id"], d)
                    # The rejection's kept tokens, summed over the processes,
                    # stand in for the trainable ones.
                    norm["tokens"], norm["seqs"] = rc["kept"], max(rc["nonempty"], 1.0)
                    norm["sum_norm"] = rc["nonempty"] * max((len(samples[i]["mask"]) for i in members), default=0)
                stats = step(model, samples, mbs, members, norm, hp, inputs["pad_id"], d, rc)
                clip = hp["clip_norm"] if hp["clip_norm"] > 0 else float("inf")
                grad_norm = float(torch.nn.utils.clip_grad_norm_([p for _, p in params], clip))
                if not math.isfinite(grad_norm):
                    raise DataError(
                        f"optimizer step {steps_before + len(step_metrics) + 1} (epoch {epoch + 1}, minibatch {k + 1}): "
                        f"gradient norm {grad_norm}; the update is not applied"
                    )
                if critic is None or not critic.warming_up():
                    opt.step()
                    actor_steps += 1
                opt.zero_grad(set_to_none=True)
                if critic is not None:
                    vnorm = aggregation_norm(samples, members)  # every trainable token: no rejection in the value loss
                    stats.update(critic.step(samples, mbs, members, lambda n: token_weight(hp, vnorm, n)))
                stats["grad_norm"] = grad_norm
                step_metrics.append(stats)
                log(f"optimizer step {steps_before + len(step_metrics)} (epoch {epoch + 1}, minibatch {k + 1}): "
                    f"loss {stats['loss']:.6g}, grad norm {grad_norm:.4g}, {stats['tokens']} tokens")
        seconds = time.monotonic() - started

        extra = None
        if critic is not None:
            extra = critic.metrics(step_metrics)
            if critic.warming_up():
                extra["critic_warmup"] = True  # the actor's adapter is unchanged
            if d.rank == io_rank:
                write_critic(args, critic, samples)
            critic.drop()
        if d.rank == io_rank:
            write_outputs(args, hp, inputs, peft_model, opt, names, steps_before + actor_steps,
                          step_metrics, seconds, len(micro), extra)
        d.barrier()
        return 0
    finally:
        d.close()


def correct_step(model, samples, micro_batches, hp, pad_id, d: Dist) -> dict:
    """The rollout correction of one step's samples on this process: each
    sample's "_keep" mask and, in decoupled mode (a sample with behaviour
    logprobs), its "_w" IS weights; returns the step's kept tokens and
    non-empty sequences and its figures, summed over every process. In
    bypass mode (the anchor is the sampler's logprobs) the log ratio is
    the current policy's against it, from a forward pass without gradient
    before the step's, so the loss's token count is known before any
    backward pass; the weights are then only reported, as verl's bypass
    mode does for ppo_clip (the ratio already is the weight)."""
    import torch

    sums = dict(tokens=0.0, seqs=0.0, wsum=0.0, capped=0.0, masked=0.0, seqs_masked=0.0, kept=0.0, nonempty=0.0)
    wmax = 0.0
    for idx in micro_batches:
        if not idx:
            continue
        batch = [samples[i] for i in idx]
        lps = None
        if any("behaviour" not in s for s in batch):
            with torch.no_grad():
                lps, _ = sequence_logprobs(model, batch, pad_id, d.device, False)
        for j, s in enumerate(batch):
            m = torch.tensor(s["mask"], dtype=torch.float64)
            old = torch.tensor(s["old"], dtype=torch.float32).double()
            if "behaviour" in s:
                lw = old - torch.tensor(s["behaviour"], dtype=torch.float32).double()
            else:
                lw = lps[j].detach().double().cpu() - old
            lw = torch.where(m > 0, lw, torch.zeros_like(lw))
            w, keep, f = rollout_correction(hp, lw, m)
            s["_keep"] = keep.tolist()
            # Decoupled mode, or a loss without a ratio to carry them.
            acts = "behaviour" in s or hp["loss"] == "reinforce"
            s["_w"] = w.tolist() if w is not None and acts else None
            for k in ("tokens", "seqs", "wsum", "capped", "masked", "seqs_masked"):
                sums[k] += f[k]
            wmax = max(wmax, f["wmax"])
            kept = float(keep.sum())
            sums["kept"] += kept
            sums["nonempty"] += 1.0 if kept > 0 else 0.0
    keys = list(sums)
    total = dict(zip(keys, d.all_sum([sums[k] for k in keys])))
    total["wmax"] = d.all_max(wmax)
    return {"kept": total["kept"], "nonempty": total["nonempty"], "figures": rollout_figures(hp, total),
            "scored": total["tokens"], "seqs": total["seqs"]}


def step(model, samples, micro_batches, members, norm, hp, pad_id, d: Dist, rc: dict | None = None) -> dict:
    """Accumulates one minibatch's gradient on this process; returns the
    minibatch's figures, summed over every process. With the rollout
    correction (rc, from correct_step) the loss sees each sample's kept
    tokens, weighted by its IS weights in decoupled mode; the mismatch
    figures see every trainable token. norm is what the aggregation
    divides by (aggregation_norm, with the kept tokens under the
    rejection)."""
    import torch

    sums = dict(loss=0.0, policy_loss=0.0, kl=0.0, entropy=0.0, clip_low=0.0, clip_high=0.0, ratio_dev=0.0,
                behaviour_kl=0.0, clip_dual=0.0, tokens=0.0, scored=0.0)
    ratio_max = 0.0
    for j, idx in enumerate(micro_batches):
        last = j == len(micro_batches) - 1
        sync = contextlib.nullcontext() if last or d.dist is None else model.no_sync()
        with sync:
            weight = 1.0
            if not idx:  # an empty share: a zero-weight pass keeps DDP in step
                idx, weight = [members[0]], 0.0
            batch = [samples[i] for i in idx]
            lps, ents = sequence_logprobs(model, batch, pad_id, d.device, True, hp["entropy_coeff"] > 0)
            loss = torch.zeros((), device=d.device)
            for s, lp, ent in zip(batch, lps, ents):
                # Only trainable tokens (an episode's replies) enter the
                # loss and the figures; an observation's are given.
                trainable = torch.tensor(s["mask"], dtype=torch.float32, device=d.device)
                old = torch.tensor(s["old"], dtype=torch.float32, device=d.device)
                log_ratio = torch.where(trainable > 0, lp - old, torch.zeros_like(lp))
                ratio = torch.exp(log_ratio)
                if weight and trainable.sum() > 0:
                    with torch.no_grad():
                        # k3 of KL(behaviour ‖ trainer) from the sampled
                        # tokens, the rejected ones included.
                        sums["behaviour_kl"] += float(((ratio - 1 - log_ratio) * trainable).sum())
                        ratio_max = max(ratio_max, float(ratio[trainable > 0].max()))
                        sums["scored"] += float(trainable.sum())
                m = trainable
                if rc is not None:
                    m = torch.tensor(s["_keep"], dtype=torch.float32, device=d.device)
                n = int(m.sum())
                if n == 0:
                    continue
                a = s["advantage"]
                if s.get("token_adv") is not None:  # PPO: GAE's advantage per token
                    a = torch.tensor(s["token_adv"], dtype=torch.float32, device=d.device)
                pg, clip_low, clip_high = policy_term(hp, lp, log_ratio, ratio, m, a)
                neg = torch.as_tensor(a < 0, device=d.device)  # a bool, or per-token under PPO
                dual = hp["dual_clip"] > 0 and bool(neg.any())
                if rc is not None and s["_w"] is not None:  # decoupled, or reinforce: the IS weights act
                    pg = pg * torch.tensor(s["_w"], dtype=torch.float32, device=d.device)
                per_token = pg
                kl = torch.zeros_like(lp)
                if hp["beta"] > 0:
                    delta = torch.tensor(s["ref"], dtype=torch.float32, device=d.device) - lp
                    kl = kl_term(delta, hp["kl_estimator"]) * m
                    if not hp["kl_in_reward"]:  # with it, the KL is in PPO's rewards
                        per_token = pg + hp["beta"] * kl
                if hp["entropy_coeff"] > 0:  # the bonus: -c·H, aggregated like the rest
                    per_token = per_token - hp["entropy_coeff"] * ent * m
                w = weight * token_weight(hp, norm, n)
                loss = loss + w * per_token.sum()
                if weight:
                    with torch.no_grad():
                        sums["loss"] += float(w * per_token.sum())
                        sums["policy_loss"] += float(w * pg.sum())
                        sums["kl"] += float(kl.sum())
                        sums["entropy"] += float((ent * m).sum())
                        sums["clip_low"] += float(clip_low.sum())
                        sums["clip_high"] += float(clip_high.sum())
                        sums["ratio_dev"] += float(((ratio - 1).abs() * m).sum())
                        if dual:
                            sums["clip_dual"] += float(((ratio > hp["dual_clip"]) & neg).float().mul(m).sum())
                        sums["tokens"] += n
            if not loss.requires_grad:
                # The rejection dropped every token here: a zero gradient
                # that still reaches every parameter, so DDP's all-reduce
                # runs on every process alike.
                loss = sum(torch.where(torch.isfinite(lp), lp, torch.zeros_like(lp)).sum() for lp in lps) * 0.0
            # DDP averages gradients over the processes; the loss is a sum
            # of shares of the minibatch's mean, so undo the average.
            (loss * d.world).backward()
    keys = list(sums)
    total = dict(zip(keys, d.all_sum([sums[k] for k in keys])))
    t = max(total["tokens"], 1.0)
    return {
        "loss": total["loss"],
        "policy_loss": total["policy_loss"],
        # Not computed at beta 0: null, never a measured-looking 0.
        "kl": total["kl"] / t if hp["beta"] > 0 else None,
        "entropy": total["entropy"] / t,
        "clip_frac_low": total["clip_low"] / t,
        "clip_frac_high": total["clip_high"] / t,
        "ratio_dev": total["ratio_dev"] / t,
        **({"clip_frac_dual": total["clip_dual"] / t} if hp["dual_clip"] > 0 else {}),
        "ratio_max": d.all_max(ratio_max),
        "behaviour_kl": total["behaviour_kl"] / max(total["scored"], 1.0),
        "tokens": int(total["tokens"]),
        **({} if rc is None else rc["figures"]),
        # What the mismatch and the rollout figures are of; not written.
        "_scored": total["scored"],
        "_seqs": 0.0 if rc is None else rc["seqs"],
    }


# ---------------------------------------------------------------- outputs


def finite(v: Any) -> Any:
    """v with NaN and infinities replaced by None: JSON has no NaN."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite(x) for x in v]
    return v


def mismatch(step_metrics: list[dict], first_epoch: int) -> dict:
    """The train/inference mismatch before the update, as rlpipe's
    trainers/grpo.MismatchOf: mismatch_kl, the token-weighted k3 of the
    first epoch's steps (each token at the first step that trains it), and
    ratio_max over every step."""
    first = step_metrics[:first_epoch]
    scored = [s.get("_scored", s["tokens"]) for s in first]  # the rejected tokens count
    tokens = sum(scored)
    kl = sum(s["behaviour_kl"] * n for s, n in zip(first, scored)) / tokens if tokens else 0.0
    return {"mismatch_kl": kl, "ratio_max": max((s["ratio_max"] for s in step_metrics), default=0.0)}


def rollout_of(step_metrics: list[dict], first_epoch: int) -> dict:
    """The rollout correction's figures of an update, as rlpipe's
    trainers/grpo.RolloutOf: over the first epoch's steps, the means and
    fractions weighted by their tokens, the sequence fraction by their
    sequences, the max over those steps."""
    first = step_metrics[:first_epoch]
    out = {}
    tokens, seqs = sum(s["_scored"] for s in first), sum(s["_seqs"] for s in first)
    if first and "rollout_is_mean" in first[0] and tokens:
        out["rollout_is_mean"] = sum(s["rollout_is_mean"] * s["_scored"] for s in first) / tokens
        out["rollout_is_max"] = max(s["rollout_is_max"] for s in first)
        out["rollout_is_capped_frac"] = sum(s["rollout_is_capped_frac"] * s["_scored"] for s in first) / tokens
    if first and "rollout_rs_masked_frac" in first[0] and tokens:
        out["rollout_rs_masked_frac"] = sum(s["rollout_rs_masked_frac"] * s["_scored"] for s in first) / tokens
        out["rollout_rs_seq_masked_frac"] = sum(s["rollout_rs_seq_masked_frac"] * s["_seqs"] for s in first) / seqs
    return out


def write_critic(args, critic, samples) -> None:
    """PPO's outputs: the critic's state (--critic-out) and the per-token
    figures (--values-out), when the flags are given."""
    if args.critic_out:
        critic.save(args.critic_out)
    else:
        log("no --critic-out: the critic's update is not kept")
    if args.values_out:
        ppo_critic.write_values(args.values_out, samples)


def write_outputs(args, hp, inputs, peft_model, opt, names, optimizer_steps, step_metrics, seconds,
                  first_epoch, extra: dict | None = None) -> None:
    import torch

    if full(hp):
        save_full(args, hp, peft_model)
    else:
        peft_model.save_pretrained(args.adapter_out, safe_serialization=True)
    os.makedirs(args.optimizer_out, exist_ok=True)
    updates = inputs["updates"] + 1
    rng = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    torch.save({
        "format": STATE_FORMAT,
        "optimizer": opt.state_dict(),
        "param_names": names,
        "optimizer_steps": optimizer_steps,
        "updates": updates,
        "rng": rng,
    }, os.path.join(args.optimizer_out, OPTIMIZER_FILE))
    with open(os.path.join(args.optimizer_out, STATE_FILE), "w", encoding="utf-8") as f:
        json.dump({"format": STATE_FORMAT, "base_model": hp["base_model"], "optimizer_steps": optimizer_steps,
                   "updates": updates, "options": hp}, f, indent=2, sort_keys=True)
        f.write("\n")

    m: dict[str, Any] = {
        "iteration": args.iteration,
        "updates": updates,
        "optimizer_steps": optimizer_steps,
        "steps": [{k: v for k, v in s.items() if not k.startswith("_")} for s in step_metrics],
        "samples_used": len(inputs["samples"]),
        "samples_skipped": sum(inputs["skipped"].values()),
        "train_seconds": seconds,
    }
    if inputs["skipped"]:
        m["skip_reasons"] = inputs["skipped"]
    if step_metrics:
        n = len(step_metrics)
        for key in ("loss", "policy_loss", "kl", "entropy", "clip_frac_low", "clip_frac_high", "clip_frac_dual",
                    "ratio_dev", "grad_norm"):
            if key == "clip_frac_dual" and hp["dual_clip"] <= 0:
                continue
            values = [s[key] for s in step_metrics if s[key] is not None]
            m[key] = sum(values) / len(values) if values else None
        m["train_tokens"] = sum(s["tokens"] for s in step_metrics)
        m.update(mismatch(step_metrics, first_epoch))
        m.update(rollout_of(step_metrics, first_epoch))
        if seconds > 0:
            m["tokens_per_second"] = m["train_tokens"] / seconds
    m.update(extra or {})
    with open(args.metrics_out, "w", encoding="utf-8") as f:
        json.dump(finite(m), f, indent=2, sort_keys=True, allow_nan=False)
        f.write("\n")


def save_full(args, hp, model) -> None:
    """Writes the fully fine-tuned model to --adapter-out as a Hugging Face
    model directory vLLM and transformers load as it is: config.json and
    safetensors weights (model-0000k-of-0000N.safetensors with
    model.safetensors.index.json above max_shard_size), and the tokenizer
    and generation config of the directory the model came from (the
    previous checkpoint, else the base model; a hub id's tokenizer is
    saved by transformers)."""
    model.save_pretrained(args.adapter_out, safe_serialization=True, max_shard_size=hp["max_shard_size"])
    src = args.adapter_in or hp["base_model"]
    if os.path.isdir(src):
        import shutil

        for name in TOKENIZER_FILES:
            if os.path.isfile(os.path.join(src, name)):
                shutil.copyfile(os.path.join(src, name), os.path.join(args.adapter_out, name))
        return
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(src, trust_remote_code=hp["trust_remote_code"]).save_pretrained(args.adapter_out)


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    hp = None
    try:
        # Checked before torch is imported, so a typo fails in a second.
        # A process on a node without the work directory gets the
        # hyperparameters from the I/O rank instead.
        if os.path.exists(args.hparams):
            hp = load_hparams(args.hparams)
        return train(args, hp)
    except ConfigError as e:
        log(str(e))
        return EXIT_CONFIG
    except (DataError, ppo_critic.CriticError) as e:
        log(str(e))
        return EXIT_DATAERR


def entry(argv: list[str] | None = None) -> int:
    """main, with an unexpected exception recorded for torchrun: its
    report of the failed rank then carries the Python traceback (what
    torch.distributed.elastic's @record does, without importing torch
    before the hyperparameters are checked)."""
    try:
        return main(argv)
    except Exception as e:
        if os.environ.get("TORCHELASTIC_ERROR_FILE"):
            from torch.distributed.elastic.multiprocessing.errors import get_error_handler

            handler = get_error_handler()
            handler.initialize()
            handler.record_exception(e)
        raise


if __name__ == "__main__":
    sys.exit(entry())
