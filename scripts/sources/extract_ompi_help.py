#!/usr/bin/env python3
"""List every topic of Open MPI's or PRRTE's show_help files (help-*.txt).

Open MPI prints most of its user-facing errors and warnings (a TCP connection
to a peer that fails, a daemon that dies, a process that exits non-zero, too
few slots, an OpenFabrics device problem ...) not from format strings in the
code but from topics of its help files, through opal_show_help() (Open MPI
<= 4.x) or, under Open MPI 5's mpirun, PRRTE's prte_show_help() on top of
PMIx's pmix_show_help_vstring(). With the error header on, the runtime prints
a line of 74 '-' characters, the topic's text with the caller's arguments
substituted printf-style (%s, %d, %lu ..., %% for a '%'), and another line of
74 '-'.

Two modes:

  ompi   the help files of an installed Open MPI (Debian: /usr/share/openmpi,
         package openmpi-common), as opal_show_help() 4.1.x reads them. Its
         flex lexer (opal/util/show_help_lex.l) has these rules, checked
         against the installed libopen-pal 4.1.4 (opal_show_help_string() on
         a test file):
           - a line whose first character is '#' is a comment and is skipped;
             it does NOT end the topic: text after it still belongs to it;
           - a line that starts with '[' and has a ']' later starts a topic;
             the name is what lies between the '[' and the line's LAST ']',
             the rest of the line is ignored; a '[' line with no ']' or a
             line with a leading space is text;
           - every other line, blank ones included, is a line of the current
             topic's text, up to the next topic line or the end of the file;
           - if a file has a topic name twice, the first one is printed.

  prrte  the help files of a PRRTE source tree (every src/**/help-*.txt),
         read from a git object store with `git --git-dir DIR show REV:PATH`
         (no work tree needed). PRRTE compiles them into its library with
         src/util/prte-convert-help.py, whose rules this follows:
           - trailing white space of each line is removed;
           - a line that starts with '[' and has a ']' later starts a topic
             named by what lies between the '[' and the FIRST ']'; a '[' line
             with no ']' is dropped;
           - a line starting with "#include" is a directive (below);
           - any other line starting with '#' is a comment and ENDS the
             topic: the lines after it, up to the next topic, belong to none;
           - every other line (blank ones included) is a line of the topic;
           - if a file has a topic name twice, the last one is kept.
         Every topic is kept (the converter's --purge, used only in picky
         builds, drops topics no code cites; this script does not), except
         the command-line tools' option documentation (what `prterun --help
         map-by` prints, never an error): "usage", "version" and
         "placement*" topics, a topic named after an option ("--NAME"
         anywhere in the help texts) in a file that has a "usage" topic,
         and every topic of the files that hold only such documentation
         (DOC_FILES).
         The directive "#include#FILE#TOPIC" (or "#include#PROJECT#FILE#TOPIC")
         is replaced when the message is printed by the lines of TOPIC of
         FILE (PMIx's get_content(), recursively, at most 16 deep); FILE is a
         help file's basename, PROJECT the name a table was registered under
         (PRRTE registers its own as "prte", PMIx its as "pmix"). This script
         INLINES the directive the same way when it names a PRRTE file with
         no project or project "prte"; a directive naming another project
         prints nothing here (for "pmix", PMIx's own text, which is not in
         this tree; for any other name the runtime finds no table and prints
         nothing either) and is reported on stderr.

For both, a topic's text in the table is its lines joined with newlines, each
line's trailing white space removed and leading blank lines kept; trailing
blank lines are dropped (the runtime prints them before the closing dashes,
but they carry nothing). Topics whose text is then empty are left out.

Output (stdout) is a TSV, UTF-8, no quoting: a comment line naming the source
and its version ("# Open-MPI 4.1.4 (Debian openmpi-common 4.1.4-3,
/usr/share/openmpi/help-*.txt)" or "# PRRTE 5.0.0a1 <commit>"), a "# note:"
line, a column line, then one row per topic sorted by path then line:
    path  line  how  format
path is the help file (its basename for ompi, its path in the tree for
prrte), line the line number of the "[topic]" line, how the topic name,
format the topic's text with backslash, newline, tab and carriage return
written as \\\\, \\n, \\t, \\r. printf conversions are kept as written.

Usage:
    python3 scripts/sources/extract_ompi_help.py ompi [--dir /usr/share/openmpi] \\
        > collectors/sources/openmpi_help.tsv
    python3 scripts/sources/extract_ompi_help.py prrte \\
        --git-dir /path/prrte/.git [--rev HEAD] > collectors/sources/prrte_help.tsv
In ompi mode the version is taken from dpkg (the package owning the files);
elsewhere give it with --version 4.1.4 [--package "..."].
"""
import argparse
import glob
import os
import re
import subprocess
import sys

MAX_INCLUDE_DEPTH = 16  # PMIX_SHOW_HELP_MAX_INCLUDE_DEPTH


