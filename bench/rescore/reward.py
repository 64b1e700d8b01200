"""The reward of reward.yaml as a per-row CPython function, the way a
TRL-style reward function computes it: read trajectories as JSON lines,
join the prompts by prompt_id, call the reward for each row, write the
rewards as JSON lines.

    python3 reward.py PROMPTS.jsonl TRAJECTORIES.jsonl OUT.jsonl

Standard library only. Rows whose status is not "ok" are skipped as rlpipe
skips them: null components and total, status "skipped: <status>".
"""
import json
import re
import sys

BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def extract_answer(text):
    """Last \\boxed{...}, else the text after the last "####" on its line,
    else the last number, else ""."""
    boxed = BOXED.findall(text)
    if boxed:
        return boxed[-1].strip()
    i = text.rfind("####")
    if i >= 0:
        rest = text[i + 4:].split("\n", 1)[0].strip()
        if rest:
            return rest
    numbers = NUMBER.findall(text)
    return numbers[-1] if numbers else ""


def to_number(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def reward(completion, answer, num_tokens):
    """Returns (correct, format, length, total)."""
    got = to_number(extract_answer(completion))
    want = to_number(answer)
    correct = 1.0 if got is not None and want is not None and abs(got - want) <= 1e-6 else 0.0
    fmt = 1.0 if "####" in completion or "\\boxed{" in completion else 0.0
    length = -0.001 * float(num_tokens - 150) if num_tokens > 150 else 0.0
    total = 0.0
    total += 1.0 * correct
    total += 0.2 * fmt
    total += 1.0 * length
    return correct, fmt, length, total


def main(prompts_path, trajectories_path, out_path):
    answers = {}
    with open(prompts_path, encoding="utf-8") as f:
        for line in f:
            p = json.loads(line)
            answers[p["prompt_id"]] = p["answer"]
    with open(trajectories_path, encoding="utf-8") as f, open(out_path, "w", encoding="utf-8") as out:
        for line in f:
            t = json.loads(line)
            row = {"prompt_id": t["prompt_id"], "sample_index": t["sample_index"]}
            if t["status"] == "ok":
                c, fm, ln, total = reward(t["completion"], answers[t["prompt_id"]], t["num_tokens"])
                row.update(status="ok", r_correct=c, r_format=fm, r_length=ln, total=total)
            else:
                row.update(status="skipped: " + t["status"], r_correct=None, r_format=None, r_length=None, total=None)
            out.write(json.dumps(row))
            out.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
