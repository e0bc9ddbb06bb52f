"""JAX (0.10.2): asks for legacy capsules only (its arrays are immutable, so it never
writes through what it imports); rejects non-compact and negative strides; copies data
that is not 64-byte aligned.

Transposed (permuted-compact) arrays are handed over as they are only from 0.10 on (measured on
0.10.2, for_installed): 0.6.2 reads a 64-byte-aligned transposed array as row-major (wrong
values) and 0.7.2 refuses it, so on any older or unknown release they get one row-major copy."""

from __future__ import annotations

import dataclasses
import math

from ._release import at_least
from ._spec import (CPU, CUDA, FLOAT8, ROCM, STANDARD_DTYPES, DTypeSetting, NotApplicable, NotObservable, Peer,
                    Target, strided_layout)

NAME = "jax"
RANK = 3
MODULE = "jax"
CONSUMER = "jax.dlpack:from_dlpack"


def _x64_state():
    """Where JAX's 64-bit switch is read: its state object, whose ``value`` is the setting in
    force in this thread (``jax.experimental.enable_x64()`` included), else ``jax.config``."""
    try:
        from jax._src.config import enable_x64

        enable_x64.value  # noqa: B018 (present on this release)
        return enable_x64, "value"
    except (ImportError, AttributeError):
        import jax

        return jax.config, "jax_enable_x64"


# With 64-bit types off (JAX's default) jax.numpy.from_dlpack narrows these silently
# (int64 2**40 + 5 -> int32 5, float64 1e300 -> float32 inf).
X64 = DTypeSetting(
    dtypes=frozenset({"int64", "uint64", "float64", "complex128"}), state=_x64_state,
    hint='jax.config.update("jax_enable_x64", True), or JAX_ENABLE_X64=1 before importing jax',
)

TARGET = Target(
    "jax.numpy", read_only="immutable", strides="permuted_compact", devices=frozenset({CPU, CUDA, ROCM}),
    dtypes=STANDARD_DTYPES | FLOAT8 | {"bfloat16", "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3"},
    alignment=64, array_types=("jax:Array",), dtype_setting=X64, legacy_capsules_only=True,
    direct_from=("numpy:ndarray",),
    note="legacy capsules only; rejects non-compact and negative strides; copies unaligned data",
)


def for_installed(target: Target, facts) -> Target:
    """The Target for the installed JAX: its concrete array class (0.4.30's is only registered as a
    jax.Array, not derived from it), and transposed arrays only where that release was measured."""
    import jax
    import jax.numpy as jnp

    concrete = type(jnp.zeros(()))
    path = f"{concrete.__module__}:{concrete.__qualname__}"
    if jax.Array not in concrete.__mro__:
        facts.seen(f"its arrays are {path}, not derived from jax.Array")
        target = dataclasses.replace(target, array_types=(*target.array_types, path))
    if target.strides != "permuted_compact" or at_least(facts.version, 0, 10):
        facts.seen(f"jax {facts.version}: reads transposed (permuted-compact) arrays, as measured on 0.10.2")
        return target
    facts.assume(f"jax {facts.version}: transposed arrays get a row-major copy (0.6.2 misreads them, "
                 "0.7.2 refuses them; releases before 0.10 are not trusted with them)")
    # Nor are NumPy arrays handed to its importer as they are (a transposed one would be misread).
    return dataclasses.replace(target, strides="row_major", direct_from=())


def make(shape, dtype, readonly=False):
    """A fresh JAX array for `dlbridge check jax`."""
    import jax.numpy as jnp

    if readonly:
        raise NotObservable("jax arrays have no read-only flag")
    return jnp.arange(math.prod(shape), dtype=dtype).reshape(shape)


SUPPORTS_READONLY = False


def peer() -> Peer:
    """The doctor's driver: jnp.asarray (compact row-major arrays only)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    # Without x64 JAX narrows int64/float64 on creation, and every 64-bit case
    # would test a different dtype than the one named.
    jax.config.update("jax_enable_x64", True)

    def make(a):
        if strided_layout(a):
            raise NotApplicable("jax arrays are always compact row-major")
        if not a.flags.writeable:
            raise NotApplicable("jax arrays have no read-only flag (they are immutable)")
        return jnp.asarray(a)

    return Peer(make=make, consume=jnp.from_dlpack, data_ptr=lambda x: x.unsafe_buffer_pointer(),
                to_numpy=np.asarray, writable=lambda x: None, array_type=type(jnp.zeros(())))
