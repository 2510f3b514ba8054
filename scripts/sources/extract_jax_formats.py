#!/usr/bin/env python3
"""List the error/warning message formats of JAX's multi-process runtime.

What `jax.distributed.initialize()` and the XLA coordination service behind it
print into a job's log, read from two git repositories without a work tree
(every file comes from `git --git-dir DIR show REV:path`). Prints a TSV on
stdout:

    # JAX <version> <jax commit>; XLA <xla commit> (coordination service)
    # note: <what was scanned>
    path  line  how  format

Sources
  JAX (--jax-git-dir, --jax-rev): version from jax/version.py (`_version`).
    Python: jax/_src/distributed.py, jax/_src/clusters/*.py, and the
    coordination helpers of jax/experimental/multihost_utils.py (only
    sync_global_devices, reached_preemption_sync_point, _live_devices and
    _LiveDevices: the rest of that file is array sharding).
  XLA (--xla-git-dir, --xla-rev; the revision defaults to the XLA_COMMIT that
    JAX pins in third_party/xla/revision.bzl or workspace.bzl). C++ (.cc/.h,
    no *_test.cc) under xla/pjrt/distributed/ (client, service, topology
    exchange, the coordination service/agent in coordination/ and the
    preemption notifier/sync manager in preemption/: the copy jaxlib links
    at the pinned revision), xla/tsl/distributed_runtime/coordination/ and
    xla/tsl/distributed_runtime/preemption/ (the older home of the same
    service: jaxlib releases before the move print these, with task names
    like /job:jax_worker/replica:0/task:N). XLA paths get an "xla:" prefix.

Python call sites
  `raise X(msg)` -> how "raise X"; logger/logging .error/.warning/.warn/
  .exception/.critical/.fatal -> how "logger.warning" etc.; warnings.warn.
  (.info/.debug are not listed.) The message may be a literal, an f-string
  ({expr} -> {}), "...".format(...) ({...} -> {}), `+` concatenation, `%`
  formatting, "sep".join([...]) or textwrap.fill(x) (taken as x: it only
  rewraps whitespace); in logging calls with arguments %s/%d/... become {}.
  A message (or join list) that is a plain variable is looked up in the
  enclosing function: one row per `name = ...` before the call, or per
  `name = ...` + `name += ...` pair; alternatives assigned in opposite arms of
  one `if` are never combined.

C++ call sites
  - status constructors: absl::<Code>Error(msg); tsl::errors::<Code>(a, b, ...)
    (StrCat-style); XLA's xla/util.h helpers <Code>(fmt, ...) (StrFormat-style)
    and <Code>StrCat(...); absl::Status(absl::StatusCode::k<Code>, msg).
    how = the absl constructor of that code ("absl::DeadlineExceededError"),
    since XLA prints a status as "DEADLINE_EXCEEDED: <message>"; how =
    "absl::Status" where the code is not a literal. Wrappers such as
    MakeCoordinationError(...) / MakeBarrierError(...) add no text and are
    seen through: the row is the status constructor inside them.
  - LOG(ERROR|WARNING|FATAL|QFATAL|DFATAL) << ... (also LOG_EVERY_N /
    LOG_FIRST_N / LOG_EVERY_N_SEC / LOG_EVERY_POW_2 / LOG_IF of those levels)
    -> how "LOG(ERROR)" etc.; LOG(INFO) streams are not listed.
  - absl::StrCat / absl::StrFormat / absl::Substitute calls outside those
    sinks -> how "absl::StrCat" etc.; one inside a LOG(INFO) stream -> how
    "LOG(INFO)" at the LOG's line; one inside VLOG (off by default) is skipped.
  Message expressions: adjacent string literals are concatenated; StrCat
  pieces, `+` operands and `<<` operands are joined; each StrFormat
  %-specifier and Substitute $N is replaced by its argument's format; an
  integer literal prints as itself; every other piece (a variable, a call, a
  status) becomes {}. A piece that is a local variable assigned a literal,
  StrCat, StrFormat, Substitute or literal concatenation earlier in the same
  function (back to its declaration) is replaced by each such assignment in
  turn (one row per alternative), so messages built in a variable (e.g.
  "Barrier timed out. ...") still come out whole. Text that the source itself
  writes literally, such as a stray "%s" inside a StrCat, is kept as printed.

Rows
  line = line of the call (the raise / logger / LOG / status constructor).
  Runs of placeholders collapse to one {}. Backslash, newline, tab and CR in
  the text are written as \\\\, \\n, \\t, \\r. Rows whose literal text has fewer
  than 3 words (a word: a whitespace-separated piece with a letter) are
  dropped; a call site gives at most 8 alternatives. Sorted by path, then
  line. Per-file row counts go to stderr.

Run:  python3 extract_jax_formats.py --jax-git-dir /path/jax.git [--jax-rev REV] \\
          --xla-git-dir /path/xla.git [--xla-rev COMMIT] [--note TEXT] \\
          > collectors/sources/jax_distributed_formats.tsv
      (any git directory holding the XLA commit will do, e.g. a fork's.)
Standard library only; reuses the C++ lexer of extract_torch_c10d_formats.py.
"""
import argparse
import ast
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extract_torch_c10d_formats import close, esc, fmt_text, lex, split  # noqa: E402

