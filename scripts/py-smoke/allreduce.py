"""torchrun --nproc_per_node 2 allreduce.py: gloo on CPU, one all_reduce.
Each rank contributes rank+1; every rank must see the sum 1+2+...+world."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
want = world * (world + 1) / 2
assert torch.all(t == want), (rank, t)
print(f"rank {rank}/{world} local {os.environ['LOCAL_RANK']} all_reduce {t.tolist()} ok", flush=True)
dist.barrier()
dist.destroy_process_group()
