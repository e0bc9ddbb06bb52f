"""``dlbridge check TARGET``: one producer against every DLPack 1.3 producer rule that
can be observed from outside (docs/dlpack-rules.md, "Rules for a producer").

TARGET is dlbridge, the name of a library in ``dlbridge.libraries`` (numpy, torch, jax, ...), or ``module:factory`` where
``factory(shape, dtype, readonly=False)`` returns a fresh CPU array (``readonly``
may be left out when the library has no read-only arrays). Capsules are read
with ``dlbridge.inspect_capsule``, which looks without consuming.
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
import json
import math
import os
import sys
from typing import Callable

from . import libraries
from ._core import from_dlpack, inspect_capsule
from .libraries._lookup import lookup
from .libraries._spec import NotObservable

READ_ONLY, IS_COPIED = 1 << 0, 1 << 1
LEGACY, VERSIONED = "dltensor", "dltensor_versioned"
PASS, FAIL, NA = "pass", "fail", "n/a"


@dataclasses.dataclass
class Producer:
    name: str
    make: Callable  # make(shape, dtype, readonly=False)
    supports_readonly: bool


def _dlbridge_make(shape, dtype, readonly=False):
    return from_dlpack(libraries.LIBRARIES["numpy"].make(shape, dtype, readonly))


def _library_producer(name: str) -> Callable[[], Producer]:
    module = libraries.LIBRARIES[name]
    return lambda: Producer(name, module.make, module.SUPPORTS_READONLY)


# Every library module that can make arrays (libraries/<name>.py: make), and dlbridge itself.
BUILTIN = {name: _library_producer(name) for name, module in libraries.LIBRARIES.items() if hasattr(module, "make")}
BUILTIN["dlbridge"] = lambda: Producer("dlbridge", _dlbridge_make, True)


def load_target(spec: str) -> Producer:
    if spec in BUILTIN:
        return BUILTIN[spec]()
    if ":" not in spec:
        raise ValueError(f"unknown target {spec!r}: use {', '.join(BUILTIN)} or module:factory")
    factory = lookup(spec)
    try:
        takes_readonly = "readonly" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_readonly = False

    def make(shape, dtype, readonly=False):
        if readonly:
            if not takes_readonly:
                raise NotObservable("the factory takes no readonly argument")
            return factory(shape, dtype, readonly=True)
        return factory(shape, dtype)

    return Producer(spec, make, takes_readonly)


def _name(capsule) -> str:
    return inspect_capsule(capsule)["name"]


def _flags(info: dict) -> int:
    # Legacy capsules have no flags field at all.
    return info["flags"] or 0


def _flag_text(info: dict) -> str:
    if info["flags"] is None:
        return f"{info['name']!r} capsule, which cannot carry flags"
    return f"flags {info['flags']:#x}"


def _text_of(exc: BaseException) -> str:
    """str(exc), or what can be said of it when its own __str__ fails: a producer's exception is
    producer code too, and check reports it rather than dying of it."""
    try:
        return str(exc)
    except KeyboardInterrupt:
        raise
    except BaseException as inner:  # noqa: BLE001 (SystemExit from a __str__ included)
        return f"<str() of this {type(exc).__name__} raised {type(inner).__name__}>"


def _code_of(exc: BaseException) -> str | None:
    """A dlbridge error's code; None for anything else (SystemExit's .code is an exit status)."""
    try:
        code = getattr(exc, "code", None)
    except Exception:  # noqa: BLE001 (a property of a producer's exception)
        return None
    return code if isinstance(code, str) else None


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- the rules ------------------------------------------------------------------------------------

def rule_registry(rules: list) -> Callable:
    """The ``@rule(ident, text)`` decorator of one list of rules (producer rules here, consumer rules in
    check_consumer)."""

    def rule(ident: str, text: str):
        def register(fn):
            rules.append((ident, text, fn))
            return fn

        return register

    return rule


RULES: list = []
rule = rule_registry(RULES)


@rule("P1.keywords", "__dlpack__ accepts stream, max_version, dl_device and copy as keywords")
def _keywords(p):
    cap = p.make((2, 3), "float32").__dlpack__(stream=None, max_version=(1, 3), dl_device=None, copy=None)
    return True, f"__dlpack__(stream=None, max_version=(1, 3), dl_device=None, copy=None) -> {_name(cap)!r}"


# The array API standard types device_type as an Enum and NumPy, its reference, returns plain ints:
# both are ints, which is what consumers use (int(device_type), device_type == 1).
@rule("P1.device", "__dlpack_device__ returns (device_type, device_id): two ints, device_type may be an IntEnum")
def _device(p):
    dev = p.make((2, 3), "float32").__dlpack_device__()
    ok = (isinstance(dev, tuple) and len(dev) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) for v in dev))
    kinds = ", ".join(type(v).__name__ for v in dev) if isinstance(dev, tuple) else type(dev).__name__
    return ok, f"{dev!r} (types {kinds})"


@rule("P2.legacy", "max_version=None gives a legacy 'dltensor' capsule")
def _legacy(p):
    name = _name(p.make((2, 3), "float32").__dlpack__())
    return name == LEGACY, f"name {name!r}"


@rule("P2.versioned", "max_version=(1, 3) gives 'dltensor_versioned' carrying version (1, x)")
def _versioned(p):
    info = inspect_capsule(p.make((2, 3), "float32").__dlpack__(max_version=(1, 3)))
    ok = info["name"] == VERSIONED and info["version"] is not None and info["version"][0] == 1
    return ok, f"name {info['name']!r}, version {info['version']}"


@rule("P2.newer", "max_version=(2, 0) still gets the producer's own version (major 1), not a refusal")
def _newer(p):
    info = inspect_capsule(p.make((2, 3), "float32").__dlpack__(max_version=(2, 0)))
    ok = info["name"] == VERSIONED and info["version"] is not None and tuple(info["version"])[0] == 1
    return ok, f"name {info['name']!r}, version {info['version']}"


@rule("P2.old", "max_version=(0, 8) gives a legacy 'dltensor' capsule")
def _old(p):
    name = _name(p.make((2, 3), "float32").__dlpack__(max_version=(0, 8)))
    return name == LEGACY, f"name {name!r}"


@rule("P2.readonly_legacy", "read-only data requested as a legacy capsule raises BufferError")
def _readonly_legacy(p):
    x = p.make((2, 3), "float32", readonly=True)
    try:
        cap = x.__dlpack__()
    except BufferError as exc:
        return True, f"{type(exc).__name__}: {str(exc)[:100]}"
    return False, f"returned {_name(cap)!r}: a consumer of it cannot know the data is read-only"


@rule("P3.same_device", "dl_device=None exports on the array's own device, as __dlpack_device__ says")
def _same_device(p):
    x = p.make((2, 3), "float32")
    info = inspect_capsule(x.__dlpack__(max_version=(1, 3), dl_device=None))
    dev = tuple(int(v) for v in x.__dlpack_device__())
    return tuple(info["device"]) == dev, f"capsule device {tuple(info['device'])}, __dlpack_device__ {dev}"


@rule("P3.own_device", "dl_device equal to the array's own device is honoured")
def _own_device(p):
    x = p.make((2, 3), "float32")
    dev = tuple(int(v) for v in x.__dlpack_device__())
    info = inspect_capsule(x.__dlpack__(max_version=(1, 3), dl_device=dev))
    return tuple(info["device"]) == dev, f"dl_device={dev} -> capsule device {tuple(info['device'])}"


@rule("P3.bad_device", "dl_device that cannot be honoured (99, 0) raises BufferError")
def _bad_device(p):
    try:
        cap = p.make((2, 3), "float32").__dlpack__(max_version=(1, 3), dl_device=(99, 0))
    except BufferError as exc:
        return True, f"{type(exc).__name__}: {str(exc)[:100]}"
    except Exception as exc:
        return False, f"{type(exc).__name__} (not a BufferError): {str(exc)[:100]}"
    return False, f"returned {_name(cap)!r} for device 99"


@rule("P4.copy_true", "copy=True makes a copy (other data pointer) and sets IS_COPIED")
def _copy_true(p):
    x = p.make((2, 3), "float32")
    look = inspect_capsule
    plain = look(x.__dlpack__(max_version=(1, 3)))
    try:
        copied = look(x.__dlpack__(max_version=(1, 3), copy=True))
    except Exception as exc:
        return False, f"copy=True raised {type(exc).__name__}: {str(exc)[:100]}"
    ok = copied["data"] != plain["data"] and bool(_flags(copied) & IS_COPIED)
    return ok, f"data {'differs' if copied['data'] != plain['data'] else 'is the same'}, {_flag_text(copied)}"


@rule("P4.copy_false", "copy=False exports without a copy (same data pointer, IS_COPIED clear)")
def _copy_false(p):
    x = p.make((2, 3), "float32")
    look = inspect_capsule
    plain = look(x.__dlpack__(max_version=(1, 3)))
    info = look(x.__dlpack__(max_version=(1, 3), copy=False))
    ok = info["data"] == plain["data"] and not _flags(info) & IS_COPIED
    return ok, f"data {'same' if info['data'] == plain['data'] else 'differs'}, {_flag_text(info)}"


@rule("P5.stream_none", "stream=None is accepted for CPU data")
def _stream_none(p):
    return True, f"__dlpack__(stream=None) -> {_name(p.make((2, 3), 'float32').__dlpack__(stream=None))!r}"


@rule("P6.bad_argument", "a malformed argument (max_version='1.3') raises TypeError/ValueError, not BufferError")
def _bad_argument(p):
    try:
        cap = p.make((2, 3), "float32").__dlpack__(max_version="1.3")
    except BufferError as exc:
        return False, f"{type(exc).__name__}: {str(exc)[:100]}"
    except (TypeError, ValueError) as exc:
        return True, f"{type(exc).__name__}: {str(exc)[:100]}"
    return False, f"accepted and returned {_name(cap)!r}"


def _released(p, consume: Callable | None) -> tuple[bool, str]:
    """Whether a large array's memory stays while a capsule (or its consumer) holds it, and goes after."""
    mib = 1 << 20
    n = 64 * mib // 4
    # Control: without a capsule, does dropping the array give its memory back at all?
    gc.collect()
    before = _rss()
    x = p.make((n,), "float32")
    held = _rss()
    del x
    gc.collect()
    if held - _rss() < 48 * mib or held - before < 48 * mib:
        raise NotObservable("this producer's allocator does not return a dropped array's memory to the OS")
    x = p.make((n,), "float32")
    cap = x.__dlpack__(max_version=(1, 3))
    owner = consume(cap) if consume else cap
    del x, cap
    gc.collect()
    alive = _rss()
    del owner
    gc.collect()
    after = _rss()
    kept = alive - before > 48 * mib
    freed = alive - after > 48 * mib
    what = "consumer" if consume else "unconsumed capsule"
    return kept and freed, (f"64 MiB: {(alive - before) // mib} MiB held while the {what} lives, "
                            f"{(alive - after) // mib} MiB released after it is dropped")


