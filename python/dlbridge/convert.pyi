# The types of dlbridge.convert and dlbridge.plan_convert (convert.py re-exports the
# extension's functions): the result's class follows the target's name. The libraries are
# imported here for type checkers only; a stub is never run, so none of them needs to be
# installed (a type checker reads a missing one as Any). A module or a Target as `to` gives
# Any: the type system cannot tell one module object from another.
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, TypeVar, overload

import cupy  # type: ignore[import-not-found, import-untyped, unused-ignore]
import jax  # type: ignore[import-not-found, import-untyped, unused-ignore]
import mlx.core  # type: ignore[import-not-found, import-untyped, unused-ignore]
import numpy  # type: ignore[import-not-found, import-untyped, unused-ignore]
import paddle  # type: ignore[import-not-found, import-untyped, unused-ignore]
import tensorflow  # type: ignore[import-not-found, import-untyped, unused-ignore]
import torch  # type: ignore[import-not-found, import-untyped, unused-ignore]
import tvm_ffi  # type: ignore[import-not-found, import-untyped, unused-ignore]
import warp  # type: ignore[import-not-found, import-untyped, unused-ignore]

from ._core import ConversionPlan, DeviceLike, Tensor
from .libraries._spec import Target

TARGETS: dict[str, Target]

_K = TypeVar("_K")
_Tuple = TypeVar("_Tuple", bound=tuple[Any, ...])

class _ArrowTable(Protocol):
    """A pyarrow Table or RecordBatch, as far as convert reads one (pyarrow has no types of its own)."""

    @property
    def column_names(self) -> list[str]: ...
    @property
    def num_columns(self) -> int: ...
    def column(self, i: int | str, /) -> Any: ...

# What convert takes as `to` besides the names below: a module or a callable with from_dlpack.
_AnyTarget = str | Target | Callable[..., Any] | Any

def target_names() -> list[str]: ...
def alias_readonly(enabled: bool = True) -> AbstractContextManager[None]: ...
def _target_of(to: object) -> tuple[str, Target | None, Callable[..., Any] | None, tuple[type, ...],
                                    tuple[tuple[type, ...], tuple[str, ...]]]: ...

# Structures first: a dict, list or tuple (a named tuple keeps its class), an Arrow table.
@overload
def convert(x: Mapping[_K, Any], to: _AnyTarget, /, *, device: DeviceLike | None = None,  # type: ignore[overload-overlap]
            copy: bool | None = None, alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> dict[_K, Any]: ...
@overload
def convert(x: list[Any], to: _AnyTarget, /, *, device: DeviceLike | None = None,  # type: ignore[overload-overlap]
            copy: bool | None = None, alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> list[Any]: ...
@overload
def convert(x: _Tuple, to: _AnyTarget, /, *, device: DeviceLike | None = None,  # type: ignore[overload-overlap]
            copy: bool | None = None, alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> _Tuple: ...
@overload
def convert(x: _ArrowTable, to: _AnyTarget, /, *,  # type: ignore[overload-overlap]
            device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> dict[str, Any]: ...
# One array: the target's own array class.
@overload
def convert(x: object, to: Literal["torch"], /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> torch.Tensor: ...
@overload
def convert(x: object, to: Literal["jax"], /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> jax.Array: ...
@overload
def convert(x: object, to: Literal["numpy"], /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> numpy.ndarray[Any, Any]: ...
@overload
def convert(x: object, to: Literal["tensorflow"], /, *, device: DeviceLike | None = None,
            copy: bool | None = None, alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> tensorflow.Tensor: ...
@overload
def convert(x: object, to: Literal["paddle"], /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> paddle.Tensor: ...
@overload
def convert(x: object, to: Literal["arrow"], /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> Any: ...  # a pyarrow Array (pyarrow has no types)
@overload
def convert(x: object, to: Literal["mlx"], /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> mlx.core.array: ...
@overload
def convert(x: object, to: Literal["warp"], /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> warp.array[Any]: ...
@overload
def convert(x: object, to: Literal["tvm_ffi"], /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> tvm_ffi.Tensor: ...
@overload
def convert(x: object, to: Literal["cupy"], /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> cupy.ndarray: ...
@overload
def convert(x: object, to: Literal["dlbridge"], /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> Tensor: ...
# Any other name, a module, a Target or a callable with from_dlpack.
@overload
def convert(x: object, to: _AnyTarget, /, *, device: DeviceLike | None = None, copy: bool | None = None,
            alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> Any: ...

@overload
def plan_convert(x: Mapping[_K, Any], to: _AnyTarget, /, *, device: DeviceLike | None = None,  # type: ignore[overload-overlap]
                 copy: bool | None = None, alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> dict[_K, Any]: ...
@overload
def plan_convert(x: list[Any], to: _AnyTarget, /, *, device: DeviceLike | None = None,  # type: ignore[overload-overlap]
                 copy: bool | None = None, alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> list[Any]: ...
@overload
def plan_convert(x: tuple[Any, ...], to: _AnyTarget, /, *, device: DeviceLike | None = None,  # type: ignore[overload-overlap]
                 copy: bool | None = None, alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> tuple[Any, ...]: ...
@overload
def plan_convert(x: _ArrowTable, to: _AnyTarget, /, *,  # type: ignore[overload-overlap]
                 device: DeviceLike | None = None, copy: bool | None = None,
                 alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> dict[str, ConversionPlan]: ...
@overload
def plan_convert(x: object, to: _AnyTarget, /, *, device: DeviceLike | None = None, copy: bool | None = None,
                 alias_readonly: bool | None = None, keep_non_arrays: bool = False) -> ConversionPlan: ...
