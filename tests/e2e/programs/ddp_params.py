# DDP training on 3 ranks (not a power of two: scaling by 1/3 rounds), then rank 0 prints a hash of
# the parameters. Traced and untraced runs must print the same hash: the tracer changes nothing.
import hashlib

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 3)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(rank)
for _ in range(20):
    loss = model(torch.randn(8, 16, generator=g)).pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
digest = hashlib.sha1(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
if rank == 0:
    print("params", digest, flush=True)
# Every rank reaches the end before any tears its group down, DDP's reducer goes before the group, and
# the group is destroyed as torch asks: torch 2.15's gloo aborts at exit otherwise now and then
# ("terminate called without an active exception"), traced or not.
dist.barrier()
del model, opt
dist.destroy_process_group()
