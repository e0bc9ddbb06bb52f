"""Fuzzing of the C++ type casters with Hypothesis, through the caster test
modules the outside tests build (extensions/caster_functions.hpp, bound with
nanobind and with pybind11).

Hypothesis draws a case: a producer (its __dlpack__ keywords, what it returns
or raises, what __dlpack_device__ says) around a make_capsule tensor with
hostile fields, or that capsule passed raw; and a function to call (a borrowed
view, an owned tensor, a TensorArg with requirements, an overload). Each case
runs in a worker interpreter that serves many in a row, so a crash or a hang
fails the test with the case printed; the case alone reproduces it:

    .venv/bin/python tests/outside/test_casters_fuzz.py --run MODULES_DIR 'CASE'

The rules: every call returns or raises (never a crash, a SystemError, or C++
text in a message); a caster's view or owned tensor is what
dlbridge.from_dlpack gives for the same case (values, writability, exception
class and code, calls to the producer); a TensorArg refuses only with a coded
dlbridge error or the producer's own exception; every capsule's deleter runs
once. DLBRIDGE_FUZZ_EXAMPLES sets the examples per property (150 unless set;
fixed unless DLBRIDGE_FUZZ_RANDOM=1), as for tests/python/test_fuzz_boundary.py.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

EXAMPLES = int(os.environ.get("DLBRIDGE_FUZZ_EXAMPLES", "150"))
RANDOM = os.environ.get("DLBRIDGE_FUZZ_RANDOM") == "1"

# --- The worker side: one case in, one verdict out --------------------------


class Boom(Exception):
    """What a hostile producer raises."""


class Interrupt(KeyboardInterrupt):
    """A Ctrl-C inside a producer: it must come out, once."""


def capsule_keywords(case):
    """make_capsule's keywords: JSON carried its tuples as lists."""
    return {k: tuple(v) if k in ("dtype", "device", "version") else v for k, v in case["capsule"].items()}


def make_producer(case):
    """A fresh producer type for the case (dlbridge learns per type)."""
    import numpy as np

    from dlbridge._core import _testing

    returns, device, keywords = case["returns"], case["device"], case["keywords"]

    def __dlpack__(self, **kwargs):
        self.calls += 1
        if keywords == "none" and kwargs:
            raise TypeError("__dlpack__() takes no keyword arguments")
        if returns == "capsule":
            self.capsules += 1
            return _testing.make_capsule(**capsule_keywords(case))
        if returns == "numpy":
            return np.arange(6, dtype=np.float32).reshape(2, 3).__dlpack__(**kwargs)
        if returns == "boom":
            raise Boom("producer")
        if returns == "buffer_error":
            raise BufferError("cannot export")
        if returns == "interrupt":
            raise Interrupt()
        return {"int": 7, "none": None, "string": "dltensor"}[returns]

    def __dlpack_device__(self):
        if device == "boom":
            raise Boom("device")
        if device == "garbage":
            return ("cpu", None)
        if device == "capsule":
            return tuple(case["capsule"].get("device", (1, 0)))
        return tuple(device)

    def __init__(self):
        self.calls = 0
        self.capsules = 0

    return type("Fuzzed", (), {"__init__": __init__, "__dlpack__": __dlpack__,
                               "__dlpack_device__": __dlpack_device__})


def fresh_object(case, producer_type):
    from dlbridge._core import _testing

    if case["raw"]:
        return _testing.make_capsule(**capsule_keywords(case))
    return producer_type()


def answer(read, x):
    try:
        result = ("returned", read(x))
    except BaseException as e:  # the outcome is what is compared
        text = str(e)
        if "std::" in text or "terminate called" in text or isinstance(e, SystemError):
            raise AssertionError(f"{type(e).__name__} with C++ text or a SystemError: {text}") from e
        result = ("raised", type(e).__name__, getattr(e, "code", None))
    return result + ((x.calls,) if hasattr(x, "calls") else ())


def allowed_refusal(outcome):
    """A TensorArg's requirement check: a result, the producer's own
    exception, a TypeError (no tensor), or a coded dlbridge error."""
    if outcome[0] == "returned":
        return True
    _, name, code = outcome[:3]
    return name in ("Boom", "Interrupt", "TypeError", "ValueError") or code is not None


def run_case(case):
    import gc
    import importlib

    import dlbridge
    from dlbridge._core import _testing

    m = importlib.import_module(case["module"])
    producer_type = make_producer(case)
    before = _testing.deleter_calls()
    made = [fresh_object(case, producer_type) for _ in range(3)]
    # Once ahead, so that what dlbridge learns of the type on first sight is
    # learnt before the two answers are compared.
    answer(dlbridge.from_dlpack, made[0])
    direct = answer(lambda x: m.snapshot(dlbridge.from_dlpack(x)), made[1])
    function = case["function"]
    got = answer(getattr(m, function) if function != "pick" else lambda x: m.pick(x, "text"), made[2])
    if function in ("snapshot", "owned_snapshot") and got != direct:
        return f"{function} answered {got}, dlbridge.from_dlpack {direct}"
    if function == "pick":
        agree = got[0] == direct[0] == "raised" or (
            got[0] == direct[0] == "returned" and got[1] == "text " + direct[1].split(" strides")[0])
        if not agree:
            return f"pick answered {got}, dlbridge.from_dlpack {direct}"
    if function not in ("snapshot", "owned_snapshot", "pick") and not allowed_refusal(got):
        return f"{function} refused without a code: {got}"
    # Every capsule made is freed exactly once (a capsule named as consumed
    # from the start, or named otherwise, is the case's own lie).
    capsules = len(made) if case["raw"] else sum(x.capsules for x in made)
    del made
    gc.collect()
    freed = _testing.deleter_calls() - before
    if "name" not in case["capsule"] and freed != capsules:
        return f"{freed} deleter calls for {capsules} capsules"
    return None


