"""The consumer half of ``dlbridge check``: one ``from_dlpack`` against the DLPack 1.3 consumer rules
that can be observed from outside (the consumer side of the DLPack 1.3 Python specification).

A consumer is ``module:callable`` (``numpy:from_dlpack``, ``torch:from_dlpack``, ``jax.dlpack:from_dlpack``)
or one of the short names in ``BUILTIN``. Each rule hands it a producer that dlbridge builds to order
(recording the calls made on it, or carrying a capsule with a counting deleter) and looks at what happened.
Rules that could crash a careless consumer (negative strides) run in a child interpreter.
"""

from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
from typing import Callable

from . import libraries
from .check import NotObservable, evaluate, rule_registry
from .libraries._lookup import lookup

# The importers whose consumer rules were measured (libraries/<name>.py: CONSUMER), and dlbridge's.
BUILTIN = {name: module.CONSUMER for name, module in libraries.LIBRARIES.items() if hasattr(module, "CONSUMER")}
BUILTIN["dlbridge"] = "dlbridge:from_dlpack"


def load_consumer(spec: str) -> tuple[str, Callable]:
    """The spec as a ``module:callable`` string and the callable it names."""
    spec = BUILTIN.get(spec, spec)
    if ":" not in spec:
        raise ValueError(f"unknown consumer {spec!r}: use {', '.join(BUILTIN)} or module:callable")
    target = lookup(spec)
    if not callable(target):
        raise ValueError(f"{spec} is not callable")
    return spec, target


class _Recorder:
    """A producer that forwards to a dlbridge tensor and writes down each protocol call it receives."""

    def __init__(self, tensor, calls: list):
        self._tensor, self._calls = tensor, calls

    def __dlpack_device__(self):
        self._calls.append(("__dlpack_device__", {}))
        return self._tensor.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        self._calls.append(("__dlpack__", dict(kwargs)))
        return self._tensor.__dlpack__(**kwargs)


class _OldProducer:
    """A producer written before DLPack 1.0: ``__dlpack__(stream=None)`` and nothing else."""

    def __init__(self, tensor):
        self._tensor = tensor

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()

    def __dlpack__(self, stream=None):
        return self._tensor.__dlpack__(stream=stream)


class _CapsuleProducer:
    """A producer that hands out one capsule made by ``_testing.make_capsule``, versioned when asked for it."""

    def __init__(self, **capsule_args):
        self._capsule_args = capsule_args
        self.capsule = None

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, *, max_version=None, **kwargs):
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        self.capsule = _make_capsule(versioned=versioned, **self._capsule_args)
        return self.capsule


class _FutureProducer(_CapsuleProducer):
    """Answers every request with a DLPack 2.0 capsule, as a producer from the future would."""

    def __dlpack__(self, **kwargs):
        self.capsule = _make_capsule(version=(2, 0))
        return self.capsule


class _LegacyProducer(_CapsuleProducer):
    """Answers every request with a legacy capsule (a producer from before DLPack 1.0)."""

    def __dlpack__(self, **kwargs):
        self.capsule = _make_capsule(versioned=False, **self._capsule_args)
        return self.capsule


def _require_versioned(consume) -> None:
    """Rules about versioned capsules say nothing of a consumer that never asks for one."""
    import numpy as np

    calls: list = []
    consume(_Recorder(_tensor(np.arange(2.0)), calls))
    asked = [kw.get("max_version") for name, kw in calls if name == "__dlpack__"]
    if not any(v is not None and tuple(v)[0] >= 1 for v in asked):
        raise NotObservable(f"the consumer asks for legacy capsules only (max_version {asked})")


def _values(result):
    """The consumer's result as a NumPy array, read through dlbridge (which accepts any producer)."""
    import numpy as np

    import dlbridge

    return np.asarray(dlbridge.from_dlpack(result))


def _tensor(array):
    import dlbridge

    return dlbridge.from_dlpack(array)


