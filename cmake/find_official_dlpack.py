"""Prints directories that hold an official dlpack/dlpack.h, one per line.

Run by cmake/dlbridge_official_dlpack.cmake with the Python that CMake found.
argv[1] is a scratch directory where torch's ATen/dlpack.h is staged as
dlpack/dlpack.h, the layout every other package uses. Missing packages are
skipped silently: CMake reports what it found in the end.
"""

import importlib.util
import os
import shutil
import sys


def package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def main():
    staging = sys.argv[1]
    tvm_ffi = package_dir("tvm_ffi")
    if tvm_ffi and os.path.isfile(os.path.join(tvm_ffi, "include", "dlpack", "dlpack.h")):
        print(os.path.join(tvm_ffi, "include"))
    torch = package_dir("torch")
    aten_header = torch and os.path.join(torch, "include", "ATen", "dlpack.h")
    if aten_header and os.path.isfile(aten_header):
        os.makedirs(os.path.join(staging, "dlpack"), exist_ok=True)
        shutil.copyfile(aten_header, os.path.join(staging, "dlpack", "dlpack.h"))
        print(staging)


if __name__ == "__main__":
    main()
