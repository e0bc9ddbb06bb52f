"""The shapes of the facts a library module states (no library is imported here).

A library module (``dlbridge/libraries/<name>.py``) fills these in from what was
measured against the pinned version of the library (``requirements/libs.txt``);
``convert`` hands ``Target`` to the core's planner (``include/dlbridge/exchange/plan_convert.hpp``),
``dlbridge check`` calls ``make``, ``dlbridge doctor`` drives ``peer``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

# Element types every DLPack consumer of these modules understands.
STANDARD_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "complex64", "complex128"]
)
FLOAT8 = frozenset(
    ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]
)
INT32_MAX = 2**31 - 1

# DLDeviceType numbers, for the device sets below.
CPU, CUDA, CUDA_HOST, ROCM, ROCM_HOST, CUDA_MANAGED = 1, 2, 3, 10, 11, 13


class NotObservable(Exception):
    """A check rule cannot be observed for this producer (reported as n/a, not as a failure)."""


@dataclasses.dataclass(frozen=True)
class Extension:
    """Dtypes a target holds only through a package that defines them (NumPy through ml_dtypes)."""

    module: str                     # the package; its attribute of each DLPack name is the dtype
    dtypes: frozenset               # DLPack names of single-lane dtypes
    one_per_byte: bool              # stores sub-byte values a byte each, vector lanes as a trailing axis
    hand_over: Callable[[Any, Any], Any]  # (dlbridge.Tensor, the package's dtype) -> the target's array


@dataclasses.dataclass(frozen=True)
class DTypeSetting:
    """Dtypes a target holds only while one of its settings is on (JAX's 64-bit types): off,
    they are a coded refusal naming the setting, never handed over to be narrowed."""

    dtypes: frozenset               # DLPack names
    # () -> (object, attribute): the setting's value in force is getattr(object, attribute),
    # read on every conversion of one of these dtypes (it can change at run time, per thread).
    state: Callable[[], tuple[Any, str]]
    hint: str                       # how to turn it on, for the refusal


@dataclasses.dataclass(frozen=True)
class EntryTakes:
    """When a target's own importer may be called directly, its hand_over being needed otherwise."""

    dtypes: frozenset | None = None  # None: every dtype the target holds
    strides: str = "any"


@dataclasses.dataclass(frozen=True)
class Target:
    """What one consumer accepts; every field is a measured or documented limitation.

    The planner reads read_only, strides, devices, dtypes, dtype_setting, extension,
    copied_dtypes, copies_on_import, alignment, zero_dim, max_extent and
    legacy_capsules_only; the rest says how to hand a tensor over once the plan is made.
    """

    module: str                     # what to import
    entry: str = "from_dlpack"      # attribute path of its importer inside module ("": none, see hand_over)
    read_only: str = "ignored"      # "honoured" | "immutable" (never written) | "ignored"
    strides: str = "any"            # "any" | "nonnegative" | "permuted_compact" | "row_major"
    devices: frozenset | None = None  # DLDeviceType numbers it imports; None: any
    dtypes: frozenset | None = None   # dtype names it holds; None: any
    extension: Extension | None = None
    copied_dtypes: frozenset = frozenset()  # held only in a copy its hand_over makes (Arrow's bit-packed bool)
    copies_on_import: bool = False  # every import is a copy
    alignment: int = 1              # below this alignment it copies on import
    zero_dim: bool = True           # holds 0-d arrays
    max_extent: int | None = None   # the largest dimension it holds
    dtype_setting: DTypeSetting | None = None  # dtypes held only while a setting is on
    # Its importer asks for legacy capsules only (no flags): one-value-per-byte sub-byte
    # data (IS_SUBBYTE_TYPE_PADDED) cannot reach it.
    legacy_capsules_only: bool = False
    takes: str = "array"            # "array": its importer calls __dlpack__; "capsule": it wants a legacy capsule
    copy_keyword: bool = True       # its importer takes copy= (passed only as copy=False)
    # dlbridge's own hand-over (tensor, copy) -> array, where the importer alone is not enough;
    # entry_takes says when the importer may still be called directly (None: never).
    hand_over: Callable[[Any, Any], Any] | None = None
    entry_takes: EntryTakes | None = None
    # Attribute path in `module` of the array type whose DLPack C exchange API builds this
    # library's arrays (managed_tensor_to_py_object_no_sync); used for host tensors while
    # the importer at `entry` is the library's own.
    exchange_api: str = ""
    # "module:qualname" of the library's own array types: convert(x, name) of one of them,
    # with no device and copy asked, returns x itself.
    array_types: tuple[str, ...] = ()
    # "module:qualname" of other libraries' concrete array classes that the importer reads exactly
    # as dlbridge would hand them over, each side refusing what it cannot take: convert with no
    # device and copy asked passes their instances (of exactly these classes, never a subclass,
    # which may override __dlpack__) to the importer as they are, and takes its plan only if the
    # importer refuses (tests/python/test_convert_direct.py pins both to the same result).
    # Only for a target that never writes through what it imports or sees READ_ONLY.
    direct_from: tuple[str, ...] = ()
    # Run once before the first hand-over (Warp: wp.init() without its banner).
    prepare: Callable[[], None] | None = None
    note: str = ""


class NotApplicable(Exception):
    """The doctor's producer cannot make this case (e.g. negative strides in PyTorch)."""


@dataclasses.dataclass(frozen=True)
class Peer:
    """How the doctor (and the tests) drive a library: its own constructors and readers only,
    never dlbridge, so that a case checks the library, not dlbridge."""

    make: Callable[[Any], Any]          # a NumPy array -> this library's array, same layout (or NotApplicable)
    consume: Callable[[Any], Any]       # its own from_dlpack, as a user calls it
    data_ptr: Callable[[Any], int]
    to_numpy: Callable[[Any], Any]
    writable: Callable[[Any], bool | None]  # None: the library has no notion of writes
    array_type: type | None = None


def strided_layout(a) -> bool:
    """Whether a NumPy array's layout is anything but compact row-major (size 0 and 0-d are compact)."""
    return a.ndim >= 1 and a.size and not a.flags.c_contiguous


def exported_pointer(x) -> int:
    """Where the library's own export says the data is, for libraries with no pointer accessor
    (a versioned capsule where it makes one: Arrow refuses legacy requests)."""
    from .._core import inspect_capsule

    try:
        capsule = x.__dlpack__(max_version=(1, 3))
    except TypeError:
        capsule = x.__dlpack__()
    return inspect_capsule(capsule)["data"]
