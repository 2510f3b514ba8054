"""dsdoctor's collective tracer for unmodified PyTorch and DeepSpeed programs.

Loaded by dsdoctor's sitecustomize in every Python rank that `dsdoctor run` starts. When the
program imports torch.distributed, every collective, barrier and point-to-point call it makes
(synchronous or asynchronous), every new process group, and DDP's gradient-bucket all-reduces are
recorded in the rank's trace ring (docs/trace.md) through libdsdoctor_pytrace.so: the same file the
bundled runtime writes, so the agent, the diagnosis engine, `dsdoctor analyze` and the TUI read a
Python rank like any other. DeepSpeed's deepspeed.comm calls torch.distributed, so it is covered.

Each record's callsite is the program's own frame (the first one outside torch, deepspeed and
site-packages) and the function that issued the call: the framework function the program called
("train.py:92 (engine.save_checkpoint)"), else the program's own ("train.py:49 (save_checkpoint)").

Rules: the program's behaviour never changes (same calls, same arguments, same return values, same
exceptions, and tracebacks without a frame of ours); a call torch refused before issuing any work
leaves no record and no sequence number (docs/trace.md, withdrawn); a failure inside the tracer
disables it and says so once on stderr; a process forked
from a traced rank (a DataLoader worker) records nothing. DSDOCTOR_TRACE_FILE names the trace;
DSDOCTOR_TRACER_LIB the shared library (default: beside this folder).
"""

import ctypes
import functools
import os
import sys
import threading
import weakref
import zlib

# Numbers of runtime/types.h (part of the trace format).
OPS = {
    "barrier": 1, "broadcast": 2, "all_reduce": 3, "all_gather": 4, "send": 5, "recv": 6, "rendezvous": 7,
    "reduce": 8, "reduce_scatter": 9, "all_to_all": 10, "gather": 11, "scatter": 12, "all_gather_object": 13,
    "broadcast_object_list": 14, "gather_object": 15, "scatter_object_list": 16,
}
DTYPES = {
    "torch.float32": 1, "torch.float16": 2, "torch.int32": 3, "torch.int64": 4, "torch.uint8": 5, "torch.bfloat16": 6,
    "torch.float64": 7, "torch.int8": 8, "torch.bool": 9, "torch.int16": 10, "torch.complex64": 11, "torch.complex128": 12,
}
DTYPE_OTHER = 13
REDUCE = {"SUM": 1, "MAX": 2, "MIN": 3, "PRODUCT": 4, "AVG": 5, "BAND": 6, "BOR": 7, "BXOR": 8, "PREMUL_SUM": 9}
PHASE_USER, PHASE_SAVE, PHASE_LOAD, PHASE_FINISHED = 7, 5, 6, 8
FLAG_FINISHED = 1
FLAG_FLIGHT_RECORDER = 8  # its thread dumps torch's Flight Recorder on request (runtime/trace.h)

# What each torch.distributed function is, and where its arguments are. tensor: the argument whose
# element count and type the record carries (a list: its first element; None: no tensor, count 0).
# count0: sizes legitimately differ between ranks (all_to_all), so the count is not compared.
# root: the argument naming the root rank; peer: the p2p peer. Functions a torch version lacks
# are skipped (feature detection), so 1.13 and 2.x names both work.
SPECS = {
    "barrier": dict(op="barrier"),
    "monitored_barrier": dict(op="barrier"),
    "all_reduce": dict(op="all_reduce", tensor="tensor", reduce="op"),
    "all_reduce_coalesced": dict(op="all_reduce", tensor="tensors", reduce="op"),
    "broadcast": dict(op="broadcast", tensor="tensor", root="src"),
    "reduce": dict(op="reduce", tensor="tensor", root="dst", reduce="op"),
    "all_gather": dict(op="all_gather", tensor="tensor"),
    "all_gather_coalesced": dict(op="all_gather", tensor="input_tensor_list"),
    "all_gather_into_tensor": dict(op="all_gather", tensor="input_tensor"),
    "_all_gather_base": dict(op="all_gather", tensor="input_tensor"),
    "reduce_scatter": dict(op="reduce_scatter", tensor="output", reduce="op"),
    "reduce_scatter_tensor": dict(op="reduce_scatter", tensor="output", reduce="op"),
    "_reduce_scatter_base": dict(op="reduce_scatter", tensor="output", reduce="op"),
    "all_to_all": dict(op="all_to_all", tensor="input_tensor_list", count0=True),
    "all_to_all_single": dict(op="all_to_all", tensor="input", count0=True),
    "gather": dict(op="gather", tensor="tensor", root="dst"),
    "scatter": dict(op="scatter", tensor="tensor", root="src"),
    "all_gather_object": dict(op="all_gather_object"),
    "broadcast_object_list": dict(op="broadcast_object_list", root="src", listlen="object_list"),
    "gather_object": dict(op="gather_object", root="dst"),
    "scatter_object_list": dict(op="scatter_object_list", root="src"),
    "send": dict(op="send", tensor="tensor", peer="dst"),
    "recv": dict(op="recv", tensor="tensor", peer="src"),
    "isend": dict(op="send", tensor="tensor", peer="dst", always_async=True),
    "irecv": dict(op="recv", tensor="tensor", peer="src", always_async=True),
}

# The public functions of torch.distributed that communicate are found from torch's own definitions
# (derive_specs): a function torch exports that takes `async_op` or names a collective or a
# point-to-point call, with a group, is traced even when it is not in SPECS (torch 2.15's
# all_gather_single, reduce_scatter_single, gather_single, send_object_list…). Its op comes from its
# name, its tensor, root and peer from its parameters. Functions that make, query or configure groups
# are not calls a record pairs up across ranks.
_OP_WORDS = (("all_gather_object", "all_gather_object"), ("all_gather", "all_gather"), ("reduce_scatter", "reduce_scatter"),
             ("all_reduce", "all_reduce"), ("all_to_all", "all_to_all"), ("broadcast_object", "broadcast_object_list"),
             ("broadcast", "broadcast"), ("barrier", "barrier"), ("gather_object", "gather_object"),
             ("scatter_object", "scatter_object_list"), ("gather", "gather"), ("scatter", "scatter"), ("reduce", "reduce"),
             ("send", "send"), ("recv", "recv"))
