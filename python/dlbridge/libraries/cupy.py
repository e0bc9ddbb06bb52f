"""CuPy: no CPU import; negative strides were corrupted before 2026. Not installed on the
CPU test machine: its facts come from its documentation and the GPU check (scripts/gpu-check)."""

from __future__ import annotations

from ._spec import CUDA, CUDA_HOST, CUDA_MANAGED, STANDARD_DTYPES, Target

NAME = "cupy"
RANK = 4
MODULE = "cupy"

TARGET = Target("cupy", read_only="ignored", strides="nonnegative",
                devices=frozenset({CUDA, CUDA_HOST, CUDA_MANAGED}), dtypes=STANDARD_DTYPES | {"bfloat16"},
                array_types=("cupy:ndarray",), note="no CPU import; negative strides were corrupted before 2026")
