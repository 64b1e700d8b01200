"""The checker of BenchmarkMathVerify's per-row way: a verifier whose
candidate run prints the completion and whose checker scores it with the
shipped reward function (a copy beside this file in /check), in a new
sandbox per row. The verdict's reason is the score."""
import os

from math_verify_reward import accuracy

completion = open("/candidate/stdout").read()
score = accuracy([completion], [""], [open("/check/answer.txt").read()])[0]
with open(os.environ["RLPIPE_VERDICT"], "w") as f:
    f.write(("pass: " if score == 1.0 else "fail: ") + repr(score))