_NOT_CALLS = ("group", "backend", "world_size", "timeout", "supports", "debug", "abort", "shutdown", "record_comm")
_TENSOR_PARAMS = ("tensor", "input_tensor", "input", "tensors", "input_tensor_list", "tensor_list", "output_tensor")
_ROOT_OPS = {"broadcast": "src", "scatter": "src", "scatter_object_list": "src", "broadcast_object_list": "src",
             "reduce": "dst", "gather": "dst", "gather_object": "dst"}


def derive_spec(name, fn):
    """SPECS' entry for a public torch.distributed function from its name and signature; None when it
    is not a call that communicates."""
    import inspect

    # batch_isend_irecv calls the isend/irecv its P2POps name: traced through them, one record each.
    if name.startswith(("_", "get_", "is_", "batch_")) or any(w in name for w in _NOT_CALLS):
        return None
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    op = next((o for w, o in _OP_WORDS if w in name), None)
    p2p = op in ("send", "recv")
    if op is None or not ("group" in params or "async_op" in params or p2p):
        return None
    spec = dict(op=op)
    if op == "reduce_scatter":
        spec["tensor"] = next((t for t in ("output", "output_tensor_list") if t in params), None)  # each rank's shard
    else:
        spec["tensor"] = next((t for t in _TENSOR_PARAMS if t in params), None)
    if "object_list" in params and op in ("send", "recv", "broadcast_object_list"):
        spec["listlen"] = "object_list"
    if op in ("reduce", "all_reduce", "reduce_scatter") and "op" in params:
        spec["reduce"] = "op"
    if op == "all_to_all":
        spec["count0"] = True
    if p2p:
        spec["peer"] = "dst" if op == "send" else "src"
        if name.startswith("i"):
            spec["always_async"] = True
    elif op in _ROOT_OPS:
        spec["root"] = _ROOT_OPS[op]
    return spec


# Decorators' and dispatchers' frames between the program and the function it called
# (deepspeed's nvtx wrapped_fn, torch's no_grad decorate_context, Module._call_impl).
_WRAPPERS = frozenset(("wrapped_fn", "wrapper", "wrapped", "log_wrapper", "inner", "decorate_context", "_call_impl",
                       "__call__", "_wrapped_call_impl", "forward_call"))

# Frameworks are recognised by module, never by a path's words: a program in a folder named
# `deepspeed` or `torch` is the program. A frame is the framework's when its module's top package is
# one of these (a source checkout of DeepSpeed on sys.path too), or its file lies in an installed
# package's folder (site-packages/dist-packages on sys.path) or the standard library.
_FRAMEWORK_PACKAGES = frozenset(("torch", "deepspeed", "torchvision", "torchaudio", "transformers", "accelerate",
                                 "lightning", "pytorch_lightning", "megatron", "apex", "fairscale", "dsdoctor_tracer"))


