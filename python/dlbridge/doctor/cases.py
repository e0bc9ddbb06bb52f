"""The matrix of dtypes and layouts each pair is tried on, built as NumPy arrays."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    dtype: str
    layout: str

    @property
    def phrase(self) -> str:
        """The case in words, as the doctor's messages name it: "float32 data with negative strides"."""
        return PHRASES[self.layout].format(dtype=self.dtype)

    def build(self):
        """A fresh NumPy array with this dtype and layout and distinguishable values."""
        import numpy as np

        dtype = _numpy_dtype(self.dtype)
        base = np.arange(24, dtype=np.float64).reshape(4, 6)
        if self.dtype == "bool":
            base = base % 3 == 0
        elif self.dtype.startswith("complex"):
            base = base + 1j * base[::-1]
        a = np.ascontiguousarray(base.astype(dtype))
        layout = LAYOUTS[self.layout]
        return layout(a)


def _numpy_dtype(name: str):
    import numpy as np

    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def _read_only(a):
    a.flags.writeable = False
    return a


LAYOUTS = {
    "contiguous": lambda a: a,
    "transposed": lambda a: a.T,
    "strided": lambda a: a[:, ::2],
    "negative": lambda a: a[:, ::-1],
    "0-d": lambda a: a[1, 2, ...].copy(),
    "size-0": lambda a: a[:0],
    "read-only": _read_only,
}

PHRASES = {
    "contiguous": "{dtype} data",
    "transposed": "a transposed {dtype} view",
    "strided": "a strided {dtype} view (every other column)",
    "negative": "{dtype} data with negative strides",
    "0-d": "a 0-d {dtype} tensor",
    "size-0": "an empty {dtype} tensor",
    "read-only": "read-only {dtype} data",
}

DTYPES = ("bool", "int8", "int32", "int64", "uint8", "float16", "float32", "float64",
          "complex64", "complex128", "bfloat16")

# Every dtype on the plain layout, every layout on float32: the interesting
# failures are per dtype or per layout, rarely per combination.
CASES = tuple(
    [Case(d, d, "contiguous") for d in DTYPES]
    + [Case(lay, "float32", lay) for lay in LAYOUTS if lay != "contiguous"]
)


def by_name(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def available(cases=CASES):
    """Cases whose dtype this interpreter can build (bfloat16 needs ml_dtypes)."""
    from .libraries import importable

    return tuple(c for c in cases if c.dtype != "bfloat16" or importable("ml_dtypes"))