@rule("P7.unconsumed", "an unconsumed capsule keeps the data alive and its destructor calls the deleter")
def _unconsumed(p):
    return _released(p, None)


@rule("P7.consumed", "a consumed capsule (renamed used_...) leaves the data to the consumer; the deleter runs once")
def _consumed(p):
    return _released(p, from_dlpack)


@rule("P8.flags_default", "flags are 0 for plain writable data")
def _flags_default(p):
    info = inspect_capsule(p.make((2, 3), "float32").__dlpack__(max_version=(1, 3)))
    if info["name"] != VERSIONED:
        raise NotObservable("the producer gave a legacy capsule, which has no flags")
    return info["flags"] == 0, f"flags {info['flags']:#x}"


@rule("P8.flags_readonly", "read-only data exported versioned carries READ_ONLY")
def _flags_readonly(p):
    info = inspect_capsule(p.make((2, 3), "float32", readonly=True).__dlpack__(max_version=(1, 3)))
    if info["name"] != VERSIONED:
        return False, f"name {info['name']!r}: no way to carry the flag"
    return bool(info["flags"] & READ_ONLY), f"flags {info['flags']:#x}"


@rule("P8.cpu_id", "device_id is 0 for CPU")
def _cpu_id(p):
    x = p.make((2, 3), "float32")
    dev = x.__dlpack_device__()
    if int(dev[0]) != 1:
        raise NotObservable(f"not CPU data: {dev}")
    info = inspect_capsule(x.__dlpack__(max_version=(1, 3)))
    return int(dev[1]) == 0 and tuple(info["device"]) == (1, 0), f"__dlpack_device__ {dev}, capsule {tuple(info['device'])}"


