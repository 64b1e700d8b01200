"""Check a running vLLM server against transformers/peft on the tiny model
that tiny_llama.py wrote: prompt logprobs of the base model and of the LoRA
adapter loaded at run time, then unload. Exits non-zero on a mismatch.

    python check_vllm.py http://127.0.0.1:8011 OUT [--served tiny]
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def served_logprobs(base, model, ids):
    st, text = post(base + "/v1/completions", {
        "model": model, "prompt": ids, "max_tokens": 1, "temperature": 0,
        "prompt_logprobs": 0, "return_token_ids": True})
    assert st == 200, (st, text)
    c = json.loads(text)["choices"][0]
    assert c["prompt_token_ids"] == ids, c["prompt_token_ids"]
    # prompt_logprobs[0] is null; entry i maps str(token id) -> {logprob, rank, decoded_token}.
    return [c["prompt_logprobs"][i][str(ids[i])]["logprob"] for i in range(1, len(ids))]


def hf_logprobs(model, ids):
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return [lp[i - 1, ids[i]].item() for i in range(1, len(ids))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("out")
    ap.add_argument("--served", default="tiny")
    a = ap.parse_args()
    mdir, ldir = os.path.join(a.out, "model"), os.path.join(a.out, "lora")
    ids = AutoTokenizer.from_pretrained(mdir)("ab 12+34=46\n")["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(mdir, dtype=torch.float32)
    worst = 0.0
    got, want = served_logprobs(a.base, a.served, ids), hf_logprobs(model, ids)
    worst = max(worst, max(abs(x - y) for x, y in zip(got, want)))
    print("base max |diff|", worst)

    st, text = post(a.base + "/v1/load_lora_adapter", {"lora_name": "smoke", "lora_path": ldir})
    print("load", st, text)
    assert st == 200, text
    peft_model = PeftModel.from_pretrained(model, ldir)
    got, want = served_logprobs(a.base, "smoke", ids), hf_logprobs(peft_model, ids)
    d = max(abs(x - y) for x, y in zip(got, want))
    print("lora max |diff|", d)
    worst = max(worst, d)
    st, text = post(a.base + "/v1/unload_lora_adapter", {"lora_name": "smoke"})
    print("unload", st, text)
    assert st == 200, text
    if worst > 1e-3:
        sys.exit(f"logprobs differ by {worst}")
    print("ok")


if __name__ == "__main__":
    main()
