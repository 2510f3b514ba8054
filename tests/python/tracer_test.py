"""Tests of the Python collective tracer (python/dsdoctor_tracer.py and sitecustomize.py) with real
torch.distributed (gloo, one rank) in child processes, reading the trace file it writes with a
reader of docs/trace.md's layout written here (a second reader of the format).

Run by ctest with each PyTorch the project tests on (Debian's torch 1.13 and the pinned torch 2.x venv
of scripts/setup.sh): PYTHON tests/python/tracer_test.py -v, with DSDOCTOR_BUILD=<build>. The
programs run under the same interpreter as the test."""
import os
import random
import shutil
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
STATE = {1: "enqueued", 2: "started", 3: "completed", 4: "failed", 5: "withdrawn"}


def read_trace(path):
    """Records of a trace file, oldest first, as dicts (docs/trace.md, version 1)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"DSDTRACE", data[:8]
    version, header_bytes, record_bytes, capacity = struct.unpack_from("<4I", data, 8)
    rank, world, local_rank, pid = struct.unpack_from("<4i", data, 24)
    next_index, = struct.unpack_from("<Q", data, 128)
    phase, flags = struct.unpack_from("<2I", data, 152)
    strings_bytes, strings_used = struct.unpack_from("<2I", data, 704)  # the callsite table after the ring
    table = header_bytes + capacity * record_bytes
    records = []
    for i in range(max(0, next_index - capacity), next_index):
        off = header_bytes + (i % capacity) * record_bytes
        ver, index, seq, count, nbytes, enq, start, end, comm, peer, op, dtype, red, state, rflags = struct.unpack_from(
            "<QQQQQqqqIi4BI", data, off)
        field = data[off + 80:off + 128]
        callsite = field.split(b"\0", 1)[0].decode()
        if field[46:48] == b"\xd5\x5d":  # a long callsite: its whole text is in the table
            at, length = struct.unpack_from("<IH", field, 40)
            if strings_bytes and at + length < min(strings_used, strings_bytes):
                callsite = data[table + at:table + at + length].decode()
        if state == 5:
            continue  # withdrawn: torch refused the call before it communicated (docs/trace.md)
        records.append(dict(op=OPS.get(op, op), seq=seq, count=count, bytes=nbytes, comm=comm, peer=peer, dtype=dtype,
                            reduce=REDUCE.get(red, red), state=STATE.get(state, state), asynchronous=bool(rflags & 1),
                            callsite=callsite))
    return dict(rank=rank, world=world, pid=pid, phase=phase, flags=flags, records=records)


def free_port():
    # Below the range connect() draws its own ports from, as net::PickUnusedPort: a port from
    # bind(port 0) may be taken by any outgoing connection before the program's store binds it.
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    for _ in range(64):
        port = random.randint(20000, max(20001, lo - 1))
        s = socket.socket()
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("0.0.0.0", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port")


class TracerTest(unittest.TestCase):
    def tmpdir(self, prefix="dsd-tracer-test-"):
        """A folder removed when the test ends (a full ctest run used to leave ~100 behind)."""
        d = tempfile.mkdtemp(prefix=prefix)
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def run_program(self, body, extra_env=None, pythonpath=None):
        d = self.tmpdir(prefix="dsd-tracer-test-")
        prog = os.path.join(d, "prog.py")
        with open(prog, "w") as f:
            f.write(textwrap.dedent(body))
        trace = os.path.join(d, "rank-0.trace")
        env = dict(os.environ, PYTHONPATH=pythonpath or PYDIR, DSDOCTOR_TRACER_LIB=LIB, DSDOCTOR_TRACE_FILE=trace, RANK="0",
                   WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        env.update(extra_env or {})
        p = subprocess.run([sys.executable, prog], env=env, capture_output=True, text=True, timeout=120, cwd=d)
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

    def test_every_communicating_public_function_of_this_torch_is_traced(self):
        """The oracle is torch's own source: a public function of distributed_c10d is communicating when
        its body calls a ProcessGroup method that returns a Work (from the bindings' signatures), or
        another communicating public function. Each must be wrapped by the tracer, except the ones
        that make groups (new_group and the like: no record pairs them up) and batch_isend_irecv (its
        P2POps call the traced isend/irecv)."""
        p, trace, _ = self.run_program("""
            import ast, inspect, re, textwrap
            import torch.distributed as dist
            import torch.distributed.distributed_c10d as c10d
            PG = c10d.ProcessGroup
            work = [n for n in dir(PG) if re.search(r"-> [\\w.:]*Work\\b", getattr(getattr(PG, n), "__doc__", None) or "")]
            assert "allreduce" in work, work
            names = [n for n in c10d.__all__ if not n.startswith("_") and type(getattr(c10d, n, None)).__name__ == "function"]
            def body(n):
                try:
                    tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(getattr(c10d, n)))))
                except (OSError, TypeError, SyntaxError):
                    return ""
                fn = tree.body[0]
                if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(getattr(fn.body[0], "value", None), ast.Constant):
                    fn.body = fn.body[1:] or [ast.Pass()]  # the docstring's examples call things too
                fn.decorator_list = []
                return ast.unparse(fn)
            src = {n: body(n) for n in names}
            pg_call = re.compile(r"\\.\\s*(" + "|".join(map(re.escape, work)) + r")\\s*\\(")
            comm = {n for n in names if pg_call.search(src[n])}
            while True:
                more = {n for n in names if n not in comm and any(re.search(r"(?<![\\w.])" + c + r"\\s*\\(", src[n]) for c in comm)}
                if not more:
                    break
                comm |= more
            makes_groups = {"init_process_group", "new_group", "new_subgroups", "new_subgroups_by_enumeration", "split_group",
                            "shrink_group", "batch_isend_irecv"}
            untraced = sorted(n for n in comm - makes_groups if not getattr(getattr(c10d, n), "__dsdoctor_traced__", False)
                              or getattr(dist, n, None) is not getattr(c10d, n))
            print("communicating", len(comm), sorted(comm))
            print("untraced", untraced)
        """)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("communicating", p.stdout)
        self.assertGreater(int(p.stdout.split("communicating ", 1)[1].split()[0]), 15, p.stdout)
        self.assertIn("untraced []", p.stdout)

    def test_torch2s_new_collective_names_are_traced(self):
        p, trace, _ = self.run_program("""
            import torch, torch.distributed as dist
            dist.init_process_group("gloo")
            done = []
            for name, call in (("all_gather_single", lambda f: f(torch.zeros(4), torch.ones(4))),
                               ("all_gather_into_tensor", lambda f: f(torch.zeros(4), torch.ones(4))),
                               ("reduce_scatter_single", lambda f: f(torch.zeros(3), torch.ones(3))),
                               ("gather_single", lambda f: f(torch.ones(2), torch.zeros(2), dst=0)),
                               ("broadcast", lambda f: f(torch.ones(5), group_src=0) if "group_src" in __import__("inspect").signature(f).parameters else f(torch.ones(5), src=0))):
                f = getattr(dist, name, None)
                if f is None:
                    continue
                try:
                    call(f)
                    done.append(name)
                except RuntimeError as e:  # gloo lacks it on this torch
                    print("gloo lacks", name, e)
            print("called", ",".join(done))
        """)
        self.assertEqual(p.returncode, 0, p.stderr)
        called = p.stdout.split("called ", 1)[1].split()[0].split(",") if "called " in p.stdout else []
        self.assertIn("broadcast", called)
        if hasattr(__import__("torch").distributed, "all_gather_single"):
            self.assertIn("all_gather_single", called, p.stdout)
        want = {"all_gather_single": ("all_gather", 4), "all_gather_into_tensor": ("all_gather", 4),
                "reduce_scatter_single": ("reduce_scatter", 3), "gather_single": ("gather", 2), "broadcast": ("broadcast", 5)}
        recs = [r for r in read_trace(trace)["records"] if r["op"] != "rendezvous"]
        self.assertEqual([(r["op"], r["count"], r["state"]) for r in recs], [want[n] + ("completed",) for n in called], p.stdout)
        for r in recs:
            self.assertTrue(r["callsite"].startswith("prog.py:"), r)
        self.assertEqual(recs[-1]["peer"], 0, "a root given as group_src is the world rank")

    def test_flight_recorder_dumps_on_request_under_the_names_this_torch_reads(self):
        """On torch 2.x the tracer points torch's Flight Recorder at the run dir under the variable
        names that torch reads (no deprecation warning), keeps the user's own, and dumps the rank's
        record into incident-<n>/rank_<r> when the node writes n into the request file. Torch 1.13 has
        no recorder: nothing is set or written."""
        body = """
            import os, pickle, sys, time, torch, torch.distributed as dist
            dist.init_process_group("gloo")
            names = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE",
                     "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
            print("env", {n: os.environ.get(n) for n in names})
            dist.all_reduce(torch.ones(4))
            fr = os.environ["DSDOCTOR_FR_DIR"]
            with open(os.path.join(fr, "request.tmp"), "w") as f:
                f.write("3\\n")
            os.replace(os.path.join(fr, "request.tmp"), os.path.join(fr, "request"))
            dump = os.path.join(fr, "incident-3", "rank_0")
            for _ in range(50):
                if os.path.exists(dump):
                    break
                time.sleep(0.1)
            if os.path.exists(dump):
                with open(dump, "rb") as f:
                    d = pickle.load(f)
                print("ops", [e["profiling_name"] for e in d["entries"]])
            print("files", sorted(os.listdir(os.path.join(fr, "incident-3"))) if os.path.isdir(os.path.join(fr, "incident-3")) else [])
            dist.destroy_process_group()
        """
        import torch
        c = torch._C._distributed_c10d
        recorder = hasattr(c, "_dump_fr_trace") or hasattr(c, "_dump_nccl_trace")
        fr = self.tmpdir(prefix="dsd-fr-")
        p, _, _ = self.run_program(body, extra_env={"DSDOCTOR_FR_DIR": fr})
        self.assertEqual(p.returncode, 0, p.stderr)
        env = eval(p.stdout.split("env ", 1)[1].split("\n", 1)[0])
        self.assertNotIn("is deprecated", p.stderr)
        if not recorder:
            self.assertEqual(set(env.values()), {None}, env)
            self.assertIn("files []", p.stdout)
            return
        new = hasattr(c, "_dump_fr_trace")
        self.assertEqual(env["TORCH_FR_BUFFER_SIZE" if new else "TORCH_NCCL_TRACE_BUFFER_SIZE"], "2000", env)
        self.assertIsNone(env["TORCH_NCCL_TRACE_BUFFER_SIZE" if new else "TORCH_FR_BUFFER_SIZE"], env)
        self.assertEqual(env["TORCH_FR_DUMP_TEMP_FILE" if new else "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"],
                         os.path.join(fr, "watchdog", "rank_"))
        self.assertEqual(env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"], os.path.join(fr, "pipe", "rank_"))
        self.assertIn("files ['rank_0']", p.stdout, p.stdout + p.stderr)  # whole: no temporary left
        ops = eval(p.stdout.split("ops ", 1)[1].split("\n", 1)[0])
        self.assertIn("gloo:all_reduce", ops)
        # The user's own setting stays, under the name they used.
        p, _, _ = self.run_program(body, extra_env={"DSDOCTOR_FR_DIR": self.tmpdir(prefix="dsd-fr-"),
                                                    "TORCH_NCCL_TRACE_BUFFER_SIZE": "100", "TORCH_FR_DUMP_TEMP_FILE": "/tmp/x_"})
        self.assertEqual(p.returncode, 0, p.stderr)
        env = eval(p.stdout.split("env ", 1)[1].split("\n", 1)[0])
        self.assertEqual(env["TORCH_NCCL_TRACE_BUFFER_SIZE"], "100")
        self.assertIsNone(env["TORCH_FR_BUFFER_SIZE"])
        self.assertEqual(env["TORCH_FR_DUMP_TEMP_FILE"], "/tmp/x_")
        self.assertIsNone(env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"])

    def test_a_long_callsite_is_kept_whole(self):
        d = self.tmpdir(prefix="dsd-long-")
        name = "pretrain_a_very_large_language_model_with_a_long_file_name.py"
        with open(os.path.join(d, name), "w") as f:
            f.write("import torch, torch.distributed as dist\n\ndef the_training_step_of_the_model():\n"
                    "    dist.all_reduce(torch.ones(2))\n")
        p, trace, _ = self.run_program("""
            import os, sys
            sys.path.insert(0, os.environ["MODULE_DIR"])
            import torch.distributed as dist
            dist.init_process_group("gloo")
            __import__("pretrain_a_very_large_language_model_with_a_long_file_name").the_training_step_of_the_model()
        """, extra_env={"MODULE_DIR": d})
        self.assertEqual(p.returncode, 0, p.stderr)
        sites = [r["callsite"] for r in read_trace(trace)["records"]]
        self.assertEqual(sites[-1], name + ":4 (the_training_step_of_the_model)")

    def test_a_program_in_folders_named_like_frameworks_is_the_program(self):
        d = self.tmpdir(prefix="dsd-fw-")
        inner = os.path.join(d, "deepspeed", "torch")
        os.makedirs(inner)
        with open(os.path.join(inner, "helpers.py"), "w") as f:
            f.write("import torch.distributed as dist\n\ndef sync():\n    dist.barrier()\n")
        p, trace, _ = self.run_program("""
            import os, sys
            sys.path.insert(0, os.environ["HELPERS"])
            import torch, torch.distributed as dist
            import helpers
            def main():
                dist.init_process_group("gloo")
                dist.all_reduce(torch.ones(2))
                helpers.sync()
            main()
        """, extra_env={"HELPERS": inner})
        self.assertEqual(p.returncode, 0, p.stderr)
        sites = [r["callsite"] for r in read_trace(trace)["records"]]
        self.assertEqual(sites[1:], ["prog.py:8 (main)", "helpers.py:4 (sync)"])

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
        hidden = self.tmpdir(prefix="dsd-hidden-")
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
            import ctypes, os, sys, subprocess, torch, torch.distributed as dist
            lib = ctypes.PyDLL(os.environ["DSDOCTOR_TRACER_LIB"])  # the library the tracer loaded
            dist.init_process_group("gloo")
            dist.barrier()
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # a DataLoader worker, say
                os.write(w, str(lib.dsd_trace_begin_fast(1, 99, 0, -1, 0, b"child")).encode())
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

    def test_by_default_ddp_buckets_are_traced_on_torch_2_and_only_a_programs_own_hook_on_1_13(self):
        body = """
            import torch, torch.distributed as dist
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            dist.init_process_group("gloo")
            plain = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
            plain(torch.ones(2, 4)).sum().backward()          # no hook: 1.13 keeps DDP's C++ path, untraced
            hooked = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
            hooked.register_comm_hook(None, default_hooks.allreduce_hook)
            hooked(torch.ones(2, 4)).sum().backward()
            del plain, hooked  # DDP's reducers before their process group: torch 1.13 may abort at exit otherwise
            dist.destroy_process_group()
        """
        torch2 = int(__import__("torch").__version__.split(".")[0]) >= 2
        for choice, counts in (("", [20, 10] if torch2 else [10]), ("0", [10])):  # DSDOCTOR_TRACE_DDP=0: off anywhere
            p, trace, _ = self.run_program(body, extra_env={"DSDOCTOR_TRACE_DDP": choice})
            self.assertEqual(p.returncode, 0, p.stderr)
            buckets = [r for r in read_trace(trace)["records"] if r["callsite"].endswith("(ddp.bucket)")]
            self.assertEqual([r["count"] for r in buckets], counts, choice)
            self.assertTrue(all(r["callsite"].startswith("prog.py:") for r in buckets), buckets)

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

    def test_calls_torch_refuses_leave_no_record_and_no_seq(self):
        p, trace, _ = self.run_program("""
            import torch, torch.distributed as dist
            dist.init_process_group("gloo")
            t = torch.ones(4)
            for refused in (lambda: dist.all_reduce(t, op="sum"),              # not a ReduceOp
                            lambda: dist.gather(t, dst=0),                     # the root needs a gather_list
                            lambda: dist.broadcast(t, src=5),                  # gloo: invalid root rank
                            lambda: dist.all_reduce("not a tensor")):
                try:
                    refused()
                except Exception as e:
                    print("torch refused:", type(e).__name__, e, flush=True)
            dist.all_reduce(t)
            dist.gather(t, gather_list=[torch.zeros(4)], dst=0)
        """)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("torch refused"), 4, p.stdout)
        self.assertNotIn("dsdoctor:", p.stderr)
        calls = [(r["op"], r["seq"], r["state"]) for r in read_trace(trace)["records"]]
        self.assertEqual(calls, [("rendezvous", 0, "completed"), ("all_reduce", 1, "completed"), ("gather", 2, "completed")])

    def test_a_refusal_is_told_from_a_failure_of_the_communication(self):
        sys.path.insert(0, PYDIR)
        try:
            import importlib.util
            spec = importlib.util.spec_from_file_location("tracer_under_test", os.path.join(PYDIR, "dsdoctor_tracer.py"))
            tracer = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(tracer)
        finally:
            sys.path.remove(PYDIR)
        # A stand-in for torch's code (the check is on where the error rose): a C function raising in
        # work.wait(), as torch's Work does, and torch's own checks raising before any work exists.
        fake = os.path.join(self.tmpdir(prefix="dsd-fake-"), "torch", "distributed_c10d.py")
        os.makedirs(os.path.dirname(fake))
        with open(fake, "w") as f:
            f.write(textwrap.dedent("""
                import threading, types
                def waits():
                    work = types.SimpleNamespace(wait=threading.Lock().release)  # RuntimeError from C
                    work.wait()
                def waits_for(error):  # a message of our choosing, raised from C as from torch's Work
                    import ctypes, functools
                    raise_it = functools.partial(ctypes.pythonapi.PyErr_SetString, ctypes.py_object(RuntimeError), error.encode())
                    work = types.SimpleNamespace(wait=raise_it)
                    work.wait()
                def checks():
                    raise RuntimeError("Cannot use ReduceOp.AVG with Gloo")
                def issues_and_fails():
                    raise RuntimeError("[pair.cc:598] Connection closed by peer [198.18.0.2]:4242")
                def validates():
                    raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
            """))
        env = {"__name__": "torch.distributed.distributed_c10d"}  # torch's code is known by its module
        with open(fake) as f:
            exec(compile(f.read(), fake, "exec"), env)

        def raised(fn):
            try:
                fn()
            except Exception as e:
                return e
            self.fail("did not raise")

        self.assertFalse(tracer._refused(raised(env["waits"])), "an error from the wait is the communication's")
        # From the wait, too (torch's Work is C++: innermost is the waiting line; a stand-in here).
        # gloo refuses AVG in its worker thread, after the call took its tag: the ranks' calls no
        # longer pair up, so the record stays (a job that retries it hangs in its next collective).
        self.assertFalse(tracer._refused(raised(lambda: env["waits_for"]("Cannot use ReduceOp.AVG with Gloo"))))
        self.assertFalse(tracer._refused(raised(lambda: env["waits_for"](
            "[enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= op.nbytes. 4 vs 8"))))
        self.assertFalse(tracer._refused(raised(lambda: env["waits_for"]("Rank 1 failed to pass monitoredBarrier in 3000 ms"))))
        self.assertTrue(tracer._refused(raised(env["checks"])))
        self.assertFalse(tracer._refused(raised(env["issues_and_fails"])))
        self.assertTrue(tracer._refused(raised(env["validates"])))
        self.assertFalse(tracer._refused(KeyboardInterrupt()))

    def test_nothing_of_dsdoctor_is_visible_to_the_program(self):
        mine = self.tmpdir(prefix="dsd-mine-")
        with open(os.path.join(mine, "sitecustomize.py"), "w") as f:
            f.write("SETTING = 42\n")
        userbase = self.tmpdir(prefix="dsd-userbase-")
        usersite = os.path.join(userbase, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
        os.makedirs(usersite)
        with open(os.path.join(usersite, "usercustomize.py"), "w") as f:
            f.write("USER_SETTING = 7\n")
        body = """
            import os, site, sys
            import sitecustomize  # the program's own, by name
            assert sitecustomize.SETTING == 42, sitecustomize
            if site.ENABLE_USER_SITE:  # a venv turns user site-packages off, with or without dsdoctor
                import usercustomize
                assert usercustomize.USER_SETTING == 7, usercustomize
            import torch, torch.distributed as dist
            seen = [p for p in sys.path if "dsdoctor" in p]
            assert not seen, seen
            ours = [n for n, m in list(sys.modules.items()) if "dsdoctor" in n or "dsdoctor" in str(getattr(m, "__file__", ""))]
            assert not ours, ours
            import traceback
            dist.init_process_group("gloo")
            dist.barrier()

            class Broken(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = torch.nn.Linear(2, 2)
                def forward(self, x):
                    raise KeyError("the model's own bug")
            model = torch.nn.parallel.DistributedDataParallel(Broken())
            for fails in (lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.AVG),  # torch's error
                          lambda: dist.new_group([0, 5]),                               # torch's error
                          lambda: model(torch.ones(1, 2))):                              # the program's
                try:
                    fails()
                    print("no error", flush=True)  # torch >= 2.x's gloo averages
                except Exception:
                    text = traceback.format_exc()
                    assert "dsdoctor" not in text, text
                    print("traceback", text.strip().splitlines()[-1], flush=True)
            print("clean", flush=True)
        """
        p, trace, _ = self.run_program(body, pythonpath=PYDIR + ":" + mine, extra_env={"PYTHONUSERBASE": userbase})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("clean", p.stdout)
        avg_refused = "no error" not in p.stdout
        self.assertEqual(p.stdout.count("traceback "), 3 if avg_refused else 2, p.stdout)
        # Traced all the same (torch 1.13's gloo refuses AVG from work.wait(): that call stays, failed).
        self.assertEqual([(r["op"], r["state"]) for r in read_trace(trace)["records"]],
                         [("rendezvous", "completed"), ("barrier", "completed"),
                          ("all_reduce", "failed" if avg_refused else "completed")])

    def test_the_program_sees_the_sitecustomize_it_would_see_without_dsdoctor(self):
        probe = """
            import json, sys  # the first import after start-up
            m = sys.modules.get("sitecustomize", "absent")
            print("sitecustomize:", getattr(m, "__file__", m), flush=True)
        """
        p, _, d = self.run_program(probe)
        self.assertEqual(p.returncode, 0, p.stderr)
        plain = subprocess.run([sys.executable, os.path.join(d, "prog.py")], capture_output=True, text=True, timeout=60,
                               env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        self.assertEqual(p.stdout, plain.stdout)

    def test_without_any_sitecustomize_none_is_importable(self):
        # The distribution's sitecustomize is hidden here by starting site by hand on a path without it.
        code = textwrap.dedent("""
            import importlib, importlib.util, os, sys
            class Hide:  # the distribution's sitecustomize, as on a system without one
                def find_spec(self, name, path=None, target=None):
                    if name == "sitecustomize" and %r not in sys.path:
                        raise ModuleNotFoundError("No module named 'sitecustomize'", name=name)
            sys.meta_path.insert(0, Hide())
            sys.path.insert(0, %r)
            import site
            site.ENABLE_USER_SITE = False
            site.main()
            import json  # the first import after start-up
            assert "sitecustomize" not in sys.modules, sys.modules.get("sitecustomize")
            try:
                import sitecustomize
            except ImportError as e:
                assert e.name == "sitecustomize", e
                print("no sitecustomize", flush=True)
        """ % (PYDIR, PYDIR))
        p = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, DSDOCTOR_TRACER_LIB=LIB, DSDOCTOR_TRACE_FILE=os.path.join(self.tmpdir(), "t")))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("no sitecustomize", p.stdout)
        self.assertNotIn("dsdoctor", p.stderr)

    def test_path_entries_the_hidden_sitecustomize_adds_are_kept(self):
        hidden = self.tmpdir(prefix="dsd-hidden-")
        extra = self.tmpdir(prefix="dsd-extra-")
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
        p2 = subprocess.run([sys.executable, os.path.join(d, "prog.py")], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, PYTHONPATH=PYDIR, DSDOCTOR_TRACER_LIB=LIB, DSDOCTOR_TRACE_FILE=trace, RANK="0",
                                     WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())))
        self.assertEqual(p2.returncode, 0, p2.stderr)
        self.assertEqual(read_trace(trace)["records"], before)


if __name__ == "__main__":
    unittest.main()
