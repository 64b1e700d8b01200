"""Call a policy server serving the tiny model with the official openai SDK
and check the fields the SDK parses; print them as JSON for the Go test to
compare with the model's numbers.

    python openai_sdk.py BASE_URL MODEL TOKEN [TOOLS_URL]

TOOLS_URL serves a policy that replies with its last message's content
(model "echo", no token): the SDK's tools, tool_calls and tool messages.
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

# Streams, read by the SDK's iterator: per choice the chunks' text joined is
# the non-stream answer's for the same seed, their logprobs its logprobs, the
# last carries its finish_reason, and the usage chunk (no choices) its usage.
kw = dict(model=model, prompt=["12+30=", "7+8="], n=2, max_tokens=6, temperature=1, seed=7, logprobs=1)
whole = client.completions.create(**kw)
texts, tokens, logprobs, finish, usage, ids = {}, {}, {}, {}, None, set()
for chunk in client.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
    assert chunk.object == "text_completion", chunk.object
    ids.add(chunk.id)
    if not chunk.choices:
        assert usage is None, "two usage chunks"
        usage = chunk.usage
        continue
    assert chunk.usage is None and len(chunk.choices) == 1, chunk
    ch = chunk.choices[0]
    assert ch.index not in finish, f"choice {ch.index} streams after its finish_reason"
    texts[ch.index] = texts.get(ch.index, "") + ch.text
    tokens.setdefault(ch.index, []).extend(ch.logprobs.tokens)
    logprobs.setdefault(ch.index, []).extend(ch.logprobs.token_logprobs)
    if ch.finish_reason is not None:
        finish[ch.index] = ch.finish_reason
assert len(whole.choices) == 4 and sorted(texts) == [0, 1, 2, 3], texts
for c in whole.choices:
    assert texts[c.index] == c.text, (c.index, texts[c.index], c.text)
    assert tokens[c.index] == c.logprobs.tokens and logprobs[c.index] == c.logprobs.token_logprobs, (c.index, tokens[c.index], c.logprobs)
    assert finish[c.index] == c.finish_reason, (c.index, finish[c.index], c.finish_reason)
assert usage is not None and usage.model_dump() == whole.usage.model_dump(), (usage, whole.usage)
assert len(ids) == 1, f"chunks of one stream with ids {ids}"
out["stream"] = {"completions": [texts[k] for k in sorted(texts)]}

kw = dict(model=model, messages=[{"role": "user", "content": "77+642="}], n=2, max_tokens=5, temperature=1, seed=42,
          logprobs=True, top_logprobs=2)
whole = client.chat.completions.create(**kw)
texts, content, finish, usage = {}, {}, {}, None
with client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw) as stream:
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk", chunk.object
        if not chunk.choices:
            usage = chunk.usage
            continue
        ch = chunk.choices[0]
        if ch.index not in texts:
            assert ch.delta.role == "assistant", f"choice {ch.index}: the first delta {ch.delta} has no role"
            texts[ch.index] = ""
        else:
            assert ch.delta.role is None, ch.delta
        texts[ch.index] += ch.delta.content or ""
        if ch.logprobs is not None:
            content.setdefault(ch.index, []).extend(ch.logprobs.content)
        if ch.finish_reason is not None:
            finish[ch.index] = ch.finish_reason
for c in whole.choices:
    assert texts[c.index] == c.message.content, (c.index, texts[c.index], c.message.content)
    assert [t.model_dump() for t in content[c.index]] == [t.model_dump() for t in c.logprobs.content], c.index
    assert finish[c.index] == c.finish_reason, (c.index, finish[c.index], c.finish_reason)
assert usage is not None and usage.model_dump() == whole.usage.model_dump(), (usage, whole.usage)
out["stream"]["chat"] = [texts[k] for k in sorted(texts)]

# A wrong token is a 401 that names what to set.
try:
    openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0).models.list()
    raise AssertionError("a wrong token was accepted")
except openai.AuthenticationError as e:
    msg = str(e)
    assert "RLPIPE_POLICY_TOKEN" in msg and "key_env" in msg, msg

# Tools: the SDK sends tools, reads tool_calls (non-stream and stream),
# and sends its own assistant message with tool_calls and a tool message
# back in the next turn.
if len(sys.argv) > 4:
    echo = openai.OpenAI(base_url=sys.argv[4] + "/v1", api_key="none", max_retries=0)
    tools = [{"type": "function", "function": {"name": "bash", "description": "Run a command",
              "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}]
    reply = 'I will look.\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>'
    msgs = [{"role": "user", "content": reply}]
    r = echo.chat.completions.create(model="echo", messages=msgs, tools=tools, tool_choice="auto", seed=5)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch.finish_reason
    call = ch.message.tool_calls[0]
    res = {"content": ch.message.content, "id": call.id, "name": call.function.name, "arguments": call.function.arguments}
    calls = {}
    with echo.chat.completions.create(model="echo", messages=msgs, tools=tools, seed=5, stream=True) as stream:
        text = ""
        for chunk in stream:
            d = chunk.choices[0].delta
            text += d.content or ""
            for tc in d.tool_calls or []:
                calls[tc.index] = [tc.id, tc.function.name, tc.function.arguments]
            if chunk.choices[0].finish_reason is not None:
                res["stream_finish"] = chunk.choices[0].finish_reason
    res["stream"] = [text, calls[0]]
    msgs += [ch.message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "a.txt"}]
    r = echo.chat.completions.create(model="echo", messages=msgs, tools=tools, seed=5)
    res["after_tool"] = [r.choices[0].message.content, r.choices[0].finish_reason]
    out["tools"] = res

print(json.dumps(out))
