"""``dlbridge.convert``: hand an array to another library with the least work it accepts.

What each library can take is data (``TARGETS``), measured against the
installed versions by ``dlbridge doctor``; the route below only reads it.
Python decides the route; every copy, re-layout and capsule is made by the C++
core (``from_dlpack``, ``Tensor.copy``, ``Tensor.copy_unpacked``,
``Tensor.__dlpack__``, ``Tensor.__array_interface__``).

``convert`` itself is ``_core.convert`` (src/python/convert_route.cpp): it takes
the plain requests whose outcome ``_fast_spec`` describes completely, and
hands every other one to ``_convert_general`` below, which keeps every rule.
A target whose hand-over is not ``fn(array)`` must get ``None`` from
``_fast_spec``.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from typing import Any, Callable

from . import _core

# Element types every DLPack consumer of this table understands.
STANDARD_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "complex64", "complex128"]
)
FLOAT8 = frozenset(
    ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]
)
# The DLPack names ml_dtypes (0.5+) defines NumPy dtypes for, under the same names.
ML_DTYPES = FLOAT8 | {
    "bfloat16", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn", "int4", "uint4", "int2", "uint2", "int1", "uint1",
}


def _numpy_view(tensor, dtype):
    # NumPy takes the Tensor through __array_interface__ as raw '|V<n>' elements
    # (its from_dlpack refuses these codes) and the view relabels them without a
    # copy; the array's base chain keeps the Tensor, so the memory, alive.
    import numpy

    return numpy.asarray(tensor).view(dtype)


@dataclasses.dataclass(frozen=True)
class Extension:
    """Dtypes a target holds only through a package that defines them (NumPy through ml_dtypes)."""

    module: str                      # the package; its attribute of each DLPack name is the dtype
    dtypes: frozenset                # DLPack names of single-lane dtypes
    one_per_byte: bool               # stores sub-byte values a byte each, vector lanes as a trailing axis
    hand_over: Callable[[Any, Any], Any]   # (dlbridge.Tensor, the package's dtype) -> the target's array


@dataclasses.dataclass(frozen=True)
class Target:
    """What one consumer accepts; every field is a measured or documented limitation."""

    name: str
    module: str                      # what to import
    entry: str                       # attribute path of its import function inside module
    versioned: bool | None           # asks for DLPack >= 1.0 capsules; None: unknown
    read_only: str                   # "honoured" | "immutable" (results never written) | "ignored"
    strides: str                     # "any" | "nonnegative" | "permuted_compact" | "row_major"
    devices: frozenset | None        # DLDeviceType numbers it imports; None: unknown
    dtypes: frozenset | None         # dtype names it holds; None: unknown, let it decide
    takes: str = "array"             # "array": calls __dlpack__ itself; "capsule": wants a capsule
    copy_keyword: bool = True        # its from_dlpack takes copy=
    alignment: int = 1               # below this alignment it copies on import
    extension: Extension | None = None
    note: str = ""
    # Top-level modules whose array types this library's from_dlpack takes
    # exactly (convert then hands them over directly, as a user would). Only
    # for libraries whose own export keeps every rule: torch's drops the
    # negative bit, so torch tensors go through dlbridge's import instead.
    native: tuple[str, ...] = ()
    # Other libraries whose own __dlpack__ this one reads exactly, so that
    # convert hands their arrays over directly too: each export refuses what
    # it cannot say (NumPy: read-only data to a legacy consumer, the other
    # byte order), the target refuses what it cannot take, and a refusal
    # sends convert to its general route. Pinned by test_convert_direct.py.
    direct_from: tuple[str, ...] = ()
    # Attribute path in `module` of the array type whose DLPack C exchange
    # API builds this library's arrays (managed_tensor_to_py_object_no_sync);
    # convert hands host tensors to it instead of calling from_dlpack. Only
    # for tables checked against from_dlpack (test_convert_exchange_api.py).
    exchange_api: str = ""


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("numpy", "numpy", "from_dlpack", versioned=True, read_only="honoured", strides="any",
               devices=frozenset({1, 3, 11}), dtypes=STANDARD_DTYPES, native=("numpy",),
               direct_from=("jax", "jaxlib"),
               extension=Extension("ml_dtypes", ML_DTYPES, one_per_byte=True, hand_over=_numpy_view),
               note="from_dlpack has no bfloat16/FP8/FP4/int4; host memory only"),
        Target("torch", "torch", "from_dlpack", versioned=True, read_only="ignored", strides="nonnegative",
               devices=frozenset({1, 2, 10}),
               dtypes=(STANDARD_DTYPES | FLOAT8 | {"bfloat16"}) - {"uint16", "uint32", "uint64"},
               exchange_api="Tensor",
               note="never sets or honours READ_ONLY; negative strides abort the process"),
        Target("jax", "jax.numpy", "from_dlpack", versioned=False, read_only="immutable",
               strides="permuted_compact", devices=frozenset({1, 2, 10}),
               dtypes=STANDARD_DTYPES | FLOAT8 | {"bfloat16", "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3"},
               alignment=64, native=("jax", "jaxlib"), direct_from=("numpy",),
               note="legacy capsules only; rejects non-compact and negative strides; copies unaligned data"),
        Target("tvm_ffi", "tvm_ffi", "from_dlpack", versioned=False, read_only="ignored", strides="any",
               devices=None, dtypes=None, copy_keyword=False,
               note="asks for legacy capsules only; no copy keyword"),
        Target("cupy", "cupy", "from_dlpack", versioned=True, read_only="ignored", strides="nonnegative",
               devices=frozenset({2, 3, 13}), dtypes=STANDARD_DTYPES | {"bfloat16"},
               note="no CPU import; negative strides were corrupted before 2026"),
        Target("tensorflow", "tensorflow", "experimental.dlpack.from_dlpack", versioned=False,
               read_only="ignored", strides="row_major", devices=frozenset({1, 2}),
               dtypes=STANDARD_DTYPES | {"bfloat16"}, takes="capsule", copy_keyword=False,
               note="takes a legacy capsule, compact row-major only"),
    )
}

# A target we know nothing about gets the cautious reading: it may ignore READ_ONLY.
_UNKNOWN = dict(versioned=None, read_only="ignored", strides="any", devices=None, dtypes=None, copy_keyword=False)


@dataclasses.dataclass
class Route:
    """How convert hands a tensor over; doctor prints it."""

    target: Target
    copy_reason: str | None = None   # why dlbridge made a copy after the import, if it did
    dtype: Any = None                # the extension's dtype object when the target holds it that way


def _dlbridge():
    import dlbridge

    return dlbridge


def _fail(cls_name: str, message: str, hint: str):
    cls = getattr(_dlbridge(), cls_name)
    return cls(message, hint)


def strides_fit(shape, strides, rule: str) -> bool:
    """Whether (shape, strides in elements) is a layout the rule admits (the core decides)."""
    return _core.strides_fit(tuple(shape), tuple(strides), rule)


def resolve(to) -> tuple[Target, Callable[..., Any] | None]:
    """The Target for `to` and its import function (None for dlbridge itself)."""
    if isinstance(to, str):
        if to == "dlbridge":
            return Target("dlbridge", "dlbridge", "from_dlpack", True, "honoured", "any", None, None), None
        target = TARGETS.get(to)
        if target is None:
            try:
                module = importlib.import_module(to)
            except ImportError:
                known = ", ".join(["dlbridge", *TARGETS])
                raise ValueError(f"unknown conversion target {to!r}; use one of {known}, "
                                 "or pass a module or callable that has from_dlpack") from None
            return _resolve_object(module)
        module = importlib.import_module(target.module)
        fn = module
        for part in target.entry.split("."):
            fn = getattr(fn, part)
        return target, fn
    return _resolve_object(to)


def _resolve_object(to) -> tuple[Target, Callable[..., Any]]:
    fn = getattr(to, "from_dlpack", None)
    if fn is None and callable(to):
        fn = to
    if fn is None:
        raise TypeError(f"convert target {to!r} is neither a known name nor has from_dlpack")
    name = getattr(to, "__name__", type(to).__name__)
    base = name.split(".")[0]
    if base in TARGETS:
        # A module we have data for, passed by object rather than by name.
        return TARGETS[base], fn
    return Target(name, name, "from_dlpack", **_UNKNOWN), fn


def _device_name(code: int) -> str:
    try:
        return _dlbridge().DeviceType(code).name
    except (ValueError, AttributeError):
        return str(code)


def plan(tensor, target: Target, copy: bool | None) -> Route:
    """Decide whether `tensor` (a dlbridge.Tensor) must be copied for `target`; raise if it may not."""
    route = Route(target)
    dev = int(tensor.device.type)
    if target.devices is not None and dev not in target.devices:
        supported = ", ".join(_device_name(d) for d in sorted(target.devices))
        raise _fail("UnsupportedDeviceError",
                    f"The device specification passed to to_dlpack contains an unsupported device type "
                    f"(DLDeviceType: {_device_name(dev)}) for {target.name}, which imports {supported}.",
                    f"Pass device= one of those (e.g. device='cpu') to convert.")
    reasons = []
    if target.dtypes is not None and tensor.dtype.name not in target.dtypes:
        route.dtype = _extension_dtype(tensor, target)
        if _needs_unpacking(tensor, target.extension):
            if copy is False:
                raise _fail("CopyRequiredError",
                            f"{target.extension.module} stores {tensor.dtype.name} one value per byte, so the "
                            "packed data must be unpacked into a copy, and copy=False forbids the copy.",
                            "Pass copy=None to let dlbridge make the one unpacking copy.")
            reasons.append(f"{target.extension.module} stores sub-byte values and lanes one per byte")
    if not strides_fit(tensor.shape, tensor.strides, target.strides):
        if copy is False:
            raise _fail("LayoutError",
                        f"{target.name} cannot represent strides {tensor.strides} for shape {tensor.shape} "
                        f"(it needs {target.strides.replace('_', ' ')} strides) and copy=False forbids the re-layout.",
                        "Pass copy=None to let dlbridge make one compact copy.")
        reasons.append(f"{target.name} needs {target.strides.replace('_', ' ')} strides")
    if tensor.readonly:
        if target.read_only == "immutable" and target.versioned is False:
            # The data stays unwritten, but a legacy capsule cannot carry the flag.
            if copy is False:
                raise _fail("CopyRequiredError",
                            f"{target.name} only speaks legacy capsules, which cannot carry read-only data "
                            "without a copy, and copy=False forbids the copy.",
                            "Pass copy=None or copy=True.")
            reasons.append(f"{target.name} only speaks legacy capsules, which cannot carry READ_ONLY")
        elif target.read_only not in ("honoured", "immutable") and not reasons:
            # With a copy planned anyway the target gets private memory, which it may write.
            raise _fail("ReadOnlyError",
                        f"The data is read-only and {target.name} cannot see the READ_ONLY flag, "
                        "so a write through the result would change memory that must not change.",
                        "Pass copy=True to hand over a private, writable copy.")
    if not reasons and target.alignment > 1 and tensor.data_ptr % target.alignment and tensor.size:
        if copy is False:
            raise _fail("CopyRequiredError",
                        f"{target.name} copies data that is not aligned to {target.alignment} bytes, "
                        "and copy=False forbids the copy.",
                        "Pass copy=None, or allocate the source aligned.")
        # The target copies on import anyway; a copy here would only add a second one.
    if reasons:
        route.copy_reason = "; ".join(reasons)
    return route


def _extension_dtype(tensor, target: Target):
    """The dtype object through which `target` holds `tensor`'s dtype, or raise UnsupportedDTypeError."""
    dtype = tensor.dtype
    scalar = _dlbridge().DType((dtype.code, dtype.bits, 1)).name
    ext = target.extension
    if ext is None or scalar not in ext.dtypes:
        raise _fail("UnsupportedDTypeError",
                    f"{target.name} cannot hold dtype {dtype.name}.",
                    "Cast in the source library first (e.g. to float32), or choose a target that holds it.")
    try:
        module = importlib.import_module(ext.module)
    except ImportError:
        raise _fail("UnsupportedDTypeError",
                    f"{target.name} holds dtype {dtype.name} only through {ext.module}, which is not installed.",
                    f"pip install {ext.module} (or cast to float32 in the source library first).") from None
    found = getattr(module, scalar, None)
    if found is None:
        raise _fail("UnsupportedDTypeError",
                    f"The installed {ext.module} has no {scalar}, so {target.name} cannot hold {dtype.name}.",
                    f"pip install -U {ext.module} (or cast to float32 in the source library first).")
    return found


