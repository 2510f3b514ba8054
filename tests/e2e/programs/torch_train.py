# A small PyTorch (gloo) training program in the style of real ones, with one failure chosen by
# SCENARIO, for the e2e tests of `dsdoctor run` on unmodified Python jobs. It knows nothing of
# dsdoctor: every finding must come from the injected tracer, stacks, logs and exits.
#
#   healthy        DDP loop with a DataLoader (2 workers), metrics all-reduce, only rank 0 logs,
#                  a 12 s silent evaluation on rank 0 in the middle: must finish untouched
#   ckpt_rank0     save_checkpoint() (a barrier inside) is called under `if rank == 0`
#   size_mismatch  the metrics all-reduce has one more element on the last rank
#   uneven         the last rank's data shard is shorter: it leaves the loop early and exits 0
#   early_exit     the last rank returns from main() after step 2 (exit 0); the others then fail in
#                  DDP's gradient all-reduce ("Connection closed by peer")
#   p2p_deadlock   a pipeline step in which every rank receives before it sends
#   loader_stuck   rank 0's data loader blocks forever; the others wait in DDP's gradient all-reduce
#   world_size     the last rank passes world_size=WORLD_SIZE+1 to init_process_group
#   refused        healthy, but at step 2 the last rank first passes op="avg" to all_reduce and the
#                  ranks but 0 pass a gather_list to gather(): torch refuses both, the program
#                  retries them right, and the job must finish with no finding of an error
#   own_sitecustomize  the program imports its own sitecustomize (on PYTHONPATH) by name and
#                  checks that nothing of dsdoctor is on sys.path or in sys.modules
#   bench          healthy without the evaluation; rank 0 prints "steps_per_s N" (bench/torch_ddp_overhead.sh)
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

SCENARIO = os.environ.get("SCENARIO", "healthy")
STEPS = int(os.environ.get("STEPS", "6"))
TIMEOUT = float(os.environ.get("STEP_TIMEOUT", "120"))


class Synthetic(Dataset):
    def __init__(self, n, stuck_at=None):
        self.n = n
        self.stuck_at = stuck_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.stuck_at is not None and i >= self.stuck_at:
            time.sleep(3600)  # a read from a dead file system
        g = torch.Generator().manual_seed(i)
        return torch.randn(16, generator=g), torch.randn(4, generator=g)


def log(rank, msg):
    if rank == 0:
        print(msg, flush=True)


def save_checkpoint(model, path):
    dist.barrier()  # every rank must be here before the files count as written
    torch.save(model.state_dict(), path)


def evaluate(model):
    time.sleep(12)  # a long evaluation, no output, no collectives
    return 0.0


def pipeline_step(rank, world):
    buf = torch.zeros(1024)
    peer = (rank + 1) % world
    dist.recv(buf, src=(rank - 1) % world)
    dist.send(buf, dst=peer)


def refused_then_retried(rank, world, metrics):
    if rank == world - 1:
        try:
            dist.all_reduce(metrics.clone(), op="avg")  # a string, not a ReduceOp
        except TypeError as e:
            print(f"rank {rank}: torch refused: {e}", flush=True)
    t = torch.ones(2)
    if rank != 0:
        try:
            dist.gather(t, gather_list=[torch.zeros(2) for _ in range(world)], dst=0)
        except ValueError as e:
            print(f"rank {rank}: torch refused: {e}", flush=True)
        dist.gather(t, dst=0)
    else:
        dist.gather(t, gather_list=[torch.zeros(2) for _ in range(world)], dst=0)


def check_own_sitecustomize():
    import sitecustomize

    assert getattr(sitecustomize, "OWN_SETTING", None) == "mine", sitecustomize
    on_path = [p for p in sys.path if "dsdoctor" in p]
    assert not on_path, on_path
    modules = [n for n, m in list(sys.modules.items()) if "dsdoctor" in n or "dsdoctor" in str(getattr(m, "__file__", ""))]
    assert not modules, modules
    print("own sitecustomize ok", flush=True)


def main():
    if SCENARIO == "own_sitecustomize":
        check_own_sitecustomize()
    world = int(os.environ["WORLD_SIZE"])
    kwargs = {}
    if SCENARIO == "world_size" and int(os.environ["RANK"]) == world - 1:
        kwargs["world_size"] = world + 1
        kwargs["rank"] = int(os.environ["RANK"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT), **kwargs)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    n = 8 * STEPS * world
    if SCENARIO == "uneven" and rank == world - 1:
        n = n // 2
    stuck = 8 * 2 if SCENARIO == "loader_stuck" and rank == 0 else None
    data = Synthetic(n, stuck_at=stuck)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False) if SCENARIO != "uneven" else None
    if sampler is None:  # each rank reads its own (uneven) shard
        data = Synthetic(n // world)
    loader = DataLoader(data, batch_size=8, sampler=sampler, num_workers=2 if SCENARIO in ("healthy", "loader_stuck") else 0)
    t0 = None
    for step, (x, y) in enumerate(loader):
        if step == 5:
            t0 = time.perf_counter()  # past the first steps (DDP's bucket rebuild, warm-up)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        metrics = torch.tensor([loss.item(), 1.0] + ([1.0] if SCENARIO == "size_mismatch" and rank == world - 1 and step == 2 else []))
        dist.all_reduce(metrics)
        log(rank, f"step {step} loss {metrics[0].item() / world:.4f}")
        if SCENARIO == "healthy" and step == 2 and rank == 0:
            evaluate(model)
        if SCENARIO == "ckpt_rank0" and step == 2 and rank == 0:
            save_checkpoint(model, f"/tmp/dsd-ckpt-{os.getpid()}.pt")
        if SCENARIO == "p2p_deadlock" and step == 2:
            pipeline_step(rank, world)
        if SCENARIO == "refused" and step == 2:
            refused_then_retried(rank, world, metrics)
        if SCENARIO == "early_exit" and step == 2 and rank == world - 1:
            return
    dist.barrier()
    if SCENARIO == "bench" and t0 is not None:
        log(rank, "steps_per_s %.1f" % ((step - 5) / (time.perf_counter() - t0)))
    log(rank, "done")
    # As torch asks (torch 2.15 aborts at exit in about 1 of 10 runs without it, untraced): DDP's
    # reducer first, then the group (torch 1.13 may abort at exit otherwise).
    del model, opt
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
