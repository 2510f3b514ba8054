"""Tests of the Python collective tracer (python/dsdoctor_tracer.py and sitecustomize.py) with real
torch.distributed (gloo, one rank) in child processes, reading the trace file it writes with a
reader of docs/trace.md's layout written here (a second reader of the format).

Run by ctest: /usr/bin/python3 tests/python/tracer_test.py -v, with DSDOCTOR_BUILD=<build>."""
import os
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import unittest

BUILD = os.environ.get("DSDOCTOR_BUILD", os.path.join(os.path.dirname(__file__), "../../build"))
PYDIR = os.path.abspath(os.path.join(BUILD, "lib/dsdoctor/python"))
LIB = os.path.abspath(os.path.join(BUILD, "lib/dsdoctor/libdsdoctor_pytrace.so"))
OPS = {1: "barrier", 2: "broadcast", 3: "all_reduce", 4: "all_gather", 5: "send", 6: "recv", 7: "rendezvous", 8: "reduce",
       9: "reduce_scatter", 10: "all_to_all", 11: "gather", 12: "scatter", 13: "all_gather_object", 14: "broadcast_object_list"}
REDUCE = {0: "", 1: "sum", 2: "max", 3: "min", 4: "product", 5: "avg"}
STATE = {1: "enqueued", 2: "started", 3: "completed", 4: "failed"}


