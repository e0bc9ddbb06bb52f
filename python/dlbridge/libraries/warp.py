"""NVIDIA Warp (1.19.0; 1.10.1 silenced through config.quiet): its __dlpack__ takes no max_version (legacy capsules only), its
importer refuses to run before wp.init() (whose banner and "no CUDA driver" warning would
land on the user's terminal), it has no 0-d arrays and no complex types. Its arrays are
plain writable memory (wp.array.numpy() is a writable view), so the legacy capsules it
exports are imported as writable."""

from __future__ import annotations

import dataclasses

from ._spec import CPU, CUDA, STANDARD_DTYPES, NotApplicable, NotObservable, Peer, Target

NAME = "warp"
RANK = 10
MODULE = "warp"
# What Warp's own export leaves unsaid: its legacy capsules carry writable memory.
LEGACY_EXPORT_WRITABLE = True

_ready = False


def ready():
    """warp, initialised without printing anything (the user's log level is put back)."""
    global _ready
    import warp

    if not _ready:
        # The setting that silences init: log_level where the release has it, quiet before
        # (warp-lang 1.10 has only quiet); the user's value is put back either way.
        setting, silent = ("log_level", warp.LOG_ERROR) if hasattr(warp.config, "log_level") else ("quiet", True)
        before = getattr(warp.config, setting)
        setattr(warp.config, setting, silent)
        try:
            warp.init()
        finally:
            setattr(warp.config, setting, before)
        _ready = True
    return warp


TARGET = Target(
    "warp", read_only="ignored", strides="any", devices=frozenset({CPU, CUDA}),
    dtypes=(STANDARD_DTYPES - {"complex64", "complex128"}) | {"bfloat16"}, zero_dim=False, copy_keyword=False,
    prepare=ready, array_types=("warp:array",), note="legacy capsules only; no 0-d arrays; no complex types",
)


def for_installed(target: Target, facts) -> Target:
    """The Target for the installed Warp: booleans only from the measured 1.19 on (1.10.1 refuses
    DLPack's bool, "Unknown DLPack datatype (6, 8)")."""
    from ._release import at_least

    if at_least(facts.version, 1, 19):
        facts.seen(f"warp {facts.version}: imports DLPack booleans, as measured on 1.19.0")
        return target
    facts.assume(f"warp {facts.version}: no booleans (1.10.1 refuses them; releases before 1.19 are not trusted "
                 "with them)")
    return dataclasses.replace(target, dtypes=target.dtypes - {"bool"})


def make(shape, dtype, readonly=False):
    """A fresh warp.array on the CPU for `dlbridge check warp`."""
    from .numpy import make as numpy_make

    if readonly:
        raise NotObservable("warp arrays have no read-only state")
    return ready().array(numpy_make(shape, dtype), device="cpu")


SUPPORTS_READONLY = False


def peer() -> Peer:
    """The doctor's driver: wp.array on the CPU."""
    wp = ready()

    def make(a):
        if a.ndim == 0:
            raise NotApplicable("warp arrays have at least one dimension")
        if not a.flags.writeable:
            raise NotApplicable("warp arrays have no read-only state")
        if a.dtype.kind == "c" or a.dtype.name == "bfloat16":
            raise NotApplicable(f"warp.array cannot be made from NumPy {a.dtype.name}")
        return wp.array(a, device="cpu")

    return Peer(make=make, consume=wp.from_dlpack, data_ptr=lambda x: x.ptr, to_numpy=lambda x: x.numpy(),
                writable=lambda x: True, array_type=wp.array)
