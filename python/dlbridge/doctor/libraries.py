"""The array libraries doctor knows how to drive, as producers and as consumers.

Each Library is a small adapter: how to make its array from a NumPy array
(keeping the layout where the library can), how its own from_dlpack is called,
and how to read back a data pointer, values and writability. Libraries that are
not installed are simply absent; nothing here imports them at module level.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from typing import Any, Callable

# The order doctor lists them in; only importable ones are used.
KNOWN = ("numpy", "torch", "jax", "cupy", "paddle", "tensorflow", "mlx", "tvm_ffi", "arrow", "warp", "dlbridge")
# paddle 3.3.1 dies (SIGSEGV) when imported after tensorflow 2.21.0; the other order works.
IMPORT_FIRST = {"tensorflow": ("paddle",)}
# Seconds to import each (cold, on the 2-core test machine): the doctor runs the
# exchanges that may crash cheap producers first, so that a crash seldom throws
# away a heavy import that the next child would have to repeat.
IMPORT_COST = {"numpy": 0.1, "dlbridge": 0.2, "mlx": 0.1, "arrow": 0.2, "warp": 0.6, "jax": 0.7,
               "tvm_ffi": 2.0, "torch": 2.2, "paddle": 3.2, "tensorflow": 4.8 + 3.2}  # tensorflow needs paddle first


class NotApplicable(Exception):
    """The producer cannot make this case (e.g. negative strides in PyTorch)."""


@dataclasses.dataclass
class Library:
    name: str
    version: str
    make: Callable[[Any], Any] | None             # numpy array -> this library's array, same layout
    consume: Callable[[Any], Any] | None          # this library's from_dlpack
    data_ptr: Callable[[Any], int] | None
    to_numpy: Callable[[Any], Any] | None
    writable: Callable[[Any], bool | None]        # None: the library has no notion of writes
    array_type: type | None = None

    @property
    def c_exchange_api(self) -> str:
        if self.array_type is None:
            return "n/a"
        if hasattr(self.array_type, "__dlpack_c_exchange_api__"):
            return "1.3 capsule"
        if hasattr(self.array_type, "__c_dlpack_exchange_api__"):
            return "1.2 int"
        return "no"


def importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(MODULES.get(name, name).split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _version(module) -> str:
    return str(getattr(module, "__version__", "?"))


def _numpy():
    import numpy as np

    return Library(
        "numpy", _version(np), make=lambda a: a, consume=np.from_dlpack,
        data_ptr=lambda a: a.__array_interface__["data"][0], to_numpy=np.asarray,
        writable=lambda a: bool(a.flags.writeable), array_type=np.ndarray,
    )


def _torch():
    import numpy as np
    import torch

    def make(a):
        if not a.flags.writeable:
            raise NotApplicable("torch tensors cannot be read-only")
        if a.dtype.name == "bfloat16":
            return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
        try:
            return torch.from_numpy(a)
        except (ValueError, TypeError) as exc:
            raise NotApplicable(str(exc)) from None

    def to_numpy(t):
        t = t.detach().cpu().resolve_conj()
        if t.dtype == torch.bfloat16:
            import ml_dtypes

            return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()

    return Library(
        "torch", _version(torch), make=make, consume=torch.from_dlpack, data_ptr=lambda t: t.data_ptr(),
        to_numpy=to_numpy, writable=lambda t: True, array_type=torch.Tensor,
    )


def _jax():
    import jax
    import jax.numpy as jnp
    import numpy as np

    # Without x64 JAX narrows int64/float64 on creation, and every 64-bit case
    # would test a different dtype than the one named.
    jax.config.update("jax_enable_x64", True)

    def make(a):
        if a.ndim >= 1 and a.size and not a.flags.c_contiguous:
            raise NotApplicable("jax arrays are always compact row-major")
        if not a.flags.writeable:
            raise NotApplicable("jax arrays have no read-only flag (they are immutable)")
        return jnp.asarray(a)

    return Library(
        "jax", _version(jax), make=make, consume=jnp.from_dlpack,
        data_ptr=lambda x: x.unsafe_buffer_pointer(), to_numpy=np.asarray,
        writable=lambda x: None, array_type=type(jnp.zeros(())),
    )


def _tvm_ffi():
    import numpy as np
    import tvm_ffi

    def make(a):
        if not a.flags.writeable:
            raise NotApplicable("tvm_ffi asks for legacy capsules, which cannot carry read-only data")
        return tvm_ffi.from_dlpack(a)

    return Library(
        "tvm_ffi", _version(tvm_ffi), make=make, consume=tvm_ffi.from_dlpack,
        data_ptr=lambda t: t.data_ptr(), to_numpy=np.from_dlpack, writable=lambda t: True,
        array_type=tvm_ffi.Tensor,
    )


def _dlbridge():
    import numpy as np

    import dlbridge

    def to_numpy(t):
        return np.from_dlpack(t)

    return Library(
        "dlbridge", _version(dlbridge), make=dlbridge.from_dlpack, consume=dlbridge.from_dlpack,
        data_ptr=lambda t: t.data_ptr, to_numpy=to_numpy, writable=lambda t: not t.readonly,
        array_type=getattr(dlbridge, "Tensor", None),
    )


def _version_only(name: str):
    # Installed but not driven yet: listed so the report shows it is there.
    module = importlib.import_module(MODULES.get(name, name))
    return Library(name, _version(module), None, None, None, None, lambda x: None)


ADAPTERS = {"numpy": _numpy, "torch": _torch, "jax": _jax, "tvm_ffi": _tvm_ffi, "dlbridge": _dlbridge}

from .peers import ADAPTERS as _PEERS, MODULES  # noqa: E402  (peers builds on Library above)

ADAPTERS.update(_PEERS)


def import_order(names) -> list[str]:
    """names, with what must be imported before them (IMPORT_FIRST), in a safe order."""
    names = list(names)
    for name in list(names):
        names[:0] = [first for first in IMPORT_FIRST.get(name, ()) if first not in names]
    return sorted(names, key=lambda n: KNOWN.index(n) if n in KNOWN else len(KNOWN))


def discover(names=None) -> tuple[dict[str, Library], dict[str, str]]:
    """(libraries loaded, {name: why not} for the known ones that are absent or broken)."""
    loaded, missing = {}, {}
    for name in import_order(names or KNOWN):
        if name not in KNOWN:
            missing[name] = "unknown to doctor"
            continue
        if not importable(name):
            missing[name] = "not installed"
            continue
        try:
            loaded[name] = ADAPTERS.get(name, lambda n=name: _version_only(n))()
        except Exception as exc:  # a broken install is a finding, not a doctor crash
            missing[name] = f"import failed: {type(exc).__name__}: {exc}"
    return loaded, missing
