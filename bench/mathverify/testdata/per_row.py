"""One row scored by a fresh interpreter, as a per-row verifier does:
the interpreter's start, math-verify's import and one call. The row is
{"completions": [c], "prompts": [p], "answer": [a]} on stdin; prints the
score (null when not scored)."""
import json
import sys

sys.path.insert(0, "/rlpipe-functions/0")
from math_verify_reward import accuracy  # noqa: E402

print(json.dumps(accuracy(**json.load(sys.stdin))[0]))
