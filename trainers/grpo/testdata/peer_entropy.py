"""The loss with a KL term and an entropy bonus, from verl's own functions,
for trainers/grpo/peer_entropy_test.go.

Usage: python peer_entropy.py BATCH.json

BATCH.json is {"seqs": [{"logits": [[V floats] per token], "target": [token
per token], "old": [...], "ref": [...], "mask": [0/1, ...], "adv": A}, ...],
"cases": [{"name", "agg", "kl", "beta", "entropy_coeff", "eps_low",
"eps_high"}, ...]}. For each case it composes verl's actor loss as
verl.workers.utils.losses.ppo_loss does:

    compute_policy_loss_vanilla(...) − entropy_coeff·agg_loss(entropy_from_logits(logits))
        + beta·agg_loss(kl_penalty(logπ, logπ_ref, kl))

with logπ = log_softmax(logits)[target], and prints {"loss", "grad": the
gradient with respect to every token's logits} per case, plus
"trl_entropy": TRL's entropy_from_logits of every token (or "trl_error"),
"verl_entropy" likewise; or "verl_error": why verl does not import.
"""

import json
import os
import sys


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peer_losses import actor_config, setup

    got = setup()
    if got is None:
        return
    batch, core_algos, how = got
    import torch
    from verl.utils.torch_functional import entropy_from_logits  # core_algos imported it

    seqs = batch["seqs"]
    width = max(len(s["target"]) for s in seqs)
    vocab = len(seqs[0]["logits"][0])

    def padded(key, fill=0.0, dtype=torch.float64):
        return torch.tensor([s[key] + [fill] * (width - len(s[key])) for s in seqs], dtype=dtype)

    old, ref, mask = padded("old"), padded("ref"), padded("mask")
    target = padded("target", 0, torch.long)
    adv = torch.tensor([[s["adv"]] * width for s in seqs], dtype=torch.float64)
    logits0 = torch.tensor(
        [s["logits"] + [[0.0] * vocab] * (width - len(s["logits"])) for s in seqs], dtype=torch.float64
    )

    def per_token(t):
        return [t[i, : len(s["target"])].tolist() for i, s in enumerate(seqs)]

    out = {"verl_import": how, "verl_entropy": per_token(entropy_from_logits(logits0))}
    for c in batch["cases"]:
        logits = logits0.clone().requires_grad_(True)
        lp = torch.log_softmax(logits, dim=-1).gather(-1, target[..., None]).squeeze(-1)
        mode = c["agg"]
        cfg = actor_config(core_algos, c["eps_low"], c["eps_high"], 1e9)  # 1e9: no dual clip
        loss, _ = core_algos.compute_policy_loss_vanilla(
            old_log_prob=old, log_prob=lp, advantages=adv, response_mask=mask, loss_agg_mode=mode, config=cfg
        )
        entropy = entropy_from_logits(logits)
        loss = loss - c["entropy_coeff"] * core_algos.agg_loss(entropy, mask, mode)
        if c["beta"] > 0:
            kld = core_algos.kl_penalty(lp, ref, c["kl"])
            loss = loss + c["beta"] * core_algos.agg_loss(kld, mask, mode)
        loss.backward()
        out[c["name"]] = {
            "loss": loss.item(),
            "grad": [logits.grad[i, : len(s["target"])].tolist() for i, s in enumerate(seqs)],
        }
    try:
        from trl.trainer.utils import entropy_from_logits as trl_entropy
    except Exception as e:
        out["trl_error"] = f"{type(e).__name__}: {e}"
    else:
        out["trl_entropy"] = per_token(trl_entropy(logits0))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