def escape(text):
    return (text.replace("\\", "\\\\").replace("\n", "\\n")
            .replace("\t", "\\t").replace("\r", "\\r"))


def finish(lines):
    """The table's text of a topic: lines right-stripped, trailing blank lines dropped."""
    lines = [ln.rstrip(" \t\f\v") for ln in lines]
    while lines and not lines[-1].strip(" \t\f\v\r"):
        lines.pop()
    return "\n".join(lines)


# ---------------------------------------------------------------- Open MPI

def parse_ompi(text):
    """Topics of one Open MPI (opal_show_help 4.1.x) help file: [(line, name, [lines])]."""
    topics, cur = [], None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # after the final newline
    for no, line in enumerate(lines, 1):
        if line.startswith("#"):
            continue
        if line.startswith("[") and line.rfind("]") > 1:  # flex: ^\[.+\]/[^\]\n]*\n
            cur = (no, line[1:line.rindex("]")], [])
            topics.append(cur)
        elif cur is not None:
            cur[2].append(line)
    return topics


def dpkg_version(directory):
    """('4.1.4', 'Debian openmpi-common 4.1.4-3') for the package owning the help files."""
    sample = sorted(glob.glob(os.path.join(directory, "help-*.txt")))[0]
    owner = subprocess.run(["dpkg", "-S", os.path.realpath(sample)], check=True,
                           capture_output=True, text=True).stdout.split(":")[0].strip()
    full = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", owner], check=True,
                          capture_output=True, text=True).stdout.strip()
    upstream = re.sub(r"-[^-]*$", "", full.split(":", 1)[-1])
    return upstream, f"Debian {owner} {full}"


def run_ompi(a):
    files = sorted(glob.glob(os.path.join(a.dir, "help-*.txt")))
    if not files:
        sys.exit(f"no help-*.txt in {a.dir}")
    if a.version:
        version, package = a.version, a.package
    else:
        version, package = dpkg_version(a.dir)
    origin = f"{package}, " if package else ""
    rows = []
    for path in files:
        base = os.path.basename(path)
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
            topics = parse_ompi(f.read())
        seen = set()
        for no, name, lines in topics:
            if name in seen:
                print(f"{base}:{no}: [{name}] again; opal_show_help prints the first",
                      file=sys.stderr)
                continue
            seen.add(name)
            text = finish(lines)
            if text:
                rows.append((base, no, name, text))
    head = [f"# Open-MPI {version} ({origin}{os.path.join(a.dir, 'help-*.txt')})",
            "# note: one row per [topic] of each help file (opal_show_help, Open MPI 4.1.x): "
            "'#' lines are comments and skipped; a line starting with '[' and holding a ']' "
            "starts a topic; every other line up to the next topic is its text. Trailing "
            "blank lines and trailing spaces dropped; empty topics and a repeated topic name "
            "(never printed) left out. Printed between two lines of 74 '-', with printf "
            "conversions (%s, %d, %%) filled by the caller."]
    return head, rows, len(files)


# ---------------------------------------------------------------- PRRTE

def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True,
                          capture_output=True).stdout


def parse_prrte(text, dups):
    """Topics of one PRRTE help file as prte-convert-help.py reads it: {name: (line, [lines])}.

    A repeated topic name is appended to dups as (first line, line, name)."""
    sections, cur = {}, None
    # the converter reads the file in text mode: universal newlines
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if not line and cur is None:
            continue
        if line.startswith("#include"):
            if cur is not None:
                sections[cur][1].append(line)
            continue
        if line.startswith("#"):
            cur = None
            continue
        if line.startswith("["):
            end = line.find("]", 1)
            if end == -1:
                continue
            cur = line[1:end]
            if cur in sections:
                dups.append((sections[cur][0], no, cur))
            sections[cur] = (no, [])  # a repeated name replaces the earlier topic
        elif cur is not None:
            sections[cur][1].append(line)
    return sections


def parse_include(line):
    """(project or None, file, topic) of an "#include#[PROJECT#]FILE#TOPIC" line, or None."""
    parts = line.split("#")
    if len(parts) < 4:
        return None
    topic, file, proj = parts[-1], parts[-2], parts[-3]
    return (None if proj.startswith("include") else proj), file, topic


def expand(byfile, base, name, depth, problems, where):
    """The printed lines of topic `name` of help file `base`, #include lines inlined."""
    out = []
    for line in byfile[base][name][1]:
        if not line.startswith("#include"):
            out.append(line)
            continue
        inc = parse_include(line) if depth < MAX_INCLUDE_DEPTH else None
        if inc is None:
            problems.append(f"{where}: {line}: not expanded (malformed or nested too deep)")
            continue
        proj, file, topic = inc
        if proj not in (None, "prte"):
            problems.append(f"{where}: {line}: project {proj!r} is not PRRTE's table "
                            "(registered as \"prte\"); prints nothing here")
            continue
        if file not in byfile or topic not in byfile[file]:
            problems.append(f"{where}: {line}: no such PRRTE topic; prints nothing")
            continue
        out.extend(expand(byfile, file, topic, depth + 1, problems, where))
    return out


