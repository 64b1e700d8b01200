"""The floor of BenchmarkMathVerify: the reward function called in a
plain Python loop, no sandbox, no pipe, no Parquet.

    python floor.py REWARD_DIR < rows.json

rows.json is {"warmup": {...}, "rows": {...}}, each {"completions": [...],
"prompts": [...], "answer": [...]}. The warm-up batch is scored first,
untimed; then the rows, timed. Prints {"seconds": s, "scores": [...]}.
"""
import json
import sys
import time

sys.path.insert(0, sys.argv[1])
from math_verify_reward import accuracy  # noqa: E402

req = json.load(sys.stdin)
accuracy(**req["warmup"])
rows = req["rows"]
t0 = time.perf_counter()
scores = accuracy(**rows)
seconds = time.perf_counter() - t0
json.dump({"seconds": seconds, "scores": scores}, sys.stdout)