@rule("P8.strides", "strides are non-NULL when ndim != 0 (DLPack >= 1.2)")
def _strides(p):
    info = inspect_capsule(p.make((2, 3), "float32").__dlpack__(max_version=(1, 3)))
    version = tuple(info["version"] or (0, 0))
    if version < (1, 2):
        raise NotObservable(f"capsule {info['name']!r} version {info['version']}: NULL strides allowed before 1.2")
    return info["strides"] is not None, f"version {version}, strides {info['strides']}"


@rule("P8.describes", "the capsule describes the array: shape, dtype (float32 = (2, 32, 1)) and element strides")
def _describes(p):
    info = inspect_capsule(p.make((2, 3), "float32").__dlpack__(max_version=(1, 3)))
    strides = info["strides"]
    ok = (tuple(info["shape"]) == (2, 3) and tuple(info["dtype"]) == (2, 32, 1)
          and (strides is None or tuple(strides) == (3, 1)))
    return ok, f"shape {info['shape']}, dtype {info['dtype']}, strides {strides}"


@rule("P8.edge_shapes", "0-d and size-0 arrays export (size-0 may have NULL data)")
def _edge_shapes(p):
    look = inspect_capsule
    zero_d = look(p.make((), "float32").__dlpack__(max_version=(1, 3)))
    empty = look(p.make((0, 3), "float32").__dlpack__(max_version=(1, 3)))
    # A 0-d tensor may have a NULL shape, which inspect_capsule reports as None.
    ok = tuple(zero_d["shape"] or ()) == () and tuple(empty["shape"]) == (0, 3)
    return ok, f"0-d shape {zero_d['shape']}, size-0 shape {empty['shape']} data {empty['data']:#x}"


