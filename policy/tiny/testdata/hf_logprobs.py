"""Per-token log-probabilities of given token ids under transformers
(float32), for the parity test of policy/tiny (hf_test.go).

    python hf_logprobs.py MODEL_DIR [--adapter PEFT_DIR] < in.json > out.json

in.json: {"sequences": [[1, 4, 5, ...], ...], "texts": ["12+3=", ...]}
out.json: {"logprobs": [[lp of token 1, lp of token 2, ...], ...],
           "encoded": [[ids of each text, as AutoTokenizer encodes it]],
           "chat": [ids of a two-message conversation through the chat template]}
"""
import argparse
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--adapter")
    a = ap.parse_args()
    req = json.load(sys.stdin)
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    if a.adapter:
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, a.adapter)
    model.eval()
    out = {"logprobs": [], "encoded": [], "chat": None}
    with torch.no_grad():
        for ids in req["sequences"]:
            logits = model(torch.tensor([ids])).logits[0].float()
            lp = torch.log_softmax(logits, -1)
            out["logprobs"].append([lp[i - 1, ids[i]].item() for i in range(1, len(ids))])
    for t in req.get("texts", []):
        out["encoded"].append(tok(t)["input_ids"])
    if req.get("chat"):
        out["chat"] = tok.apply_chat_template(req["chat"], tokenize=True, return_dict=False)
        if isinstance(out["chat"], dict):
            out["chat"] = out["chat"]["input_ids"]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
