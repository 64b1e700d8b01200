"""A stand-in for reasoning_gym with families that misbehave, for the
generator's fault tests (reasoninggym_test.go puts it first on PYTHONPATH)."""

import dataclasses
import os
import sys

from . import factory
from .factory import create_dataset

__version__ = "fake"


@dataclasses.dataclass
class Config:
    seed: int = 0
    size: int = 10


class Dataset:
    def __init__(self, config):
        self.config = config

    def __getitem__(self, idx):
        return {"question": f"{self.name} {idx}?", "answer": self.answer(idx), "metadata": self.metadata(idx)}

    def answer(self, idx):
        return str(idx)

    def metadata(self, idx):
        return {"source_dataset": self.name, "source_index": idx}


class Raises(Dataset):
    name = "raises"

    def __getitem__(self, idx):
        if idx == 2:
            raise ValueError("boom at 2")
        return super().__getitem__(idx)


class NaN(Dataset):
    name = "nan"

    def metadata(self, idx):
        return {"x": float("nan")}


class Odd(Dataset):
    # An int answer, a set and a tuple in the metadata, and a repeated
    # question every other index.
    name = "odd"

    def __getitem__(self, idx):
        item = super().__getitem__(idx // 2)
        item["metadata"]["tags"] = {"b", "a"}
        item["metadata"]["pair"] = (1, 2)
        return item

    def answer(self, idx):
        return idx * 10


class Dies(Dataset):
    name = "dies"

    def __getitem__(self, idx):
        print("dying on purpose", file=sys.stderr, flush=True)
        os._exit(7)


class Hangs(Dataset):
    name = "hangs"

    def __getitem__(self, idx):
        import time

        time.sleep(3600)


for cls in (Raises, NaN, Odd, Dies, Hangs):
    factory.DATASETS[cls.name] = (cls, Config)
