"""math-verify as an rlpipe reward function, with TRL's signature.

reward-math-verify.yaml names it (functions: accuracy); rlpipe calls it
once per scoring batch in a sandboxed worker (docs/REWARDS.md, "Python
functions" and "math-verify"). Per row:

- the gold answer (the dataset's answer column) is parsed with
  math-verify's default extraction (LaTeX and plain expressions), and
  a reference with a LaTeX command but no delimiters ("\\sqrt{2}") again
  inside $...$; when nothing parses ("", "n/a", plain words), the row
  is not scored: None, which rlpipe records as status "error", "function
  accuracy returned None: not scored";
- the completion is parsed with LaTeX (a \\boxed{} answer first) and plain
  expression extraction; a completion with nothing to parse is a wrong
  answer, 0.0;
- 1.0 when math-verify's verify finds them equal, else 0.0. math-verify
  bounds each parse and each comparison by its own timeout (5 s, a
  SIGALRM in the worker's main thread); a comparison that times out is
  False, so 0.0.
"""
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

_COMPLETION = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]


def _text(completion):
    """A completion's text; for an episode (a list of messages) its last
    assistant turn."""
    if isinstance(completion, str):
        return completion
    for message in reversed(completion or []):
        if message.get("role") == "assistant":
            return message.get("content") or ""
    return ""


def accuracy(completions, prompts, answer, **columns):
    golds = {}  # a prompt's samples share its answer: parse it once a batch
    scores = []
    for completion, gold in zip(completions, answer):
        gold = "" if gold is None else str(gold)
        if gold not in golds:
            golds[gold] = parse(gold) or ("\\" in gold and parse("$" + gold + "$")) or []
        parsed = golds[gold]
        if not parsed:
            scores.append(None)
            continue
        scores.append(1.0 if verify(parsed, parse(_text(completion), extraction_config=_COMPLETION)) else 0.0)
    return scores
