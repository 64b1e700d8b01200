"""Per-token log-probabilities of completions under transformers (float32),
optionally with a PEFT LoRA adapter: the reference the real-vLLM tests
compare the server's logprobs with.

    python hf_logprobs.py MODEL_DIR [--adapter ADAPTER_DIR] < in.json > out.json

in.json is a list of {"prompt": [ids], "completion": [ids]} with an optional
"temperature" T (default 1: the logits are divided by it); out.json the list
of the completions' logprobs, each token's given all before it.
"""
import argparse
import json
import sys

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--adapter")
    a = ap.parse_args()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    if a.adapter:
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, a.adapter)
    model.eval()
    out = []
    with torch.no_grad():
        for row in json.load(sys.stdin):
            ids = row["prompt"] + row["completion"]
            logits = model(torch.tensor([ids])).logits[0].float()
            temperature = row.get("temperature", 1.0)
            if temperature != 1.0:
                logits = logits / temperature
            lp = torch.log_softmax(logits, -1)
            n = len(row["prompt"])
            out.append([lp[i - 1, ids[i]].item() for i in range(n, len(ids))])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
