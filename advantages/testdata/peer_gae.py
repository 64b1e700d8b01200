"""GAE and whitening of verl's own code, for advantages/gae_peer_test.go.

Usage: python peer_gae.py BATCH.json

BATCH.json is {"rows": [{"rewards": [...], "values": [...], "mask":
[0/1, ...]}, ...], "gamma": g, "lambda": l}. Prints one JSON object:
{"advantages": whitened advantages per row, "returns": returns per row},
each row cut to its own length, from verl's
core_algos.compute_gae_advantage_return on the rows padded to one width
(padding masked); or "verl_error": why verl does not import.
"""

import json
import sys

from peer_advantages import import_core_algos


def main():
    with open(sys.argv[1]) as f:
        batch = json.load(f)
    try:
        import torch

        core_algos, how = import_core_algos()
    except Exception as e:  # report, so that the Go test skips with the reason
        json.dump({"verl_error": f"{type(e).__name__}: {e}"}, sys.stdout)
        return
    rows = batch["rows"]
    width = max(len(r["rewards"]) for r in rows)

    def padded(key):
        return torch.tensor([r[key] + [0.0] * (width - len(r[key])) for r in rows], dtype=torch.float64)

    adv, ret = core_algos.compute_gae_advantage_return(
        token_level_rewards=padded("rewards"),
        values=padded("values"),
        response_mask=padded("mask"),
        gamma=batch["gamma"],
        lam=batch["lambda"],
    )
    json.dump(
        {
            "verl_import": how,
            "advantages": [adv[i, : len(r["rewards"])].tolist() for i, r in enumerate(rows)],
            "returns": [ret[i, : len(r["rewards"])].tolist() for i, r in enumerate(rows)],
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
