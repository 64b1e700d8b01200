"""Call a policy server serving the tiny model with the official openai SDK
and check the fields the SDK parses; print them as JSON for the Go test to
compare with the model's numbers.

    python openai_sdk.py BASE_URL MODEL TOKEN
"""
import json
import sys

import openai

base, model, token = sys.argv[1:4]
client = openai.OpenAI(base_url=base + "/v1", api_key=token, max_retries=0)


def descending(values):
    return all(a >= b for a, b in zip(values, values[1:]))


def check_alternatives(where, names, values, k):
    assert len(names) == k, f"{where}: {len(names)} alternatives, want {k}"
    assert all(len(n) == 1 or n == "<eos>" for n in names), f"{where}: alternatives {names} are not characters"
    assert all(v <= 0 for v in values), f"{where}: logprobs {values} above 0"
    assert descending(values), f"{where}: logprobs {values} not sorted descending"


out = {}

# Completions, greedy, logprobs=3 and echo: the prompt's characters, then
# the completion's, cut by a stop string.
c = client.completions.create(model=model, prompt="123+456=", max_tokens=6, temperature=0,
                              logprobs=3, echo=True, stop=["9"], seed=1)
ch = c.choices[0]
lp = ch.logprobs
assert ch.text == "123+456=57", ch.text
assert ch.finish_reason == "stop", ch.finish_reason
assert ch.stop_reason == "9", ch.stop_reason
assert lp.tokens == list("123+456=579"), lp.tokens
assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None, "the first prompt token has a logprob"
assert lp.text_offset == list(range(11)), lp.text_offset
for i in range(1, len(lp.tokens)):
    top = lp.top_logprobs[i]
    tok = lp.tokens[i]
    assert top[tok] == lp.token_logprobs[i], f"position {i}: {tok} {lp.token_logprobs[i]} not in {top}"
    names, values = list(top), list(top.values())
    if i >= 8:  # the completion, greedy: its token is the most likely
        check_alternatives(f"completion position {i}", names, values, 3)
        assert names[0] == tok, f"position {i}: sampled {tok}, most likely {names[0]}"
    else:  # the prompt: its token is added when not among the 3
        check_alternatives(f"prompt position {i}", names[:3], values[:3], 3)
        assert len(top) == 3 or names[3] == tok, f"prompt position {i}: {top}"
        assert descending(values), values
out["completions"] = {"tokens": lp.tokens, "token_logprobs": lp.token_logprobs,
                      "top_logprobs": [None if d is None else list(d.items()) for d in lp.top_logprobs]}

# Completions without echo: EOS ends the text, stop_reason is null.
c = client.completions.create(model=model, prompt="123+456=", max_tokens=6, temperature=0, logprobs=3)
ch = c.choices[0]
assert ch.text == "579" and ch.finish_reason == "stop" and ch.stop_reason is None, (ch.text, ch.finish_reason, ch.stop_reason)
assert ch.logprobs.tokens == ["5", "7", "9", "<eos>"], ch.logprobs.tokens

# Chat, sampled, logprobs=True and top_logprobs=3: max_tokens ends it.
r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "77+642="}],
                                   max_tokens=2, temperature=1, seed=42, n=2, logprobs=True, top_logprobs=3)
out["chat"] = []
for j, ch in enumerate(r.choices):
    assert ch.finish_reason == "length", ch.finish_reason
    assert ch.stop_reason is None, ch.stop_reason
    content = ch.logprobs.content
    assert "".join(t.token for t in content) == ch.message.content, (content, ch.message.content)
    for i, t in enumerate(content):
        names = [a.token for a in t.top_logprobs]
        values = [a.logprob for a in t.top_logprobs]
        check_alternatives(f"chat choice {j} position {i}", names, values, 3)
        assert t.bytes == list(t.token.encode()), t.bytes
        assert all(a.bytes == list(a.token.encode()) for a in t.top_logprobs)
        if t.token in names:
            assert values[names.index(t.token)] == t.logprob, (t.token, t.logprob, t.top_logprobs)
        else:
            assert t.logprob <= values[-1], (t.token, t.logprob, values)
    out["chat"].append([{"token": t.token, "logprob": t.logprob,
                         "top": [[a.token, a.logprob] for a in t.top_logprobs]} for t in content])

# A wrong token is a 401 that names what to set.
try:
    openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0).models.list()
    raise AssertionError("a wrong token was accepted")
except openai.AuthenticationError as e:
    msg = str(e)
    assert "RLPIPE_POLICY_TOKEN" in msg and "key_env" in msg, msg

print(json.dumps(out))
