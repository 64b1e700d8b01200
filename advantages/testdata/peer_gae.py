"""GAE and whitening of verl's own code, for advantages/peer_test.go.

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

from peer_advantages import verl_batch


def main():
    got = verl_batch("rows")
    if got is None:
        return
    batch, _, core_algos, how, padded = got
    adv, ret = core_algos.compute_gae_advantage_return(
        token_level_rewards=padded("rewards"),
        values=padded("values"),
        response_mask=padded("mask"),
        gamma=batch["gamma"],
        lam=batch["lambda"],
    )
    cut = [len(r["rewards"]) for r in batch["rows"]]
    json.dump(
        {
            "verl_import": how,
            "advantages": [adv[i, :n].tolist() for i, n in enumerate(cut)],
            "returns": [ret[i, :n].tolist() for i, n in enumerate(cut)],
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
