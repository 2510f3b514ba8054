#!/usr/bin/env python3
"""List the error/warning message formats of DeepSpeed's launcher and comm layer.

Reads an installed DeepSpeed package (its Python files are its source) and prints
a TSV on stdout in the format of extract_torch_c10d_formats.py:

    # DeepSpeed <version> <where it was read>
    path  line  kind  format

Files: deepspeed/launcher/*.py (the `deepspeed` runner, hostfile and resource
parsing, the pdsh/OpenMPI/MVAPICH/Slurm multinode runners, the per-node
launch.py) and deepspeed/comm/*.py (init_distributed and the backends).
`raise X(...)`, logger .error/.warning/.exception/.critical and warnings.warn,
with the same placeholder rules as the PyTorch extractor.

Run:  python3 extract_deepspeed_formats.py --package \\
          .deps/torch2-venv/lib/python3.11/site-packages/deepspeed > formats.tsv
Standard library only.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extract_torch_c10d_formats import esc, py_rows  # noqa: E402

DIRS = ("launcher", "comm")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", required=True, help="the deepspeed package directory")
    a = ap.parse_args()
    pkg = os.path.abspath(a.package)
    version = "unknown"
    with open(os.path.join(pkg, "git_version_info_installed.py")) as f:
        for line in f:
            if line.startswith("version="):
                version = line.split("=", 1)[1].strip().strip("'\"")
    rows = []
    for d in DIRS:
        for name in sorted(os.listdir(os.path.join(pkg, d))):
            if name.endswith(".py"):
                path = "deepspeed/%s/%s" % (d, name)
                with open(os.path.join(pkg, d, name)) as f:
                    rows += py_rows(path, f.read())
    out = sys.stdout
    out.write("# DeepSpeed %s (installed package: deepspeed/launcher, deepspeed/comm)\n" % version)
    out.write("path\tline\tkind\tformat\n")
    kept = sorted(r for r in set(rows) if r[3].replace("{}", "").strip())
    for path, line, kind, fmt in kept:
        out.write("%s\t%d\t%s\t%s\n" % (path, line, kind, esc(fmt)))
    print("%d rows written" % len(kept), file=sys.stderr)


if __name__ == "__main__":
    main()