@rule("C.exchange_api", "a C exchange API, when offered, is 1.3's PyCapsule 'dlpack_exchange_api' on the type")
def _exchange_api(p):
    cls = type(p.make((2, 3), "float32"))
    api = getattr(cls, "__dlpack_c_exchange_api__", None)
    if api is None:
        if hasattr(cls, "__c_dlpack_exchange_api__"):
            return False, "only DLPack 1.2's int attribute __c_dlpack_exchange_api__"
        raise NotObservable(f"{cls.__name__} offers no C exchange API")
    text = repr(api)
    return '"dlpack_exchange_api"' in text and type(api).__name__ == "PyCapsule", text


# -- running and reporting ------------------------------------------------------------------------

def evaluate(rules: list, call: Callable) -> list[dict]:
    """Runs every rule through ``call(fn) -> (ok, evidence)`` and reports pass, fail or n/a for each."""
    from .catalogue import identify

    results = []
    for ident, text, fn in rules:
        catalogue = None  # the catalogue id of the error a failing rule raised
        try:
            ok, evidence = call(fn)
            status = PASS if ok else FAIL
        except NotObservable as exc:
            status, evidence = NA, str(exc)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 (a producer's SystemExit is its failure, not check's end)
            text = _text_of(exc)
            status, evidence = FAIL, f"raised {type(exc).__name__}: {text[:160]}"
            catalogue = identify(text, type(exc).__name__, _code_of(exc))
        results.append({"rule": ident, "text": text, "status": status, "evidence": evidence, "catalogue": catalogue})
    return results


def run(producer: Producer) -> list[dict]:
    return evaluate(RULES, lambda fn: fn(producer))


def render(target: str, results: list[dict], color: bool = False) -> str:
    paint = {PASS: "32", FAIL: "31", NA: "2"}
    lines = [f"dlbridge check {target}: {len(RULES)} producer rules of DLPack 1.3"]
    width = max(len(r["rule"]) for r in results)
    for r in results:
        mark = r["status"].upper().ljust(4)
        if color:
            mark = f"\033[{paint[r['status']]}m{mark}\033[0m"
        lines.append(f"{mark}  {r['rule'].ljust(width)}  {r['text']}\n      {' ' * width}  evidence: {r['evidence']}")
        if r.get("catalogue"):
            lines.append(f"      {' ' * width}  catalogue: {r['catalogue']}")
    counts = {s: sum(r["status"] == s for r in results) for s in (PASS, FAIL, NA)}
    summary = f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[NA]} not observable"
    lines.append(summary)
    return "\n".join(lines) + "\n"


def main(target: str, as_json: bool = False) -> int:
    import warnings

    warnings.simplefilter("ignore")
    try:
        producer = load_target(target)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 (importing the target runs its code: SystemExit too)
        print(f"dlbridge check: cannot load {target!r}: {type(exc).__name__}: {_text_of(exc)}",
              file=sys.stderr)
        return 2
    results = run(producer)
    if as_json:
        json.dump({"target": target, "results": results}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(target, results, color=sys.stdout.isatty()))
    return 1 if any(r["status"] == FAIL for r in results) else 0