def run_program(case):
    try:
        return run_case(case)
    except BaseException:  # noqa: BLE001 (a broken rule or a broken harness, both reported)
        return traceback.format_exc()


def serve(modules):
    sys.path.insert(0, modules)
    import numpy  # noqa: F401

    import dlbridge  # noqa: F401

    verdicts = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        verdicts.write(json.dumps(run_program(json.loads(line))) + "\n")
        verdicts.flush()


# --- The parent side: the worker and the strategies --------------------------

if __name__ != "__main__":
    import pytest
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @pytest.fixture(scope="module")
    def worker(extensions):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
        from worker_interpreter import WorkerInterpreter

        w = WorkerInterpreter([sys.executable, __file__, "--serve", str(extensions)],
                              dict(os.environ, PYTHONFAULTHANDLER="1"))
        yield w
        w.stop()

    fuzz_settings = settings(max_examples=EXAMPLES, derandomize=not RANDOM, deadline=None, database=None,
                             suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

    # Layouts whose lies a consumer can catch: extents that overflow, negative
    # sizes, NULL shapes. One that claims memory it does not have (ndim beyond
    # the shape array, a stride reaching past the buffer) cannot be caught by
    # anyone and is not drawn: shapes and strides come in matching lengths,
    # small ones stay inside make_capsule's buffer (4 KiB on either side of
    # element 0), large ones overflow int64 and must be refused.
    sizes = st.sampled_from([0, 1, 2, 3, 5, -1, -3, 2**62, 2**63 - 1])
    steps = st.sampled_from([0, 1, 2, 3, 5, -1, -3, 2**62, -(2**62), 2**63 - 1])

    @st.composite
    def layouts(draw):
        kind = draw(st.sampled_from(["dims", "dims", "dims", "null_shape", "ones"]))
        if kind == "null_shape":
            return {"shape": None, "ndim": draw(st.sampled_from([0, 1, 2, 64, 65, -1]))}
        if kind == "ones":
            return {"shape": [1] * draw(st.sampled_from([64, 65]))}
        shape = draw(st.lists(sizes, max_size=4))
        strides = draw(st.one_of(st.none(), st.lists(steps, min_size=len(shape), max_size=len(shape))))
        return {"shape": shape, "strides": strides}

    @st.composite
    def capsules(draw):
        spec = draw(layouts())
        spec["byte_offset"] = draw(st.sampled_from([4096, 4097, 4100, 4108, 2**63]))
        spec["data_bytes"] = 8192
        spec.update(draw(st.fixed_dictionaries({}, optional={
            "dtype": st.sampled_from([(2, 32, 1), (0, 8, 1), (1, 16, 1), (4, 16, 1), (5, 64, 1), (6, 8, 1),
                                      (6, 1, 1), (17, 4, 1), (17, 4, 2), (2, 32, 4), (2, 32, 0), (99, 8, 1),
                                      (2, 0, 1)]),
            "device": st.sampled_from([(1, 0), (1, 1), (2, 0), (3, 0), (4, 0), (13, 0), (99, 0), (1, -1)]),
            "versioned": st.booleans(),
            "version": st.sampled_from([(1, 0), (1, 3), (1, 9), (0, 9), (2, 0)]),
            "flags": st.sampled_from([0, 1, 2, 4, 7, 8, 1 << 63]),
            "null_data": st.booleans(),
            # A name for the other kind of struct is a lie no consumer can catch.
            "name": st.sampled_from(["used_dltensor_versioned", "used_dltensor", "other"]),
        })))
        return spec

    cases = st.fixed_dictionaries({
        "module": st.sampled_from(["casters_nanobind", "casters_pybind11"]),
        "capsule": capsules(),
        "raw": st.booleans(),
        "returns": st.sampled_from(["capsule", "capsule", "capsule", "numpy", "boom", "buffer_error",
                                    "interrupt", "int", "none", "string"]),
        "keywords": st.sampled_from(["any", "none"]),
        "device": st.sampled_from(["capsule", "capsule", "boom", "garbage", (1, 0), (2, 0), (99, 0)]),
        "function": st.sampled_from(["snapshot", "snapshot", "owned_snapshot", "pick", "float_matrix",
                                     "writable", "compact", "on_cuda"]),
    })

    @fuzz_settings
    @given(case=cases)
    def test_casters_answer_as_from_dlpack_and_never_crash(worker, extensions, case):
        problem = worker.run(case, timeout=60.0)
        assert problem is None, (
            f"{problem}\nreproduce with:\n  .venv/bin/python tests/outside/test_casters_fuzz.py --run "
            f"{extensions} {json.dumps(json.dumps(case))}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    elif sys.argv[1:2] == ["--run"]:
        sys.path.insert(0, sys.argv[2])
        print(run_program(json.loads(sys.argv[3])) or "no problem")
    else:
        sys.exit(f"usage: {sys.argv[0]} --serve MODULES_DIR | --run MODULES_DIR 'CASE'")
