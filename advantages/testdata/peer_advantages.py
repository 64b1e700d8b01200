"""Advantages of the peers' own code, for advantages/peer_test.go.

Usage: python peer_advantages.py BATCH.json

BATCH.json is {"groups": [[r, ...], ...]}, each group the scored rewards
of one prompt (two or more). Prints one JSON object: for each case, the
advantages in the batch's order (groups concatenated), or for each
package that does not import, "<package>_error": why.
"""

import importlib.util
import json
import sys
import types


def import_core_algos():
    """verl.trainer.ppo.core_algos, imported as far as this venv allows.

    verl/__init__.py imports verl.protocol, which imports ray, and
    core_algos imports verl.workers.config (for ActorConfig, a type hint and
    one isinstance in a loss), which reaches ray through verl.utils.profiler
    and verl.single_controller. The lock leaves ray out (heavy, and no
    estimator calls it): without it, verl's package __init__ is skipped and
    verl.workers.config is an empty placeholder holding ActorConfig. The
    functions under test are verl's own, unchanged.
    """
    try:
        from verl.trainer.ppo import core_algos

        return core_algos, "import verl"
    except ModuleNotFoundError as e:
        if e.name != "ray":
            raise
    for name in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
        del sys.modules[name]
    spec = importlib.util.find_spec("verl")
    pkg = types.ModuleType("verl")
    pkg.__path__ = list(spec.submodule_search_locations)
    pkg.__spec__ = spec
    sys.modules["verl"] = pkg
    workers = types.ModuleType("verl.workers")
    workers.__path__ = []
    config = types.ModuleType("verl.workers.config")
    config.ActorConfig = type("ActorConfig", (), {})
    sys.modules["verl.workers"] = workers
    sys.modules["verl.workers.config"] = config
    from verl.trainer.ppo import core_algos

    return core_algos, "verl without ray: package __init__ skipped, verl.workers.config a placeholder"


def verl_batch(rows_key):
    """The batch of sys.argv[1], torch and verl's core_algos for the scripts
    that compare with verl alone (peer_gae.py, trainers/grpo's), and
    padded(key), the rows' lists under key as one float64 tensor padded
    with zeros to the longest row of key rows_key. When torch or verl does
    not import, prints {"verl_error": why}, so that the Go test skips with
    the reason, and returns None.
    """
    with open(sys.argv[1]) as f:
        batch = json.load(f)
    try:
        import torch

        core_algos, how = import_core_algos()
    except Exception as e:
        json.dump({"verl_error": f"{type(e).__name__}: {e}"}, sys.stdout)
        return None
    rows = batch[rows_key]
    width = max(len(r[k]) for r in rows for k in r if isinstance(r[k], list))

    def padded(key):
        return torch.tensor([r[key] + [0.0] * (width - len(r[key])) for r in rows], dtype=torch.float64)

    return batch, torch, core_algos, how, padded


def main():
    with open(sys.argv[1]) as f:
        groups = json.load(f)["groups"]
    try:
        import numpy as np
        import torch
    except Exception as e:  # neither peer can run
        why = f"{type(e).__name__}: {e}"
        json.dump({"verl_error": why, "trl_error": why}, sys.stdout)
        return

    scores = [r for g in groups for r in g]
    index = np.array([i for i, g in enumerate(groups) for _ in g])
    out = {}

    try:
        core_algos, how = import_core_algos()
    except Exception as e:  # report, so that the Go test skips with the reason
        out["verl_error"] = f"{type(e).__name__}: {e}"
    else:
        out["verl_import"] = how

        def verl(fn, **kw):
            # One token per response holding the outcome reward, float64
            # so the comparison is not float32's.
            rewards = torch.tensor(scores, dtype=torch.float64).unsqueeze(-1)
            mask = torch.ones_like(rewards)
            adv, _ = fn(token_level_rewards=rewards, response_mask=mask, index=index, **kw)
            return adv[:, 0].tolist()

        out["verl_grpo"] = verl(core_algos.compute_grpo_outcome_advantage, epsilon=1e-6, norm_adv_by_std_in_grpo=True)
        out["verl_grpo_no_std"] = verl(core_algos.compute_grpo_outcome_advantage, norm_adv_by_std_in_grpo=False)
        out["verl_rloo"] = verl(core_algos.compute_rloo_outcome_advantage)
        # verl whitens over response tokens; with one token per response
        # that is rlpipe's whitening over samples.
        out["verl_rpp_baseline"] = verl(core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage)

    try:
        from trl.trainer.utils import nanstd
    except Exception as e:
        out["trl_error"] = f"{type(e).__name__}: {e}"
    else:
        # TRL computes GRPO's advantages inline in GRPOTrainer
        # (trl/trainer/grpo_trainer.py, _generate_and_score_completions,
        # scale_rewards "group" and "none"): rewards minus the group's
        # nanmean, divided by nanstd + 1e-4 unless "none". The group std is
        # TRL's own callable, nanstd; the rest is those lines, per group.
        group, none = [], []
        for g in groups:
            r = torch.tensor(g, dtype=torch.float64).view(-1, len(g))
            mean = torch.nanmean(r, dim=1).repeat_interleave(len(g), dim=0)
            std = nanstd(r, dim=1).repeat_interleave(len(g), dim=0)
            a = r.view(-1) - mean
            none += a.tolist()
            group += (a / (std + 1e-4)).tolist()
        out["trl_grpo"] = group
        out["trl_grpo_none"] = none

    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
