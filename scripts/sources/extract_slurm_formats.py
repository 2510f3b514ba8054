#!/usr/bin/env python3
"""List the error/fatal message formats that Slurm's srun and slurmstepd print.

These are the lines a user finds in a job's output, e.g.
    srun: error: node01: task 3: Exited with exit code 1
    slurmstepd: error: *** STEP 42.0 ON node01 CANCELLED AT 2026-... DUE TO TIME LIMIT ***
    slurmstepd-node01: error:  mpi/pmix_v5: pmixp_p2p_send: node01 [0]: pmixp_utils.c:467: ...

Reads Slurm's source straight from a git object store (`git --git-dir DIR
cat-file --batch` on REV), so no work tree is needed. Scanned (*.c and *.h):
    src/srun/, src/slurmd/slurmstepd/, src/api/step_launch.c,
    src/api/step_io.c, src/api/step_ctx.c (absent in newer trees: it moved to
    src/srun/step_ctx.c), src/plugins/mpi/pmix/, src/plugins/mpi/pmi2/,
    src/plugins/task/, src/plugins/proctrack/, src/plugins/cgroup/,
    src/plugins/jobacct_gather/, src/common/env.[ch], src/common/io_hdr.[ch],
    src/interfaces/jobacct_gather.c (the memory-limit enforcement in
    slurmstepd: "%ps exceeded memory limit (%lu > %lu), being killed")
(code that runs inside srun or slurmstepd; what it prints reaches the job's
output or the step's stderr). `#if 0` blocks are skipped; other preprocessor
branches are all scanned.

Call sites taken, one row each (no deduplication):
  * error(), fatal(), fatal_abort(), error_in_daemon() (and slurm_error(),
    error()'s exported alias, where called): the first argument is the format.
  * Function-like macros #defined in the scanned files whose body calls one of
    those (or another such macro) with a format built from a macro parameter,
    e.g. PMIx's PMIXP_ERROR(fmt, ...), PMIXP_ERROR_STD, PMIXP_ERROR_NO(err,
    fmt, ...), PMIXP_ABORT. The format written is the one error() really gets:
    the macro's own text around the caller's format, e.g. PMIXP_ERROR("x %d")
    gives " %s: %s: %s [%d]: %s:%d: x %d". `how` is the macro's name.
  * info() in srun's code (src/srun/, src/api/step_{launch,io,ctx}.c),
    which srun prints as "srun: <msg>" at its default verbosity, only when the
    format contains (case-insensitively) one of: error, fail, abort, kill,
    terminat, cancel, timeout, time limit, unable, cannot, can't, lost, died,
    signal. (slurmstepd writes to the step's stderr only at level error unless
    srun --slurmd-debug raises it (mgr.c), so its info() is not taken.)
Formats with no literal letters at all (only conversions, ${...} pieces and
punctuation, e.g. "%s", "%s: %m", "${msg}") are dropped, except the call sites
in KEEP_BARE: srun's task-exit-by-signal line "%s: %s %s: %s%s" (hosts,
"task"/"tasks", task ids, strsignal() text such as "Killed" or "Segmentation
fault", " (core dumped)"), kept because it reports how tasks died.

For each call the format argument's adjacent string literals are joined
("a" "b"), calls may span lines, comments and whitespace are ignored. C escapes
are decoded, then backslash, newline, tab and CR are written as \\\\, \\n,
\\t, \\r. %-conversions are kept as written, Slurm's own included (%m, %pJ,
%ps, %pA, %pS, %pd, %pD, %M, %t, %T). The <inttypes.h> PRI* macros are expanded
(PRIu64 -> "lu", as on 64-bit Linux) and object-like macros #defined to string
literal(s) and/or PRI* macros in the scanned files, src/common/*.h or slurm/*.h
are expanded (pmi2's PMIJOBID_KEY, BITSTR_FMT -> "ld"). Any other non-literal
piece is written as ${TOKEN} (e.g. ${SUCMD}, a path set by configure; ${#x}
for a stringified macro parameter). A "%s: " that prints __func__ is kept as
written.

Output (stdout), UTF-8 TSV: `# Slurm <version> <commit> (...)`, where version
is META's Version (plus "-Release" when Release is not 1, e.g. 26.11.0-0rc1)
and the parenthesis says the branch/`git describe`; a `# note:` line; the
header `path<TAB>line<TAB>how<TAB>format`; then one row per call site, sorted
by path then line: path in the repository, line of the call's name, how (the
function or macro called), format.

Usage:
    python3 scripts/sources/extract_slurm_formats.py \\
        --git-dir /work/.mirror/SchedMD+slurm/repo --rev HEAD \\
        > collectors/sources/slurm_formats.tsv
"""
import argparse
import os
import re
import subprocess
import sys