# Files that hold only the command-line tools' option documentation.
DOC_FILES = {"help-placement.txt", "help-mapby.txt", "help-rankby.txt", "help-bindto.txt",
             "help-schizo-rtos.txt", "help-schizo-display.txt"}


def prrte_version(gitdir, commit):
    v = dict(re.findall(r"^(major|minor|release|greek)=(\S*)",
                        git(gitdir, "show", f"{commit}:VERSION").decode(), re.M))
    return "{major}.{minor}.{release}".format(**v) + v.get("greek", "")


def run_prrte(a):
    commit = git(a.git_dir, "rev-parse", a.rev + "^{commit}").decode().strip()
    version = prrte_version(a.git_dir, commit)
    paths = [p for p in git(a.git_dir, "ls-tree", "-r", "--name-only", commit, "--", "src")
             .decode().splitlines()
             if os.path.basename(p).startswith("help-") and p.endswith(".txt")]
    byfile, pathof = {}, {}
    for p in paths:
        base = os.path.basename(p)
        if base in byfile:
            print(f"{p}: basename also {pathof[base]}; the runtime looks topics up by basename",
                  file=sys.stderr)
        dups = []
        byfile[base] = parse_prrte(git(a.git_dir, "show", f"{commit}:{p}").decode("utf-8"), dups)
        pathof[base] = p
        for first, no, name in dups:
            print(f"{p}:{no}: [{name}] again (first at line {first}); the converter keeps this one",
                  file=sys.stderr)
    # The command-line tools' option documentation (prterun --help map-by ...) is text a user asks
    # for, never an error: the topics named after an option ("--NAME" in any topic's text), the
    # "usage", "version" and "placement*" topics, and the files that hold only documentation.
    options = set()
    for sections in byfile.values():
        for name, (no, lines) in sections.items():
            options.update(re.findall(r"(?<![\w-])--([A-Za-z][\w-]*)", "\n".join(lines)))
    rows, problems, n_inc, n_doc = [], [], 0, 0
    for base, sections in byfile.items():
        for name, (no, lines) in sections.items():
            if (base in DOC_FILES or name in ("usage", "version") or name.startswith("placement") or
                    ("usage" in sections and name in options)):
                n_doc += 1
                continue
            where = f"{pathof[base]}:{no} [{name}]"
            n_inc += any(ln.startswith("#include") for ln in lines)
            text = finish(expand(byfile, base, name, 0, problems, where))
            if text:
                rows.append((pathof[base], no, name, text))
    for p in problems:
        print(p, file=sys.stderr)
    head = [f"# PRRTE {version} {commit}",
            "# note: one row per [topic] of each src/**/help-*.txt, as src/util/prte-convert-help.py "
            "reads them: a '#' line ends the topic (text after it up to the next topic is dropped); "
            "a line starting with '[' and holding a ']' starts a topic; other lines are its text. "
            f"\"#include#[PROJECT#]FILE#TOPIC\" lines ({n_inc} topics) are inlined as PMIx's "
            "show_help does when printing. Trailing blank lines and trailing spaces dropped; empty "
            f"topics and {n_doc} topics of command-line option documentation (named after an "
            "option, usage, version, placement*; help-placement/mapby/rankby/bindto/schizo-rtos/schizo-display) left out; a "
            "repeated topic name keeps the last. Printed between two lines of "
            "74 '-', with printf conversions (%s, %d, %%) filled by the caller."]
    return head, rows, len(paths)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    o = sub.add_parser("ompi", help="installed Open MPI help files")
    o.add_argument("--dir", default="/usr/share/openmpi")
    o.add_argument("--version", help="Open MPI version (default: from dpkg)")
    o.add_argument("--package", help="where the files come from, for the comment line")
    p = sub.add_parser("prrte", help="PRRTE help files in a git object store")
    p.add_argument("--git-dir", required=True)
    p.add_argument("--rev", default="HEAD")
    a = ap.parse_args()
    head, rows, nfiles = run_ompi(a) if a.mode == "ompi" else run_prrte(a)
    rows.sort(key=lambda r: (r[0], r[1]))
    out = sys.stdout
    out.reconfigure(encoding="utf-8", errors="surrogateescape", newline="\n")
    for line in head:
        out.write(line + "\n")
    out.write("path\tline\thow\tformat\n")
    for path, no, name, text in rows:
        out.write(f"{path}\t{no}\t{escape(name)}\t{escape(text)}\n")
    print(f"{len(rows)} topics from {nfiles} files", file=sys.stderr)


if __name__ == "__main__":
    main()
