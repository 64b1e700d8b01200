"""Write small Hugging Face datasets with the real `datasets` package, in the
layouts `rlpipe dataset import` reads, under the directory given as argv[1];
print the fingerprints as JSON. No network: everything is made here."""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
import datasets  # noqa: E402

datasets.disable_progress_bars()
out = sys.argv[1]
rows = {
    "question": ["What is 2+2?", "Tom has 3 apples and buys 5. How many?", "What is 10-7?"],
    "answer": ["2 and 2 make 4.\n#### 4", "3 + 5 = 8\n#### 8", "#### 3"],
    "level": [1, 2, 1],
}
train = datasets.Dataset.from_dict(rows)
test = datasets.Dataset.from_dict({k: v[:1] for k, v in rows.items()})

# save_to_disk: one Dataset, and a DatasetDict of two splits.
train.save_to_disk(os.path.join(out, "saved"))
datasets.DatasetDict({"train": train, "test": test}).save_to_disk(os.path.join(out, "dict"))

# A repository snapshot as the hub cache keeps it.
snap = os.path.join(out, "hub", "datasets--openai--gsm8k", "snapshots", "e53f048856ff4f594e959d75785d2c2d37b678ee")
train.to_parquet(os.path.join(snap, "data", "train-00000-of-00001.parquet"))
test.to_parquet(os.path.join(snap, "data", "test-00000-of-00001.parquet"))

# A chat dataset: the prompt is a list of messages.
chat = datasets.Dataset.from_dict({
    "messages": [[{"role": "system", "content": "Answer with a number."}, {"role": "user", "content": "2+2?"}],
                 [{"role": "user", "content": "3+5?"}]],
    "answer": ["4", "8"],
})
chat.save_to_disk(os.path.join(out, "chat"))

print(json.dumps({"saved": train._fingerprint, "chat": chat._fingerprint, "datasets": datasets.__version__}))
