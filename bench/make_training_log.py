#!/usr/bin/env python3
"""Writes a realistic training log of a given size, fast: a few MiB of varied lines (progress
bars, loss lines, DeepSpeed and NCCL INFO lines, with launcher prefixes) repeated, with a handful
of real-format error lines at fixed fractions of the file. Used by bench/analyze_bench.sh.

usage: make_training_log.py OUT SIZE_MB [--prefix torchrun|pdsh|none] [--rank R] [--errors N]
"""
import argparse
import random

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("size_mb", type=float)
p.add_argument("--prefix", default="none", choices=["torchrun", "pdsh", "none"])
p.add_argument("--rank", type=int, default=0)
p.add_argument("--ranks", type=int, default=8)
p.add_argument("--errors", type=int, default=17)
a = p.parse_args()

rng = random.Random(a.rank)


def prefix(r):
    if a.prefix == "torchrun":
        return f"[rank{r}]:"
    if a.prefix == "pdsh":
        return f"worker-{r // 8}: "
    return ""


lines = []
for i in range(40000):
    r = rng.randrange(a.ranks) if a.prefix != "none" else a.rank
    k = rng.random()
    if k < 0.45:
        lines.append(f"{prefix(r)}step {i} loss {rng.random():.4f} lr 1.0e-4 grad_norm {rng.random() * 3:.3f} tokens/s {rng.randint(1000, 9000)}")
    elif k < 0.75:
        lines.append(f"{prefix(r)}[2024-05-01 12:00:{i % 60:02d},123] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]")
    elif k < 0.92:
        n = i % 100
        lines.append(f"{prefix(r)}Epoch 1: {n:3d}%|{'#' * (n // 4)}{' ' * (25 - n // 4)}| {i}/100000 [00:{i % 60:02d}<01:00, 4.41it/s, loss=0.123]")
    else:
        lines.append(f"{prefix(r)}node{r}:{1000 + r}:{1100 + r} [{r % 8}] NCCL INFO Channel {i % 32:02d}/32 : 0 1 2 3 4 5 6 7")
block = ("\n".join(lines) + "\n").encode()

errors = [
    "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800212 milliseconds before timing out.",
    "node1:1234:1300 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43123> failed : Connection refused",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]
target = int(a.size_mb * 1024 * 1024)
written = 0
next_error = 0
with open(a.out, "wb") as f:
    while written < target:
        chunk = block[: min(len(block), target - written)]
        cut = chunk.rfind(b"\n") + 1 or len(chunk)
        f.write(chunk[:cut])
        written += cut
        # The errors sit at even fractions of the file.
        while next_error < a.errors and written >= target * (next_error + 1) // (a.errors + 1):
            line = (prefix(next_error % a.ranks) + errors[next_error % len(errors)] + "\n").encode()
            f.write(line)
            written += len(line)
            next_error += 1
