"""A real PyTorch Flight Recorder dump of a full ring (2,000 entries, torch's default buffer) for
bench/fr_parse_bench: one gloo rank calls all_reduce 2,100 times from a program function, then dumps.

    .deps/torch2-venv/bin/python bench/make_fr_dump.py OUT_FILE
"""
import os
import sys

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29561")


def train_step(t):
    dist.all_reduce(t)


def main():
    dist.init_process_group("gloo", rank=0, world_size=1)
    t = torch.ones(1024)
    for _ in range(2100):
        train_step(t)
    data = torch._C._distributed_c10d._dump_fr_trace(True, True, False)
    with open(sys.argv[1], "wb") as f:
        f.write(data)
    dist.destroy_process_group()


main()
