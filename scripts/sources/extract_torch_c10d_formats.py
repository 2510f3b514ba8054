#!/usr/bin/env python3
"""List the error/warning message formats of PyTorch's distributed stack.

Reads a PyTorch git repository without a work tree (every file comes from
`git --git-dir DIR show REV:path`) and prints a TSV on stdout:

    # PyTorch <version.txt> <commit>
    path  line  kind  format

C++ under torch/csrc/distributed/c10d/: the message arguments of TORCH_CHECK,
TORCH_CHECK_WITH, TORCH_INTERNAL_ASSERT, C10_THROW_ERROR, C10D_THROW_ERROR,
C10_BUILD_ERROR, TORCH_WARN, TORCH_WARN_ONCE, C10D_ERROR, C10D_WARNING, the
`LOG(ERROR|WARNING|FATAL) << ...` streams, and message variables (a variable
named like msg/err/reason/exception assigned a literal, c10::str(...),
fmt::format(...) or a `+` concatenation: kind "msg-var").
Python under torch/distributed/ (distributed_c10d.py, rendezvous.py, run.py,
elastic/, launcher/): `raise X(...)`, logger/log .error/.warning/.exception/
.critical and warnings.warn.

Literal pieces are kept; each non-literal argument (or run of them) becomes
`{}`; fmt `{...}`, f-string `{expr}` and %-style placeholders also become `{}`.
Rows without any literal text are dropped. Newlines/tabs/backslashes in the
text are written as \\n, \\t, \\\\. Rows are sorted by path, then line.

Run:  python3 extract_torch_c10d_formats.py --git-dir /path/pytorch.git \\
          --rev HEAD [--note "where the tree came from"] > formats.tsv
Standard library only.
"""
import argparse
import ast
import re
import subprocess
import sys

CXX_ROOT = "torch/csrc/distributed/c10d/"
CXX_EXT = (".cpp", ".cc", ".hpp", ".h", ".cu", ".cuh")
PY_FILES = ("torch/distributed/distributed_c10d.py", "torch/distributed/rendezvous.py",
            "torch/distributed/run.py")
PY_DIRS = ("torch/distributed/elastic/", "torch/distributed/rendezvous/",
           "torch/distributed/launcher/")
# macro -> number of leading arguments that are not part of the message
MACROS = {"TORCH_CHECK": 1, "TORCH_CHECK_WITH": 2, "TORCH_INTERNAL_ASSERT": 1,
          "C10_THROW_ERROR": 1, "C10D_THROW_ERROR": 1, "C10_BUILD_ERROR": 1,
          "TORCH_WARN": 0, "TORCH_WARN_ONCE": 0}
FMT_MACROS = ("C10D_ERROR", "C10D_WARNING")  # fmt-style: (format, args...)
LOG_LEVELS = ("ERROR", "WARNING", "FATAL")
MSG_VAR = re.compile(r"(?i)msg|message|err|reason|exception|warn")
SKIP_VAR = re.compile(r"(?i)key|name|path|prefix")
PY_LOGGERS = ("logger", "log", "_logger", "logging", "LOGGER")
PY_LEVELS = ("error", "warning", "warn", "exception", "critical")

