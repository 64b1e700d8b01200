DATASETS = {}


def create_dataset(name, **kwargs):
    cls, cfg = DATASETS[name]
    return cls(cfg(**kwargs))
