"""A function that reads a column under another name: a metadata field."""


def level(completions, prompts, level, **columns):
    """The row's metadata level, or None (not scored) when it has none."""
    return [None if x is None else float(x) for x in level]


def first_role(completions, prompts, **columns):
    """1.0 when the completion is one assistant message and the prompt one
    user message: TRL's conversational format."""
    return [float(c[0]["role"] == "assistant" and p[0]["role"] == "user") for c, p in zip(completions, prompts)]