def _capsule_name(capsule) -> str:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get_name(capsule).decode()


def _deleter_calls() -> int:
    from ._core import _testing

    return _testing.deleter_calls()


def _make_capsule(**kwargs):
    from ._core import _testing

    return _testing.make_capsule(**kwargs)


def _write(result) -> None:
    """Writes -1 everywhere through the result: its own setter, else a NumPy view of what it exports."""

    if hasattr(result, "fill_"):
        result.fill_(-1)
    elif hasattr(type(result), "__setitem__"):
        result[...] = -1
    else:
        _values(result)[...] = -1


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:100]}"


RULES: list = []
rule = rule_registry(RULES)


@rule("C1.device_first", "a consumer that passes a stream has asked __dlpack_device__ first")
def _device_first(consume):
    import numpy as np

    calls: list = []
    consume(_Recorder(_tensor(np.arange(6.0)), calls))
    names = [name for name, _ in calls]
    if "__dlpack__" not in names:
        return False, f"calls {names}: __dlpack__ never called"
    streams = [kw.get("stream") for name, kw in calls if name == "__dlpack__"]
    if all(stream is None for stream in streams) and "__dlpack_device__" not in names:
        # The device only decides the stream; for CPU data without a stream, skipping the call is allowed.
        raise NotObservable(f"calls {names}: no stream passed, so the device was not needed")
    ok = "__dlpack_device__" in names and names.index("__dlpack_device__") < names.index("__dlpack__")
    return ok, f"calls in order: {names}, streams {streams}"


@rule("C1.max_version", "__dlpack__ is asked with max_version of major 1 or more")
def _max_version(consume):
    import numpy as np

    calls: list = []
    consume(_Recorder(_tensor(np.arange(6.0)), calls))
    asked = [kw.get("max_version") for name, kw in calls if name == "__dlpack__"]
    ok = bool(asked) and asked[-1] is not None and tuple(asked[-1])[0] >= 1
    return ok, f"max_version passed: {asked}"


@rule("C1.old_producer", "a producer without the 1.0 keywords (__dlpack__(stream=None)) is still imported")
def _old_producer(consume):
    import numpy as np

    source = np.arange(6.0).reshape(2, 3)
    got = _values(consume(_OldProducer(_tensor(source))))
    return bool(np.array_equal(got, source)), f"values {got.tolist()}"


@rule("C2.future_major", "a capsule of DLPack 2.0 is refused with BufferError, its deleter run exactly once")
def _future_major(consume):
    _require_versioned(consume)
    before = _deleter_calls()
    producer = _FutureProducer()
    try:
        consume(producer)
        outcome, refused_right = "accepted it", False
    except BufferError as exc:
        outcome, refused_right = _short(exc), True
    except Exception as exc:
        outcome, refused_right = f"{_short(exc)} (not a BufferError)", False
    del producer
    gc.collect()
    runs = _deleter_calls() - before
    return refused_right and runs == 1, f"{outcome}; deleter ran {runs} time(s)"


@rule("C2.newer_minor", "a capsule of DLPack 1.99 (a newer minor) is accepted")
def _newer_minor(consume):
    _require_versioned(consume)
    producer = _CapsuleProducer(version=(1, 99), shape=[2, 3])
    try:
        got = _values(consume(producer))
    except Exception as exc:
        return False, f"refused: {_short(exc)}"
    return got.shape == (2, 3), f"shape {got.shape}"


@rule("C3.consumed_once", "the consumer renames the capsule to used_... and its deleter runs once, when the result dies")
def _consumed_once(consume):
    before = _deleter_calls()
    producer = _CapsuleProducer(shape=[4], dtype=(2, 32, 1))
    result = consume(producer)
    name = _capsule_name(producer.capsule)
    gc.collect()
    while_alive = _deleter_calls() - before
    del result, producer
    gc.collect()
    after = _deleter_calls() - before
    ok = name.startswith("used_") and while_alive == 0 and after == 1
    return ok, f"capsule renamed to {name!r}; deleter ran {while_alive} time(s) while alive, {after} after"


