"""PyArrow (26.0.1) both ways.

Out (convert's "arrow" target): a 1-d tensor becomes a pyarrow Array, an n-d tensor a
FixedShapeTensorArray whose first axis is the array's length. Arrow stores booleans one
bit each, so a bool tensor is packed into a new bitmap (one copy; copy=False refuses).
Its importers read compact row-major data only, have no 0-d arrays, and refuse an empty
1-d tensor or divide by zero (SIGFPE) on an empty n-d one.

In (dlbridge.from_dlpack): pyarrow's own __dlpack__ serves primitive arrays and
FixedShapeTensorArray; second_look covers what it refuses. Nulls have no DLPack form and
are refused with the fix; booleans are unpacked into one byte per value (one copy); a
ChunkedArray with one chunk is that chunk.
"""

from __future__ import annotations

import dataclasses
import math

from ._spec import CPU, INT32_MAX, NotApplicable, NotObservable, Peer, Target, exported_pointer, strided_layout

NAME = "arrow"
RANK = 9
MODULE = "pyarrow"
DIRECT_ABORTS = ("size-0", "0-d")

_NUMERIC = frozenset(["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                      "float16", "float32", "float64"])


def hand_over(tensor, copy=None, *, importers=True):
    """A pyarrow Array (1-d) or FixedShapeTensorArray (n-d) of the tensor's values; without
    importers (pyarrow before 21 has no from_dlpack), through its constructors of NumPy arrays,
    which read the tensor's memory as it is (a NumPy view through __array_interface__)."""
    # pyarrow is bound once: an import statement per call costs more than Arrow's own import of
    # a small array (the import machinery's lookups raise and drop AttributeErrors).
    pa = _pyarrow or _bind_pyarrow()
    shape = tensor.shape
    if importers and len(shape) == 1 and shape[0]:
        # The common case asks the tensor nothing more: Arrow refuses DLPack's bool type (a byte
        # each, where Arrow packs bits), and only then is the dtype read.
        try:
            return pa.Array.from_dlpack(tensor)
        except pa.ArrowInvalid:
            if tensor.dtype.name != "bool":
                raise
            return _packed_bools(tensor)
    if len(shape) > 1 and 0 in shape[1:]:
        from ..errors import LayoutError

        raise LayoutError(f"Arrow's fixed-shape tensors need inner dimensions above 0; shape {shape} "
                          "has an empty one.", "Hand over a tensor whose dimensions after the first are all > 0.")
    if tensor.dtype.name == "bool":
        return _packed_bools(tensor)
    if 0 in shape:
        return _empty(tensor)
    if not importers:
        import numpy

        host = numpy.asarray(tensor)
        return pa.array(host) if len(shape) == 1 else pa.FixedShapeTensorArray.from_numpy_ndarray(host)
    if len(shape) == 1:
        return pa.Array.from_dlpack(tensor)
    return pa.FixedShapeTensorArray.from_dlpack(tensor)


_pyarrow = None


def _bind_pyarrow():
    global _pyarrow
    import pyarrow

    _pyarrow = pyarrow
    return pyarrow


def _by_constructors(tensor, copy=None):
    return hand_over(tensor, copy, importers=False)


def has_importers(pa) -> bool:
    """Whether this pyarrow has from_dlpack on Array and FixedShapeTensorArray (21 and later)."""
    return hasattr(pa.Array, "from_dlpack") and hasattr(pa.FixedShapeTensorArray, "from_dlpack")


def for_installed(target: Target, facts) -> Target:
    """The Target for the installed pyarrow: its importers where it has them, else its constructors."""
    import pyarrow as pa

    if has_importers(pa):
        facts.seen("Array.from_dlpack and FixedShapeTensorArray.from_dlpack exist")
        return target
    facts.seen("no from_dlpack: hands over through pa.array and FixedShapeTensorArray.from_numpy_ndarray")
    return dataclasses.replace(target, hand_over=_by_constructors,
                               note=target.note + "; this release has no from_dlpack (its constructors are used)")


TARGET = Target(
    "pyarrow", "", read_only="immutable", strides="row_major", devices=frozenset({CPU}), dtypes=_NUMERIC,
    copied_dtypes=frozenset({"bool"}), zero_dim=False, max_extent=INT32_MAX, hand_over=hand_over,
    array_types=("pyarrow:Array",),
    note="1-d: Array, n-d: FixedShapeTensorArray; booleans are bit-packed (one copy); non-compact strides give "
         "wrong values",
)


def _with_shape(flat, dtype, shape):
    import pyarrow as pa

    if len(shape) == 1:
        return flat
    inner = list(shape[1:])
    storage = pa.FixedSizeListArray.from_arrays(flat, math.prod(inner))
    return pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(dtype, inner), storage)


def _empty(tensor):
    import numpy
    import pyarrow as pa

    dtype = pa.from_numpy_dtype(numpy.dtype(tensor.dtype.name))
    return _with_shape(pa.array([], dtype), dtype, tensor.shape)


def _packed_bools(tensor):
    import numpy
    import pyarrow as pa

    values = numpy.asarray(tensor).reshape(-1)
    bits = pa.py_buffer(numpy.packbits(values, bitorder="little"))
    flat = pa.Array.from_buffers(pa.bool_(), values.size, [None, bits])
    return _with_shape(flat, pa.bool_(), tensor.shape)


def _refuse_copy(what: str):
    from ..errors import CopyRequiredError

    return CopyRequiredError(f"{what}, which needs a copy, and copy=False forbids the copy.",
                             "Pass copy=None to let dlbridge make the one copy.")


def second_look(x, refusal: BaseException, device=None, copy=None):
    """dlbridge.from_dlpack for an Arrow object whose own __dlpack__ refused (`refusal`): the
    tensor, and whether it is a copy made here (the extension marks it IS_COPIED, so that a
    writable C++ argument refuses it)."""
    import pyarrow as pa

    from .. import _core
    from ..errors import LayoutError

    if isinstance(x, pa.ChunkedArray):
        if x.num_chunks == 1:
            return _import_one(x.chunk(0), device=device, copy=copy)
        if copy is False:
            raise _refuse_copy(f"A ChunkedArray of {x.num_chunks} chunks must be joined into one buffer")
        return _import_one(x.combine_chunks(), device=device, copy=None)[0], True
    if not isinstance(x, pa.Array):
        raise refusal
    if x.null_count:
        raise LayoutError(f"The Arrow array has {x.null_count} null(s); DLPack has no validity bitmap, "
                          "so the nulls would silently become values.",
                          "Replace or drop them first: arr.fill_null(0) or arr.drop_null().")
    values = x.storage if isinstance(x, pa.ExtensionArray) else x
    if pa.types.is_boolean(values.type) or (pa.types.is_fixed_size_list(values.type)
                                            and pa.types.is_boolean(values.type.value_type)):
        if copy is False:
            raise _refuse_copy("Arrow stores booleans one bit each, so they must be unpacked to one byte each")
        host = x.to_numpy_ndarray() if isinstance(x, pa.FixedShapeTensorArray) else x.to_numpy(zero_copy_only=False)
        return _core.from_dlpack(host, device=device), True
    if isinstance(x, pa.FixedShapeTensorArray) and not has_importers(pa):
        # Before pyarrow 21 a FixedShapeTensorArray has no DLPack export of its own ("DataType is not
        # compatible with DLPack spec"); its NumPy view is the same immutable memory.
        return _core.from_dlpack(x.to_numpy_ndarray(), device=device, copy=copy), False
    raise refusal


def _import_one(x, *, device, copy):
    from .. import _core

    try:
        return _core.from_dlpack(x, device=device, copy=copy), False
    except Exception as exc:
        return second_look(x, exc, device=device, copy=copy)


def make(shape, dtype, readonly=False):
    """A fresh Arrow array for `dlbridge check arrow` (Arrow data is immutable: read-only is any array)."""
    import pyarrow as pa

    from .numpy import make as numpy_make

    if len(shape) == 0:
        raise NotObservable("arrow arrays have at least one dimension")
    host = numpy_make(shape, dtype)
    if len(shape) == 1:
        return pa.array(host)
    return pa.FixedShapeTensorArray.from_numpy_ndarray(host)


SUPPORTS_READONLY = True


def peer() -> Peer:
    """The doctor's driver: pa.array (1-d) and FixedShapeTensorArray (n-d), each with its own importer."""
    import pyarrow as pa

    def make(a):
        if a.ndim == 0:
            raise NotApplicable("arrow arrays have at least one dimension")
        if strided_layout(a) or not a.flags.c_contiguous:
            raise NotApplicable("arrow arrays are compact")
        if a.dtype.kind == "c" or a.dtype.name == "bfloat16":
            raise NotApplicable(f"arrow has no {a.dtype.name}")
        if a.ndim == 1:
            return pa.array(a)
        if a.dtype == bool:
            raise NotApplicable("FixedShapeTensorArray.from_numpy_ndarray takes no booleans")
        return pa.FixedShapeTensorArray.from_numpy_ndarray(a)

    def consume(x):
        # Arrow has one importer per kind of array; the shape says which the user would call.
        # Arrow's own arrays have no .shape: a FixedShapeTensorArray is n-d, any other 1-d.
        shape = getattr(x, "shape", None)
        if shape is None:
            shape = (0, 0) if isinstance(x, pa.FixedShapeTensorArray) else (0,)
        if len(shape) == 1:
            return pa.Array.from_dlpack(x)
        return pa.FixedShapeTensorArray.from_dlpack(x)

    def to_numpy(x):
        if isinstance(x, pa.FixedShapeTensorArray):
            return x.to_numpy_ndarray()
        return x.to_numpy(zero_copy_only=False)

    return Peer(make=make, consume=consume, data_ptr=exported_pointer, to_numpy=to_numpy, writable=lambda x: None,
                array_type=pa.Array)
