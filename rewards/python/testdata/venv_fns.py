"""Reward functions that need the project venv's packages."""

from math_verify import parse, verify


def math_equal(completions, prompts, answer, **kwargs):
    """1.0 when math-verify finds the completion equal to the answer."""
    return [float(verify(parse(a), parse(c))) for c, a in zip(completions, answer)]


def base_prefix(completions, prompts, **kwargs):
    """Where the interpreter's standard library is, as a check that the
    sandbox shows it (the length of the path: a float)."""
    import sys

    return [float(len(sys.base_prefix)) for _ in completions]
