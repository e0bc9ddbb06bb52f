"""One exchange, tried and classified: zero-copy, copy, fails (with code and fix), or wrong."""

from __future__ import annotations

import statistics
import timeit

from .cases import by_name
from .libraries import Library, NotApplicable

ZERO_COPY, COPY, OK, FAILS, WRONG, CRASH, HANGS, NA = (
    "zero-copy", "copy", "ok", "fails", "wrong", "crash", "hangs", "n/a")
SUCCESS = (ZERO_COPY, COPY, OK)
BROKEN = (FAILS, WRONG, CRASH, HANGS)


def settled(task: dict, status: str, error: dict | None = None, note: str | None = None) -> dict:
    """The result of a task decided outside run_case (a crash, a hang, a library left out),
    with the same keys run_case gives a case."""
    if task.get("kind") != "case":
        return {**{k: v for k, v in task.items() if k != "isolate"}, "status": status, "error": error, "note": note}
    return {"producer": task["producer"], "consumer": task["consumer"], "case": task["case"], "route": task["route"],
            "status": status, "error": error, "readonly": None, "note": note}


def call_name(task: dict) -> str:
    """The call a task makes, as a user would write it: "torch's from_dlpack", "dlbridge.convert(x, 'arrow')"."""
    if task.get("kind") == "case":
        if task["route"] == "dlbridge":
            return f"dlbridge.convert(x, {task['consumer']!r})"
        return f"{task['consumer']}'s from_dlpack"
    if task.get("kind") == "probe":
        return f"the probe of {task['producer']} -> {task['consumer']}"
    return f"reading {task.get('producer')}'s DLPack answer"


def _where(task: dict) -> str:
    return f" on {by_name(task['case']).phrase}" if task.get("kind") == "case" else ""


def crash_error(task: dict, kind: str, detail: str = "") -> dict:
    """What the doctor reports for a task whose process died: kind is a signal name or an exit status."""
    verb = "killed the process" if kind.startswith("SIG") or kind.startswith("signal") else "ended the process"
    message = f"{call_name(task)} {verb} ({kind}){_where(task)}" + (f": {detail}" if detail else "")
    return {"type": kind, "message": message[:300], "code": None, "hint": None}


def hang_error(task: dict, seconds: float) -> dict:
    return {"type": "Hang", "message": f"{call_name(task)} did not return within {seconds:g} s{_where(task)}",
            "code": None, "hint": None}


def _wrong_error(task: dict, got, expected) -> dict:
    if got.dtype != expected.dtype:
        what = f"dtype {got.dtype} instead of {expected.dtype}"
    elif got.shape != expected.shape:
        what = f"shape {got.shape} instead of {expected.shape}"
    else:
        what = "different values"
    return {"type": "WrongResult", "message": f"{call_name(task)} returned {what} for {by_name(task['case']).phrase}",
            "code": None, "hint": None}


def error_info(exc: BaseException) -> dict:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return {
        "type": type(exc).__name__,
        "message": message[:300],
        "code": getattr(exc, "code", None) if isinstance(getattr(exc, "code", None), str) else None,
        "hint": getattr(exc, "hint", None) or None,
    }


def _consumer_call(route: str, consumer: Library):
    if route == "direct":
        return consumer.consume
    from dlbridge.convert import convert

    return lambda x: convert(x, consumer.name)


