# Trains a tiny tokenizer of the kind argv[1] names (bytelevel or
# sentencepiece) with the tokenizers package, saves it as argv[2], and
# prints decode([id]) of every id as a JSON list: what the Go decoder's
# parity test compares against.
import json
import sys

from tokenizers import ByteLevelBPETokenizer, SentencePieceBPETokenizer

LINES = [
    "the reward model scores each sample; the policy learns from the advantage",
    "héllo wörld: naïve café, 世界 和 平, emoji 🎉 and tabs\tand\nnewlines",
    "12+3=15 and 7*8=56, def f(x): return x ** 2",
]
kind, out = sys.argv[1], sys.argv[2]
if kind == "bytelevel":
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(LINES, vocab_size=400, min_frequency=1, special_tokens=["<|endoftext|>"], show_progress=False)
else:
    tok = SentencePieceBPETokenizer()
    tok.train_from_iterator(LINES, vocab_size=150, min_frequency=1, special_tokens=["<unk>", "</s>"], show_progress=False)
tok.save(out)
n = tok.get_vocab_size(with_added_tokens=True)
json.dump([tok.decode([i], skip_special_tokens=False) for i in range(n)], sys.stdout)
