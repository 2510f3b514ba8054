# A real PyTorch (gloo) job in which one rank skips a barrier: the others wait in barrier() while
# it waits in the next all_reduce(), until the process group timeout (STEP_TIMEOUT s) ends them.
import os, sys, time, datetime
import torch
import torch.distributed as dist

def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("STEP_TIMEOUT", "20"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    skip = int(os.environ.get("SKIP_RANK", "1"))
    t = torch.ones(1024)
    for step in range(5):
        dist.all_reduce(t)
        print(f"rank {rank} step {step} done", flush=True)
        if step == 2 and rank != skip:
            dist.barrier()
    print(f"rank {rank} finished", flush=True)

main()