def _needs_unpacking(tensor, ext: Extension) -> bool:
    # Padded single-lane sub-byte data is already one value per byte; lanes of
    # sub-byte values always share bytes, and a trailing lane axis is new layout.
    packed = tensor.dtype.bits < 8 and not tensor.flags & _core.FLAG_IS_SUBBYTE_TYPE_PADDED
    return ext.one_per_byte and (tensor.dtype.lanes > 1 or packed)


def _native_byte_order(x, copy):
    # DLPack has no byte order: NumPy data in the other one is byte-swapped
    # when a copy is allowed (from_dlpack refuses it with the same fix).
    # Only NumPy arrays are asked for their dtype: other libraries' dtype
    # properties may raise (tvm_ffi 0.1.15 raises ValueError for complex).
    numpy = sys.modules.get("numpy")
    if copy is False or numpy is None or not isinstance(x, numpy.ndarray):
        return x
    swapped = ">" if sys.byteorder == "little" else "<"
    if x.dtype.byteorder != swapped:
        return x
    return x.astype(x.dtype.newbyteorder("="))


def _convert_general(x, to, device, copy):
    """convert's every rule, for the requests _core.convert does not take itself."""
    import dlbridge

    target, fn = resolve(to)
    tensor = dlbridge.from_dlpack(_native_byte_order(x, copy), device=device, copy=copy)
    if fn is None:
        return tensor
    route = plan(tensor, target, copy)
    if route.dtype is not None:
        if route.copy_reason is not None:
            tensor = tensor.copy_unpacked()
        return target.extension.hand_over(tensor, route.dtype)
    if route.copy_reason is not None:
        tensor = tensor.copy()
    if target.takes == "capsule":
        return fn(tensor.__dlpack__(max_version=(1, 3) if target.versioned else None))
    if copy is False and target.copy_keyword:
        # The target must not copy behind our back either.
        return fn(tensor, copy=False)
    return fn(tensor)


