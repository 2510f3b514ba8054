#!/usr/bin/env python3
"""List the CUDA runtime's error strings (what "CUDA error: <string>" and NCCL's
"Cuda failure '<string>'" print) in the format of the other format tables:

    # CUDA <version> runtime (cudaGetErrorString over driver_types.h's enum cudaError)
    path  line  kind  format

path is the error's name (cudaErrorIllegalAddress), line its number, format the string
cudaGetErrorString returns. Needs a CUDA toolkit's header and libcudart (no GPU: the
strings are tables inside the library).

Run:  python3 extract_cuda_errors.py --cuda /usr/local/cuda > cuda_errors.tsv
Standard library only.
"""
import argparse
import ctypes
import os
import re
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuda", default="/usr/local/cuda")
    a = ap.parse_args()
    header = open(os.path.join(a.cuda, "include", "driver_types.h")).read()
    version = re.search(r"#define CUDART_VERSION\s+(\d+)", open(os.path.join(a.cuda, "include", "cuda_runtime_api.h")).read())
    v = int(version.group(1)) if version else 0
    enum = re.search(r"enum __device_builtin__ cudaError\s*\{(.*?)\};", header, re.S)
    lib = None
    for d in ("lib64", "lib"):
        p = os.path.join(a.cuda, d, "libcudart.so")
        if os.path.exists(p):
            lib = ctypes.CDLL(p)
            break
    if lib is None or enum is None:
        sys.exit("no libcudart.so or enum cudaError under " + a.cuda)
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    out = sys.stdout
    out.write("# CUDA %d.%d runtime (cudaGetErrorString over driver_types.h's enum cudaError)\n" % (v // 1000, v % 1000 // 10))
    out.write("path\tline\tkind\tformat\n")
    rows = 0
    for name, num in re.findall(r"(cudaError\w+)\s*=\s*(\d+)", enum.group(1)):
        text = lib.cudaGetErrorString(int(num)).decode()
        if name in ("cudaErrorApiFailureBase",) or not text or text.startswith("unrecognized error code"):
            continue
        out.write("%s\t%s\tcudaGetErrorString\t%s\n" % (name, num, text.replace("\\", "\\\\").replace("\t", "\\t")))
        rows += 1
    print("%d rows written" % rows, file=sys.stderr)


if __name__ == "__main__":
    main()
