# rlpipe's chat-template worker: renders a Hugging Face chat template and
# tokenizes text with the model's tokenizer.json, one JSON request per
# stdin line, one JSON reply per line on the protocol stream.
#
# argv: TOKENIZER_DIR [TEMPLATE_FILE]
# Requests: {"op": "render", "messages": [...], "add_generation_prompt": bool, "tools"?: [...]}
#           {"op": "encode", "text": "..."}
# Replies:  {"text": "..."} | {"ids": [...]} | {"error": "Type: message"}
# The first line is {"ready": true} or {"error": ...}. Anything the template
# or a library prints goes to stderr: fd 1 is the protocol's alone.
import json
import os
import sys

proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr


def reply(obj):
    proto.write(json.dumps(obj, ensure_ascii=False) + "\n")
    proto.flush()


def fail(e):
    return {"error": "%s: %s" % (type(e).__name__, e)}


def token_text(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


def load(tok_dir, template_file):
    cfg = {}
    cfg_path = os.path.join(tok_dir, "tokenizer_config.json")
    if os.path.exists(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
    if template_file:
        with open(template_file, encoding="utf-8") as f:
            template = f.read()
    else:
        template = cfg.get("chat_template")
        if template is None and os.path.exists(os.path.join(tok_dir, "chat_template.jinja")):
            with open(os.path.join(tok_dir, "chat_template.jinja"), encoding="utf-8") as f:
                template = f.read()
    if not isinstance(template, str):
        raise ValueError("%s has no chat template (tokenizer_config.json's chat_template or chat_template.jinja); name a template file" % tok_dir)
    from tokenizers import Tokenizer
    from transformers.utils.chat_template_utils import render_jinja_template

    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    special = {}
    for k in ("bos_token", "eos_token", "pad_token", "unk_token"):
        v = token_text(cfg.get(k))
        if v is not None:
            special[k] = v
    return tok, template, special, render_jinja_template


def main():
    try:
        tok, template, special, render = load(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
    except Exception as e:
        reply(fail(e))
        return
    reply({"ready": True})
    for line in sys.stdin:
        try:
            req = json.loads(line)
            if req["op"] == "render":
                out, _ = render(conversations=[req["messages"]], chat_template=template, tools=req.get("tools"),
                                add_generation_prompt=bool(req.get("add_generation_prompt")), **special)
                reply({"text": out[0]})
            elif req["op"] == "encode":
                reply({"ids": tok.encode(req["text"], add_special_tokens=False).ids})
            else:
                reply({"error": "ValueError: unknown op %r" % req["op"]})
        except Exception as e:
            reply(fail(e))


main()