def _library_dirs():
    """Folders whose files are not the program's: installed packages and the standard library."""
    import site
    import sysconfig

    dirs = set()
    try:
        dirs.update(site.getsitepackages())
    except Exception:
        pass
    try:
        dirs.add(site.getusersitepackages())
    except Exception:
        pass
    dirs.update(p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")))
    for key in ("stdlib", "platstdlib"):
        try:
            dirs.add(sysconfig.get_paths()[key])
        except Exception:
            pass
    out = set()
    for d in dirs:
        if d:
            out.add(d.rstrip("/") + "/")
            try:
                out.add(os.path.realpath(d).rstrip("/") + "/")
            except Exception:
                pass
    return tuple(sorted(out))


class _Local(threading.local):
    depth = 0  # >0 while inside a traced call: torch's own nested calls are part of that record


class _Tracer:
    """All of the tracer's state (one per process)."""

    def __init__(self):
        self.lib = None
        self.opened = False
        self.off_flag = [False]  # the generated wrappers' view of `off` (a list: one shared cell)
        self.said_off = False
        self.tls = _Local()
        self.seq = {}  # comm id -> last collective seq
        self.p2p = {}  # (op, peer) -> last seq
        self.comm_of = {}  # id(group) -> (weak reference to it, comm id)
        self.group_count = {}  # ranks tuple -> groups made with them so far
        self.framework = {}  # co_filename -> bool
        self.library_dirs = None  # _library_dirs(), at the first callsite
        self.site_cache = {}  # (file, function, line) of the calling frame -> callsite bytes
        self.installed = False
        self.here = os.path.dirname(os.path.abspath(__file__))
        self.pid = os.getpid()
        self.c10d = None
        self.traced_names = {}  # torch.distributed name -> its spec, for what this torch has

    # ---- failure policy ---------------------------------------------------------------------

    @property
    def off(self):
        return self.off_flag[0]

    @off.setter
    def off(self, value):
        self.off_flag[0] = value

    def disable(self, why):
        self.off = True
        if not self.said_off:
            self.said_off = True
            try:
                sys.stderr.write("dsdoctor: collective tracer disabled: %s; the program runs on untraced\n" % why)
                sys.stderr.flush()
            except Exception:
                pass

    # ---- the trace file ---------------------------------------------------------------------

    def load_lib(self):
        path = os.environ.get("DSDOCTOR_TRACER_LIB") or os.path.join(os.path.dirname(self.here), "libdsdoctor_pytrace.so")
        # PyDLL keeps the GIL during calls: they take nanoseconds, and the GIL orders them.
        lib = ctypes.PyDLL(path)
        lib.dsd_trace_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        lib.dsd_trace_open.restype = ctypes.c_int
        lib.dsd_trace_begin.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                                        ctypes.c_int, ctypes.c_uint32, ctypes.c_char_p]
        lib.dsd_trace_begin.restype = ctypes.c_uint64
        lib.dsd_trace_end.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
        lib.dsd_trace_end.restype = None
        lib.dsd_trace_set_phase.argtypes = [ctypes.c_int]
        lib.dsd_trace_set_phase.restype = None
        lib.dsd_trace_set_flags.argtypes = [ctypes.c_uint32]
        lib.dsd_trace_set_flags.restype = None
        lib.dsd_trace_error.restype = ctypes.c_char_p
        # The hot pair takes only C ints and pointers: no argtypes, so ctypes converts nothing.
        fast = ctypes.PyDLL(path)
        fast.dsd_trace_begin_fast.restype = ctypes.c_int
        fast.dsd_trace_end_fast.restype = None
        self.begin_fast = fast.dsd_trace_begin_fast
        self.end_fast = fast.dsd_trace_end_fast
        fast.dsd_trace_withdraw_fast.restype = None
        self.withdraw_fast = fast.dsd_trace_withdraw_fast
        lib.dsd_trace_withdraw.argtypes = [ctypes.c_uint64]
        lib.dsd_trace_withdraw.restype = None
        self.lib = lib

    def open(self, rank, world, backend):
        """Creates the trace at init_process_group (a spawned helper process that never joins the
        job never truncates it). Only the first process to open claims the file."""
        if self.opened or self.off:
            return
        self.opened = True
        path = os.environ.pop("DSDOCTOR_TRACE_FILE", "")  # children started later do not claim it
        if not path or os.getpid() != self.pid:
            self.off = True
            return
        try:  # the agent removed the file before starting the rank: the first process to create it owns it
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            self.off = True  # another process of this rank (an mp.spawn sibling) traces into it
            return
        if self.lib is None:
            self.load_lib()
        local = _int(os.environ.get("LOCAL_RANK"), 0)
        rc = self.lib.dsd_trace_open(path.encode(), rank, world, local, str(backend or "").encode()[:15], 0)
        if rc != 0:
            self.disable("cannot create %s: %s" % (path, self.lib.dsd_trace_error().decode(errors="replace")))
            return
        import atexit

        atexit.register(self.at_exit)

    def at_exit(self):
        if self.lib is not None and not self.off:
            self.lib.dsd_trace_set_phase(PHASE_FINISHED)
            self.lib.dsd_trace_set_flags(FLAG_FINISHED)

    # ---- callsites --------------------------------------------------------------------------

    def is_framework(self, frame):
        """Whether a frame is the framework's (torch, DeepSpeed, an installed package, the standard
        library, dsdoctor) rather than the program's; cached per file."""
        code = frame.f_code
        filename = code.co_filename
        fw = self.framework.get(filename)
        if fw is None:
            if self.library_dirs is None:
                self.library_dirs = _library_dirs()
            module = frame.f_globals.get("__name__") or ""
            fw = (filename.startswith(self.here) or filename.startswith("<") or
                  module.split(".", 1)[0] in _FRAMEWORK_PACKAGES or filename.startswith(self.library_dirs))
            if len(self.framework) < 65536:
                self.framework[filename] = fw
        return fw

    def callsite_bytes(self, depth):
        """callsite() of the caller `depth` frames up, as bytes, cached per place in the program."""
        try:
            f = sys._getframe(depth)
        except ValueError:
            return b""
        code = f.f_code
        if self.is_framework(f):  # the place depends on the frames above: no cache
            return self.callsite(depth + 1).encode("utf-8", "replace")
        key = (code.co_filename, code.co_name, f.f_lineno)  # code objects compare equal across files
        hit = self.site_cache.get(key)
        if hit is None:
            hit = self.callsite(depth + 1).encode("utf-8", "replace")
            if len(self.site_cache) < 65536:
                self.site_cache[key] = hit
        return hit

    def callsite(self, depth):
        """'train.py:92 (engine.save_checkpoint)': the program's frame and the framework function
        it called, if any."""
        try:
            f = sys._getframe(depth)
        except ValueError:  # called from C++ on a thread with no Python caller (an autograd thread)
            return ""
        inner = None  # the outermost framework function that is not a decorator's wrapper
        first = None
        while f is not None:
            code = f.f_code
            fn = code.co_filename
            if not self.is_framework(f):
                site = "%s:%d" % (fn.rsplit("/", 1)[-1], f.f_lineno)
                if inner is None and code.co_name != "<module>":
                    inner = code.co_name  # the program's own function that made the call
                if inner is not None:
                    site += " (%s)" % inner
                return site
            if not fn.startswith(self.here):
                if first is None:
                    first = f
                if code.co_name not in _WRAPPERS:
                    # The module's own name ("deepspeed.runtime.engine" -> engine; a package's
                    # __init__ is the package: deepspeed.initialize).
                    mod = (f.f_globals.get("__name__") or "").rsplit(".", 1)[-1]
                    if not mod:
                        mod = fn.rsplit("/", 1)[-1]
                        mod = mod[:-3] if mod.endswith(".py") else mod
                    inner = "%s.%s" % (mod.lstrip("_"), code.co_name)
            f = f.f_back
        if first is not None:  # only framework frames (a program inside site-packages)
            return "%s:%d" % (first.f_code.co_filename.rsplit("/", 1)[-1], first.f_lineno)
        return ""

    # ---- groups -----------------------------------------------------------------------------

    def comm_id(self, group):
        """0 for the world; for another group a number every member computes alike: a hash of its
        ranks and how many groups with those ranks were made before (new_group is called in the
        same order on every rank)."""
        c10d = self.c10d
        if group is None or group is c10d.GroupMember.WORLD:
            return 0
        hit = self.comm_of.get(id(group))
        if hit is not None and hit[0]() is group:
            return hit[1]
        try:
            ranks = tuple(sorted(c10d.get_process_group_ranks(group)))
        except Exception:
            ranks = ()
        return self.register_group(group, ranks)

    def global_rank(self, group, group_rank):
        """The world rank of rank `group_rank` of `group` (-1 when it is not one)."""
        if group_rank.__class__ is not int:
            return -1
        try:
            if group is None or group is self.c10d.GroupMember.WORLD:
                return group_rank
            return self.c10d.get_global_rank(group, group_rank)
        except Exception:
            return -1

    def register_group(self, group, ranks):
        n = self.group_count.get(ranks, 0)
        self.group_count[ranks] = n + 1
        cid = (zlib.crc32(repr((ranks, n)).encode()) & 0x7FFFFFFF) or 1
        if group is not None:
            try:  # a weak reference: a group's lifetime is the program's (and torch's) alone
                self.comm_of[id(group)] = (weakref.ref(group), cid)
            except TypeError:  # not weakly referenceable (an older torch): keep it
                self.comm_of[id(group)] = ((lambda g=group: g), cid)
        return cid


T = _Tracer()


def _int(s, default):
    try:
        return int(s)
    except (TypeError, ValueError):
        return default


_DTYPE_BY_OBJECT = {}  # torch.dtype -> (number, element bytes), filled as types are seen
_REDUCE_BY_OBJECT = {}  # torch.distributed.ReduceOp value -> number


def _dtype_facts(t):
    d = t.dtype
    hit = _DTYPE_BY_OBJECT.get(d)
    if hit is None:
        hit = _DTYPE_BY_OBJECT[d] = (DTYPES.get(str(d), DTYPE_OTHER), t.element_size())
    return hit


