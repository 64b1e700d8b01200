"""Print reasoning-gym's basic_arithmetic rows of two one-digit terms as JSON
lines {"question", "answer"}: argv[1] rows from seed argv[2]."""

import json
import sys
import warnings

warnings.simplefilter("ignore")
import reasoning_gym  # noqa: E402

size, seed = int(sys.argv[1]), int(sys.argv[2])
rows = reasoning_gym.create_dataset(
    "basic_arithmetic", size=size, seed=seed, min_terms=2, max_terms=2, min_digits=1, max_digits=1
)
for row in rows:
    print(json.dumps({"question": row["question"], "answer": row["answer"]}))