# The same C string literals, escapes, PRI* macros and git access as NCCL's extractor.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extract_nccl_formats import PRI, decode, git  # noqa: E402

EXTS = (".c", ".h")
SCAN = ("src/srun/", "src/slurmd/slurmstepd/", "src/api/step_launch.c",
        "src/api/step_io.c", "src/api/step_ctx.c", "src/plugins/mpi/pmix/",
        "src/plugins/mpi/pmi2/", "src/plugins/task/", "src/plugins/proctrack/",
        "src/plugins/cgroup/", "src/plugins/jobacct_gather/",
        "src/common/env.c", "src/common/env.h", "src/common/io_hdr.c",
        "src/common/io_hdr.h", "src/interfaces/jobacct_gather.c")
# Headers read only for object-like string macros (BITSTR_FMT -> PRId64 -> "ld").
MACRO_HEADERS = ("src/common/", "slurm/")
# srun's own code, where info() reaches the user's terminal.
SRUN = ("src/srun/", "src/api/step_launch.c", "src/api/step_io.c",
        "src/api/step_ctx.c")
LOGFUNCS = ("error", "fatal", "fatal_abort", "error_in_daemon", "slurm_error")
INFO_WORDS = ("error", "fail", "abort", "kill", "terminat", "cancel", "timeout",
              "time limit", "unable", "cannot", "can't", "lost", "died", "signal")
# (path, format) of placeholder-only formats kept anyway (see the docstring).
KEEP_BARE = {("src/srun/launch.c", "%s: %s %s: %s%s")}

TOKEN = re.compile(r"""
    (?P<ws>\s+|\\\n)
  | (?P<comment>//(?:\\\n|[^\n])*|/\*.*?\*/)
  | (?P<str>(?:u8|u|U|L)?"(?:\\.|\\\n|[^"\\\n])*")
  | (?P<chr>(?:u8|u|U|L)?'(?:\\.|[^'\\\n])*')
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.']|)*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>->|\#\#|.)
""", re.S | re.X)
DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:\\\n|[^\n])*)", re.M)

def read_blobs(gitdir, commit, paths):
    """Return {path: text} for paths at commit, with one `git cat-file --batch`."""
    req = "".join(f"{commit}:{p}\n" for p in paths).encode()
    data = subprocess.run(["git", "--git-dir", gitdir, "cat-file", "--batch"],
                          input=req, check=True, capture_output=True).stdout
    out, pos = {}, 0
    for p in paths:
        nl = data.index(b"\n", pos)
        header = data[pos:nl].split()
        if header[-1] == b"missing":
            pos = nl + 1
            continue
        size = int(header[2])
        out[p] = data[nl + 1:nl + 1 + size].decode("utf-8", "replace")
        pos = nl + 1 + size + 1
    return out


def tokenize(text, line=1):
    """Yield (kind, text, line) tokens, skipping whitespace and comments."""
    for m in TOKEN.finditer(text):
        kind = m.lastgroup
        if kind not in ("ws", "comment"):
            yield kind, m.group(), line
        line += m.group().count("\n")


def call_args(toks, i):
    """Return (list of argument token lists, ok) for a call whose '(' is toks[i]."""
    depth, args, cur = 0, [], []
    for tok in toks[i + 1:]:
        text = tok[1]
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            if depth == 0:
                args.append(cur)
                return args, True
            depth -= 1
        elif text == "," and depth == 0:
            args.append(cur)
            cur = []
            continue
        cur.append(tok)
    return args, False