def _tensor_facts(t):
    """(count, dtype number, element bytes) of a tensor, or of a list of tensors (summed)."""
    if t is None:
        return 0, 0, 0
    if isinstance(t, (list, tuple)):
        count = 0
        dtype = elem = 0
        for x in t:
            c, d, e = _tensor_facts(x)
            count += c
            if not dtype:
                dtype, elem = d, e
        return count, dtype, elem
    n, (d, e) = t.numel(), _dtype_facts(t)
    return n, d, e


def _reduce_number(op):
    if op is None:
        return 1
    try:
        hit = _REDUCE_BY_OBJECT.get(op)
    except TypeError:  # an unhashable op (a premul_sum ReduceOp instance)
        hit = None
    if hit is None:
        inner = getattr(op, "op", op)  # torch 1.13: a ReduceOp instance around a RedOpType
        name = getattr(inner, "name", None) or str(inner).rsplit(".", 1)[-1]
        hit = REDUCE.get(str(name).upper(), 0)
        try:
            _REDUCE_BY_OBJECT[op] = hit
        except TypeError:
            pass
    return hit


def _begin(packed, seq, count, elem, peer, comm, site):
    """One record (packed: op | dtype << 8 | reduce << 16 | async << 30); the fast entry point when
    every number fits a C int."""
    if count < 0x7FFFFFFF and seq < 0x7FFFFFFF and elem < 64:
        return T.begin_fast(packed | (elem << 24), seq, count, peer, comm, site)
    op = (packed & 0xFF) | (0x100 if packed & (1 << 30) else 0)
    h = T.lib.dsd_trace_begin(op, (packed >> 8) & 0xFF, (packed >> 16) & 0xFF, seq, count, count * elem, peer, comm, site)
    return -h  # a slow handle: negative, so _end knows which entry point ends it


def _arg(args, kwargs, index, name, default=None):
    if name in kwargs:
        return kwargs[name]
    if index is not None and index < len(args):
        return args[index]
    return default


_TEMPLATE = """
def traced(*args, **kwargs):
    if OFF[0] or tls.depth:
        if tls.depth:
            tls.depth = 2  # a nested call: the outer one communicated
        try:
            return orig(*args, **kwargs)
        except BaseException as e:
            _hide(e)
            raise
    handle = 0
    record = False
    try:
        n = len(args)
        group = GROUP
        if group is not NON_MEMBER:  # torch does nothing on a non-member: nor do we
            comm = 0 if group is None else T.comm_id(group)
            try:
                TENSOR_LINES
            except Exception:  # not a tensor: torch will say so; the record counts nothing
                count = dtype = elem = 0
            REDUCE_LINE
            PEER_LINE
            SEQ_LINES
            is_async = ASYNC
            try:
                f = _getframe(1)
                code = f.f_code
                site = site_cache.get((code.co_filename, code.co_name, f.f_lineno)) or T.callsite_bytes(2)
            except ValueError:  # called from C++ with no Python caller
                site = b""
            if count < 0x7FFFFFFF and seq < 0x7FFFFFFF and elem < 64:
                handle = begin_fast(OP | (dtype << 8) | (reduce_op << 16) | (elem << 24) | (is_async << 30), seq, count, peer, comm, site)
            else:
                handle = _begin(OP | (dtype << 8) | (reduce_op << 16) | (is_async << 30), seq, count, elem, peer, comm, site)
            record = True
    except Exception as e:  # our bug, never the program's
        T.disable("NAME: %s: %s" % (type(e).__name__, e))
    if not record:
        try:
            return orig(*args, **kwargs)
        except BaseException as e:
            _hide(e)
            raise
    tls.depth = 1
    try:
        ret = orig(*args, **kwargs)
    except BaseException as e:
        nested = tls.depth > 1
        tls.depth = 0
        if not nested and _refused(e):  # torch refused it before communicating: no record, no seq
            _withdraw(handle)
            SEQ_UNDO
        else:
            _end(handle, False, "%s: %s" % (type(e).__name__, e))
        _hide(e)
        raise
    tls.depth = 0
    if ret is not None and is_async:
        _complete_on_future(ret, handle)
    elif handle > 0:
        end_fast(handle, None)
    else:
        _end(handle, True, None)
    return ret
"""


def _wrap_collective(name, orig, spec):
    """A wrapper generated for `orig`'s own signature, so each argument is one index or dict
    look-up: the whole record costs about a microsecond."""
    import inspect

    params = list(inspect.signature(orig).parameters.values())
    pos = {p.name: i for i, p in enumerate(params)}
    defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    env = {"T": T, "tls": T.tls, "orig": orig, "_begin": _begin, "_end": _end, "_complete_on_future": _complete_on_future,
           "_tensor_facts": _tensor_facts, "_reduce_number": _reduce_number, "NON_MEMBER": T.c10d.GroupMember.NON_GROUP_MEMBER,
           "_getframe": sys._getframe, "_refused": _refused, "_withdraw": _withdraw, "_hide": _hide, "site_cache": T.site_cache, "begin_fast": T.begin_fast, "end_fast": T.end_fast,
           "DTYPE": _DTYPE_BY_OBJECT, "_dtype_facts": _dtype_facts, "OFF": T.off_flag, "SEQ": T.seq}
    try:
        env["SUM"] = T.c10d.ReduceOp.SUM
    except Exception:
        env["SUM"] = object()

    def get(pname):
        """Source of an expression giving argument `pname` (its default when not passed)."""
        if pname not in pos:
            return "kwargs.get(%r)" % pname
        dname = "D_" + pname
        env[dname] = defaults.get(pname)
        i = pos[pname]
        return "(args[%d] if n > %d else kwargs.get(%r, %s))" % (i, i, pname, dname)

    t_name = spec.get("tensor")
    if not t_name:
        tensor = "count = dtype = elem = 0"
    elif t_name in ("tensor", "input", "output", "input_tensor") and not spec.get("count0"):  # one tensor: inline
        tensor = ("t = %s\n                count = t.numel()\n                dtype, elem = DTYPE.get(t.dtype) or _dtype_facts(t)" % get(t_name))
    else:
        tensor = "count, dtype, elem = _tensor_facts(%s)" % get(t_name)
        if spec.get("count0"):
            tensor += "\n                count = 0"
    if spec.get("listlen"):
        tensor = "count = len(%s or ())\n                dtype = elem = 0" % get(spec["listlen"])
    if spec.get("reduce"):
        reduce_line = "r = %s\n            reduce_op = 1 if r is SUM else _reduce_number(r)" % get(spec["reduce"])
    else:
        reduce_line = "reduce_op = 0"
    root_name = spec.get("root") or spec.get("peer")
    if root_name:
        peer_line = "peer = %s\n            peer = peer if peer.__class__ is int else -1" % get(root_name)
        if "group_" + root_name in pos:  # torch >= 2.6: the root or peer as a rank of the group
            peer_line += "\n            if peer < 0:\n                peer = T.global_rank(group, %s)" % get("group_" + root_name)
    else:
        peer_line = "peer = -1"
    op = OPS[spec["op"]]
    if "peer" in spec:
        seq_lines = "key = (%d, peer)\n            seq = T.p2p.get(key, 0) + 1\n            T.p2p[key] = seq" % op
        seq_undo = "if T.p2p.get(key) == seq:\n                T.p2p[key] = seq - 1"
    else:
        seq_lines = "seq = SEQ.get(comm, 0) + 1\n            SEQ[comm] = seq"
        seq_undo = "if SEQ.get(comm) == seq:\n                SEQ[comm] = seq - 1"
    is_async = "True" if spec.get("always_async") else ("bool(%s)" % get("async_op") if "async_op" in pos else "False")
    src = (_TEMPLATE.replace("GROUP", get("group")).replace("TENSOR_LINES", tensor).replace("REDUCE_LINE", reduce_line)
           .replace("PEER_LINE", peer_line).replace("SEQ_LINES", seq_lines).replace("SEQ_UNDO", seq_undo).replace("OP", str(op))
           .replace("ASYNC", is_async).replace("NAME", name))
    exec(compile(src, "<dsdoctor tracer: %s>" % name, "exec"), env)
    traced = functools.wraps(orig)(env["traced"])
    traced.__dsdoctor_traced__ = True
    return traced