def _fast_spec(name: str):
    """What _core.convert needs to hand a tensor to the target `name` without Python:
    ("dlbridge",), or ("fast", module, entry path, device numbers | None, dtypes as
    (code, bits, lanes) | None, stride rule, READ_ONLY safe, modules handed over
    directly, exchange API type path | None); None when every call must take the
    general route (an unknown name, a target that wants a capsule or is not
    installed)."""
    if name == "dlbridge":
        return ("dlbridge",)
    target = TARGETS.get(name)
    if target is None or target.takes != "array":
        return None
    try:
        resolve(name)  # imports the module, as the general route would
    except ImportError:
        return None
    dtypes = None
    if target.dtypes is not None:
        dtypes = []
        for dtype_name in sorted(target.dtypes):
            try:
                dtype = _core.DType(dtype_name)
            except (ValueError, TypeError):
                continue  # a name this dlbridge cannot parse: the general route decides
            dtypes.append((dtype.code, dtype.bits, dtype.lanes))
        dtypes = tuple(dtypes)
    read_only_safe = target.read_only == "honoured" or (
        target.read_only == "immutable" and target.versioned is not False)
    return ("fast", target.module, tuple(target.entry.split(".")),
            None if target.devices is None else tuple(sorted(target.devices)), dtypes,
            target.strides, read_only_safe, tuple(target.native) + tuple(target.direct_from),
            tuple(target.exchange_api.split(".")) if target.exchange_api else None)


convert = _core.convert
_core._install_convert(_convert_general, _fast_spec, TARGETS)


def explain_route(x, to, /, *, device=None, copy=None) -> Route:
    """The route convert would take, without handing anything over (for doctor)."""
    import dlbridge

    target, fn = resolve(to)
    tensor = dlbridge.from_dlpack(x, device=device, copy=copy)
    if fn is None:
        return Route(target)
    return plan(tensor, target, copy)


from .adapters.targets import register as _register_adapter_targets  # noqa: E402  (needs Target above)

_register_adapter_targets(TARGETS)
