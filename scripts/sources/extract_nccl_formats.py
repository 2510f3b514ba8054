#!/usr/bin/env python3
"""List every WARN/ncclSetLastError message format in NCCL's source code.

Reads NCCL's src/ tree (*.cc, *.cu, *.h and the *.cpp/*.cuh/*.hpp variants)
straight from a git object store with `git --git-dir DIR show REV:PATH`, so no
work tree is needed. For every call site of the WARN(...) macro, and of
ncclSetLastError(...) where that function exists, it takes the first argument
(the printf format), joins adjacent string literals ("a" "b"), and handles calls
spanning several lines. Comments are ignored.

Output (stdout) is a TSV: a comment line `# NCCL <version> <commit>`, a column
line, then one row per call site (no deduplication), sorted by path then line:
    path  line  macro  format
C escapes in the format are decoded, then backslash, newline, tab and CR are
written as \\\\, \\n, \\t, \\r. %-conversions are kept as written; the
<inttypes.h> PRI* macros are expanded (PRIu64 -> "lu", as on 64-bit Linux) and
object-like macros #defined to a string literal anywhere in src/ are expanded.
Any other non-literal piece of the format is written as ${TOKEN} (e.g. ${#name}
for a stringified macro parameter, ${fmt} for a format passed in a variable).

Usage:
    python3 scripts/sources/extract_nccl_formats.py --git-dir /path/nccl/.git \
        --rev v2.30.7-1 > collectors/sources/nccl_warn_formats.tsv
"""
import argparse
import re
import subprocess
import sys

EXTS = (".cc", ".cu", ".h", ".cpp", ".cuh", ".hpp")
MACROS = ("WARN", "ncclSetLastError")
TOKEN = re.compile(r"""
    (?P<ws>\s+|\\\n)
  | (?P<comment>//(?:\\\n|[^\n])*|/\*.*?\*/)
  | (?P<raw>(?:u8|u|U|L)?R"(?P<delim>[^(\s]*)\(.*?\)(?P=delim)")
  | (?P<str>(?:u8|u|U|L)?"(?:\\.|\\\n|[^"\\\n])*")
  | (?P<chr>(?:u8|u|U|L)?'(?:\\.|[^'\\\n])*')
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.']|)*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>->|::|.)
""", re.S | re.X)
PRI = {f"PRI{c}{n}": ("l" if n == "64" else "") + c
       for c in "diouxX" for n in ("8", "16", "32", "64")}
ESC = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
       "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?", "\n": ""}


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True,
                          capture_output=True).stdout.decode("utf-8", "replace")


def tokenize(text):
    """Yield (kind, text, line) tokens, skipping whitespace and comments."""
    line = 1
    for m in TOKEN.finditer(text):
        kind = m.lastgroup if m.lastgroup != "delim" else "raw"
        if kind not in ("ws", "comment"):
            yield kind, m.group(), line
        line += m.group().count("\n")


def decode(lit):
    """Decode the contents of one C string literal token."""
    body = lit[lit.index('"') + 1:-1]
    return re.sub(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|.|\n)", lambda m: ESC.get(
        m.group(1), chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x"
        else chr(int(m.group(1), 8)) if m.group(1)[0] in "01234567"
        else m.group(1)), body, flags=re.S)


def first_arg(toks, i):
    """Return (tokens of the first argument, ok) for a call whose '(' is toks[i]."""
    depth, out = 0, []
    for kind, text, _ in toks[i + 1:]:
        if text in "([{":
            depth += 1
        elif text in ")]}":
            if depth == 0:
                return out, True
            depth -= 1
        elif text == "," and depth == 0:
            return out, True
        out.append((kind, text))
    return out, False


def render(arg, strmacros):
    parts, prev_hash = [], False
    for kind, text in arg:
        if kind == "str":
            parts.append(decode(text))
        elif kind == "id" and text in PRI:
            parts.append(PRI[text])
        elif kind == "id" and text in strmacros:
            parts.append(strmacros[text])
        elif text == "#":
            prev_hash = True
            continue
        else:
            parts.append("${%s%s}" % ("#" if prev_hash else "", text))
        prev_hash = False
    s = "".join(parts)
    return (s.replace("\\", "\\\\").replace("\n", "\\n")
             .replace("\t", "\\t").replace("\r", "\\r"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--rev", default="HEAD")
    a = ap.parse_args()
    commit = git(a.git_dir, "rev-parse", a.rev + "^{commit}").strip()
    vmk = dict(re.findall(r"^(NCCL_\w+)[ \t]*:=[ \t]*(\S*)",
                          git(a.git_dir, "show", f"{commit}:makefiles/version.mk"), re.M))
    version = "{NCCL_MAJOR}.{NCCL_MINOR}.{NCCL_PATCH}".format(**vmk) + vmk.get("NCCL_SUFFIX", "")
    paths = [p for p in git(a.git_dir, "ls-tree", "-r", "--name-only", commit, "--", "src").splitlines()
             if p.endswith(EXTS)]
    files = {p: list(tokenize(git(a.git_dir, "show", f"{commit}:{p}"))) for p in paths}
    strmacros = {}  # object-like macros whose whole body is string literal(s)
    for toks in files.values():
        for j in range(len(toks) - 3):
            if toks[j][1] == "#" and toks[j + 1][1] == "define" and toks[j + 2][0] == "id":
                k, body = j + 3, []
                while k < len(toks) and toks[k][0] == "str" and toks[k][2] == toks[j + 2][2]:
                    body.append(decode(toks[k][1]))
                    k += 1
                if body and (k == len(toks) or toks[k][2] != toks[j + 2][2]):
                    strmacros[toks[j + 2][1]] = "".join(body)
    rows = []
    for path in sorted(files):
        toks = files[path]
        for i, (kind, text, line) in enumerate(toks):
            if kind != "id" or text not in MACROS or i + 1 >= len(toks) or toks[i + 1][1] != "(":
                continue
            prev = [t[1] for t in toks[max(0, i - 2):i]]
            if prev[-1:] and prev[-1] in (".", "->", "define") or prev == ["#", "define"]:
                continue  # member access or the macro's own definition
            arg, ok = first_arg(toks, i + 1)
            if text == "ncclSetLastError" and any(t[1] in ("char", "void") for t in arg):
                continue  # declaration/definition, not a call
            fmt = render(arg, strmacros) if ok else "${UNTERMINATED}"
            rows.append((path, line, text, fmt))
    out = sys.stdout
    out.write(f"# NCCL {version} {commit}\n")
    out.write("path\tline\tmacro\tformat\n")
    for r in sorted(rows, key=lambda r: (r[0], r[1])):
        out.write("%s\t%d\t%s\t%s\n" % r)


if __name__ == "__main__":
    main()