TOKEN = re.compile(r"""
 (?P<ws>(?:[ \t\r\f\v\n]|\\\n)+)
|(?P<comment>//[^\n]*|/\*.*?\*/)
|(?P<raw>(?:u8|u|U|L)?R"(?P<d>[^()\\\s]{0,16})\((?P<rawbody>.*?)\)(?P=d)")
|(?P<str>(?:u8|u|U|L)?"(?P<body>(?:[^"\\\n]|\\.)*)")
|(?P<chr>(?:u8|u|U|L)?'(?:[^'\\\n]|\\.)*')
|(?P<id>[A-Za-z_]\w*)
|(?P<num>\.?\d(?:[eEpP][+-]|[\w.'])*)
|(?P<op><<=|>>=|<<|>>|->|::|&&|\|\||==|!=|<=|>=|\+=|-=|[^\s])
""", re.S | re.X)
CXX_ESC = {"n": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\", "r": "\r", "?": "?"}


def git(args, gitdir):
    return subprocess.run(["git", "--git-dir", gitdir] + args, check=True,
                          capture_output=True).stdout.decode("utf-8", "replace")


def lex(text):
    """C++ tokens as (kind, value, line); comments dropped, strings decoded."""
    toks, line = [], 1
    for m in TOKEN.finditer(text):
        kind = next(k for k in ("ws", "comment", "raw", "str", "chr", "id", "num", "op")
                    if m.group(k) is not None)
        if kind == "raw":
            toks.append(("str", m.group("rawbody"), line))
        elif kind == "str":
            toks.append(("str", re.sub(r"\\(.)", lambda e: CXX_ESC.get(e.group(1), e.group(0)),
                                       m.group("body")), line))
        elif kind not in ("ws", "comment"):
            toks.append((kind, m.group(0), line))
        line += m.group(0).count("\n")
    return toks


def close(toks, i):
    """Index of the bracket closing the one at toks[i]."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j][0] == "op" and toks[j][1] in ("(", "[", "{"):
            depth += 1
        elif toks[j][0] == "op" and toks[j][1] in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def split(toks, seps):
    """Split a token list at depth-0 operators in seps."""
    parts, cur, depth = [], [], 0
    for t in toks:
        if t[0] == "op" and t[1] in ("(", "[", "{"):
            depth += 1
        elif t[0] == "op" and t[1] in (")", "]", "}"):
            depth -= 1
        if depth == 0 and t[0] == "op" and t[1] in seps:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    return parts + [cur] if cur or parts else []


def call_args(toks, names):
    """If toks is exactly a call of one of names (e.g. 'c10::str'), its argument lists."""
    for name in names:
        n = name.split("::")
        head = [t[1] for t in toks[:2 * len(n) - 1]]
        if head == [x for p in n for x in (p, "::")][:-1] and len(toks) > len(head) \
                and toks[len(head)][1] == "(" and close(toks, len(head)) == len(toks) - 1:
            return split(toks[len(head) + 1:-1], (",",))
    return None


def fmt_text(s):
    """fmt/str.format placeholders -> {}, escaped braces -> literal."""
    s = re.sub(r"\{[^{}]*\}", "\0", s.replace("{{", "\1").replace("}}", "\2"))
    return s.replace("\1", "{").replace("\2", "}").replace("\0", "{}")


def fmt_call(args):
    """Format of fmt::format(fmt, args...): its literal format string, else {}."""
    inner = call_args(args[0], ("fmt::runtime",)) if args else None
    first = inner[0] if inner else (args[0] if args else [])
    if first and all(t[0] == "str" for t in first):
        return fmt_text("".join(t[1] for t in first))
    return cxx_expr(first) if first else "{}"


def cxx_expr(toks):
    """Format of one C++ message expression."""
    if toks and all(t[0] == "str" for t in toks):
        return "".join(t[1] for t in toks)
    args = call_args(toks, ("c10::str",))
    if args is not None:
        return join(cxx_expr(a) for a in args)
    args = call_args(toks, ("fmt::format", "c10d::detail::formatLogMessage"))
    if args:
        return fmt_call(args)
    args = call_args(toks, ("std::string",))
    if args and len(args) == 1:
        return cxx_expr(args[0])
    parts = split(toks, ("+",))
    if len(parts) > 1:
        return join(cxx_expr(p) for p in parts)
    return "{}"


def join(pieces):
    return re.sub(r"(\{\})+", "{}", "".join(pieces))


def cxx_rows(path, text):
    toks, rows = lex(text), []
    for i, (kind, val, line) in enumerate(toks):
        nxt = toks[i + 1][1] if i + 1 < len(toks) and toks[i + 1][0] == "op" else ""
        if kind != "id" or nxt not in ("(", "="):
            continue
        if nxt == "(" and (val in MACROS or val in FMT_MACROS):
            args = split(toks[i + 2:close(toks, i + 1)], (",",))
            if val in FMT_MACROS:
                fmt = fmt_call(args)
            else:
                fmt = join(cxx_expr(a) for a in args[MACROS[val]:])
            rows.append((path, line, val, fmt))
        elif nxt == "(" and val == "LOG" and i + 3 < len(toks) and toks[i + 2][1] in LOG_LEVELS \
                and toks[i + 3][1] == ")":
            end = i + 4
            while end < len(toks) and not (toks[end][0] == "op" and toks[end][1] in (";", ")", "}", "#")):
                end = close(toks, end) + 1 if toks[end][0] == "op" and toks[end][1] in ("(", "[", "{") else end + 1
            pieces = split(toks[i + 4:end], ("<<",))[1:]
            rows.append((path, line, "LOG(%s)" % toks[i + 2][1], join(cxx_expr(p) for p in pieces)))
        elif nxt == "=" and MSG_VAR.search(val) and not val.isupper() and not SKIP_VAR.search(val):
            end = i + 2
            while end < len(toks) and not (toks[end][0] == "op" and toks[end][1] in (";", ",", ")", "}", "#")):
                end = close(toks, end) + 1 if toks[end][0] == "op" and toks[end][1] in ("(", "[", "{") else end + 1
            rhs = toks[i + 2:end]
            if rhs and (rhs[0][0] == "str" or len(split(rhs, ("+",))) > 1
                        or call_args(rhs, ("c10::str", "fmt::format", "std::string"))):
                rows.append((path, line, "msg-var", cxx_expr(rhs)))
    return rows


def py_text(node, percent=False):
    """Format of a Python message expression (percent: %-placeholders -> {})."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if not percent:
            return node.value
        return re.sub(r"%%|%(\([^)]*\))?[-#0 +]*(\d+|\*)?(\.\d+)?[sdrifgexXco]",
                      lambda m: "%" if m.group(0) == "%%" else "{}", node.value)
    if isinstance(node, ast.JoinedStr):
        return join(py_text(v) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return join([py_text(node.left, percent), py_text(node.right, percent)])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return py_text(node.left, True)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "format":
        return fmt_text(py_text(node.func.value))
    return "{}"


def py_rows(path, text):
    rows = []
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            name = ast.unparse(node.exc.func)
            rows.append((path, node.lineno, "raise " + name, py_text(node.exc.args[0])))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            recv = ast.unparse(node.func.value)
            if (recv.split(".")[-1] in PY_LOGGERS and node.func.attr in PY_LEVELS) or \
                    (recv == "warnings" and node.func.attr == "warn"):
                pct = recv != "warnings" and len(node.args) > 1
                rows.append((path, node.lineno, recv + "." + node.func.attr,
                             py_text(node.args[0], pct)))
    return rows


def esc(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--note", help="extra '# note:' header line (provenance)")
    a = ap.parse_args()
    commit = git(["rev-parse", a.rev + "^{commit}"], a.git_dir).strip()
    version = git(["show", commit + ":version.txt"], a.git_dir).strip()
    files = git(["ls-tree", "-r", "--name-only", commit, "--", CXX_ROOT, "torch/distributed/"],
                a.git_dir).splitlines()
    rows = []
    for f in files:
        if f.startswith(CXX_ROOT) and f.endswith(CXX_EXT):
            rows += cxx_rows(f, git(["show", commit + ":" + f], a.git_dir))
        elif f.endswith(".py") and (f in PY_FILES or f.startswith(PY_DIRS)):
            rows += py_rows(f, git(["show", commit + ":" + f], a.git_dir))
    out = sys.stdout
    out.write("# PyTorch %s %s\n" % (version, commit))
    if a.note:
        out.write("# note: %s\n" % a.note)
    out.write("path\tline\tkind\tformat\n")
    kept = sorted(r for r in set(rows) if r[3].replace("{}", "").strip())
    for path, line, kind, fmt in kept:
        out.write("%s\t%d\t%s\t%s\n" % (path, line, kind, esc(fmt)))
    print("%d rows written, %d calls without literal text dropped"
          % (len(kept), len(set(rows)) - len(kept)), file=sys.stderr)


if __name__ == "__main__":
    main()
