# A real torch.distributed (gloo) job in which one rank runs out of host memory (a real
# MemoryError) while the others wait for it in all_reduce. Under mpirun, RANK/WORLD_SIZE come from
# Open MPI's environment.
import datetime
import os

os.environ.setdefault("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
os.environ.setdefault("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
print(f"rank {rank} step 1 done", flush=True)
if rank == int(os.environ.get("BAD_RANK", "2")):
    buf = bytearray(10**15)  # more than any machine has: MemoryError at once
dist.all_reduce(t)
print(f"rank {rank} step 2 done", flush=True)
