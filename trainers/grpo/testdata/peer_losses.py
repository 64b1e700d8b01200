"""Policy losses and the KL of verl's own code, for trainers/grpo/peer_test.go.

Usage: python peer_losses.py BATCH.json

BATCH.json is {"seqs": [{"logprobs": [...], "old": [...], "ref": [...],
"mask": [0/1, ...], "adv": A, optionally "token_adv": [...], PPO's per
token}, ...], "cases": [{"name", "fn", "agg", "eps_low", "eps_high",
"clip_c"}, ...]}. Prints one JSON object: for each
case, {"loss": the aggregated loss, "grad": the gradient with respect to
each sequence's logprobs}; or "verl_error": why verl does not import.
verl's core_algos is imported the way advantages/testdata/peer_advantages.py
does (without ray), by importing that script's function.
"""

import json
import os
import sys


def import_verl():
    """verl's core_algos and how it was imported, as
    advantages/testdata/peer_advantages.py imports it (without ray)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "..", "advantages", "testdata"))
    from peer_advantages import import_core_algos

    return import_core_algos()


def setup():
    """The batch file (sys.argv[1]), verl's core_algos and how it was
    imported; or None after printing {"verl_error": why}, so that the Go
    test skips with the reason."""
    with open(sys.argv[1]) as f:
        batch = json.load(f)
    try:
        return (batch, *import_verl())
    except Exception as e:
        json.dump({"verl_error": f"{type(e).__name__}: {e}"}, sys.stdout)
        return None


def padder(seqs):
    """padded(key), which pads every sequence's list under key into a
    float64 tensor [sequences, the longest], and the advantages as one."""
    import torch

    width = max(len(s["logprobs"]) for s in seqs)

    def padded(key, fill=0.0):
        return torch.tensor([s[key] + [fill] * (width - len(s[key])) for s in seqs], dtype=torch.float64)

    # PPO's per-token advantages (token_adv) when a sequence has them.
    return padded, torch.tensor([s["token_adv"] + [0.0] * (width - len(s["token_adv"])) if "token_adv" in s
                                 else [s["adv"]] * width for s in seqs], dtype=torch.float64)


def actor_config(core_algos, eps_low, eps_high, clip_c, **fields):
    """The actor config fields verl's loss functions read, and fields."""

    class Config(core_algos.ActorConfig):
        def __init__(self):
            self.clip_ratio = eps_low
            self.clip_ratio_low = eps_low
            self.clip_ratio_high = eps_high
            self.clip_ratio_c = clip_c
            self.global_batch_info = {}
            for k, v in fields.items():
                setattr(self, k, v)

        def get(self, key, default=None):
            return getattr(self, key, default)

    return Config()


def main():
    got = setup()
    if got is None:
        return
    batch, core_algos, how = got
    seqs = batch["seqs"]
    padded, adv = padder(seqs)
    old, ref, mask = padded("old"), padded("ref"), padded("mask")

    out = {"verl_import": how}
    for c in batch["cases"]:
        lp = padded("logprobs").requires_grad_(True)
        mode = c["agg"]
        if c["fn"].startswith("kl_"):  # kl_kl, kl_mse, kl_low_var_kl: kl_penalty's estimator names
            loss = core_algos.agg_loss(core_algos.kl_penalty(lp, ref, c["fn"][3:]), mask, mode)
        else:
            fn = getattr(core_algos, c["fn"])
            cfg = actor_config(core_algos, c["eps_low"], c["eps_high"], c["clip_c"])
            loss, _ = fn(old_log_prob=old, log_prob=lp, advantages=adv, response_mask=mask, loss_agg_mode=mode, config=cfg)
        loss.backward()
        out[c["name"]] = {
            "loss": loss.item(),
            "grad": [lp.grad[i, : len(s["logprobs"])].tolist() for i, s in enumerate(seqs)],
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
