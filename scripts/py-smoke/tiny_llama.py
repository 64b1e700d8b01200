"""Write a tiny random LlamaForCausalLM with a char-level WordLevel tokenizer,
and a PEFT LoRA adapter for it, for smoke tests of transformers, peft and vLLM.

    python tiny_llama.py OUT            # OUT/model, OUT/lora (r=8 on q,k,v,o)
    python tiny_llama.py OUT --head-dim 16 --heads 4   # try other shapes
"""
import argparse
import os

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig,
                          LlamaForCausalLM, PreTrainedTokenizerFast)

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHARS = list("abcdefghijklmnopqrstuvwxyz0123456789 +=\n")


def tokenizer():
    vocab = {t: i for i, t in enumerate(SPECIALS + CHARS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # One token per character, newlines included; decode concatenates.
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>",
        eos_token="<eos>", unk_token="<unk>")
    # Chat: the messages' contents one after another, an assistant's
    # followed by <eos> (what the exported embedded model's template does).
    fast.chat_template = ("{% for m in messages %}{{ m['content'] }}"
                          "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
                          "{% endfor %}")
    return fast


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--rank", type=int, default=8)
    a = ap.parse_args()
    torch.manual_seed(0)
    tok = tokenizer()
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=a.hidden, intermediate_size=2 * a.hidden,
        num_hidden_layers=a.layers, num_attention_heads=a.heads,
        num_key_value_heads=a.heads, head_dim=a.head_dim,
        max_position_embeddings=256, tie_word_embeddings=False,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, torch_dtype="float32")
    model = LlamaForCausalLM(cfg).float()
    mdir = os.path.join(a.out, "model")
    model.save_pretrained(mdir)
    tok.save_pretrained(mdir)

    # Round trip: what a trainer would do.
    tok2 = AutoTokenizer.from_pretrained(mdir)
    ids = tok2("ab 1+2=3\n")["input_ids"]
    assert tok2.decode(ids) == "ab 1+2=3\n", (ids, tok2.decode(ids))
    m2 = AutoModelForCausalLM.from_pretrained(mdir)
    out = m2(torch.tensor([ids])).logits
    print("model", mdir, type(tok2).__name__, "ids", ids, "logits", tuple(out.shape))

    from peft import LoraConfig, get_peft_model
    lcfg = LoraConfig(r=a.rank, lora_alpha=2 * a.rank, lora_dropout=0.0,
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                      init_lora_weights=False, task_type="CAUSAL_LM")
    pm = get_peft_model(m2, lcfg)
    ldir = os.path.join(a.out, "lora")
    pm.save_pretrained(ldir)
    print("lora", ldir, sorted(os.listdir(ldir)))


if __name__ == "__main__":
    main()