JAX_PY_FILES = ("jax/_src/distributed.py",)
JAX_PY_DIRS = ("jax/_src/clusters/",)
# file -> top-level functions/classes whose call sites are kept (None: all)
JAX_PY_PARTIAL = {"jax/experimental/multihost_utils.py":
                  ("sync_global_devices", "reached_preemption_sync_point",
                   "_live_devices", "_LiveDevices")}
XLA_DIRS = ("xla/pjrt/distributed/", "xla/tsl/distributed_runtime/coordination/",
            "xla/tsl/distributed_runtime/preemption/")
XLA_EXT = (".cc", ".h")

PY_LOGGERS = ("logger", "logging", "log", "_logger")
PY_LEVELS = ("error", "warning", "warn", "exception", "critical", "fatal")

CODES = ("Aborted", "AlreadyExists", "Cancelled", "DataLoss", "DeadlineExceeded",
         "FailedPrecondition", "Internal", "InvalidArgument", "NotFound", "OutOfRange",
         "PermissionDenied", "ResourceExhausted", "Unauthenticated", "Unavailable",
         "Unimplemented", "Unknown")
LOG_LEVELS = ("ERROR", "WARNING", "FATAL", "QFATAL", "DFATAL")
LOG_MACROS = ("LOG", "LOG_EVERY_N", "LOG_FIRST_N", "LOG_EVERY_N_SEC", "LOG_EVERY_POW_2",
              "LOG_IF")
STR_FUNCS = ("StrCat", "StrFormat", "Substitute")
PRINTF = re.compile(r"%%|%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|j|z|t)?"
                    r"[sdiuoxXfFeEgGaAcpvn]")
SUBST = re.compile(r"\$\$|\$\d")
MAX_ALTS = 8


def git(args, gitdir):
    return subprocess.run(["git", "--git-dir", gitdir] + args, check=True,
                          capture_output=True).stdout.decode("utf-8", "replace")


def join(pieces):
    return re.sub(r"(\{\})+", "{}", "".join(pieces))


def printf_text(s):
    return PRINTF.sub(lambda m: "%" if m.group(0) == "%%" else "{}", s)


def words(fmt):
    return sum(1 for w in fmt.replace("{}", " ").split() if re.search(r"[A-Za-z]", w))


# ----------------------------------------------------------------- Python

def py_alts(node, resolve, percent=False):
    """Formats of a Python message expression: a list of alternatives, each
    (text, branches); branches = the (if-node, arm) pairs of the assignments a
    resolved variable came from, so that alternatives from opposite arms of one
    `if` are never combined."""
    def product(parts):
        out = [("", frozenset())]
        for alts in parts:
            out = [(a + b, ca | cb) for a, ca in out for b, cb in alts
                   if compatible(ca, cb)][:MAX_ALTS]
        return [(join([t]), c) for t, c in out]

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(printf_text(node.value) if percent else node.value, frozenset())]
    if isinstance(node, ast.JoinedStr):
        return [(join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values),
                 frozenset())]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return product([py_alts(node.left, resolve, percent),
                        py_alts(node.right, resolve, percent)])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return py_alts(node.left, resolve, True)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        if node.func.attr == "format":
            return [(fmt_text(t), c) for t, c in py_alts(node.func.value, resolve)]
        if node.func.attr == "join" and isinstance(node.func.value, ast.Constant) \
                and isinstance(node.func.value.value, str):
            lists = py_list(node.args[0], resolve)
            if lists:
                return [(join([node.func.value.value.join(x)]), c) for x, c in lists]
        if ast.unparse(node.func) in ("textwrap.fill", "textwrap.dedent"):
            return py_alts(node.args[0], resolve, percent)   # only rewraps whitespace
    if isinstance(node, ast.Name) and resolve is not None:
        alts = [(t, c | cv) for v, cv in resolve(node.id, node.lineno)
                for t, c in py_alts(v, None, percent) if compatible(c, cv)]
        return alts[:MAX_ALTS] or [("{}", frozenset())]
    return [("{}", frozenset())]


