"""The reference script's PPO arithmetic against verl's own functions, for
trainers/external/ppo_torch_test.go.

Usage: python peer_ppo_critic.py

On a fixed-seed batch (24 sequences of 1 to 12 tokens, masks with holes
as episodes' observation tokens make, rewards on the last trainable token,
a KL in the reward) it computes with trainers/python/ppo_critic.py and with
verl's core_algos (compute_gae_advantage_return, whose masked_whiten is
verl.utils.torch_functional's; compute_value_loss; kl_penalty "kl") for
several (gamma, lambda), and prints one JSON object: the largest
difference of each figure, or "verl_error": why verl does not import.
"""

import json
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        import torch

        sys.path.insert(0, os.path.join(here, "..", "..", "..", "advantages", "testdata"))
        from peer_advantages import import_core_algos

        core_algos, how = import_core_algos()
    except Exception as e:  # report, so that the Go test skips with the reason
        json.dump({"verl_error": f"{type(e).__name__}: {e}"}, sys.stdout)
        return
    sys.path.insert(0, os.path.join(here, "..", "..", "python"))
    import ppo_critic

    g = torch.Generator().manual_seed(36)
    samples = []
    for i in range(24):
        n = 1 + int(torch.randint(12, (1,), generator=g))
        mask = [1] * n
        if i % 4 == 1 and n > 2:  # an episode: observation tokens between replies
            mask = [1 if torch.rand(1, generator=g).item() > 0.35 else 0 for _ in range(n)]
            mask[0] = 1
        old = (-torch.rand(n, generator=g, dtype=torch.float64) * 2).tolist()
        ref = (torch.tensor(old) + torch.randn(n, generator=g, dtype=torch.float64) * 0.3).tolist()
        samples.append({"mask": mask, "old": old, "ref": ref, "advantage": float(torch.randint(2, (1,), generator=g)),
                        "completion": [0] * n})
    width = max(len(s["mask"]) for s in samples)

    def padded(rows):
        return torch.tensor([r + [0.0] * (width - len(r)) for r in rows], dtype=torch.float64)

    M = padded([[float(m) for m in s["mask"]] for s in samples])
    V = torch.randn(M.shape, generator=g, dtype=torch.float64) * 0.5
    out = {"verl_import": how, "tokens": int(M.sum())}
    worst = {}

    def note(key, a, b):
        d = float((a - b).abs().max())
        worst[key] = max(worst.get(key, 0.0), d)

    beta = 0.05
    # Per-token rewards with the KL in the reward: verl's token_level_scores
    # (the outcome on the last response token) minus beta·kl_penalty "kl".
    ours_r = padded([ppo_critic.token_rewards(s, beta, True) for s in samples])
    scores = torch.zeros_like(M)
    for i, s in enumerate(samples):
        scores[i, max(j for j, m in enumerate(s["mask"]) if m)] = s["advantage"]
    kld = core_algos.kl_penalty(padded([s["old"] for s in samples]), padded([s["ref"] for s in samples]), "kl") * M
    verl_r = scores - beta * kld
    note("rewards", ours_r * M, verl_r * M)
    for gamma, lam in ((1.0, 1.0), (1.0, 0.95), (0.99, 0.9), (1.0, 0.0)):
        adv, ret = ppo_critic.gae(ours_r, V, M, gamma, lam)
        adv = ppo_critic.masked_whiten(adv, M)
        vadv, vret = core_algos.compute_gae_advantage_return(verl_r, V, M, gamma, lam)
        note("advantages", adv * M, vadv * M)
        note("returns", ret * M, vret * M)
    # The value loss, token-mean, with a clip that binds on some tokens.
    vpred = V + torch.randn(M.shape, generator=g, dtype=torch.float64) * 0.6
    terms, clipped = ppo_critic.value_loss_terms(vpred, V, ret, 0.5)
    ours_loss = 0.5 * (terms * M).sum() / M.sum()
    verl_loss, verl_frac = core_algos.compute_value_loss(vpred, ret, V, M, 0.5, "token-mean")
    note("value_loss", ours_loss, verl_loss)
    note("vf_clip_frac", (clipped.double() * M).sum() / M.sum(), verl_frac)
    out["clipped_tokens"] = int((clipped.double() * M).sum())
    out["worst"] = worst
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
