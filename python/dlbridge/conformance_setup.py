"""What ``dlbridge.testing`` checks before any rule runs: that each ``--dlpack-producer`` and
``--dlpack-consumer`` names something it can use.

A mistake here (a misspelt module, a factory with the wrong signature, a factory that ignores the shape
it is asked for) would otherwise fail every rule with the same unrelated evidence. Each is a
``SetupError`` whose message says what was found and where the factory is; the plugin reports them all
at once, as a usage error, and runs no rule. What a factory cannot do that the rules need (read-only
arrays) is no mistake: the rules that need it are skipped, saying why.

Needs no pytest: the plugin imports pytest only when it runs under it.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import os
import pkgutil
import sys
import traceback

from . import check, check_consumer
from .libraries._lookup import MissingAttribute, lookup

#: What the setup check asks each producer factory for: the shape and dtype most rules use.
PROBE_SHAPE, PROBE_DTYPE = (2, 3), "float32"


class SetupError(Exception):
    """A ``--dlpack-producer``/``--dlpack-consumer`` value that names nothing usable."""


@dataclasses.dataclass
class Subject:
    """One producer or consumer under test, and where its factory or callable is written."""

    option: str  # "--dlpack-producer" or "--dlpack-consumer"
    spec: str  # as given on the command line
    target: object  # a check.Producer, or check_consumer.load_consumer's (module:callable spec, callable)
    path: str  # the file of the factory or callable (its module's file when it has no source)
    line: int | None  # 1-based line of its definition; None when unknown

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


def _location(obj, module=None) -> tuple[str, int | None]:
    """The file and line that define obj (a function, a method, a callable object)."""
    target = inspect.unwrap(obj) if callable(obj) else obj
    for candidate in (target, getattr(target, "__func__", None), type(target)):
        if candidate is None:
            continue
        try:
            path = inspect.getsourcefile(candidate)
            line = inspect.getsourcelines(candidate)[1]
        except (TypeError, OSError):
            continue
        if path:
            return path, line
    module = module or sys.modules.get(getattr(target, "__module__", None) or "")
    return (getattr(module, "__file__", None) or repr(obj)), None


def _suggestion(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, sorted(set(candidates) - {name}), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def _top_level_modules():
    return [m.name for m in pkgutil.iter_modules()] + list(sys.builtin_module_names)


def _where_raised(exc: BaseException) -> str:
    """The innermost frame of exc's traceback outside dlbridge, as 'file:line'."""
    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith((here, "<"))]  # nor importlib's frozen frames
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _load(option: str, spec: str, kind: str, full: str | None = None):
    """The object that ``module:attr.path`` (full, or spec itself) names, and its module; SetupError with the
    fix otherwise."""
    path = full or spec
    if full and full != spec:
        spec = f"{spec} ({full})"
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise SetupError(f"{option} {spec}: expected module:{kind}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            hint = _suggestion(missing, _top_level_modules()) if "." not in missing else ""
            raise SetupError(f"{option} {spec}: there is no module {missing!r} in this environment "
                             f"({sys.executable}){hint}") from None
        raise SetupError(f"{option} {spec}: importing {module_name!r} failed: "
                         f"{type(exc).__name__}: {exc}{_where_raised(exc)}") from None
    except Exception as exc:
        raise SetupError(f"{option} {spec}: importing {module_name!r} failed: "
                         f"{type(exc).__name__}: {exc}{_where_raised(exc)}") from None
    try:
        target = lookup(path)
    except MissingAttribute as exc:
        raise SetupError(f"{option} {spec}: {exc}{_suggestion(exc.name, dir(exc.owner))}") from None
    if not callable(target):
        raise SetupError(f"{option} {spec}: {module_name}.{attr} is a {type(target).__name__}, not a {kind}")
    return target, module


def _check_signature(option: str, spec: str, target, args: tuple, shape_text: str) -> None:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return  # a builtin without one: the probe call below finds out
    try:
        signature.bind(*args)
    except TypeError as exc:
        name = getattr(target, "__name__", spec)
        raise SetupError(f"{option} {spec}: {name}{signature} cannot be called as {shape_text} ({exc})") from None


def _observed_shape(x):
    try:
        return tuple(int(n) for n in x.shape)
    except Exception:
        pass
    try:
        import dlbridge

        return tuple(dlbridge.from_dlpack(x).shape)
    except Exception:
        return None  # unknown: the rules look through DLPack themselves


def _observed_dtype(x, wanted: str):
    """None when x holds `wanted` (or this cannot be told), else the dtype that x has instead."""
    own = getattr(x, "dtype", None)
    # "float32", "torch.float32", "array_api_strict.float32", "dtype('float32')"
    if own is not None and wanted in str(own).replace("'", " ").split(".")[-1].split():
        return None
    try:
        import dlbridge

        through_dlpack = str(dlbridge.from_dlpack(x).dtype)
    except Exception:
        return None
    return None if through_dlpack == wanted else (str(own) if own is not None else through_dlpack)


def _observably_writable(x) -> str | None:
    """How x shows that it is writable, if it does."""
    flags = getattr(x, "flags", None)
    if getattr(flags, "writeable", None) is True:
        return "its flags.writeable is True"
    try:
        if not memoryview(x).readonly:
            return "memoryview(x).readonly is False"
    except Exception:
        pass
    try:
        if x.__array_interface__["data"][1] is False:
            return "its __array_interface__ says writable"
    except Exception:
        pass
    return None


def _without_readonly(producer: check.Producer, reason: str) -> check.Producer:
    """The producer, with read-only arrays refused as not observable (those rules skip with reason)."""

    def make(shape, dtype, readonly=False):
        if readonly:
            raise check.NotObservable(reason)
        return producer.make(shape, dtype)

    return check.Producer(producer.name, make, False)


def producer_subject(spec: str) -> Subject:
    """The producer that ``--dlpack-producer spec`` names, checked: SetupError when it cannot be used."""
    option = "--dlpack-producer"
    if spec in check.BUILTIN:
        producer, module = check.load_target(spec), None
        factory, whose = producer.make, "dlbridge's built-in factory"
    else:
        if ":" not in spec:
            raise SetupError(f"{option} {spec}: not a short name ({', '.join(check.BUILTIN)}) nor "
                             f"module:factory{_suggestion(spec, check.BUILTIN)}")
        factory, module = _load(option, spec, "factory")
        _check_signature(option, spec, factory, (PROBE_SHAPE, PROBE_DTYPE), "factory(shape, dtype)")
        producer, whose = check.load_target(spec), "your factory"
    path, line = _location(factory, module)
    where = f"{path}:{line}" if line else path
    label = f"{option} {spec}: {whose} ({where})"

    call = f"({PROBE_SHAPE}, {PROBE_DTYPE!r})"
    try:
        x = producer.make(PROBE_SHAPE, PROBE_DTYPE)
    except Exception as exc:
        raise SetupError(f"{label} raised {type(exc).__name__} for {call}: "
                         f"{str(exc)[:200]}{_where_raised(exc)}") from None
    if not hasattr(x, "__dlpack__"):
        raise SetupError(f"{label} returned a {type(x).__name__}, which has no "
                         f"__dlpack__: it must return an array of the library under test")
    shape = _observed_shape(x)
    if shape is not None and shape != PROBE_SHAPE:
        raise SetupError(f"{label} returned shape {shape} for {PROBE_SHAPE}: "
                         f"factory(shape, dtype, readonly=False) must return a new array of that shape and dtype")
    dtype = _observed_dtype(x, PROBE_DTYPE)
    if dtype is not None:
        raise SetupError(f"{label} returned dtype {dtype} for {PROBE_DTYPE!r}: "
                         f"factory(shape, dtype, readonly=False) must return a new array of that shape and dtype")
    del x

    if producer.supports_readonly:
        cannot = None
        try:
            x = producer.make(PROBE_SHAPE, PROBE_DTYPE, readonly=True)
        except Exception as exc:
            cannot = f"it raised {type(exc).__name__} for readonly=True: {str(exc)[:160]}"
        else:
            shown = _observably_writable(x)
            if shown:
                cannot = f"it returned a writable array for readonly=True ({shown})"
        if cannot:
            producer = _without_readonly(
                producer, f"{whose} {spec} ({where}) cannot make read-only arrays: {cannot}")
    return Subject(option, spec, producer, path, line)


def consumer_subject(spec: str) -> Subject:
    """The consumer that ``--dlpack-consumer spec`` names, checked: SetupError when it cannot be used."""
    option = "--dlpack-consumer"
    full = check_consumer.BUILTIN.get(spec, spec)
    if ":" not in full:
        raise SetupError(f"{option} {spec}: not a short name ({', '.join(check_consumer.BUILTIN)}) nor "
                         f"module:callable{_suggestion(spec, check_consumer.BUILTIN)}")
    consume, module = _load(option, spec, "callable", full)
    _check_signature(option, spec, consume, (object(),), "consume(producer)")
    path, line = _location(consume, module)
    return Subject(option, spec, check_consumer.load_consumer(spec), path, line)


def subjects(producers: list[str], consumers: list[str]) -> tuple[list[Subject], list[str]]:
    """Every subject that checks out, and the SetupError messages of those that do not."""
    found, errors = [], []
    for make, specs in ((producer_subject, producers), (consumer_subject, consumers)):
        for spec in dict.fromkeys(specs):
            try:
                found.append(make(spec))
            except SetupError as exc:
                errors.append(str(exc))
    return found, errors


__all__ = ["PROBE_DTYPE", "PROBE_SHAPE", "SetupError", "Subject", "consumer_subject", "producer_subject",
           "subjects"]