def read_trace(path):
    """Records of a trace file, oldest first, as dicts (docs/trace.md, version 1)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"DSDTRACE", data[:8]
    version, header_bytes, record_bytes, capacity = struct.unpack_from("<4I", data, 8)
    rank, world, local_rank, pid = struct.unpack_from("<4i", data, 24)
    next_index, = struct.unpack_from("<Q", data, 128)
    phase, flags = struct.unpack_from("<2I", data, 152)
    records = []
    for i in range(max(0, next_index - capacity), next_index):
        off = header_bytes + (i % capacity) * record_bytes
        ver, index, seq, count, nbytes, enq, start, end, comm, peer, op, dtype, red, state, rflags = struct.unpack_from(
            "<QQQQQqqqIi4BI", data, off)
        callsite = data[off + 80:off + 128].split(b"\0", 1)[0].decode()
        records.append(dict(op=OPS.get(op, op), seq=seq, count=count, bytes=nbytes, comm=comm, peer=peer, dtype=dtype,
                            reduce=REDUCE.get(red, red), state=STATE.get(state, state), asynchronous=bool(rflags & 1),
                            callsite=callsite))
    return dict(rank=rank, world=world, pid=pid, phase=phase, flags=flags, records=records)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class TracerTest(unittest.TestCase):
    def run_program(self, body, extra_env=None, pythonpath=None):
        d = tempfile.mkdtemp(prefix="dsd-tracer-test-")
        prog = os.path.join(d, "prog.py")
        with open(prog, "w") as f:
            f.write(textwrap.dedent(body))
        trace = os.path.join(d, "rank-0.trace")
        env = dict(os.environ, PYTHONPATH=pythonpath or PYDIR, DSDOCTOR_TRACER_LIB=LIB, DSDOCTOR_TRACE_FILE=trace, RANK="0",
                   WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        env.update(extra_env or {})
        p = subprocess.run(["/usr/bin/python3", prog], env=env, capture_output=True, text=True, timeout=120, cwd=d)
        return p, trace, d

    def test_records_every_kind_of_call_with_the_programs_callsite(self):
        p, trace, _ = self.run_program("""
            import torch, torch.distributed as dist
            def main():
                dist.init_process_group("gloo")
                t = torch.ones(8)
                dist.all_reduce(t)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                dist.broadcast(torch.ones(3, dtype=torch.int64), src=0)
                w = dist.all_reduce(torch.ones(2, dtype=torch.float16), async_op=True)
                w.wait()
                g = dist.new_group([0])
                dist.all_reduce(torch.ones(5), group=g)
                dist.all_gather_object([None], {"a": 1})
                save()
            def save():
                dist.barrier()
            main()
        """)
        self.assertEqual(p.returncode, 0, p.stderr)
        t = read_trace(trace)
        calls = [(r["op"], r["seq"], r["count"], r["reduce"], r["comm"] != 0, r["asynchronous"], r["state"]) for r in t["records"]]
        self.assertEqual(calls, [
            ("rendezvous", 0, 0, "", False, False, "completed"),
            ("all_reduce", 1, 8, "sum", False, False, "completed"),
            ("all_reduce", 2, 8, "max", False, False, "completed"),
            ("broadcast", 3, 3, "", False, False, "completed"),
            ("all_reduce", 4, 2, "sum", False, True, "completed"),
            ("all_reduce", 1, 5, "sum", True, False, "completed"),  # its own group counts from 1
            ("all_gather_object", 5, 0, "", False, False, "completed"),  # its inner all_gathers are part of it
            ("barrier", 6, 0, "", False, False, "completed"),
        ])
        sites = [r["callsite"] for r in t["records"]]
        self.assertEqual(sites[1], "prog.py:6 (main)")
        self.assertEqual(sites[-1], "prog.py:16 (save)")
        self.assertEqual(t["records"][3]["bytes"], 24)
        self.assertEqual(t["records"][3]["peer"], 0)
        self.assertEqual(t["phase"], 8, "finished at exit")
        self.assertEqual(t["flags"] & 1, 1)

    def test_a_failure_inside_the_tracer_disables_it_once_and_the_program_runs(self):
        p, trace, _ = self.run_program("""
            import torch, torch.distributed as dist
            dist.init_process_group("gloo")
            dist.all_reduce(torch.ones(4))
            print("finished", flush=True)
        """, extra_env={"DSDOCTOR_TRACER_LIB": "/nonexistent/libdsdoctor_pytrace.so"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("finished", p.stdout)
        lines = [l for l in p.stderr.splitlines() if l.startswith("dsdoctor:")]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("disabled", lines[0])

    def test_the_hidden_sitecustomize_still_runs(self):
        hidden = tempfile.mkdtemp(prefix="dsd-hidden-")
        with open(os.path.join(hidden, "sitecustomize.py"), "w") as f:
            f.write("import os\nos.environ['HIDDEN_SITECUSTOMIZE_RAN'] = '1'\n")
        p, trace, _ = self.run_program("""
            import os, torch, torch.distributed as dist
            assert os.environ.get("HIDDEN_SITECUSTOMIZE_RAN") == "1", "the user's sitecustomize did not run"
            dist.init_process_group("gloo")
            dist.barrier()
        """, pythonpath=PYDIR + ":" + hidden)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([r["op"] for r in read_trace(trace)["records"]], ["rendezvous", "barrier"])

    def test_forked_children_and_a_second_process_of_the_rank_record_nothing(self):
        p, trace, d = self.run_program("""
            import os, sys, subprocess, torch, torch.distributed as dist
            import dsdoctor_tracer as tr
            dist.init_process_group("gloo")
            dist.barrier()
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # a DataLoader worker, say
                os.write(w, str(tr.T.begin_fast(1, 99, 0, -1, 0, b"child")).encode())
                os._exit(0)
            os.waitpid(pid, 0)
            print("child handle", os.read(r, 32).decode(), flush=True)
            # A process the rank starts later does not inherit the trace file.
            out = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('DSDOCTOR_TRACE_FILE', 'unset'))"],
                                 capture_output=True, text=True).stdout.strip()
            print("grandchild sees", out, flush=True)
            dist.barrier()
        """)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("child handle 0", p.stdout)
        self.assertIn("grandchild sees unset", p.stdout)
        self.assertEqual([r["op"] for r in read_trace(trace)["records"]], ["rendezvous", "barrier", "barrier"])

    def test_ddp_buckets_are_traced_and_a_hook_registered_after_the_first_forward_still_works(self):
        p, trace, _ = self.run_program("""
            import torch, torch.distributed as dist
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            dist.init_process_group("gloo")
            m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
            m(torch.ones(2, 4)).sum().backward()           # dsdoctor's hook goes in here
            calls = []
            def my_hook(state, bucket):
                calls.append(1)
                return default_hooks.allreduce_hook(state, bucket)
            m.register_comm_hook(None, my_hook)              # after the first forward: must work
            m(torch.ones(2, 4)).sum().backward()
            assert calls == [1], calls
            try:
                m.register_comm_hook(None, my_hook)          # a second one: torch's own error
            except RuntimeError as e:
                print("second registration refused", flush=True)
            del m  # DDP's reducer before its process group (see below)
            dist.destroy_process_group()
        """, extra_env={"DSDOCTOR_TRACE_DDP": "1"})  # dsdoctor's own hook first (off by default: docs/run.md)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("second registration refused", p.stdout)
        self.assertNotIn("dsdoctor:", p.stderr)
        buckets = [r for r in read_trace(trace)["records"] if r["callsite"].endswith("(ddp.bucket)")]
        self.assertEqual(len(buckets), 2, read_trace(trace)["records"])
        self.assertTrue(all(r["asynchronous"] and r["state"] == "completed" for r in buckets))
        self.assertEqual(buckets[0]["count"], 20)

    def test_by_default_only_the_programs_own_ddp_hook_is_traced(self):
        p, trace, _ = self.run_program("""
            import torch, torch.distributed as dist
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            dist.init_process_group("gloo")
            plain = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
            plain(torch.ones(2, 4)).sum().backward()          # no hook: DDP's C++ path, untraced
            hooked = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
            hooked.register_comm_hook(None, default_hooks.allreduce_hook)
            hooked(torch.ones(2, 4)).sum().backward()
            del plain, hooked  # DDP's reducers before their process group: torch 1.13 may abort at exit otherwise
            dist.destroy_process_group()
        """)
        self.assertEqual(p.returncode, 0, p.stderr)
        buckets = [r for r in read_trace(trace)["records"] if r["callsite"].endswith("(ddp.bucket)")]
        self.assertEqual([r["count"] for r in buckets], [10])

    def test_bad_arguments_are_torchs_to_refuse_and_tracing_goes_on(self):
        p, trace, _ = self.run_program("""
            import torch, torch.distributed as dist
            dist.init_process_group("gloo")
            try:
                dist.all_reduce("not a tensor")
            except Exception as e:
                print("torch refused:", type(e).__name__, flush=True)
            dist.all_reduce(torch.ones(3))
        """)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("torch refused", p.stdout)
        self.assertNotIn("dsdoctor:", p.stderr)
        self.assertEqual([r["op"] for r in read_trace(trace)["records"]][-1], "all_reduce")
        self.assertEqual(read_trace(trace)["records"][-1]["count"], 3)

    def test_path_entries_the_hidden_sitecustomize_adds_are_kept(self):
        hidden = tempfile.mkdtemp(prefix="dsd-hidden-")
        extra = tempfile.mkdtemp(prefix="dsd-extra-")
        with open(os.path.join(extra, "their_module.py"), "w") as f:
            f.write("VALUE = 42\n")
        with open(os.path.join(hidden, "sitecustomize.py"), "w") as f:
            f.write("import sys\nsys.path.append(%r)\n" % extra)
        p, trace, _ = self.run_program("""
            import their_module
            print("value", their_module.VALUE, flush=True)
        """, pythonpath=PYDIR + ":" + hidden)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("value 42", p.stdout)

    def test_a_second_process_claiming_the_same_trace_stays_untraced(self):
        # An mp.spawn sibling: the file exists already, so it must not truncate it.
        body = """
            import torch, torch.distributed as dist
            dist.init_process_group("gloo")
            dist.barrier()
        """
        p, trace, d = self.run_program(body)
        self.assertEqual(p.returncode, 0, p.stderr)
        before = read_trace(trace)["records"]
        p2 = subprocess.run(["/usr/bin/python3", os.path.join(d, "prog.py")], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, PYTHONPATH=PYDIR, DSDOCTOR_TRACER_LIB=LIB, DSDOCTOR_TRACE_FILE=trace, RANK="0",
                                     WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())))
        self.assertEqual(p2.returncode, 0, p2.stderr)
        self.assertEqual(read_trace(trace)["records"], before)


if __name__ == "__main__":
    unittest.main()
