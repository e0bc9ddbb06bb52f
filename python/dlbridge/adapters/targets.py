"""convert targets for the libraries whose import needs more than their own from_dlpack.

Each target below was measured against the pinned versions of requirements/libs.txt;
the tests in tests/python/test_interop_<library>.py assert every limitation named here.
Where a library's own importer is wrong or incomplete, the target points at a small
function of this package (module ``dlbridge.adapters.<library>``) that calls it the
way it works.
"""

from __future__ import annotations

from ..convert import STANDARD_DTYPES, Target

TARGETS = (
    Target("paddle", "dlbridge.adapters.paddle", "from_tensor", versioned=True, read_only="ignored", strides="nonnegative",
           devices=frozenset({1, 2}),
           dtypes=STANDARD_DTYPES | {"bfloat16", "float8_e4m3fn", "float8_e5m2"},
           note="never honours READ_ONLY; reads negative strides as wrong values; "
                "dies when imported after tensorflow", native=("paddle",)),
    Target("arrow", "dlbridge.adapters.arrow", "from_tensor", versioned=True, read_only="immutable",
           strides="row_major", devices=frozenset({1}),
           dtypes=frozenset(["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                             "float16", "float32", "float64"]),
           note="1-d: Array, n-d: FixedShapeTensorArray; booleans are bit-packed (one copy); "
                "non-compact strides give wrong values", native=()),
    Target("warp", "dlbridge.adapters.warp", "from_tensor", versioned=False, read_only="ignored", strides="any",
           devices=frozenset({1, 2}), dtypes=(STANDARD_DTYPES - {"complex64", "complex128"}) | {"bfloat16"},
           copy_keyword=False, note="legacy capsules only; no 0-d arrays; no complex types", native=("warp",)),
    Target("mlx", "dlbridge.adapters.mlx", "from_tensor", versioned=True, read_only="honoured",
           strides="nonnegative", devices=frozenset({1}), dtypes=(STANDARD_DTYPES - {"complex128"}) | {"bfloat16"},
           note="always copies on the CPU; its from_dlpack narrows float64 and complex128", native=()),
)


def register(table: dict) -> None:
    """Add these targets to convert's table (tensorflow is in it already)."""
    for target in TARGETS:
        table.setdefault(target.name, target)
