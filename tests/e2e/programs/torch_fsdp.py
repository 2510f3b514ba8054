# FSDP2 (torch.distributed.fsdp.fully_shard) training on gloo, for the e2e tests of `dsdoctor run`
# on sharded models: every parameter all-gather and gradient reduce-scatter torch issues inside the
# forward and backward passes must be traced with this program's own line. SCENARIO:
#   healthy      3 steps, then every rank leaves cleanly
#   save_rank0   at step 2 only rank 0 saves a checkpoint (a barrier inside) while the others go
#                on into the next forward pass, whose parameter all-gather waits for rank 0
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

SCENARIO = os.environ.get("SCENARIO", "healthy")
TIMEOUT = float(os.environ.get("STEP_TIMEOUT", "120"))


def save_checkpoint(model, path):
    dist.barrier()  # every rank must be here before the files count as written
    torch.save(model.state_dict(), path)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for step in range(3):
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if SCENARIO == "save_rank0" and step == 1 and rank == 0:
            save_checkpoint(model, "/dev/null")
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