@rule("C4.legacy_null_strides", "a legacy capsule with NULL strides is read as compact row-major")
def _null_strides(consume):
    producer = _LegacyProducer(shape=[2, 3], strides=None)
    got = _values(consume(producer))
    return got.shape == (2, 3), f"shape {got.shape}"


@rule("C4.edge_shapes", "0-d and size-0 tensors import with their shapes")
def _edge_shapes(consume):
    import numpy as np

    zero_d = _values(consume(_tensor(np.array(2.5))))
    empty = _values(consume(_tensor(np.zeros((0, 3)))))
    ok = zero_d.shape == () and float(zero_d) == 2.5 and empty.shape == (0, 3)
    return ok, f"0-d {zero_d.shape} = {zero_d.tolist()}, size-0 {empty.shape}"


@rule("C4.offset_view", "a view that starts inside its buffer (non-zero offset, steps) keeps its values")
def _offset_view(consume):
    import numpy as np

    source = np.arange(24.0).reshape(4, 6)[1:, 2::2]
    got = _values(consume(_tensor(source)))
    return bool(np.array_equal(got, source)), f"expected {source.tolist()}, got {got.tolist()}"


_NEGATIVE_CHILD = textwrap.dedent("""
    import sys
    from dlbridge._parent_death import end_with_parent
    end_with_parent(int(sys.argv[2]))
    import numpy as np
    import dlbridge
    from dlbridge.libraries._lookup import lookup
    consume = lookup(sys.argv[1])
    source = np.arange(6.0).reshape(2, 3)[:, ::-1]
    try:
        got = np.asarray(dlbridge.from_dlpack(consume(dlbridge.from_dlpack(source))))
    except BufferError as exc:
        print("refused", type(exc).__name__, str(exc)[:100])
    else:
        print("equal" if np.array_equal(got, source) else f"wrong {got.tolist()}")
""")


def _last_words(stderr: str) -> str:
    """The line of a dead child's stderr that says why: an abort's what(), else the last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()] or ["no output"]
    said = [line for line in lines if "what():" in line or "Error" in line]
    return (said or lines)[-1][:160]


@rule("C4.negative_strides", "negative strides import with the right values or are refused with BufferError (no crash)")
def _negative_strides(consume, spec: str):
    proc = subprocess.run([sys.executable, "-c", _NEGATIVE_CHILD, spec, str(os.getpid())], capture_output=True, text=True,
                          timeout=120)
    out = proc.stdout.strip()
    if proc.returncode != 0:
        return False, f"child exited with status {proc.returncode}: {_last_words(proc.stderr)}"
    return out == "equal" or out.startswith("refused"), out


@rule("C5.read_only", "READ_ONLY data is refused, or the result refuses writes (the data never changes)")
def _read_only(consume):
    import numpy as np

    source = np.arange(4.0)
    source.flags.writeable = False
    try:
        result = consume(_tensor(source))
    except BufferError as exc:
        return True, f"refused: {_short(exc)}"
    try:
        _write(result)
    except Exception as exc:
        return True, f"imported; a write raised {_short(exc)}"
    changed = not np.array_equal(source, np.arange(4.0))
    return not changed, "imported writable; a write " + ("changed the read-only data" if changed else "left it intact")


def call_rule(fn, consume, spec: str):
    """Runs one rule; the rules that start a child interpreter also need the consumer's spec."""
    return fn(consume, spec) if fn.__code__.co_argcount == 2 else fn(consume)


def run(spec: str) -> list[dict]:
    """Every consumer rule against the consumer that ``spec`` names, as check.run reports producer rules."""
    spec, consume = load_consumer(spec)
    return evaluate(RULES, lambda fn: call_rule(fn, consume, spec))
