"""reasoning-gym's own scorers as an rlpipe reward function (reward.yaml).

TRL's signature: one call per scoring batch, a score per row. Each row's
entry is rebuilt as reasoning-gym made it -- {question, answer, metadata}
from the prompts table `rlpipe dataset reasoning-gym` writes -- and scored
by the score_answer of the family its metadata names (source_dataset), so
one batch may mix families.
"""

import reasoning_gym
from reasoning_gym.utils import extract_answer

_scorers = {}


def _scorer(family):
    # get_score_answer_fn builds the family's dataset with its default
    # config: do that once per family, not once per row.
    fn = _scorers.get(family)
    if fn is None:
        fn = _scorers[family] = reasoning_gym.get_score_answer_fn(family)
    return fn


def _text(prompt):
    # A prompt with a chat form comes as its messages: the question is the
    # last user turn.
    if isinstance(prompt, list):
        users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        return users[-1] if users else ""
    return prompt


def score(completions, prompts, answer, metadata, **columns):
    """The family's score_answer of each completion, in [0, 1].

    The answer scored is the text in the completion's last
    <answer>...</answer>, as reasoning-gym's own evaluations take it, else
    the whole completion stripped. A row whose metadata names no family
    (not a reasoning-gym row) is not scored (None).
    """
    out = []
    for completion, prompt, ref, meta in zip(completions, prompts, answer, metadata):
        family = meta.get("source_dataset") if isinstance(meta, dict) else None
        if not family:
            out.append(None)
            continue
        if isinstance(completion, list):  # an episode's turns: the last assistant turn answers
            said = [m.get("content", "") for m in completion if m.get("role") == "assistant"]
            completion = said[-1] if said else ""
        given = extract_answer(completion)
        if given is None:
            given = completion.strip()
        entry = {"question": _text(prompt), "answer": ref, "metadata": meta}
        out.append(float(_scorer(family)(given, entry)))
    return out