def _end(handle, ok, error):
    if not handle:
        return
    try:
        err = None if ok else (error or "failed").encode(errors="replace")[:500]
        if handle > 0:
            T.end_fast(handle, err)
        else:
            T.lib.dsd_trace_end(-handle, 1 if ok else 0, err)
    except Exception as e:
        T.disable("end: %s: %s" % (type(e).__name__, e))


def _hide(e, frames=1):
    """Takes the caller's frame (and the `frames` - 1 below it) out of e's traceback before the
    caller re-raises it with a bare `raise` (which adds no frame on Python >= 3.11): a traceback
    through a traced call reads as it would without dsdoctor."""
    try:
        caller = sys._getframe(1)
        tb = e.__traceback__
        for _ in range(frames):
            if tb is None or tb.tb_frame is not caller:
                return
            tb = tb.tb_next
            caller = tb.tb_frame if tb is not None else None
        e.__traceback__ = tb
    except Exception:
        pass


def _withdraw(handle):
    try:
        if handle > 0:
            T.withdraw_fast(handle)
        elif handle < 0:
            T.lib.dsd_trace_withdraw(-handle)
    except Exception as e:
        T.disable("withdraw: %s: %s" % (type(e).__name__, e))


# Errors that mean the arguments were refused, not that communication failed.
_ARGUMENT_ERRORS = (ValueError, TypeError, AssertionError, NotImplementedError, IndexError, KeyError, AttributeError)
# Words of a communication failure (NCCL launches at once; a monitored barrier waits inside the
# call; gloo's enforce failures are a peer's different size): such an error is the call's.
_COMMUNICATION_WORDS = ("nccl", "connection", "connect", "timed out", "timeout", "closed", "abort", "socket", "peer",
                        "monitoredbarrier", "broken pipe", "reset by", "unhandled", "watchdog", "communicator", "mpi",
                        "enforce fail", "transport", "read error", "write error")
def _refused(e):
    """True when torch refused the call before it issued any work: an argument error, or a
    RuntimeError of torch's own checks (its innermost frame is torch's code, not the line that
    waits for the work). An error from work.wait() stays a failed call even when it is a refusal:
    gloo checks a reduce op in its worker thread ("Cannot use ReduceOp.AVG with Gloo") after the
    call took its tag, so the ranks' calls no longer pair up and the record must stay."""
    try:
        dist = sys.modules.get("torch.distributed")
        dist_error = getattr(dist, "DistError", None)
        if dist_error is not None and isinstance(e, dist_error):
            return False  # torch >= 2.1 says a backend, store or network failed
        if isinstance(e, _ARGUMENT_ERRORS):
            return True
        text = str(e).lower()
        if not isinstance(e, RuntimeError) or any(w in text for w in _COMMUNICATION_WORDS):
            return False
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is None:
            return False
        filename = tb.tb_frame.f_code.co_filename
        if not (tb.tb_frame.f_globals.get("__name__") or "").startswith("torch."):  # torch's own check, by module
            return False
        import linecache

        line = linecache.getline(filename, tb.tb_lineno)
        return bool(line.strip()) and "wait(" not in line
    except Exception:
        return False


def _complete_on_future(work, handle):
    """An asynchronous call ends when its Work's future does (gloo, NCCL and MPI all give one)."""
    try:
        fut = work.get_future()
    except Exception:
        _end(handle, True, None)  # no future to watch: do not leave a call in flight forever
        return

    def done(f):
        try:
            f.value()
            _end(handle, True, None)
        except Exception as e:
            _end(handle, False, "%s: %s" % (type(e).__name__, e))

    try:
        fut.add_done_callback(done)
    except Exception:
        _end(handle, True, None)


def _wrap_init(orig):
    import inspect

    pos = {p: i for i, p in enumerate(inspect.signature(orig).parameters)}

    @functools.wraps(orig)
    def traced(*args, **kwargs):
        handle = 0
        try:
            world = _arg(args, kwargs, pos.get("world_size"), "world_size", -1)
            rank = _arg(args, kwargs, pos.get("rank"), "rank", -1)
            world = world if isinstance(world, int) and world > 0 else _int(os.environ.get("WORLD_SIZE"), 1)
            rank = rank if isinstance(rank, int) and rank >= 0 else _int(os.environ.get("RANK"), 0)
            T.open(rank, world, _arg(args, kwargs, pos.get("backend"), "backend", ""))
            if not T.off:
                handle = _begin(OPS["rendezvous"], 0, 0, 0, world, 0, T.callsite_bytes(2))
        except Exception as e:
            T.disable("init_process_group: %s: %s" % (type(e).__name__, e))
        _configure_flight_recorder()
        try:
            ret = orig(*args, **kwargs)
        except BaseException as e:
            if handle:
                _end(handle, False, "%s: %s" % (type(e).__name__, e))
            _hide(e)
            raise
        if handle:
            _end(handle, True, None)
            T.lib.dsd_trace_set_phase(PHASE_USER)
        _watch_flight_recorder()
        return ret

    return traced