def py_list(node, resolve):
    """Alternatives ([formats], branches) of a list expression, or None."""
    if isinstance(node, (ast.List, ast.Tuple)):
        out = [([], frozenset())]
        for e in node.elts:
            out = [(x + [t], cx | ct) for x, cx in out for t, ct in py_alts(e, resolve)
                   if compatible(cx, ct)][:MAX_ALTS]
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = py_list(node.left, resolve), py_list(node.right, resolve)
        if a is not None and b is not None:
            return [(x + y, cx | cy) for x, cx in a for y, cy in b
                    if compatible(cx, cy)][:MAX_ALTS]
    if isinstance(node, ast.Name) and resolve is not None:
        out = [(x, c | cv) for v, cv in resolve(node.id, node.lineno)
               for x, c in (py_list(v, None) or []) if compatible(c, cv)]
        return out[:MAX_ALTS] or None
    return None


def compatible(a, b):
    """False if a and b put one `if` node in different arms."""
    arms = dict(a)
    return all(arms.get(n, arm) == arm for n, arm in b)


def py_rows(path, text, keep=None):
    tree = ast.parse(text, path)
    rows = []
    arms = {}   # id(assignment node) -> frozenset of (id(if node), arm)

    def visit(node, func, top, branch):
        for field, value in ast.iter_fields(node):
            for child in (value if isinstance(value, list) else [value]):
                if not isinstance(child, ast.AST):
                    continue
                b = branch
                if isinstance(node, (ast.If, ast.Try)) and field in ("body", "orelse"):
                    b = branch | {(id(node), field)}
                f = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
                t = top or (child.name if isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else None)
                arms[id(child)] = frozenset(b)
                site(child, func, t)
                visit(child, f, t, b)

    def resolver(func):
        def resolve(name, line):
            """(value, branches) assigned to `name` before `line`: each
            `name = v`, or, where `name += w` follows, each v + w (one
            alternative per `+=`, as in if/else arms extending a message)."""
            base, augs = [], []
            nodes = sorted((n for n in ast.walk(func if func is not None else tree)
                            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                            and n.lineno < line and n.value is not None),
                           key=lambda n: n.lineno)
            for n in nodes:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if not any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    continue
                if isinstance(n, ast.AugAssign):
                    if isinstance(n.op, ast.Add):
                        augs.append((n.value, arms.get(id(n), frozenset())))
                else:
                    base.append((n.value, arms.get(id(n), frozenset())))
            if not augs:
                return base
            return [(ast.BinOp(left=b, op=ast.Add(), right=w), cb | cw)
                    for b, cb in base for w, cw in augs if compatible(cb, cw)]
        return resolve

    def site(node, func, top):
        if keep is not None and top not in keep:
            return
        how = msg = None
        pct = False
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            how, msg = "raise " + ast.unparse(node.exc.func), node.exc.args[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            recv = ast.unparse(node.func.value)
            if recv.split(".")[-1] in PY_LOGGERS and node.func.attr in PY_LEVELS:
                how, msg, pct = recv + "." + node.func.attr, node.args[0], len(node.args) > 1
            elif recv == "warnings" and node.func.attr == "warn":
                how, msg = "warnings.warn", node.args[0]
        if how:
            for fmt, _ in py_alts(msg, resolver(func), pct):
                rows.append((path, node.lineno, how, fmt))

    visit(tree, None, None, frozenset())
    return rows


# -------------------------------------------------------------------- C++

class Cxx:
    def __init__(self, path, text):
        self.path, self.toks = path, lex(text)
        self.covered = set()       # token indices already inside a sink
        self.scope = self._scopes()

    def _scopes(self):
        """For each token, the index of the '{' opening its function body (or -1)."""
        toks, out, stack = self.toks, [], []
        for i, t in enumerate(toks):
            if t[0] == "op" and t[1] == "{":
                j = i - 1
                while j >= 0 and not (toks[j][0] == "op" and toks[j][1] in (";", "{", "}")):
                    j -= 1
                head = {x[1] for x in toks[j + 1:i] if x[0] == "id"}
                is_type = bool(head & {"namespace", "class", "struct", "enum", "union", "extern"})
                stack.append((i, is_type))
            out.append(next((b for b, is_type in stack if not is_type), -1))
            if t[0] == "op" and t[1] == "}" and stack:
                stack.pop()
        return out

    def is_tok(self, i, val):
        return 0 <= i < len(self.toks) and self.toks[i][1] == val and self.toks[i][0] in ("op", "id")

    def call_at(self, i):
        """If toks[i] starts a (qualified) name followed by '(', (name parts, '(' index)."""
        toks, parts, j = self.toks, [], i
        while j < len(toks) and toks[j][0] == "id":
            parts.append(toks[j][1])
            if self.is_tok(j + 1, "::"):
                j += 2
            else:
                break
        if parts and self.is_tok(j + 1, "("):
            return parts, j + 1
        return None, None

    def args(self, lp):
        return split(self.toks[lp + 1:close(self.toks, lp)], (",",)), close(self.toks, lp)

    # -- message expressions -------------------------------------------------
    def expr(self, toks, at):
        """Alternative formats of a C++ message expression (token list)."""
        if not toks:
            return ["{}"]
        if all(t[0] == "str" for t in toks):
            return ["".join(t[1] for t in toks)]
        plus = split(toks, ("+",))
        if len(plus) > 1:
            return self.product([self.expr(p, at) for p in plus])
        name = []
        j = 0
        while j < len(toks) and toks[j][0] == "id":
            name.append(toks[j][1])
            if j + 1 < len(toks) and toks[j + 1][1] == "::":
                j += 2
            else:
                break
        if name and j + 1 < len(toks) and toks[j + 1][1] == "(" \
                and close(toks, j + 1) == len(toks) - 1:
            args = split(toks[j + 2:-1], (",",))
            fn = name[-1]
            if fn == "StrCat":
                return self.product([self.expr(a, at) for a in args])
            if fn in ("StrFormat", "Substitute") and args and all(t[0] == "str" for t in args[0]):
                return self.fill("".join(t[1] for t in args[0]), args[1:], at,
                                 PRINTF if fn == "StrFormat" else SUBST)
            if fn in ("string", "string_view") and len(args) == 1:
                return self.expr(args[0], at)
            return ["{}"]
        if len(toks) == 1 and toks[0][0] == "num" and re.fullmatch(r"\d+", toks[0][1]):
            return [toks[0][1]]   # an integer literal prints as itself
        if len(toks) == 1 and toks[0][0] == "id":
            return self.resolve(toks[0][1], at) or ["{}"]
        return ["{}"]

    def fill(self, fmt, args, at, spec):
        """Format string with each %-specifier (or $N) replaced by its argument's formats."""
        pieces, pos, k = [], 0, 0
        for m in spec.finditer(fmt):
            pieces.append([fmt[pos:m.start()]])
            if m.group(0) in ("%%", "$$"):
                pieces.append([m.group(0)[0]])
            else:
                n = int(m.group(0)[1:]) if spec is SUBST else k
                k += 1
                pieces.append(self.expr(args[n], at) if n < len(args) else ["{}"])
            pos = m.end()
        pieces.append([fmt[pos:]])
        return self.product(pieces)

    def product(self, alt_lists):
        out = [""]
        for alts in alt_lists:
            out = [a + b for a in out for b in alts][:MAX_ALTS]
        return [join([o]) for o in out]

    def msgish(self, rhs):
        if rhs and all(t[0] == "str" for t in rhs):
            return True
        if len(split(rhs, ("+",))) > 1 and any(t[0] == "str" for t in rhs):
            return True
        parts, lp = self.call_at_list(rhs)
        return bool(parts) and parts[-1] in STR_FUNCS and close(rhs, lp) == len(rhs) - 1

    @staticmethod
    def call_at_list(toks):
        parts, j = [], 0
        while j < len(toks) and toks[j][0] == "id":
            parts.append(toks[j][1])
            if j + 1 < len(toks) and toks[j + 1][1] == "::":
                j += 2
            else:
                break
        if parts and j + 1 < len(toks) and toks[j + 1][1] == "(":
            return parts, j + 1
        return None, None

    def resolve(self, ident, at):
        """Formats of the string assignments to local variable `ident` before token `at`."""
        toks, body, alts = self.toks, self.scope[at], []
        if body < 0:
            return []
        for j in range(at - 1, body, -1):
            if toks[j][0] != "id" or toks[j][1] != ident or self.scope[j] != body:
                continue
            prev = toks[j - 1]
            if prev[0] == "op" and prev[1] in (".", "->", "::"):
                continue
            decl = prev[0] == "id" and prev[1] not in ("return", "case", "else") \
                or (prev[0] == "op" and prev[1] in ("&", ">", "*"))
            if self.is_tok(j + 1, "=") and not self.is_tok(j + 2, "="):
                end = j + 2
                while end < len(toks) and not (toks[end][0] == "op" and toks[end][1] in (";", ",", ")", "}")):
                    end = close(toks, end) + 1 if toks[end][0] == "op" and toks[end][1] in ("(", "[", "{") else end + 1
                rhs = toks[j + 2:end]
                if self.msgish(rhs):
                    alts = self.expr(rhs, j + 2) + alts
                    self.covered.update(range(j + 2, end))
            if decl:
                break
        return [a for i, a in enumerate(alts) if a not in alts[:i]][:MAX_ALTS]

    # -- sinks ---------------------------------------------------------------
    def rows(self):
        toks, rows = self.toks, []
        pending = []   # (line, how, start, end) of free StrCat-like calls
        quiet = {}     # token index -> (how, line) of the INFO stream it is in (None: VLOG)
        for i, (kind, val, line) in enumerate(toks):
            if kind != "id" or (i > 0 and toks[i - 1][1] == "::"):
                continue
            parts, lp = self.call_at(i)
            if not parts:
                continue
            prev = toks[i - 1][1] if i > 0 else ""
            if prev in (".", "->"):
                continue
            fn = parts[-1]
            qual = parts[:-1]
            how = fmt_args = None
            style = "strcat"
            if (fn in LOG_MACROS or fn == "VLOG") and not qual:
                margs, rp = self.args(lp)
                lvl = margs[0][0][1] if margs and margs[0] else ""
                end = rp + 1
                while end < len(toks) and not (toks[end][0] == "op" and toks[end][1] in (";", "}", "#")):
                    end = close(toks, end) + 1 if toks[end][0] == "op" and toks[end][1] in ("(", "[", "{") else end + 1
                if fn != "VLOG" and lvl in LOG_LEVELS:
                    pieces = split(toks[rp + 1:end], ("<<",))[1:]
                    self.covered.update(range(i, end))
                    for fmt in self.product([self.expr(p, i) for p in pieces]):
                        rows.append((self.path, line, "LOG(%s)" % lvl, fmt))
                else:
                    # INFO streams: a StrCat-like call in one is labelled LOG(INFO);
                    # VLOG streams (off by default) are skipped.
                    for k in range(i, end):
                        quiet.setdefault(k, None if fn == "VLOG" else ("LOG(%s)" % lvl, line))
                continue
            if fn.endswith("Error") and fn[:-5] in CODES and qual in (["absl"], []):
                how, style = "absl::" + fn, "one"
            elif fn in CODES and qual and qual[-1] == "errors":
                how = "absl::%sError" % fn
            elif fn in CODES and qual in (["xla"], []) and not self.is_decl(i):
                how, style = "absl::%sError" % fn, "printf"
            elif fn.endswith("StrCat") and fn[:-6] in CODES and qual in (["xla"], []):
                how = "absl::%sError" % fn[:-6]
            elif fn == "Status" and qual == ["absl"]:
                how, style = "absl::Status", "status"
            elif fn in STR_FUNCS and qual == ["absl"]:
                if i not in self.covered:
                    args, rp = self.args(lp)
                    pending.append((line, "absl::" + fn, i, rp))
                continue
            if how is None:
                continue
            args, rp = self.args(lp)
            if not args:
                continue
            if style == "status":
                if len(args) < 2:
                    continue
                code = [t[1] for t in args[0]]
                if len(code) >= 3 and code[-1].startswith("k") and code[-1][1:] in CODES \
                        and code[-2] == "::" and code[-3] == "StatusCode":
                    how = "absl::%sError" % code[-1][1:]
                args = args[1:2]
            self.covered.update(range(i, rp + 1))
            if style == "printf":
                first = args[0]
                if all(t[0] == "str" for t in first):
                    alts = self.fill("".join(t[1] for t in first), args[1:], i, PRINTF)
                else:
                    alts = self.expr(first, i)
            elif style in ("one", "status"):
                alts = self.expr(args[0], i)
            else:
                alts = self.product([self.expr(a, i) for a in args])
            for fmt in alts:
                rows.append((self.path, line, how, fmt))
        for line, how, start, rp in pending:
            if start in self.covered:
                continue
            if start in quiet:
                if quiet[start] is None:
                    continue
                how, line = quiet[start]
            for fmt in self.expr(self.toks[start:rp + 1], start):
                rows.append((self.path, line, how, fmt))
        return rows

    def is_decl(self, i):
        """True if the name at toks[i] is being declared/defined (a type precedes it)."""
        prev = self.toks[i - 1] if i > 0 else ("op", "", 0)
        return prev[0] == "id" and prev[1] not in ("return", "case", "else", "co_return")


# ------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jax-git-dir", required=True)
    ap.add_argument("--jax-rev", default="HEAD")
    ap.add_argument("--xla-git-dir", required=True)
    ap.add_argument("--xla-rev", help="default: the XLA_COMMIT pinned by the JAX revision")
    ap.add_argument("--note", help="extra '# note:' header line (provenance)")
    a = ap.parse_args()

    jax = git(["rev-parse", a.jax_rev + "^{commit}"], a.jax_git_dir).strip()
    m = re.search(r'^_version\s*(?::\s*str\s*)?=\s*"([^"]+)"',
                  git(["show", jax + ":jax/version.py"], a.jax_git_dir), re.M)
    version = m.group(1) if m else "unknown"
    xla_rev = a.xla_rev
    if not xla_rev:
        for f in ("third_party/xla/revision.bzl", "third_party/xla/workspace.bzl"):
            try:
                m = re.search(r'XLA_COMMIT\s*=\s*"([0-9a-f]{40})"',
                              git(["show", jax + ":" + f], a.jax_git_dir))
            except subprocess.CalledProcessError:
                m = None
            if m:
                xla_rev = m.group(1)
                break
    if not xla_rev:
        sys.exit("no --xla-rev and no XLA_COMMIT found in the JAX tree")
    xla = git(["rev-parse", xla_rev + "^{commit}"], a.xla_git_dir).strip()

    rows, counts = [], {}
    for f in git(["ls-tree", "-r", "--name-only", jax, "--", "jax/"], a.jax_git_dir).splitlines():
        if f in JAX_PY_FILES or (f.startswith(JAX_PY_DIRS) and f.endswith(".py")) \
                or f in JAX_PY_PARTIAL:
            got = py_rows(f, git(["show", jax + ":" + f], a.jax_git_dir), JAX_PY_PARTIAL.get(f))
            rows += got
    for f in git(["ls-tree", "-r", "--name-only", xla, "--"] + list(XLA_DIRS),
                 a.xla_git_dir).splitlines():
        if f.endswith(XLA_EXT) and not f.endswith("_test.cc"):
            rows += Cxx("xla:" + f, git(["show", xla + ":" + f], a.xla_git_dir)).rows()

    kept = sorted(r for r in set(rows) if words(r[3]) >= 3)
    out = sys.stdout
    out.write("# JAX %s %s; XLA %s (coordination service)\n" % (version, jax, xla))
    if a.note:
        out.write("# note: %s\n" % a.note)
    out.write("path\tline\thow\tformat\n")
    for path, line, how, fmt in kept:
        out.write("%s\t%d\t%s\t%s\n" % (path, line, how, esc(fmt)))
        counts[path] = counts.get(path, 0) + 1
    for path in sorted(counts):
        print("%5d  %s" % (counts[path], path), file=sys.stderr)
    print("%d rows written, %d call sites with under 3 words of literal text dropped"
          % (len(kept), len(set(rows)) - len(kept)), file=sys.stderr)


if __name__ == "__main__":
    main()
