"""An unmodified mpi4py program for the PMPI tracer's tests (it knows nothing of dsdoctor).

skip_barrier: at iteration 3 the last rank skips comm.Barrier() and goes on to the next Allreduce.
healthy: every rank runs 5 iterations.
"""
import sys
import time

import numpy as np
from mpi4py import MPI

mode = sys.argv[1] if len(sys.argv) > 1 else "healthy"
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
grad = np.ones(1024, dtype=np.float32)
total = np.empty_like(grad)
for it in range(1, 6):
    comm.Allreduce(grad, total, op=MPI.SUM)
    if not (mode == "skip_barrier" and it == 3 and rank == size - 1):
        comm.Barrier()
    time.sleep(0.01)
print(f"rank {rank} done", flush=True)
