"""reasoning-gym's own scorer as a reward function with TRL's signature."""

import reasoning_gym


def score_answer(completions, prompts, answer, metadata, **columns):
    """Score each completion with its family's score_answer.

    The family is the row's metadata["source_dataset"] (what `rlpipe dataset
    reasoning-gym` writes), basic_arithmetic when the row has none.
    """
    scores = []
    for completion, prompt, ans, meta in zip(completions, prompts, answer, metadata):
        family = meta.get("source_dataset") or "basic_arithmetic"
        entry = {"question": prompt, "answer": ans, "metadata": meta}
        scores.append(float(reasoning_gym.get_score_answer_fn(family)(completion, entry)))
    return scores
