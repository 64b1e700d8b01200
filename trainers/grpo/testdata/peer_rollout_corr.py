"""verl's rollout correction on a batch, for trainers/grpo/rollout_corr_peer_test.go.

Usage: python peer_rollout_corr.py BATCH.json

BATCH.json is {"seqs": [{"logprobs", "old", "behaviour", "mask", "adv"}, ...],
"cases": [{"name", "mode", "fn", "agg", "eps_low", "eps_high",
"rollout_is", "rollout_is_threshold", "rollout_rs",
"rollout_rs_threshold"}, ...]}. mode "decoupled" calls
rollout_corr_helper.compute_rollout_correction_and_rejection_mask(old,
behaviour, ...) and hands its weights and mask to the core_algos loss fn
(verl's three-policy mode); mode "bypass" calls
core_algos.compute_policy_loss_bypass_mode with old as the rollout
logprobs (verl's bypass mode, loss_type ppo_clip or reinforce). Prints one
JSON object: for each case {"loss", "grad" (per sequence, with respect to
logprobs), "mask" (the response mask after rejection), "weights" (the IS
weights, or null), "metrics" (verl's rollout_corr/ metrics)}; or
"verl_error": why verl does not import.

verl is imported as trainers/grpo/testdata/peer_losses.py does (without
ray); rollout_corr_helper also imports verl.protocol, which imports ray
and names ray.ObjectRef in a type hint, and
verl.workers.config.actor.PolicyLossConfig (a type hint): without ray
both are placeholders. The functions compared are verl's own, unchanged.
"""

import json
import os
import sys
import types


def import_rollout_corr():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "..", "advantages", "testdata"))
    from peer_advantages import import_core_algos

    core_algos, how = import_core_algos()
    if "ray" not in sys.modules:
        try:
            import ray  # noqa: F401
        except ModuleNotFoundError:
            ray = types.ModuleType("ray")
            ray.ObjectRef = type("ObjectRef", (), {})
            sys.modules["ray"] = ray
            how += "; ray a placeholder module (verl.protocol's import and type hint)"
    if not hasattr(sys.modules["verl.workers.config"], "__path__"):
        actor = types.ModuleType("verl.workers.config.actor")
        actor.PolicyLossConfig = type("PolicyLossConfig", (), {})
        sys.modules["verl.workers.config.actor"] = actor
    from verl.trainer.ppo import rollout_corr_helper

    return core_algos, rollout_corr_helper, how


def main():
    with open(sys.argv[1]) as f:
        batch = json.load(f)
    try:
        import torch

        from peer_losses import actor_config, padder

        core_algos, helper, how = import_rollout_corr()
    except Exception as e:  # report, so that the Go test skips with the reason
        json.dump({"verl_error": f"{type(e).__name__}: {e}"}, sys.stdout)
        return

    seqs = batch["seqs"]
    padded, adv = padder(seqs)
    old, behaviour, mask = padded("old"), padded("behaviour"), padded("mask")

    out = {"verl_import": how}
    for c in batch["cases"]:
        lp = padded("logprobs").requires_grad_(True)
        # verl's dual clip at 1e9: rlpipe's off.
        cfg = actor_config(core_algos, c["eps_low"], c["eps_high"], 1e9, policy_loss={"rollout_correction": {
            "loss_type": c["fn"],
            "rollout_is": c["rollout_is"],
            "rollout_is_threshold": c["rollout_is_threshold"],
            "rollout_rs": c["rollout_rs"],
            "rollout_rs_threshold": c["rollout_rs_threshold"],
        }})
        if c["mode"] == "bypass":
            loss, metrics = core_algos.compute_policy_loss_bypass_mode(
                old_log_prob=old, log_prob=lp, advantages=adv, response_mask=mask,
                loss_agg_mode=c["agg"], config=cfg)
            with torch.no_grad():
                w, kept, _ = helper.compute_rollout_correction_and_rejection_mask(
                    old_log_prob=lp.detach(), rollout_log_prob=old, response_mask=mask,
                    rollout_is=c["rollout_is"], rollout_is_threshold=c["rollout_is_threshold"],
                    rollout_rs=c["rollout_rs"], rollout_rs_threshold=c["rollout_rs_threshold"])
        else:
            w, kept, metrics = helper.compute_rollout_correction_and_rejection_mask(
                old_log_prob=old, rollout_log_prob=behaviour, response_mask=mask,
                rollout_is=c["rollout_is"], rollout_is_threshold=c["rollout_is_threshold"],
                rollout_rs=c["rollout_rs"], rollout_rs_threshold=c["rollout_rs_threshold"])
            fn = getattr(core_algos, c["fn"])
            loss, _ = fn(old_log_prob=old, log_prob=lp, advantages=adv, response_mask=kept,
                         loss_agg_mode=c["agg"], config=cfg,
                         rollout_is_weights=None if w is None else w.batch["rollout_is_weights"])
        loss.backward()
        weights = None if w is None else w.batch["rollout_is_weights"]
        out[c["name"]] = {
            "loss": loss.item(),
            "grad": [lp.grad[i, : len(s["logprobs"])].tolist() for i, s in enumerate(seqs)],
            "mask": [kept[i, : len(s["logprobs"])].tolist() for i, s in enumerate(seqs)],
            "weights": None if weights is None else [weights[i, : len(s["logprobs"])].tolist() for i, s in enumerate(seqs)],
            "metrics": {k: float(v) for k, v in metrics.items() if k.startswith("rollout_corr/")},
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
