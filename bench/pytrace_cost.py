"""Per-call cost of dsdoctor's Python collective tracer (python/dsdoctor_tracer.py): the generated
wrapper around a torch.distributed function, with the real libdsdoctor_pytrace.so and a real trace
file, around a collective that does nothing (so only the tracer is measured).

    /usr/bin/python3 bench/pytrace_cost.py [build]

Prints ns per call untraced and traced, and the difference. docs/performance.md has figures."""
import os
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
sys.path.insert(0, os.path.join(build, "lib/dsdoctor/python"))
os.environ["DSDOCTOR_TRACER_LIB"] = os.path.abspath(os.path.join(build, "lib/dsdoctor/libdsdoctor_pytrace.so"))
path = os.path.join(tempfile.mkdtemp(), "bench.trace")
os.environ["DSDOCTOR_TRACE_FILE"] = path

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import dsdoctor_tracer as tr  # noqa: E402

tr.T.c10d = sys.modules["torch.distributed.distributed_c10d"]
tr.T.load_lib()
tr.T.open(0, 1, "gloo")


def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
    return None


traced = tr._wrap_collective("all_reduce", all_reduce, tr.SPECS["all_reduce"])
t = torch.ones(1024)
N = 300000


def per_call(f):
    best = 1e9
    for _ in range(5):
        s = time.perf_counter()
        for _ in range(N):
            f(t)
        best = min(best, (time.perf_counter() - s) / N * 1e9)
    return best


plain, wrapped = per_call(all_reduce), per_call(traced)
print("untraced %.0f ns/call, traced %.0f ns/call: the tracer adds %.0f ns per call" % (plain, wrapped, wrapped - plain))