def render(arg, strmacros):
    parts, prev_hash = [], False
    for kind, text, *_ in arg:
        if kind == "str":
            parts.append(decode(text))
        elif kind == "id" and text in PRI:
            parts.append(PRI[text])
        elif kind == "id" and text in strmacros:
            parts.append(strmacros[text])
        elif text == "#":
            prev_hash = True
            continue
        elif text == "##":
            continue
        else:
            parts.append("${%s%s}" % ("#" if prev_hash else "", text))
        prev_hash = False
    s = "".join(parts)
    return (s.replace("\\", "\\\\").replace("\n", "\\n")
             .replace("\t", "\\t").replace("\r", "\\r"))


def bare(fmt):
    """True when the format has no literal letter of its own."""
    s = re.sub(r"\$\{[^}]*\}", "", fmt)
    s = re.sub(r"%%|%p[A-Za-z]|%[-+ #0]*[\d*]*(?:\.[\d*]*)?[hlLqjzt]*[A-Za-z]", "", s)
    s = re.sub(r"\\[ntr\\]", "", s)
    return not re.search(r"[A-Za-z]", s)


def drop_if0(text):
    """Blank out `#if 0` blocks (up to their #else or #endif), keeping line numbers."""
    out, skip, depth = [], False, 0
    for ln in text.split("\n"):
        d = re.match(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b\s*(\S*)", ln)
        if skip:
            if d and d.group(1).startswith("if"):
                depth += 1
            elif d and d.group(1) == "endif":
                depth -= 1
            elif d and d.group(1) in ("else", "elif") and depth == 1:
                depth = 0
            if depth == 0:
                skip = False
            out.append("")
            continue
        if d and d.group(1) == "if" and d.group(2) == "0":
            skip, depth = True, 1
            out.append("")
            continue
        out.append(ln)
    return "\n".join(out)


def string_macros(texts):
    """Object-like macros whose whole body is string literal(s) and PRI* macros."""
    out = {}
    for text in texts:
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+((?:\\\n|[^\n])*)", text, re.M):
            toks = list(tokenize(m.group(2)))
            if toks and all(k == "str" or t in PRI for k, t, _ in toks):
                out[m.group(1)] = "".join(decode(t) if k == "str" else PRI[t] for k, t, _ in toks)
    return out


def wrapper_macros(files):
    """Function-like macros that log through a LOGFUNCS call (or another such macro).

    Returns {name: (params, fmt_index, template_tokens)}: the format error()
    gets is template_tokens with each parameter token replaced by the caller's
    argument of that name.
    """
    defs = {}
    for text in files.values():
        for m in DEFINE.finditer(text):
            params = [p.strip().replace("...", "").strip() or "__VA_ARGS__"
                      for p in m.group(2).split(",")]
            defs[m.group(1)] = (params, list(tokenize(m.group(3))))
    wrappers = {}
    changed = True
    while changed:  # resolve macros that call other wrappers
        changed = False
        for name, (params, body) in defs.items():
            if name in wrappers or name in LOGFUNCS:
                continue
            for i, (kind, text, _) in enumerate(body[:-1]):
                if kind != "id" or body[i + 1][1] != "(" or not (text in LOGFUNCS or text in wrappers):
                    continue
                args, ok = call_args(body, i + 1)
                if not ok:
                    continue
                if text in LOGFUNCS:
                    tmpl = args[0] if args else []
                else:
                    iparams, ifmt, itmpl = wrappers[text]
                    sub = dict(zip(iparams, args))
                    tmpl = [t2 for t in itmpl for t2 in (sub.get(t[1], [t]) if t[0] == "id" else [t])]
                fmt_params = [k for k, p in enumerate(params) if any(t[1] == p for t in tmpl)]
                if fmt_params:
                    wrappers[name] = (params, fmt_params[0], tmpl)
                    changed = True
                    break
    return wrappers


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--rev", default="HEAD")
    a = ap.parse_args()
    commit = git(a.git_dir, "rev-parse", a.rev + "^{commit}").strip()
    meta = dict(re.findall(r"^\s*(\w+):\s*(\S+)", git(a.git_dir, "show", f"{commit}:META"), re.M))
    version = meta["Version"] + ("" if meta.get("Release", "1") == "1" else "-" + meta["Release"])
    try:
        describe = git(a.git_dir, "describe", "--tags", commit).strip()
    except subprocess.CalledProcessError:
        describe = ""
    branches = git(a.git_dir, "branch", "--format=%(refname:short)", "--points-at", commit).split()
    all_paths = git(a.git_dir, "ls-tree", "-r", "--name-only", commit, "--", "src").splitlines()
    paths = [p for p in all_paths if p.endswith(EXTS)
             and any(p == s or (s.endswith("/") and p.startswith(s)) for s in SCAN)]
    headers = [p for p in all_paths + git(a.git_dir, "ls-tree", "--name-only", commit, "--", "slurm/").splitlines()
               if p.endswith(".h") and p.rsplit("/", 1)[0] + "/" in MACRO_HEADERS]
    texts = {p: drop_if0(t) for p, t in read_blobs(a.git_dir, commit, paths).items()}
    files = {p: list(tokenize(t)) for p, t in texts.items()}
    # the scanned files' own definitions win over the common headers'
    strmacros = string_macros(read_blobs(a.git_dir, commit, headers).values())
    strmacros.update(string_macros(texts.values()))
    wrappers = wrapper_macros(texts)
    rows = []
    for path in sorted(files):
        toks = files[path]
        in_srun = any(path == s or (s.endswith("/") and path.startswith(s)) for s in SRUN)
        for i, (kind, text, line) in enumerate(toks):
            if kind != "id" or i + 1 >= len(toks) or toks[i + 1][1] != "(":
                continue
            if not (text in LOGFUNCS or text in wrappers or (text == "info" and in_srun)):
                continue
            prev = [t[1] for t in toks[max(0, i - 2):i]]
            if prev[-1:] and prev[-1] in (".", "->") or prev == ["#", "define"]:
                continue  # member access or a macro's own definition
            args, ok = call_args(toks, i + 1)
            if ok and args and any(t[1] in ("char", "void", "const") for t in args[0]):
                continue  # declaration/definition, not a call
            if not ok:
                fmt = "${UNTERMINATED}"
            elif text in wrappers:
                params, fi, tmpl = wrappers[text]
                sub = dict(zip(params, args))
                if fi >= len(args):
                    continue
                fmt = render([t2 for t in tmpl for t2 in (sub.get(t[1], [t]) if t[0] == "id" else [t])],
                             strmacros)
            else:
                fmt = render(args[0], strmacros)
            if text == "info" and not any(w in fmt.lower() for w in INFO_WORDS):
                continue
            if bare(fmt) and (path, fmt) not in KEEP_BARE:
                continue
            rows.append((path, line, text, fmt))
    out = sys.stdout
    where = ", ".join(b for b in branches) or "detached"
    out.write(f"# Slurm {version} {commit} (branch {where}; META Version {meta['Version']} "
              f"Release {meta.get('Release', '?')}; git describe {describe})\n")
    out.write("# note: scripts/sources/extract_slurm_formats.py over src/srun, src/slurmd/slurmstepd, "
              "src/api/step_{launch,io}.c, src/plugins/{mpi/pmix,mpi/pmi2,task,proctrack,cgroup,"
              "jobacct_gather}, src/common/{env,io_hdr}.[ch], src/interfaces/jobacct_gather.c; "
              "error/fatal/fatal_abort/error_in_daemon calls, PMIXP_* wrappers (format as error() gets it), "
              "srun info() with a failure word; formats without literal letters dropped except srun's "
              "task-killed-by-signal line (launch.c, \"%s: %s %s: %s%s\")\n")
    out.write("path\tline\thow\tformat\n")
    for r in sorted(rows, key=lambda r: (r[0], r[1])):
        out.write("%s\t%d\t%s\t%s\n" % r)


if __name__ == "__main__":
    main()