# ---- PyTorch's Flight Recorder, dumped on the coordinator's request ---------------------------------
# On a hang or a suspicion, each node writes the incident's number into DSDOCTOR_FR_DIR/request; a
# thread of every torch rank notices within half a second and writes torch's own record of the
# rank's collectives to DSDOCTOR_FR_DIR/incident-<n>/rank_<r> (docs/flight-recorder.md). The thread
# runs while the main thread waits in a collective (torch releases the GIL there). Any failure
# costs the dump, never the program.

_FR_POLL_S = 0.5
_fr_started = [False]


def _flight_recorder_dump():
    """Torch's Flight Recorder dump (pickle bytes), or None where this torch has none."""
    c = sys.modules.get("torch._C._distributed_c10d")
    if c is None:
        return None
    for name in ("_dump_fr_trace", "_dump_nccl_trace"):
        fn = getattr(c, name, None)
        if fn is None:
            continue
        try:
            return fn(True, True, False)  # collectives, their stacks, finished ones too
        except TypeError:
            try:
                return fn()
            except Exception:
                continue
        except Exception:
            continue
    return None


def _flight_recorder_rank():
    try:
        return int(T.c10d.get_rank())
    except Exception:
        return _int(os.environ.get("RANK"), 0)


def _read_incident(path):
    try:
        with open(path, "rb") as f:
            return int(f.read(32).strip() or b"0")
    except (OSError, ValueError):
        return 0


def _flight_recorder_loop(fr_dir, done):
    import time

    request = os.path.join(fr_dir, "request")
    last = None
    while True:
        time.sleep(_FR_POLL_S)
        try:
            stamp = os.stat(request).st_mtime_ns
        except OSError:
            continue
        if stamp == last:
            continue
        last = stamp
        n = _read_incident(request)
        if n <= done:
            continue
        done = n
        try:
            data = _flight_recorder_dump()
            if not data:
                continue
            folder = os.path.join(fr_dir, "incident-%d" % n)
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, "rank_%d" % _flight_recorder_rank())
            tmp = "%s.%d.tmp" % (path, os.getpid())  # a name not ending in a rank: never read as a dump
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)  # whole or absent: a reader never sees half a dump
        except Exception:
            pass