def run_case(libs: dict, producer: str, consumer: str, case_name: str, route: str) -> dict:
    import numpy as np

    prod, cons = libs[producer], libs[consumer]
    case = by_name(case_name)
    result = {"producer": producer, "consumer": consumer, "case": case_name, "route": route,
              "status": NA, "error": None, "readonly": None, "note": None}
    try:
        source = prod.make(case.build())
    except NotApplicable as exc:
        result["note"] = str(exc)
        return result
    except Exception as exc:
        result["note"] = f"producer cannot make it: {type(exc).__name__}: {exc}"[:200]
        return result
    if route == "dlbridge":
        try:
            from dlbridge.convert import plan_convert

            result["note"] = plan_convert(source, consumer).why or None
        except Exception:
            pass  # the conversion below reports the failure itself
    try:
        out = _consumer_call(route, cons)(source)
    except Exception as exc:
        result["status"] = FAILS
        result["error"] = error_info(exc)
        return result
    expected = case.build()
    try:
        got = cons.to_numpy(out)
        same = got.shape == expected.shape and got.dtype == expected.dtype and np.array_equal(got, expected)
    except Exception as exc:
        same = None
        result["note"] = f"values not checked: {type(exc).__name__}"
    if same is False:
        result["status"] = WRONG
        result["error"] = _wrong_error(result | {"kind": "case"}, got, expected)
        return result
    if expected.size == 0:
        result["status"] = OK
    else:
        try:
            result["status"] = ZERO_COPY if prod.data_ptr(source) == cons.data_ptr(out) else COPY
        except Exception:
            result["status"] = OK
    if case.layout == "read-only":
        writable = cons.writable(out)
        if writable is None:
            result["readonly"] = "immutable"
        elif not writable:
            result["readonly"] = "kept"
        else:
            # A writable result is harmless where it is a private copy: no write reaches the source.
            result["readonly"] = "copied" if result["status"] == COPY else "lost"
    return result


class _Spy:
    """Stands in for the producer's array and records what the consumer asks for."""

    def __init__(self, inner):
        self._inner = inner
        self.asked = None
        self.answered = None

    def __dlpack__(self, **kwargs):
        self.asked = {k: v for k, v in kwargs.items()}
        capsule = self._inner.__dlpack__(**kwargs)
        self.answered = _capsule_name(capsule)
        return capsule

    def __dlpack_device__(self):
        return self._inner.__dlpack_device__()

    def __getattr__(self, name):
        # Consumers that look at the array first (Arrow picks its importer by ndim) see the real one.
        return getattr(self._inner, name)


def _plain(value):
    """A keyword argument of __dlpack__ as JSON: tuples as lists, numbers and None as they are."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _capsule_name(capsule) -> str:
    text = repr(capsule)
    return text.split('"')[1] if '"' in text else text


def _median_us(fn, number: int, repeat: int) -> float:
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e6


def probe_pair(libs: dict, producer: str, consumer: str, number: int = 50, repeat: int = 5) -> dict:
    """Versions spoken between the two, and the median cost of one exchange per route."""
    prod, cons = libs[producer], libs[consumer]
    source = prod.make(by_name("float32").build())
    out = {"producer": producer, "consumer": consumer, "asked": None, "answered": None, "error": None,
           "cost_us": {"direct": None, "dlbridge": None}}
    spy = _Spy(source)
    try:
        cons.consume(spy)
    except Exception as exc:
        out["error"] = error_info(exc)
    # What the consumer asked for, whether or not the exchange then worked.
    out["asked"] = None if spy.asked is None else {k: _plain(v) for k, v in spy.asked.items()}
    out["answered"] = spy.answered
    for route in ("direct", "dlbridge"):
        call = _consumer_call(route, cons)
        try:
            call(source)
            out["cost_us"][route] = round(_median_us(lambda: call(source), number, repeat), 2)
        except Exception:
            pass
    return out


def producer_info(lib: Library) -> dict:
    """What the producer answers when asked for DLPack 1.3, and its C exchange API."""
    info = {"name": lib.name, "version": lib.version, "c_exchange_api": lib.c_exchange_api,
            "speaks": None, "driven": lib.make is not None}
    if lib.name != "dlbridge":
        from .. import libraries

        try:
            facts = libraries.release_facts(lib.name)
            info["facts"] = {"observed": facts["observed"], "assumed": facts["assumed"]}
        except Exception as exc:  # a release whose facts cannot be learnt is a finding (summary: left out)
            info["facts"] = {"observed": [], "assumed": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
    if lib.make is None:
        return info
    try:
        source = lib.make(by_name("float32").build())
        info["speaks"] = "versioned" if _capsule_name(source.__dlpack__(max_version=(1, 3))) == "dltensor_versioned" else "legacy"
    except TypeError:
        info["speaks"] = "legacy (no max_version keyword)"
    except Exception as exc:
        info["speaks"] = f"failed: {type(exc).__name__}"
    return info