def _configure_flight_recorder():
    """Before the process groups exist (they read these when made): torch's own recorder settings,
    under the names this torch reads (the newer TORCH_FR_* where it has them: the older names make
    it warn), each only where the user set neither name."""
    fr_dir = os.environ.get("DSDOCTOR_FR_DIR", "")
    c = sys.modules.get("torch._C._distributed_c10d")
    if not fr_dir or c is None or not (hasattr(c, "_dump_fr_trace") or hasattr(c, "_dump_nccl_trace")):
        return  # torch 1.x: no recorder to configure
    new = hasattr(c, "_dump_fr_trace")
    env = os.environ

    def unless_set(names, value):
        if not any(env.get(n) for n in names):
            env[names[0] if new else names[-1]] = value

    try:
        unless_set(("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"), "2000")
        unless_set(("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), os.path.join(fr_dir, "watchdog", "rank_"))
        unless_set(("TORCH_NCCL_DEBUG_INFO_PIPE_FILE",), os.path.join(fr_dir, "pipe", "rank_"))
    except Exception:
        pass


def _watch_flight_recorder():
    fr_dir = os.environ.get("DSDOCTOR_FR_DIR", "")
    if not fr_dir or _fr_started[0]:
        return
    c = sys.modules.get("torch._C._distributed_c10d")
    if c is None or not (hasattr(c, "_dump_fr_trace") or hasattr(c, "_dump_nccl_trace")):
        return  # torch 1.x: no Flight Recorder
    _fr_started[0] = True
    # An incident from before this process joined is not its to answer (read now, not in the thread:
    # a request written just after init must not be taken for an old one).
    done = _read_incident(os.path.join(fr_dir, "request"))
    try:
        threading.Thread(target=_flight_recorder_loop, args=(fr_dir, done), name="dsdoctor-flight-recorder",
                         daemon=True).start()
        if T.lib is not None and not T.off:
            T.lib.dsd_trace_set_flags(FLAG_FLIGHT_RECORDER)  # its node waits for its dumps
    except Exception:
        pass


def _wrap_new_group(orig):
    import inspect

    pos = {p: i for i, p in enumerate(inspect.signature(orig).parameters)}

    @functools.wraps(orig)
    def traced(*args, **kwargs):
        try:
            ret = orig(*args, **kwargs)
        except BaseException as e:
            _hide(e)
            raise
        if not T.off:
            try:
                ranks = _arg(args, kwargs, pos.get("ranks"), "ranks")
                if ranks is None:
                    ranks = range(T.c10d.get_world_size())
                T.register_group(ret if ret is not T.c10d.GroupMember.NON_GROUP_MEMBER else None, tuple(sorted(ranks)))
            except Exception as e:
                T.disable("new_group: %s: %s" % (type(e).__name__, e))
        return ret

    return traced


def _wrap_destroy(orig):
    """Forget a destroyed group, so dsdoctor holds no reference that keeps it alive."""

    @functools.wraps(orig)
    def traced(*args, **kwargs):
        group = args[0] if args else kwargs.get("group")
        if group is None:
            T.comm_of.clear()
        else:
            T.comm_of.pop(id(group), None)
        try:
            return orig(*args, **kwargs)
        except BaseException as e:
            _hide(e)
            raise

    return traced


def patch_c10d(c10d):
    """Replaces the functions in torch.distributed.distributed_c10d before torch.distributed's
    __init__ re-exports them, so both names (and deepspeed.comm, which calls them) are traced."""
    T.c10d = c10d
    if T.lib is None:
        T.load_lib()
    specs = dict(SPECS)
    for name in getattr(c10d, "__all__", ()):
        fn = getattr(c10d, name, None)
        if name not in specs and type(fn).__name__ == "function":  # type(): no attribute of a deprecated alias is read
            spec = derive_spec(name, fn)
            if spec is not None:
                specs[name] = spec
    T.traced_names = specs
    wrapped = {}  # id(original) -> wrapper: an alias (one function under two names) is wrapped once
    for name, spec in specs.items():
        orig = getattr(c10d, name, None)
        if orig is None or getattr(orig, "__dsdoctor_traced__", False):
            continue
        w = wrapped.get(id(orig))
        if w is None:
            w = wrapped[id(orig)] = _wrap_collective(name, orig, spec)
        setattr(c10d, name, w)
    for fname, wrap in (("init_process_group", _wrap_init), ("new_group", _wrap_new_group), ("destroy_process_group", _wrap_destroy)):
        orig = getattr(c10d, fname, None)
        if orig is not None and not getattr(orig, "__dsdoctor_traced__", False):
            wrapped = wrap(orig)
            wrapped.__dsdoctor_traced__ = True
            setattr(c10d, fname, wrapped)
    # torch.distributed re-exports these names; when it was imported before us, rebind them there.
    pkg = sys.modules.get("torch.distributed")
    if pkg is not None:
        for name in list(specs) + ["init_process_group", "new_group", "destroy_process_group"]:
            traced = getattr(c10d, name, None)
            orig = getattr(traced, "__wrapped__", None)
            if orig is not None and getattr(pkg, name, None) is orig:
                setattr(pkg, name, traced)


def _traced_hook(hook, ddp_comm=None):
    """Records DDP's gradient-bucket all-reduce around a comm hook (DDP issues it from C++) on the
    communicator `ddp_comm` (the model's group), else on the group the hook's state is."""

    @functools.wraps(hook)
    def traced_hook(state, bucket):
        if T.off or not T.opened:
            try:
                return hook(state, bucket)
            except BaseException as e:
                _hide(e)
                raise
        handle = 0
        try:
            buf = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
            comm = ddp_comm if ddp_comm is not None else T.comm_id(state if hasattr(state, "allreduce") else None)
            seq = T.seq.get(comm, 0) + 1
            T.seq[comm] = seq
            count, dtype, elem = _tensor_facts(buf)
            site = T.callsite(2)
            site = (site.split(" (", 1)[0] + " (ddp.bucket)") if site else "ddp.bucket"
            handle = _begin(OPS["all_reduce"] | (dtype << 8) | (REDUCE["SUM"] << 16) | (1 << 30), seq, count, elem, -1, comm, site.encode())
        except Exception as e:
            T.disable("DDP comm hook: %s: %s" % (type(e).__name__, e))
        T.tls.depth = 1  # the hook's own torch.distributed calls are this record
        try:
            fut = hook(state, bucket)
        except BaseException as e:
            T.tls.depth = 0
            _end(handle, False, "%s: %s" % (type(e).__name__, e))
            _hide(e)
            raise
        T.tls.depth = 0
        if handle:
            _complete_on_future(_FutureWork(fut), handle)
        return fut

    return traced_hook


class _FutureWork:
    def __init__(self, fut):
        self.fut = fut

    def get_future(self):
        return self.fut


class _DdpDispatch:
    """The one comm hook dsdoctor registers on a DDP model (the reducer takes one registration):
    it calls `inner`, traced. A hook the program registers later replaces `inner` rather than
    registering again, so late registrations work as they would without us. It holds no process
    group: the reducer passes its state (the group) to every call, as with any hook, so the group's
    lifetime is torch's alone (a group freed from one of its own worker threads aborts)."""

    def __init__(self, comm):
        self.__name__ = self.__qualname__ = "dsdoctor_ddp_dispatch"  # DDP checks and logs the hook's name
        self.comm = comm
        self.program_state = None
        self.program_hook = None
        self.traced = _traced_hook(_reducer_allreduce, comm)

    def set(self, state, hook):
        self.program_state, self.program_hook, self.traced = state, hook, _traced_hook(hook, self.comm)

    def __call__(self, state, bucket):
        try:
            return self.traced(self.program_state if self.program_hook is not None else state, bucket)
        except BaseException as e:
            _hide(e)
            raise


def _reducer_allreduce(process_group, bucket):
    """DDP's built-in path as a hook: scale by 1/size (a multiply, like the reducer's copy into the
    bucket, so results are bit-identical), all-reduce (sum), hand the bucket back.
    A failed all-reduce reaches the program as torch's own hooks report one: "Got the following error
    when running the callback: <the backend's error>", with this callback's frame under "At:". No
    Python-level way around it keeps the error a C++ one (a future of our own completed with
    set_exception hands DDP the exception as its value: "Unable to cast … to Tensor"), and then()
    is what carries CUDA streams over."""
    buf = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
    group = process_group if process_group is not None else T.c10d._get_default_group()
    buf.mul_(1.0 / group.size())
    return group.allreduce([buf]).get_future().then(_first_tensor)


def _first_tensor(fut):
    return fut.value()[0]


def _model_comm(model):
    try:
        return T.comm_id(model.process_group)
    except Exception:
        return 0


def _builtin_as_python(comm_hook_type):
    """The Python equivalent of a built-in C++ comm hook, for a registration that comes after ours."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    name = getattr(comm_hook_type, "name", str(comm_hook_type)).rsplit(".", 1)[-1]
    if name == "ALLREDUCE":
        return default_hooks.allreduce_hook
    if name == "FP16_COMPRESS":
        return default_hooks.fp16_compress_hook
    return None


def patch_ddp(mod):
    """DDP all-reduces gradient buckets from C++. A comm hook is the public way to see them: the
    program's own hook is wrapped; with no hook of the program's, on torch >= 2 (or with
    DSDOCTOR_TRACE_DDP=1), dsdoctor's dispatcher (DDP's built-in arithmetic) is registered at the
    first forward, and a hook the program registers later goes into it.
    Not covered: Join's divide_by_initial_world_size=False scaling (the hook divides by the
    group's size, as torch's own allreduce_hook does)."""
    DDP = getattr(mod, "DistributedDataParallel", None)
    if DDP is None or getattr(DDP.forward, "__dsdoctor_traced__", False):
        return
    orig_register = DDP.register_comm_hook
    orig_builtin = getattr(DDP, "_register_builtin_comm_hook", None)
    orig_forward = DDP.forward

    @functools.wraps(orig_register)
    def register_comm_hook(self, state, hook):
        try:
            return register_comm_hook_body(self, state, hook)
        except BaseException as e:
            _hide(e, 2)  # this frame and the body's
            raise

    def register_comm_hook_body(self, state, hook):
        d = self.__dict__
        dispatch = d.get("_dsdoctor_dispatch")
        if dispatch is not None and d.get("_dsdoctor_hook") == "dsdoctor":
            self._check_comm_hook(hook)  # the same checks, the same errors
            dispatch.set(state, hook)
            d["_dsdoctor_hook"] = "program"
            try:
                self.logger._set_comm_hook_name(hook.__qualname__)
            except Exception:
                pass
            return None
        if d.get("_dsdoctor_hook", "none") == "none":  # the program's first (and only) registration
            d["_dsdoctor_hook"] = "program"
            return orig_register(self, state, _traced_hook(hook, _model_comm(self)) if not T.off else hook)
        return orig_register(self, state, hook)  # a second registration: torch's own error

    DDP.register_comm_hook = register_comm_hook
    if orig_builtin is not None:

        @functools.wraps(orig_builtin)
        def register_builtin(self, comm_hook_type):
            d = self.__dict__
            dispatch = d.get("_dsdoctor_dispatch")
            if dispatch is not None and d.get("_dsdoctor_hook") == "dsdoctor":
                hook = _builtin_as_python(comm_hook_type)
                if hook is not None:
                    dispatch.set(self.process_group, hook)  # held by us, like the state of a program's hook
                    d["_dsdoctor_hook"] = "builtin"
                    return None
            if "_dsdoctor_hook" not in d:
                d["_dsdoctor_hook"] = "builtin"  # runs in C++: not traced
            try:
                return orig_builtin(self, comm_hook_type)
            except BaseException as e:
                _hide(e)
                raise

        DDP._register_builtin_comm_hook = register_builtin

    # A Python comm hook on a gloo DDP model makes torch 1.13 abort at interpreter exit in about
    # half of the runs ("terminate called without an active exception"), with torch's own
    # allreduce_hook and without dsdoctor too: registering one uninvited there would harm healthy
    # jobs. torch 2.x exits clean with one (tests/e2e/torch_e2e_test.cc runs it repeatedly), so there
    # the buckets of a CPU model (gloo) are traced by default. A GPU model's buckets are NCCL's, which
    # the NCCL profiler plugin records without touching DDP's C++ path; a Python hook there is not
    # proven here (no GPU), so only DSDOCTOR_TRACE_DDP=1 adds it (and turns it on for 1.13); =0 turns
    # it off for any. Untraced, a rank blocked in backward() is recognised from its stack.
    choice = os.environ.get("DSDOCTOR_TRACE_DDP", "")
    torch2 = False
    try:
        import torch

        torch2 = int(torch.__version__.split(".", 1)[0]) >= 2
    except Exception:
        pass

    def register_ours(model):
        if choice in ("0", "1"):
            return choice == "1"
        if not torch2:
            return False
        try:
            return all(p.device.type == "cpu" for p in model.parameters())
        except Exception:
            return False

    @functools.wraps(orig_forward)
    def forward(self, *args, **kwargs):
        d = self.__dict__
        if "_dsdoctor_hook" not in d:
            ours = register_ours(self)
            d["_dsdoctor_hook"] = "dsdoctor" if ours else "none"
            if ours and not T.off and T.opened:
                try:
                    dispatch = _DdpDispatch(_model_comm(self))
                    orig_register(self, self.process_group, dispatch)
                    d["_dsdoctor_dispatch"] = dispatch
                except Exception as e:
                    d["_dsdoctor_hook"] = "none"
                    T.disable("DDP comm hook registration: %s: %s" % (type(e).__name__, e))
        try:
            return orig_forward(self, *args, **kwargs)
        except BaseException as e:
            _hide(e)  # an error in the model's forward is the program's: no frame of ours above it
            raise

    forward.__dsdoctor_traced__ = True
    DDP.forward = forward


def patch_deepspeed_engine(mod):
    """The phase says when a rank is inside DeepSpeed's checkpoint code (what the report shows for
    a rank that is not in a collective)."""
    Engine = getattr(mod, "DeepSpeedEngine", None)
    if Engine is None:
        return
    for name, phase in (("save_checkpoint", PHASE_SAVE), ("load_checkpoint", PHASE_LOAD)):
        orig = getattr(Engine, name, None)
        if orig is None:
            continue

        def make(orig, phase):
            @functools.wraps(orig)
            def traced(self, *args, **kwargs):
                if T.opened and not T.off:
                    T.lib.dsd_trace_set_phase(phase)
                try:
                    return orig(self, *args, **kwargs)
                except BaseException as e:
                    _hide(e)
                    raise
                finally:
                    if T.opened and not T.off:
                        T.lib.dsd_trace_set_phase(PHASE_USER)

            return traced

        setattr(Engine, name, make(orig, phase))


PATCHES = {
    "torch.distributed.distributed_c10d": patch_c10d,
    "torch.nn.parallel.distributed": patch_ddp,
    "deepspeed.runtime.engine": patch_deepspeed_engine,
}


class _PostImportFinder:
    """Runs a patch right after a module's code ran, before anything imports names from it."""

    def find_spec(self, name, path=None, target=None):
        patch = PATCHES.get(name)
        if patch is None:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        orig_exec = spec.loader.exec_module

        def exec_module(module):
            try:
                orig_exec(module)
            except BaseException as e:
                _hide(e)
                raise
            if not T.off and getattr(module, "__name__", None) == name:  # a loader shared by several modules
                try:
                    patch(module)
                except Exception as e:
                    T.disable("patching %s: %s: %s" % (name, type(e).__name__, e))

        spec.loader.exec_module = exec_module
        return spec


def install():
    if not os.environ.get("DSDOCTOR_TRACE_FILE") or T.installed:
        return  # not a rank of `dsdoctor run` (or a child of one that already claimed the trace)
    T.installed = True
    sys.meta_path.insert(0, _PostImportFinder())
    for name, patch in PATCHES.items():  # already imported (a sitecustomize before ours imported torch)
        mod = sys.modules.get(name)
        if mod is not None:
            try:
                patch(mod)
            except Exception as e:
                T.disable("patching %s: %s: %s" % (name, type(e).__name__, e))
